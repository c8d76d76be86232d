// The gateway on Cloudflare: one GatewayCore per Durable Object, whose state
// is stored before any answer leaves, so an evicted or restarted object
// continues the same timelines and never grants a dispatch time twice. The
// state is stored as records, one per bucket and per run under keys of their
// own, and a request writes only the records it changed: its storage cost is
// bounded by what it touched, not by how much the object holds.
import { GatewayCore, gatewayObjectName } from "../paceline.js";
import { gatewayWireTable, handleGatewayRequest, readRequestBody } from "./gateway-http.js";

// Where objects of earlier versions kept their whole state as one value; it
// is read once, written again as records, and deleted.
const SNAPSHOT_KEY = "snapshot";
// Durable Object storage takes at most this many keys per put or delete.
const KEYS_PER_CALL = 128;

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

/** Writes the records (`[key, bytes | null]`), in calls of at most 128 keys. */
async function store(storage, records) {
  const puts = records.filter(([, bytes]) => bytes !== null);
  const deletes = records.filter(([, bytes]) => bytes === null).map(([key]) => key);
  for (let i = 0; i < puts.length; i += KEYS_PER_CALL) {
    await storage.put(Object.fromEntries(puts.slice(i, i + KEYS_PER_CALL)));
  }
  for (let i = 0; i < deletes.length; i += KEYS_PER_CALL) {
    await storage.delete(deletes.slice(i, i + KEYS_PER_CALL));
  }
}

export class PacelineGateway {
  #ctx;
  #core;

  constructor(ctx, env) {
    let options;
    try {
      if (typeof ctx?.blockConcurrencyWhile !== "function" || typeof ctx.storage?.list !== "function") {
        throw configError("PacelineGateway needs a Durable Object state (ctx) with storage");
      }
      options = coreOptions(env ?? {});
    } catch (cause) {
      throw cause?.code === "INVALID_INPUT"
        ? cause
        : configError("PacelineGateway: ctx or env could not be read", cause);
    }
    this.#ctx = ctx;
    // Records that cannot be restored fail the object loudly: starting
    // empty would re-grant every time the lost timelines had handed out.
    ctx.blockConcurrencyWhile(async () => {
      const stored = await ctx.storage.list();
      const snapshot = stored.get(SNAPSHOT_KEY);
      if (snapshot !== undefined) {
        this.#core = GatewayCore.restore(snapshot, options);
        await store(ctx.storage, this.#core.records());
        await ctx.storage.delete(SNAPSHOT_KEY);
      } else if (stored.size > 0) {
        this.#core = GatewayCore.restoreRecords(stored, options);
      } else {
        this.#core = new GatewayCore(options);
      }
    });
  }

  async fetch(request) {
    if (typeof this !== "object" || this === null || !(#core in this)) {
      throw configError("fetch was called on an object that is not a PacelineGateway");
    }
    const response = await handleGatewayRequest(this.#core, request);
    // A request that changed nothing (a forged token, a bad body) has no
    // records to write.
    const changed = this.#core.takeChangedRecords();
    if (changed.length > 0) await store(this.#ctx.storage, changed);
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
