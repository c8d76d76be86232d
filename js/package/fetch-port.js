// The client reaches a gateway only through this port, so a Worker can point
// it at a service binding, a Durable Object stub or a plain URL by choosing
// which `fetch` to inject.

const ENDPOINTS = {
  acquire: "/v1/rate/acquire",
  release: "/v1/rate/release",
  penalize: "/v1/rate/penalize",
  observe: "/v1/rate/observe",
  charge: "/v1/budget/charge",
};

const CODES = new Set([
  "INVALID_INPUT",
  "FORBIDDEN_SCOPE",
  "BUDGET_EXCEEDED",
  "PROVIDER_EXHAUSTED",
  "GATEWAY_UNAVAILABLE",
  "ABORTED",
  "CYCLE_DETECTED",
]);

// Enough of a proxy's HTML error page to recognise it in a log.
const EXCERPT_CHARS = 120;

function portError(code, message, status, cause) {
  const error = new Error(message, cause === undefined ? undefined : { cause });
  error.name = "PacelineError";
  error.code = code;
  error.status = status;
  return error;
}

/** A caller's mistake: an Error with code INVALID_INPUT (and what was thrown reading the argument, as cause). */
function misuse(message, cause) {
  return portError("INVALID_INPUT", message, undefined, cause);
}

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describeBody(text, what) {
  if (text === "") return "an empty body";
  const excerpt = text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS)}…` : text;
  return `a body ${what}: ${JSON.stringify(excerpt)}`;
}

function unavailable(status, path, what, cause) {
  return portError(
    "GATEWAY_UNAVAILABLE",
    `paceline gateway answered HTTP ${status} to POST ${path} with ${what}`,
    status,
    cause,
  );
}

function errorFromBody(fields, status, path) {
  const known = CODES.has(fields.code);
  const gatewayMessage = typeof fields.message === "string" ? fields.message : undefined;
  // A newer gateway's unknown code still surfaces, as the one code every
  // client already treats as "the gateway could not answer".
  const message = known
    ? (gatewayMessage ?? `paceline gateway answered HTTP ${status} to POST ${path} with ${fields.code}`)
    : `paceline gateway answered HTTP ${status} to POST ${path} with unknown code ${fields.code}` +
      (gatewayMessage === undefined ? "" : `: ${gatewayMessage}`);
  const error = portError(known ? fields.code : "GATEWAY_UNAVAILABLE", message, status);
  if (typeof fields.key === "string") error.key = fields.key;
  for (const name of ["observed", "limit", "cooldownUntilMs"]) {
    if (Number.isFinite(fields[name])) error[name] = fields[name];
  }
  return error;
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

  async function post(path, req) {
    const sent = new Headers(fixedHeaders);
    if (!sent.has("content-type")) sent.set("content-type", "application/json");
    let payload;
    try {
      payload = JSON.stringify(req);
    } catch (cause) {
      throw misuse(`the request to ${path} cannot be written as JSON`, cause);
    }
    // Called as a plain function: a bound stub fetch or globalThis.fetch must
    // not see the port object as `this`. Its own exceptions pass through.
    const response = await fetch(`${base}${path}`, { method: "POST", headers: sent, body: payload });
    const { status } = response;
    let text;
    try {
      text = await response.text();
    } catch (cause) {
      throw unavailable(status, path, "a body that could not be read", cause);
    }
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      throw unavailable(status, path, describeBody(text, "that is not JSON"));
    }
    if (status >= 200 && status < 300) {
      if (isObject(body)) return body;
      throw unavailable(status, path, describeBody(text, "that is not a JSON object"));
    }
    if (isObject(body) && isObject(body.error) && typeof body.error.code === "string") {
      throw errorFromBody(body.error, status, path);
    }
    throw unavailable(status, path, describeBody(text, "without an error code"));
  }

  return {
    acquire: (req) => post(ENDPOINTS.acquire, req),
    release: (req) => post(ENDPOINTS.release, req),
    penalize: (req) => post(ENDPOINTS.penalize, req),
    observe: (req) => post(ENDPOINTS.observe, req),
    charge: (req) => post(ENDPOINTS.charge, req),
  };
}
