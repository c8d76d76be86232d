import type { GatewayCore } from "../paceline.js";

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
