import type { GatewayRateState, LocalRateState, PacingRuleInit, Permit, PermitRefusal } from "../paceline.js";
import type { fetchPort } from "./fetch-port.js";

export interface LimiterOptions {
  /** The gateway (`gatewayPort(env)`, `fetchPort(...)`); without one, the limit holds in this isolate only. */
  port?: ReturnType<typeof fetchPort>;
  /** The limit's name: every isolate pacing the same provider uses the same one. */
  bucketId: string;
  rules: PacingRuleInit[];
  /** From mintRateScopeToken, for a gateway with a secret. */
  rateScopeToken?: string | null;
  /** A Worker's `ctx.waitUntil.bind(ctx)`, for a limiter made per request. */
  waitUntil?: (promise: Promise<unknown>) => void;
  /** A wait for a permit longer than this fails with PROVIDER_EXHAUSTED (default 120000). */
  maxWaitMs?: number;
  blockHorizonMs?: number;
  releaseLingerMs?: number;
}

export interface LimiterCallOptions {
  signal?: AbortSignal;
  /** A Worker's `ctx.waitUntil.bind(ctx)`: the release after the call is registered with it. */
  waitUntil?: (promise: Promise<unknown>) => void;
}

/** What `schedule` hands its call. */
export interface ScheduledCall {
  /** When the call was let go (`Date.now()` as its permit came due). */
  readonly sentAtMs: number;
  /**
   * The provider answered 429: tells the pacer (a rate state's `penalize`, with this call's
   * `sentAtMs`, so the cut reads what the provider took in the second before it went out) and
   * not as a success. `cooldownMs` is the 429's `Retry-After` in ms (0 if none). A second call
   * returns the first report.
   */
  refused(input: { cooldownMs: number }): Promise<void>;
}

export interface Limiter {
  /**
   * Waits for a permit, runs `fn`, and releases the permit however `fn` ends.
   * A call that returns is reported as done (`state.observeSuccess`): the
   * pacer learns how long calls take and keeps the permits its callers come
   * back for. `fn`'s value is not read: when the provider answers 429, say so
   * with `call.refused({ cooldownMs })`; the call is then not reported as done.
   */
  schedule<T>(fn: (call: ScheduledCall) => Promise<T> | T, options?: LimiterCallOptions): Promise<T>;
  /** A permit at its time; `release()` it when the call is done. */
  acquire(options?: { signal?: AbortSignal }): Promise<Permit>;
  /** A permit due now, or a `PermitRefusal` saying when to ask again; never waits. */
  tryAcquire(): Permit | PermitRefusal;
  /** The rate state underneath (for `createGovernor`, `penalize`, `observeHeaders`). */
  readonly state: GatewayRateState | LocalRateState;
  readonly bucketId: string;
}

/** At most the rules' calls per window for `bucketId`, across every isolate sharing `port`. */
export function createLimiter(options: LimiterOptions): Limiter;
