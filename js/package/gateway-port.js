// The one-Worker wiring: the gateway's Durable Object is exported by the
// same Worker, and the port reaches it through the router in-process,
// without a second Worker or a service binding.
import { routeGatewayRequest } from "./durable-object.js";
import { isPacelineError } from "./errors.js";
import { fetchPort } from "./fetch-port.js";

// Requests never leave the isolate; the origin only has to parse.
const IN_PROCESS_ORIGIN = "https://paceline.gateway";

/** @param {string} message */
function misuse(message) {
  const error = /** @type {import("./errors.js").PacelineError} */ (new Error(message));
  error.name = "PacelineError";
  error.code = "INVALID_INPUT";
  return error;
}

/**
 * @param {object} env
 * @param {{ bindingName?: string }} [options]
 * @returns {ReturnType<typeof import("./fetch-port.js").fetchPort>}
 */
export function gatewayPort(env, options) {
  /** @type {unknown} */
  let bindingName = "PACELINE_GATEWAY";
  /** @type {any} */
  let namespace;
  try {
    if (options !== undefined && options !== null) {
      if (typeof options !== "object") throw misuse("gatewayPort: options must be { bindingName? }");
      if (options.bindingName !== undefined) bindingName = options.bindingName;
    }
    if (typeof bindingName !== "string") throw misuse("gatewayPort: options.bindingName must be a string");
    namespace =
      typeof env === "object" && env !== null ? /** @type {Record<string, unknown>} */ (env)[bindingName] : undefined;
    if (typeof namespace?.idFromName !== "function") namespace = undefined;
  } catch (cause) {
    if (isPacelineError(cause, "INVALID_INPUT")) throw cause;
    const error = misuse("gatewayPort: env or options could not be read");
    error.cause = cause;
    throw error;
  }
  if (namespace === undefined) {
    throw misuse(
      `gatewayPort: env.${bindingName} is not a Durable Object namespace binding; add ` +
        `[[durable_objects.bindings]] name = "${bindingName}", class_name = "PacelineGateway" ` +
        "to wrangler.toml (and export { PacelineGateway } from the Worker)",
    );
  }
  const name = bindingName;
  const routed = { [name]: namespace };
  return fetchPort({
    fetch: (url, init) => routeGatewayRequest(new Request(url, init), routed, name),
    baseUrl: IN_PROCESS_ORIGIN,
  });
}
