import type { GatewayCore } from "../paceline.js";

/**
 * Answers one wire-protocol request with `core.handle`; a bad request is a
 * 4xx response, never a rejection. `nowMs` defaults to `Date.now()` read
 * after the body has arrived.
 */
export function handleGatewayRequest(
  core: Pick<GatewayCore, "handle">,
  request: Request,
  nowMs?: number,
): Promise<Response>;
