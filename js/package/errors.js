// The one error type every paceline entry point throws or rejects with: an
// `Error` named "PacelineError" with a string `code`, made by the wasm, the
// glue and the port alike, so one guard recognises all of them.

/** @type {readonly import("./fetch-port.js").PacelineErrorCode[]} */
export const ERROR_CODES = Object.freeze([
  "INVALID_INPUT",
  "FORBIDDEN_SCOPE",
  "BUDGET_EXCEEDED",
  "PROVIDER_EXHAUSTED",
  "GATEWAY_UNAVAILABLE",
  "ABORTED",
  "CYCLE_DETECTED",
]);
const CODES = new Set(/** @type {readonly string[]} */ (ERROR_CODES));

/**
 * @param {unknown} value
 * @param {import("./fetch-port.js").PacelineErrorCode} [code]
 * @returns {value is import("./errors.js").PacelineError}
 */
export function isPacelineError(value, code) {
  // A guard never throws: a revoked Proxy or a throwing getter is simply
  // not one of ours.
  try {
    if (!(value instanceof Error) || value.name !== "PacelineError") return false;
    const actual = /** @type {{ code?: unknown }} */ (value).code;
    if (typeof actual !== "string" || !CODES.has(actual)) return false;
    return code === undefined || actual === code;
  } catch {
    return false;
  }
}
