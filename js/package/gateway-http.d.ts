import type { GatewayCore, GatewayWire } from "../paceline.js";
import type { GatewayTransport } from "./fetch-port.js";

/**
 * Answers one wire-protocol request with `core.handle`; a bad request is a
 * 4xx response, never a rejection. `nowMs` defaults to `Date.now()` read
 * after the body has arrived. A body over 64 KiB is refused with a 400
 * before it is read in full, and never reaches the wasm.
 */
export function handleGatewayRequest(
  core: Pick<GatewayCore, "handle">,
  request: Request,
  nowMs?: number,
): Promise<Response>;

/**
 * The request's body, read until `limitBytes` (default 65536): `null` when
 * it declares or turns out to be longer, and then the stream is cancelled
 * unread.
 */
export function readRequestBody(request: Request, limitBytes?: number): Promise<Uint8Array | null>;

/** The protocol's endpoint table and body limit (read from the wasm once). */
export function gatewayWireTable(): GatewayWire;

/**
 * A transport to a `GatewayCore` in this isolate, answered at once through
 * the core's router on the clock `now` (default `Date.now`): for tests, and
 * for a process that hosts the gateway beside its clients.
 */
export function coreTransport(core: Pick<GatewayCore, "handle">, now?: () => number): GatewayTransport;
