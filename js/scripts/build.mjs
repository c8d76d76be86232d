// Builds the npm package from wasm-pack.toml: wasm-pack per target, wasm-opt,
// short names on the .wasm's boundary, brand checks and an "initialise
// first" guard in the generated glue, the Workers and Node entries, the
// Node dev gateway, the package README, and a size report checked against
// the budget.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { parse } from "smol-toml";
import { renameGlue, renameInitOutput, renameWasmTypings, shortenBoundaryNames } from "./boundary-names.mjs";
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

// wasm-opt with wasm-pack.toml's flags, from `input` to `output`, then
// short import and export names in place of wasm-bindgen's (see
// boundary-names.mjs); returns the renames, for the glue.
function optimise(input, output) {
  run(wasmOpt, [...config["wasm-opt"].flags, input, "-o", output]);
  const shortened = shortenBoundaryNames(readFileSync(output));
  writeFileSync(output, shortened.bytes);
  return shortened;
}

// The glue (`glue`, text), its typings and the raw module's typings with
// the module's new boundary names.
function renameBoundary(glue, names, { typingsPath, wasmTypingsPath }) {
  writeFileSync(wasmTypingsPath, renameWasmTypings(readFileSync(wasmTypingsPath, "utf8"), names));
  writeFileSync(typingsPath, renameInitOutput(readFileSync(typingsPath, "utf8"), names));
  return renameGlue(glue, names);
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
// its one import of the built package pointed at the gateway module's Node
// entry (see [[target.module]] "gateway" in wasm-pack.toml), which holds
// all it calls.
const GATEWAY_MODULE = "paceline_gateway";
const nodeGatewaySource = join(root, "js/gateway/node-server.mjs");
const NODE_GATEWAY = "node-gateway.mjs";

function addNodeGateway(outDir) {
  const source = readFileSync(nodeGatewaySource, "utf8");
  const repoImport = /^import \{ paceline \} from "\.\.\/lib\/node-package\.mjs";$/m;
  if (!repoImport.test(source)) {
    throw new Error(`build: ${nodeGatewaySource} no longer imports the package as this build expects`);
  }
  const shipped = source.replace(repoImport, `import * as paceline from "./${GATEWAY_MODULE}_node.js";`);
  writeFileSync(join(outDir, NODE_GATEWAY), shipped.startsWith("#!") ? shipped : `#!/usr/bin/env node\n${shipped}`);
  writeFileSync(
    join(outDir, NODE_GATEWAY.replace(/\.mjs$/, ".d.mts")),
    [
      `import type { GatewayCore, GatewayCoreOptions } from "./${GATEWAY_MODULE}.js";`,
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

// The Node and workerd entries of the module whose glue is `${name}.js`
// and whose .wasm is `wasm`: each instantiates it synchronously, then
// re-exports `reexports`, with a `.d.ts` beside it re-exporting the same
// paths (TypeScript resolves each "./x.js" to its "./x.d.ts"). Returns the
// entries' file names by kind.
function writeSyncEntries(outDir, { name, wasm, reexports, workerd }) {
  const heads = {
    node: [
      "// Node entry: reads the .wasm that ships beside this file and instantiates",
      "// it synchronously, so an import needs no setup.",
      'import { readFileSync } from "node:fs";',
      `import { initSync } from "./${name}.js";`,
      `initSync({ module: readFileSync(new URL("./${wasm}", import.meta.url)) });`,
    ],
  };
  if (workerd) {
    heads.workerd = [
      "// Workers entry: workerd compiles the .wasm at deploy time and hands it",
      "// over as a WebAssembly.Module, so instantiation is synchronous.",
      `import wasm from "./${wasm}";`,
      `import { initSync } from "./${name}.js";`,
      "initSync({ module: wasm });",
    ];
  }
  const entries = {};
  for (const [kind, head] of Object.entries(heads)) {
    const file = `${name}_${kind}.js`;
    writeFileSync(join(outDir, file), [...head, ...reexports, ""].join("\n"));
    writeFileSync(join(outDir, file.replace(/\.js$/, ".d.ts")), `${reexports.join("\n")}\n`);
    entries[kind] = file;
  }
  return entries;
}

function addEntries(outDir, glue, workerd, modules) {
  const reexports = [`export * from "./${OUT_NAME}.js";`, ...glue.map((g) => `export * from "${g}";`)];
  // TypeScript resolves each "./x.js" to its "./x.d.ts", so the type
  // entries re-export the same paths.
  const typeReexports = reexports;
  writeFileSync(join(outDir, "index.js"), `${reexports.join("\n")}\n`);
  writeFileSync(join(outDir, "index.d.ts"), `${typeReexports.join("\n")}\n`);
  const files = ["index.js", "index.d.ts", "glue/", "README.md"];
  const exportsMap = { types: "./index.d.ts", default: "./index.js" };
  const entries = writeSyncEntries(outDir, { name: OUT_NAME, wasm: `${OUT_NAME}_bg.wasm`, reexports, workerd });
  const nodeEntry = entries.node;
  files.push(nodeEntry, `${OUT_NAME}_node.d.ts`, NODE_GATEWAY, NODE_GATEWAY.replace(/\.mjs$/, ".d.mts"));
  if (entries.workerd) {
    files.push(entries.workerd, `${OUT_NAME}_workerd.d.ts`);
    exportsMap.workerd = `./${entries.workerd}`;
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
  for (const module of modules) {
    pkg.exports[`./${module.entry}`] = module.exports;
    pkg.exports[`./${module.wasm}`] = `./${module.wasm}`;
    pkg.files = [...new Set([...pkg.files, ...module.files])];
    pkg.sideEffects = [...new Set([...pkg.sideEffects, ...module.sideEffects])];
  }
  pkg.bin = { "paceline-gateway": NODE_GATEWAY };
  pkg.engines = { node: ">=20" };
  writeFileSync(pkgPath, `${JSON.stringify(pkg, null, 2)}\n`);
}

// A smaller module: the same crate built with fewer cargo features (see
// each [[target.module]] in wasm-pack.toml: the client module leaves out
// the gateway's host, the limiter module the governor too). It ships
// beside the full module under its own names and is imported as
// "paceline/<entry>", with the same Workers, Node and web entries; the
// glue modules it re-exports are copies whose import of the generated glue
// points at its own.
function addModule(outDir, spec) {
  const name = spec["out-name"];
  const tmp = join(root, "target", `wasm-pack-${name}`);
  run("wasm-pack", [
    "build",
    "--release",
    "--target",
    "web",
    "--out-dir",
    tmp,
    "--out-name",
    name,
    "--",
    ...spec["cargo-args"],
  ]);
  const wasm = `${name}_bg.wasm`;
  const before = statSync(join(tmp, wasm)).size;
  const renames = optimise(join(tmp, wasm), join(outDir, wasm));
  const glueSource = readFileSync(join(tmp, `${name}.js`), "utf8");
  const glued = guardUninitialised(brandClasses(glueSource));
  // A module without the governor has no states for it to find, so no
  // token methods to hide.
  if (!spec["state-classes"] && glued.includes("pacelineStateToken")) {
    throw new Error(`build: ${name} has state token methods but its state-classes is 0`);
  }
  const tokensHidden = spec["state-classes"] ? hideStateTokens(glued, spec["state-classes"]) : glued;
  // Its typings name the wire types in its own copies of the glue.
  const typingsSource = readFileSync(join(tmp, `${name}.d.ts`), "utf8").replaceAll(
    '"./glue/',
    `"./${spec["glue-dir"]}/`,
  );
  writeFileSync(join(outDir, `${name}.d.ts`), typingsForEs2022(typingsSource));
  cpSync(join(tmp, `${name}_bg.wasm.d.ts`), join(outDir, `${name}_bg.wasm.d.ts`));
  writeFileSync(
    join(outDir, `${name}.js`),
    renameBoundary(tokensHidden, renames, {
      typingsPath: join(outDir, `${name}.d.ts`),
      wasmTypingsPath: join(outDir, `${name}_bg.wasm.d.ts`),
    }),
  );
  // The inline JS snippets it imports (the same files as the full module's
  // when their text is the same: they are named by a hash of it).
  if (existsSync(join(tmp, "snippets"))) cpSync(join(tmp, "snippets"), join(outDir, "snippets"), { recursive: true });

  const glueOut = join(outDir, spec["glue-dir"]);
  mkdirSync(glueOut, { recursive: true });
  const fullGlueImport = `"../${OUT_NAME}.js"`;
  const glue = [];
  for (const module of spec.glue) {
    for (const file of [module, module.replace(/\.js$/, ".d.ts")]) {
      const text = readFileSync(join(glueDir, file), "utf8");
      for (const line of text.split("\n")) {
        const imported = /from "(\.[^"]+)"/.exec(line)?.[1];
        if (imported && imported !== `../${OUT_NAME}.js` && !spec.glue.includes(imported.replace(/^\.\//, ""))) {
          throw new Error(`build: ${file} imports ${imported}, which ${name} does not ship`);
        }
      }
      writeFileSync(join(glueOut, file), text.replaceAll(fullGlueImport, `"../${name}.js"`));
    }
    glue.push(`./${spec["glue-dir"]}/${module}`);
  }

  const reexports = [`export * from "./${name}.js";`, ...glue.map((g) => `export * from "${g}";`)];
  const typings = `${reexports.join("\n")}\n`;
  const entry = spec.entry;
  writeFileSync(join(outDir, `${entry}.js`), typings);
  writeFileSync(join(outDir, `${entry}.d.ts`), typings);
  const { node: nodeEntry, workerd: workerdEntry } = writeSyncEntries(outDir, { name, wasm, reexports, workerd: true });
  const files = [
    `${entry}.js`,
    `${entry}.d.ts`,
    `${spec["glue-dir"]}/`,
    `${name}.js`,
    `${name}.d.ts`,
    wasm,
    `${name}_bg.wasm.d.ts`,
  ];
  for (const e of [nodeEntry, workerdEntry]) files.push(e, e.replace(/\.js$/, ".d.ts"));
  return {
    entry,
    wasm,
    before,
    files,
    sideEffects: [`./${nodeEntry}`, `./${workerdEntry}`],
    exports: {
      types: `./${entry}.d.ts`,
      workerd: `./${workerdEntry}`,
      node: `./${nodeEntry}`,
      default: `./${entry}.js`,
    },
  };
}

function report(label, wasmPath, before, budget) {
  const raw = statSync(wasmPath).size;
  const gzip = gzipSync(readFileSync(wasmPath), { level: 9 }).length;
  console.log(
    `paceline ${label}: ${wasmPath.slice(root.length + 1)} ${raw} bytes raw (${before} before wasm-opt), ${gzip} bytes gzip` +
      (budget ? ` (budget ${budget})` : ""),
  );
  return !budget || gzip <= budget;
}

const budget = config["size-budget"]?.["gzip-bytes"];
let overBudget = false;
for (const target of config.target) {
  const outDir = join(root, target["out-dir"]);
  run("wasm-pack", ["build", "--release", "--target", target.name, "--out-dir", outDir, "--out-name", OUT_NAME]);
  const wasmPath = join(outDir, `${OUT_NAME}_bg.wasm`);
  const before = statSync(wasmPath).size;
  const renames = optimise(wasmPath, wasmPath);
  const typesPath = join(outDir, `${OUT_NAME}.d.ts`);
  writeFileSync(typesPath, typingsForEs2022(readFileSync(typesPath, "utf8")));
  const gluePath = join(outDir, `${OUT_NAME}.js`);
  const glued = hideStateTokens(guardUninitialised(brandClasses(readFileSync(gluePath, "utf8"))));
  writeFileSync(
    gluePath,
    renameBoundary(glued, renames, {
      typingsPath: typesPath,
      wasmTypingsPath: join(outDir, `${OUT_NAME}_bg.wasm.d.ts`),
    }),
  );
  cpSync(packageReadme, join(outDir, "README.md"));
  addNodeGateway(outDir);
  const specs = target.module ?? [];
  const modules = specs.map((spec) => addModule(outDir, spec));
  addEntries(outDir, addGlue(outDir), target["workerd-entry"], modules);
  if (!report(target.name, wasmPath, before, budget)) overBudget = true;
  modules.forEach((module, i) => {
    const label = `${target.name} ${module.entry}`;
    if (!report(label, join(outDir, module.wasm), module.before, specs[i]["gzip-budget"])) overBudget = true;
  });
}
// Its own exit code: the package is built and usable, only too big, so the
// test script can still run the tiers after the build and fail at the end.
const OVER_BUDGET_EXIT = 3;
if (overBudget) {
  console.error("paceline: the .wasm is over its gzip size budget");
  process.exit(OVER_BUDGET_EXIT);
}
