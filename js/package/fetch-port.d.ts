/** The codes a paceline `Error` carries in `code`. */
export type PacelineErrorCode =
  | "INVALID_INPUT"
  | "FORBIDDEN_SCOPE"
  | "BUDGET_EXCEEDED"
  | "PROVIDER_EXHAUSTED"
  | "GATEWAY_UNAVAILABLE"
  | "ABORTED"
  | "CYCLE_DETECTED";

/** One pacing rule of a bucket. */
export interface PacingRule {
  requestsPerWindow: number;
  windowMs: number;
  maxConcurrency?: number;
  adaptiveMaxRps?: number;
}

/** `POST /v1/rate/acquire`. */
export interface AcquireRequest {
  bucketId: string;
  rateScopeToken?: string;
  rules: PacingRule[];
  requested: number;
  /** Provider successes seen since this client's previous acquire. */
  observedSuccesses?: number;
  schedulerSchema?: string;
  /** The provider's latest quota headers (ignored by older gateways). */
  quota?: QuotaReport;
  /** No granted time earlier than the gateway's now plus this (the answer's trip back). */
  dispatchLeadMs?: number;
  /** Granted times this client gives back unused, still ahead. */
  returnedAtMs?: number[];
  /** The client's callers drained its last block: book its next turn with this grant. */
  bookNextTurn?: boolean;
  /** How many of the client's callers wait for a permit: among contending clients its turn holds their share of a round, not a whole horizon (ignored by older gateways). */
  waitingCallers?: number;
  /** Leases the client is done with, ended before the grant (sent only to gateways that announce dispatchToleranceMs). */
  releasedLeaseIds?: string[];
  /** The turn ticket a refusal for want of a slot gave this client, shown when it comes back; 0 to take tickets while holding none. */
  turnTicket?: number;
}

/** A grant; `granted: 0` is a refusal to wait `waitMs`, not an error. */
export interface AcquireResponse {
  granted: number;
  waitMs: number;
  /** One reserved dispatch time per permit, earliest first. */
  scheduledAtMs?: number[];
  /** One lease per permit when a rule bounds concurrency. */
  leaseIds?: string[];
  effectiveRequestsPerSecond?: number;
  cooldownUntilMs?: number;
  /** The gateway's clock when it answered, to correct the client's skew. */
  serverNowMs?: number;
  /** How late after its time a permit may still be dispatched; past it the permit is dead. */
  dispatchToleranceMs?: number;
  /** To a client that sent turnTicket and got fewer permits than it asked for want of a slot: its place in line, to show after waitMs. */
  turnTicket?: number;
}

/** `POST /v1/rate/release`. */
export interface ReleaseRequest {
  bucketId: string;
  rateScopeToken?: string;
  rules: PacingRule[];
  leaseIds: string[];
  schedulerSchema?: string;
  /** Granted times given back alone, when no acquire carried them. */
  returnedAtMs?: number[];
}

export interface ReleaseResponse {
  /** How many of the ids named a live lease. */
  released: number;
}

/** `POST /v1/rate/penalize`: the provider answered 429 with this Retry-After. */
export interface PenalizeRequest {
  bucketId: string;
  rateScopeToken?: string;
  cooldownMs: number;
  schedulerSchema?: string;
  /** The 429's quota headers (ignored by older gateways). */
  quota?: QuotaReport;
}

export interface PenalizeResponse {
  effectiveRequestsPerSecond?: number;
  cooldownUntilMs: number;
}

/** What a provider's quota headers said; times on the gateway's clock. */
export interface QuotaReport {
  observedAtMs: number;
  limit?: number;
  windowMs?: number;
  remaining?: number;
  resetAtMs?: number;
}

/** `POST /v1/rate/observe`: quota headers that cannot wait for an acquire. */
export interface ObserveRequest {
  bucketId: string;
  rateScopeToken?: string;
  quota: QuotaReport;
  schedulerSchema?: string;
}

export interface ObserveResponse {
  effectiveRequestsPerSecond?: number;
}

export interface BudgetCharge {
  key: string;
  amount: number;
  limit: number;
}

/** `POST /v1/budget/charge`; retrying a `reservationId` counts once. */
export interface ChargeRequest {
  rootRunId: string;
  reservationId: string;
  charges: BudgetCharge[];
  /**
   * Set when `reservationId` was sent before and its answer not read: a
   * gateway that may have forgotten the id refuses it (`INVALID_INPUT`)
   * rather than count it twice.
   */
  resent?: boolean;
}

export interface ChargeResponse {
  /** The run's counters after this charge, for the keys it named. */
  counters: Record<string, number>;
}

/**
 * What a rate or budget state rejects with when the gateway refuses or
 * cannot answer; the wasm reads the gateway's error body into it.
 */
export interface PacelineGatewayError extends Error {
  name: "PacelineError";
  code: PacelineErrorCode;
  /** `BUDGET_EXCEEDED`: the counter, the count it would have reached, its limit. */
  key?: string;
  observed?: number;
  limit?: number;
  /** `PROVIDER_EXHAUSTED`: the provider cools down until this time. */
  cooldownUntilMs?: number;
}

/** An answer as it came back, unread. */
export interface GatewayReply {
  status: number;
  body: Uint8Array;
}

/**
 * How the rate and budget states reach a gateway: post a request's bytes to
 * an endpoint's path (`/v1/rate/acquire`, ...), resolve to the answer's
 * status and bytes, whatever the status. Reject only when no answer came;
 * a rejection without a paceline `code` counts as `GATEWAY_UNAVAILABLE`.
 * `fetchPort` makes one over `fetch`, `coreTransport` one over a
 * `GatewayCore` in the same isolate.
 */
export interface GatewayTransport {
  post(path: string, body: Uint8Array, signal?: AbortSignal): Promise<GatewayReply>;
}

/** The request a port sends. */
export interface GatewayFetchInit {
  method: "POST";
  headers: Headers;
  body: Uint8Array<ArrayBuffer>;
  signal?: AbortSignal;
}

/** The part of a `Response` a port reads. */
export interface GatewayFetchResponse {
  readonly status: number;
  arrayBuffer(): Promise<ArrayBuffer>;
}

/**
 * Called as a plain function, never as a method: pass `globalThis.fetch`, or
 * bind a stub's or a service binding's fetch
 * (`(url, init) => env.GATEWAY.fetch(url, init)`).
 */
export type GatewayFetch = (url: string, init: GatewayFetchInit) => Promise<GatewayFetchResponse>;

export interface FetchPortOptions {
  fetch: GatewayFetch;
  /** The gateway's origin (and path prefix, if any); a trailing `/` is ignored. */
  baseUrl: string;
  /** Sent with every call; `content-type: application/json` unless given here. */
  headers?: HeadersInit;
}

/**
 * A transport over `fetch`. An exception from `fetch` itself (the gateway is
 * not listening) or from reading the body rejects with a `PacelineError`
 * coded `GATEWAY_UNAVAILABLE` whose `cause` is that exception.
 */
export function fetchPort(options: FetchPortOptions): GatewayTransport;
