/** The package's entry (wasm exports and glue), ready to call. */
export const paceline: typeof import("../../pkg/index.js");
