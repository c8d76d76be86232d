/** The package's entry (wasm exports and glue), ready to call. */
export const paceline: typeof import("../../pkg/index.js");
/** The instance's memory, for tests that measure what a call leaves behind. */
export const wasmMemory: WebAssembly.Memory;
