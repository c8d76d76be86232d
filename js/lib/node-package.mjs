// The built pkg/ in Node, through the package's own Node entry (which reads
// the .wasm from disk and initialises it), as `import "paceline"` resolves
// there for a user.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const entry = new URL("../../pkg/paceline_node.js", import.meta.url);
if (!existsSync(entry)) {
  throw new Error(`no built package at ${fileURLToPath(entry)}; run node js/scripts/build.mjs`);
}

/** The package's entry (wasm exports and glue), ready to call. */
export const paceline = await import(entry.href);

/** The instance's memory, for tests that measure what a call leaves behind (initSync hands back the live exports). */
export const wasmMemory = paceline.initSync().memory;
