import type { PacelineErrorCode } from "./fetch-port.js";

/** What every paceline entry point throws or rejects with. */
export interface PacelineError extends Error {
  name: "PacelineError";
  code: PacelineErrorCode;
  /** What was thrown underneath (a `fetch` failure, an abort reason, a getter's exception). */
  cause?: unknown;
  /** The HTTP status a gateway answered with, when one did. */
  status?: number;
  /** `BUDGET_EXCEEDED`: the counter, the count it would have reached, its limit. */
  key?: string;
  observed?: number;
  limit?: number;
  /** `PROVIDER_EXHAUSTED`: the provider cools down until this time (ms since the epoch). */
  cooldownUntilMs?: number;
}

/** Every `code` a paceline error can carry. */
export const ERROR_CODES: readonly PacelineErrorCode[];

/** Whether `value` is a paceline error (with this `code`, when one is given). */
export function isPacelineError<C extends PacelineErrorCode = PacelineErrorCode>(
  value: unknown,
  code?: C,
): value is PacelineError & { code: C };
