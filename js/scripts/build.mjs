// Builds the npm package from wasm-pack.toml: wasm-pack per target, wasm-opt,
// brand checks and an "initialise first" guard in the generated glue, the
// Workers and Node entries, the Node dev gateway, the package README, and a
// size report checked against the budget.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, readFileSync, readdirSync, writeFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { parse } from "smol-toml";
import { brandClasses } from "./brand-classes.mjs";
import { guardUninitialised, hideStateTokens, typingsForEs2022 } from "./glue-rewrites.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const config = parse(readFileSync(join(root, "wasm-pack.toml"), "utf8"));
const OUT_NAME = "paceline";
// binaryen from npm (pinned in js/package-lock.json). Debian bookworm's
// wasm-opt 108 rewrites the externref table that wasm-bindgen 0.2.130 emits
// and the module then fails initSync with "WebAssembly.Table.set(): Argument
// 1 is invalid for table".
const wasmOpt = join(root, "js/node_modules/.bin/wasm-opt");

function run(cmd, args) {
  execFileSync(cmd, args, { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
}

// JS glue shipped inside the package (fetch port, HTTP handler, Durable
// Object class): every module in js/package/ is copied to <out>/glue/ and
// re-exported by the package's entry points.
const glueDir = join(root, "js/package");

function addGlue(outDir) {
  if (!existsSync(glueDir)) return [];
  cpSync(glueDir, join(outDir, "glue"), { recursive: true });
  return readdirSync(glueDir)
    .filter((f) => f.endsWith(".js"))
    .sort()
    .map((f) => `./glue/${f}`);
}

// The package's own README (for people who install it; the repository's
// README is for people who build it).
const packageReadme = join(root, "js/package-readme.md");

// The Node dev gateway ships in the package: the repository's server with
// its one import of the built package pointed at the package's Node entry.
const nodeGatewaySource = join(root, "js/gateway/node-server.mjs");
const NODE_GATEWAY = "node-gateway.mjs";

function addNodeGateway(outDir) {
  const source = readFileSync(nodeGatewaySource, "utf8");
  const repoImport = /^import \{ paceline \} from "\.\.\/lib\/node-package\.mjs";$/m;
  if (!repoImport.test(source)) {
    throw new Error(`build: ${nodeGatewaySource} no longer imports the package as this build expects`);
  }
  const shipped = source.replace(repoImport, `import * as paceline from "./${OUT_NAME}_node.js";`);
  writeFileSync(join(outDir, NODE_GATEWAY), shipped.startsWith("#!") ? shipped : `#!/usr/bin/env node\n${shipped}`);
  writeFileSync(
    join(outDir, NODE_GATEWAY.replace(/\.mjs$/, ".d.mts")),
    [
      `import type { GatewayCore, GatewayCoreOptions } from "./${OUT_NAME}.js";`,
      "/** A gateway in this process on loopback, in memory (a restart starts empty): for development and tests. */",
      "export function startDevGateway(options?: {",
      "  /** 0 picks a free port. */",
      "  port?: number;",
      "  secret?: string;",
      "  options?: GatewayCoreOptions;",
      "}): Promise<{ url: string; core: GatewayCore; close(): Promise<void> }>;",
      "",
    ].join("\n"),
  );
}

function addEntries(outDir, glue, workerd) {
  const reexports = [`export * from "./${OUT_NAME}.js";`, ...glue.map((g) => `export * from "${g}";`)];
  // TypeScript resolves each "./x.js" to its "./x.d.ts", so the type
  // entries re-export the same paths.
  const typeReexports = reexports;
  writeFileSync(join(outDir, "index.js"), `${reexports.join("\n")}\n`);
  writeFileSync(join(outDir, "index.d.ts"), `${typeReexports.join("\n")}\n`);
  const files = ["index.js", "index.d.ts", "glue/", "README.md"];
  const exportsMap = { types: "./index.d.ts", default: "./index.js" };
  const nodeEntry = `${OUT_NAME}_node.js`;
  writeFileSync(
    join(outDir, nodeEntry),
    [
      "// Node entry: reads the .wasm that ships beside this file and instantiates",
      '// it synchronously, so `import ... from "paceline"` needs no setup.',
      'import { readFileSync } from "node:fs";',
      `import { initSync } from "./${OUT_NAME}.js";`,
      `initSync({ module: readFileSync(new URL("./${OUT_NAME}_bg.wasm", import.meta.url)) });`,
      ...reexports,
      "",
    ].join("\n"),
  );
  writeFileSync(join(outDir, `${OUT_NAME}_node.d.ts`), `${typeReexports.join("\n")}\n`);
  files.push(nodeEntry, `${OUT_NAME}_node.d.ts`, NODE_GATEWAY, NODE_GATEWAY.replace(/\.mjs$/, ".d.mts"));
  if (workerd) {
    const entry = `${OUT_NAME}_workerd.js`;
    writeFileSync(
      join(outDir, entry),
      [
        "// Workers entry: workerd compiles the .wasm at deploy time and hands it",
        "// over as a WebAssembly.Module, so instantiation is synchronous.",
        `import wasm from "./${OUT_NAME}_bg.wasm";`,
        `import { initSync } from "./${OUT_NAME}.js";`,
        "initSync({ module: wasm });",
        ...reexports,
        "",
      ].join("\n"),
    );
    writeFileSync(join(outDir, `${OUT_NAME}_workerd.d.ts`), `${typeReexports.join("\n")}\n`);
    files.push(entry, `${OUT_NAME}_workerd.d.ts`);
    exportsMap.workerd = `./${entry}`;
  }
  const pkgPath = join(outDir, "package.json");
  const pkg = JSON.parse(readFileSync(pkgPath, "utf8"));
  pkg.files = [...new Set([...(pkg.files ?? []), ...files])];
  pkg.main = "index.js";
  pkg.types = "index.d.ts";
  // The workerd entry's initSync is a side effect a bundler must keep.
  pkg.sideEffects = [...new Set([...(pkg.sideEffects ?? []), `./${OUT_NAME}_workerd.js`, `./${OUT_NAME}_node.js`])];
  // workerd before node: a Workers bundler may also pass "node" (nodejs_compat).
  pkg.exports = {
    ".": {
      types: exportsMap.types,
      ...(exportsMap.workerd ? { workerd: exportsMap.workerd } : {}),
      node: `./${nodeEntry}`,
      default: exportsMap.default,
    },
    "./node-gateway": `./${NODE_GATEWAY}`,
    [`./${OUT_NAME}_bg.wasm`]: `./${OUT_NAME}_bg.wasm`,
    "./package.json": "./package.json",
  };
  pkg.bin = { "paceline-gateway": NODE_GATEWAY };
  pkg.engines = { node: ">=20" };
  writeFileSync(pkgPath, `${JSON.stringify(pkg, null, 2)}\n`);
}

const budget = config["size-budget"]?.["gzip-bytes"];
let overBudget = false;
for (const target of config.target) {
  const outDir = join(root, target["out-dir"]);
  run("wasm-pack", ["build", "--release", "--target", target.name, "--out-dir", outDir, "--out-name", OUT_NAME]);
  const wasmPath = join(outDir, `${OUT_NAME}_bg.wasm`);
  const before = statSync(wasmPath).size;
  run(wasmOpt, [...config["wasm-opt"].flags, wasmPath, "-o", wasmPath]);
  const gluePath = join(outDir, `${OUT_NAME}.js`);
  writeFileSync(gluePath, hideStateTokens(guardUninitialised(brandClasses(readFileSync(gluePath, "utf8")))));
  const typesPath = join(outDir, `${OUT_NAME}.d.ts`);
  writeFileSync(typesPath, typingsForEs2022(readFileSync(typesPath, "utf8")));
  cpSync(packageReadme, join(outDir, "README.md"));
  addNodeGateway(outDir);
  addEntries(outDir, addGlue(outDir), target["workerd-entry"]);
  const raw = statSync(wasmPath).size;
  const gzip = gzipSync(readFileSync(wasmPath), { level: 9 }).length;
  console.log(
    `paceline ${target.name}: ${target["out-dir"]}/${OUT_NAME}_bg.wasm ` +
      `${raw} bytes raw (${before} before wasm-opt), ${gzip} bytes gzip` +
      (budget ? ` (budget ${budget})` : ""),
  );
  if (budget && gzip > budget) overBudget = true;
}
if (overBudget) {
  console.error("paceline: the .wasm is over its gzip size budget");
  process.exit(1);
}
