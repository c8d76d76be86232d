// The client reaches a gateway only through a transport: post bytes to a
// path, get status and bytes back. This one posts over an injected `fetch`,
// so a Worker can point it at a service binding, a Durable Object stub or a
// plain URL. The wasm encodes every request and reads every answer (error
// bodies included); nothing here parses JSON.

function portError(code, message, cause) {
  const error = new Error(message, cause === undefined ? undefined : { cause });
  error.name = "PacelineError";
  error.code = code;
  return error;
}

/** A caller's mistake: an Error with code INVALID_INPUT (and what was thrown reading the argument, as cause). */
function misuse(message, cause) {
  return portError("INVALID_INPUT", message, cause);
}

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function fetchPort(options) {
  let fetch, baseUrl, fixedHeaders;
  try {
    if (!isObject(options)) throw misuse("fetchPort takes { fetch, baseUrl, headers? }");
    ({ fetch, baseUrl } = options);
    // Read (and checked) once: every request sends these.
    fixedHeaders = new Headers(options.headers);
  } catch (cause) {
    throw cause?.code === "INVALID_INPUT" ? cause : misuse("fetchPort: its options could not be read", cause);
  }
  if (typeof fetch !== "function") throw misuse("fetchPort: fetch must be a function");
  if (typeof baseUrl !== "string") throw misuse("fetchPort: baseUrl must be a string");
  const base = baseUrl.replace(/\/+$/, "");
  if (!fixedHeaders.has("content-type")) fixedHeaders.set("content-type", "application/json");

  async function post(path, body, signal) {
    if (typeof path !== "string" || !path.startsWith("/")) throw misuse("post: path must be a string starting with /");
    if (!(body instanceof Uint8Array)) throw misuse("post: body must be a Uint8Array");
    const init = { method: "POST", headers: new Headers(fixedHeaders), body };
    if (signal !== undefined) init.signal = signal;
    let response, status;
    try {
      // Called as a plain function: a bound stub fetch or globalThis.fetch
      // must not see the port object as `this`.
      response = await fetch(`${base}${path}`, init);
      status = response.status;
    } catch (cause) {
      if (signal?.aborted) throw cause;
      throw portError(
        "GATEWAY_UNAVAILABLE",
        `paceline gateway did not answer POST ${path}: ${cause?.message ?? cause}`,
        cause,
      );
    }
    try {
      return { status, body: new Uint8Array(await response.arrayBuffer()) };
    } catch (cause) {
      if (signal?.aborted) throw cause;
      throw portError(
        "GATEWAY_UNAVAILABLE",
        `paceline gateway answered HTTP ${status} to POST ${path} with a body that could not be read`,
        cause,
      );
    }
  }

  return { post };
}
