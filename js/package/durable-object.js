// The gateway on Cloudflare: one GatewayCore per Durable Object, whose state
// is stored before any answer leaves, so an evicted or restarted object
// continues the same timelines and never grants a dispatch time twice.
import { GatewayCore, gatewayObjectName } from "../paceline.js";
import { gatewayWireTable, handleGatewayRequest, readRequestBody } from "./gateway-http.js";

const SNAPSHOT_KEY = "snapshot";

function configError(message, cause) {
  const error = new Error(message, cause === undefined ? undefined : { cause });
  error.name = "PacelineError";
  error.code = "INVALID_INPUT";
  return error;
}

function millisFromEnv(env, name) {
  const raw = env[name];
  if (raw === undefined) return undefined;
  const ms = typeof raw === "number" ? raw : raw === "" ? NaN : Number(raw);
  if (!Number.isFinite(ms)) {
    throw configError(`${name} must be a number of milliseconds, got ${JSON.stringify(raw)}`);
  }
  return ms;
}

/**
 * Permits reach a provider a few milliseconds off their times (timers fire
 * late, isolates and the provider keep different clocks); scheduling each
 * window this much longer keeps the provider's own count within the rule.
 */
export const DEFAULT_WINDOW_GUARD_MS = 25;

function coreOptions(env) {
  const options = {};
  if (env.PACELINE_SECRET !== undefined) options.secret = env.PACELINE_SECRET;
  const horizonMs = millisFromEnv(env, "PACELINE_HORIZON_MS");
  if (horizonMs !== undefined) options.horizonMs = horizonMs;
  const leaseTtlMs = millisFromEnv(env, "PACELINE_LEASE_TTL_MS");
  if (leaseTtlMs !== undefined) options.leaseTtlMs = leaseTtlMs;
  options.windowGuardMs = millisFromEnv(env, "PACELINE_WINDOW_GUARD_MS") ?? DEFAULT_WINDOW_GUARD_MS;
  return options;
}

function sameBytes(a, b) {
  if (a === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export class PacelineGateway {
  #ctx;
  #core;
  // Equal states give equal snapshots, so a request that changed nothing
  // (a forged token, a bad body) costs no storage write.
  #stored;

  constructor(ctx, env) {
    let options;
    try {
      if (typeof ctx?.blockConcurrencyWhile !== "function" || typeof ctx.storage?.get !== "function") {
        throw configError("PacelineGateway needs a Durable Object state (ctx) with storage");
      }
      options = coreOptions(env ?? {});
    } catch (cause) {
      throw cause?.code === "INVALID_INPUT" ? cause : configError("PacelineGateway: ctx or env could not be read", cause);
    }
    this.#ctx = ctx;
    // A snapshot that cannot be restored fails the object loudly: starting
    // empty would re-grant every time the lost timelines had handed out.
    ctx.blockConcurrencyWhile(async () => {
      const saved = await ctx.storage.get(SNAPSHOT_KEY);
      this.#core = saved === undefined ? new GatewayCore(options) : GatewayCore.restore(saved, options);
      // A fresh core's state is what an empty storage already means.
      this.#stored = saved ?? this.#core.snapshot();
    });
  }

  async fetch(request) {
    if (typeof this !== "object" || this === null || !(#core in this)) {
      throw configError("fetch was called on an object that is not a PacelineGateway");
    }
    const response = await handleGatewayRequest(this.#core, request);
    if (request.method === "POST" && response.status < 500) {
      const bytes = this.#core.snapshot();
      if (!sameBytes(this.#stored, bytes)) {
        this.#stored = bytes;
        await this.#ctx.storage.put(SNAPSHOT_KEY, bytes);
      }
    }
    return response;
  }
}

function invalid(status, message) {
  return new Response(JSON.stringify({ error: { code: "INVALID_INPUT", message } }), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function forward(namespace, name, request) {
  return namespace.get(namespace.idFromName(name)).fetch(request);
}

export async function routeGatewayRequest(request, env, bindingName = "PACELINE_GATEWAY") {
  if (typeof bindingName !== "string") throw configError("routeGatewayRequest: bindingName must be a string");
  let namespace;
  try {
    namespace = env?.[bindingName];
    if (typeof namespace?.idFromName !== "function") namespace = undefined;
  } catch (cause) {
    throw configError(`routeGatewayRequest: env.${bindingName} could not be read`, cause);
  }
  if (namespace === undefined) {
    throw configError(`env.${bindingName} is not a Durable Object namespace binding`);
  }
  let isRequest;
  try {
    isRequest = request instanceof Request;
  } catch (cause) {
    throw configError("routeGatewayRequest: request could not be read", cause);
  }
  if (!isRequest) throw configError("routeGatewayRequest: request must be a Request");
  const { pathname } = new URL(request.url);
  const { routes, bucketViewPrefix, maxBodyBytes } = gatewayWireTable();
  if (request.method === "GET" && pathname.startsWith(bucketViewPrefix)) {
    let bucketId;
    try {
      bucketId = decodeURIComponent(pathname.slice(bucketViewPrefix.length));
    } catch {
      return invalid(400, `bad percent-escape in the bucket id of ${pathname}`);
    }
    if (bucketId === "") return invalid(400, `the bucket id after ${bucketViewPrefix} is empty`);
    return forward(namespace, bucketId, request);
  }
  if (!routes.some((route) => route.path === pathname)) {
    return invalid(404, `no gateway endpoint at ${request.method} ${pathname}`);
  }
  if (request.method !== "POST") return invalid(405, `${pathname} takes POST, not ${request.method}`);
  // The core refuses larger bodies anyway; the router must not parse them.
  const bytes = await readRequestBody(request, maxBodyBytes);
  if (bytes === null) {
    return invalid(400, `body is over ${maxBodyBytes} bytes; the limit is ${maxBodyBytes}`);
  }
  let name;
  try {
    name = gatewayObjectName(pathname, bytes);
  } catch (e) {
    return invalid(400, e.message);
  }
  // The body was consumed to read the id; the object gets the same bytes.
  const forwarded = new Request(request.url, { method: "POST", headers: request.headers, body: bytes });
  return forward(namespace, name, forwarded);
}
