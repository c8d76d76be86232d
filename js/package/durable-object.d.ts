/** The storage calls the gateway object makes (a `DurableObjectStorage` has them). */
export interface PacelineGatewayStorage {
  list(): Promise<Map<string, unknown>>;
  put(entries: Record<string, Uint8Array>): Promise<void>;
  delete(keys: string | string[]): Promise<unknown>;
}

/** The parts of a `DurableObjectState` the gateway object uses. */
export interface PacelineGatewayState {
  readonly storage: PacelineGatewayStorage;
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}

/**
 * The object's configuration. Numbers may come as strings (wrangler `vars`);
 * the secret belongs in a Worker secret (`wrangler secret put PACELINE_SECRET`).
 */
export interface PacelineGatewayEnv {
  /** With a secret, every rate call needs a token from `mintRateScopeToken`. */
  PACELINE_SECRET?: string;
  /** How far ahead a dispatch time may be granted (core default 1000). */
  PACELINE_HORIZON_MS?: string | number;
  /** How long a concurrency lease lives past its dispatch time (core default 60000). */
  PACELINE_LEASE_TTL_MS?: string | number;
  /** Schedule every rule window this much longer, absorbing jitter (default 25). */
  PACELINE_WINDOW_GUARD_MS?: string | number;
}

/** The window guard the hosted gateways use unless told otherwise. */
export const DEFAULT_WINDOW_GUARD_MS: number;

/**
 * A Durable Object hosting one `GatewayCore`. It serves the wire protocol,
 * and before answering a request stores the records it changed (one per
 * bucket, per run, and the lease-id counter, under keys of their own), so a
 * restarted object continues the same timelines and a request's storage
 * cost does not grow with what the object holds. An object that stored one
 * `snapshot` value (earlier versions) moves it to records on its first start.
 */
export class PacelineGateway {
  /** Throws an `Error` with `code: "INVALID_INPUT"` for a malformed env value. */
  constructor(ctx: PacelineGatewayState, env: PacelineGatewayEnv);
  fetch(request: Request): Promise<Response>;
}

/** What `routeGatewayRequest` needs of a Durable Object stub. */
export interface PacelineGatewayStub {
  fetch(request: Request): Promise<Response>;
}

/** What `routeGatewayRequest` needs of a Durable Object namespace binding. */
export interface PacelineGatewayNamespace<Id = unknown> {
  idFromName(name: string): Id;
  get(id: Id): PacelineGatewayStub;
}

/**
 * The Worker side: sends each request to the object that owns its state,
 * named by `bucketId` (rate calls and `GET /v1/rate/buckets/<id>`) or
 * `"run:" + rootRunId` (budget charges). A body that is not JSON or lacks
 * the id is answered 400 `INVALID_INPUT` here, without waking any object;
 * an unknown path is 404 and a wrong method 405, in the same error shape.
 */
export function routeGatewayRequest<Id>(
  request: Request,
  env: { readonly PACELINE_GATEWAY: PacelineGatewayNamespace<Id> },
): Promise<Response>;
export function routeGatewayRequest<K extends string, Id>(
  request: Request,
  env: { readonly [P in K]: PacelineGatewayNamespace<Id> },
  bindingName: K,
): Promise<Response>;
