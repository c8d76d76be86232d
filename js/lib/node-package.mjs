// The built pkg/ in Node. The "web" target has no Node entry that loads the
// .wasm, so it is read from disk and instantiated synchronously, as the
// workerd entry does with its compiled module.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const pkgUrl = new URL("../../pkg/", import.meta.url);
let wasmBytes;
try {
  wasmBytes = readFileSync(new URL("paceline_bg.wasm", pkgUrl));
} catch (cause) {
  throw new Error(`no built package in ${fileURLToPath(pkgUrl)}; run node js/scripts/build.mjs`, { cause });
}
const { initSync } = await import(new URL("paceline.js", pkgUrl).href);
const exports = initSync({ module: new WebAssembly.Module(wasmBytes) });

/** The instance's memory, for tests that measure what a call leaves behind. */
export const wasmMemory = exports.memory;

/** The package's entry (wasm exports and glue), ready to call. */
export const paceline = await import(new URL("index.js", pkgUrl).href);
