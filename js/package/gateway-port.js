// The one-Worker wiring: the gateway's Durable Object is exported by the
// same Worker, and the port reaches it through the router in-process,
// without a second Worker or a service binding.
import { routeGatewayRequest } from "./durable-object.js";
import { fetchPort } from "./fetch-port.js";

// Requests never leave the isolate; the origin only has to parse.
const IN_PROCESS_ORIGIN = "https://paceline.gateway";

function misuse(message) {
  const error = new Error(message);
  error.name = "PacelineError";
  error.code = "INVALID_INPUT";
  return error;
}

/**
 * @param {Record<string, unknown>} env
 * @param {{ bindingName?: string }} [options]
 */
export function gatewayPort(env, options) {
  let bindingName = "PACELINE_GATEWAY";
  let namespace;
  try {
    if (options !== undefined && options !== null) {
      if (typeof options !== "object") throw misuse("gatewayPort: options must be { bindingName? }");
      if (options.bindingName !== undefined) bindingName = options.bindingName;
    }
    if (typeof bindingName !== "string") throw misuse("gatewayPort: options.bindingName must be a string");
    namespace = typeof env === "object" && env !== null ? env[bindingName] : undefined;
  } catch (cause) {
    if (cause?.code === "INVALID_INPUT") throw cause;
    const error = misuse("gatewayPort: env or options could not be read");
    error.cause = cause;
    throw error;
  }
  if (typeof namespace?.idFromName !== "function") {
    throw misuse(
      `gatewayPort: env.${bindingName} is not a Durable Object namespace binding; add ` +
        `[[durable_objects.bindings]] name = "${bindingName}", class_name = "PacelineGateway" ` +
        "to wrangler.toml (and export { PacelineGateway } from the Worker)",
    );
  }
  const routed = { [bindingName]: namespace };
  return fetchPort({
    fetch: (url, init) => routeGatewayRequest(new Request(url, init), routed, bindingName),
    baseUrl: IN_PROCESS_ORIGIN,
  });
}
