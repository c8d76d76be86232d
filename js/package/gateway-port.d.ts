import type { fetchPort } from "./fetch-port.js";

/**
 * A port to the gateway Durable Object exported by this same Worker, reached
 * through `routeGatewayRequest` in-process: `env.PACELINE_GATEWAY` (or
 * `options.bindingName`) must be the Durable Object namespace binding of the
 * class `PacelineGateway`. Throws `INVALID_INPUT` naming the wrangler.toml
 * lines to add when the binding is missing.
 */
export function gatewayPort(env: object, options?: { bindingName?: string }): ReturnType<typeof fetchPort>;
