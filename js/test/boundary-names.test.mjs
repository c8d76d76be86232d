// The built modules' imports and exports carry short names in place of
// wasm-bindgen's hashed ones (js/scripts/boundary-names.mjs), and each
// module's glue, typings and initSync() agree with them.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { pkgDir } from "../lib/bundle-worker.mjs";
import { renameGlue, shortenBoundaryNames } from "../scripts/boundary-names.mjs";

const MODULES = ["paceline", "paceline_client", "paceline_limiter"];

for (const name of MODULES) {
  describe(`${name}_bg.wasm's boundary`, () => {
    const bytes = readFileSync(join(pkgDir, `${name}_bg.wasm`));
    const module = new WebAssembly.Module(bytes);

    test("every import comes from one module under one- or two-letter names", () => {
      const imports = WebAssembly.Module.imports(module);
      assert.ok(imports.length > 20, `${imports.length} imports`);
      assert.deepEqual([...new Set(imports.map((i) => i.module))], ["a"]);
      for (const i of imports) assert.match(i.name, /^[a-zA-Z]{1,2}$/, `import ${i.name}`);
    });

    test("every export but memory has a one- or two-letter name; memory keeps its own", () => {
      const exports = WebAssembly.Module.exports(module);
      assert.ok(exports.some((e) => e.name === "memory" && e.kind === "memory"));
      for (const e of exports.filter((e) => e.name !== "memory")) {
        assert.match(e.name, /^[a-zA-Z]{1,2}$/, `export ${e.name}`);
      }
    });

    test("its glue gives every import and reads only exports the module has", () => {
      const glue = readFileSync(join(pkgDir, `${name}.js`), "utf8");
      assert.match(glue, /"a": import0/);
      const given = new Set([...glue.matchAll(/^ {8}([a-zA-Z]{1,2}): function/gm)].map((m) => m[1]));
      for (const i of WebAssembly.Module.imports(module)) assert.ok(given.has(i.name), `import ${i.name} not given`);
      const exported = new Set(WebAssembly.Module.exports(module).map((e) => e.name));
      for (const [, read] of glue.matchAll(/\bwasm\.([\w$]+)/g)) assert.ok(exported.has(read), `wasm.${read}`);
    });

    test("the typings of what initSync() returns name the module's exports", () => {
      const exported = new Set(WebAssembly.Module.exports(module).map((e) => e.name));
      const typings = readFileSync(join(pkgDir, `${name}.d.ts`), "utf8");
      const initOutput = /export interface InitOutput \{\n([\s\S]*?)\n\}/.exec(typings)[1];
      const members = [...initOutput.matchAll(/^ {4}readonly ([\w$]+):/gm)].map((m) => m[1]);
      assert.ok(members.includes("memory"));
      for (const member of members) assert.ok(exported.has(member), `InitOutput.${member}`);
      const raw = readFileSync(join(pkgDir, `${name}_bg.wasm.d.ts`), "utf8");
      for (const [, declared] of raw.matchAll(/^export const ([\w$]+):/gm)) {
        assert.ok(exported.has(declared), `${name}_bg.wasm.d.ts declares ${declared}`);
      }
    });
  });
}

describe("renaming the glue", () => {
  const names = {
    module: { from: "./m_bg.js", to: "a" },
    imports: new Map([["__wbg_now_0123456789abcdef", "a"]]),
    exports: new Map([
      ["memory", "memory"],
      ["state_new", "b"],
    ]),
  };
  const glue = [
    "    const import0 = {",
    "        __wbg_now_0123456789abcdef: function() {",
    "            return wasm.state_new(wasm.memory);",
    "        },",
    "    };",
    '    return { "./m_bg.js": import0 };',
  ].join("\n");

  test("renames the import module's key, each import's key and each export read", () => {
    const out = renameGlue(glue, names);
    assert.match(out, /"a": import0/);
    assert.match(out, /^ {8}a: function\(\)/m);
    assert.match(out, /wasm\.b\(wasm\.memory\)/);
  });

  test("refuses glue that reads an export the module does not have", () => {
    assert.throws(() => renameGlue(`${glue}\nwasm.gone();`, names), /wasm\.gone, which the module does not export/);
  });

  test("refuses glue that does not give an import the module has", () => {
    const missing = { ...names, imports: new Map([...names.imports, ["__wbg_later_fedcba9876543210", "b"]]) };
    assert.throws(() => renameGlue(glue, missing), /__wbg_later_fedcba9876543210 once in the glue, found it 0 times/);
  });

  test("shortens a module's names and leaves its code as it was", () => {
    const bytes = readFileSync(join(pkgDir, "paceline_limiter_bg.wasm"));
    const again = shortenBoundaryNames(bytes);
    assert.equal(again.module.from, "a");
    // Already short: each name maps to the one it has, and the bytes stay.
    for (const [from, to] of again.imports) assert.equal(from, to);
    for (const [from, to] of again.exports) assert.equal(from, to);
    assert.ok(Buffer.from(again.bytes).equals(bytes));
  });
});
