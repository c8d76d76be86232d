// Every JS host of a GatewayCore answers HTTP through the core's own router,
// so the Durable Object, the Node dev server and tests cannot drift apart.
// Bodies stay bytes: the core decodes each request and encodes each answer.
import { gatewayWire } from "../paceline.js";

let wire;
/**
 * The protocol's endpoint table and body limit, read from the wasm on first
 * use (the module may be loaded before the wasm is initialised).
 */
export function gatewayWireTable() {
  wire ??= gatewayWire();
  return wire;
}

function refusal(status, message) {
  return new Response(JSON.stringify({ error: { code: "INVALID_INPUT", message } }), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function misuse(message, cause) {
  const error = new Error(message, cause === undefined ? undefined : { cause });
  error.name = "PacelineError";
  error.code = "INVALID_INPUT";
  return error;
}

/**
 * The request's body, read until `limitBytes`: `null` when it declares or
 * turns out to be longer, in which case the stream is cancelled unread.
 */
/** Throws INVALID_INPUT unless `request` is a Request (a revoked Proxy included). */
function checkRequest(request, who) {
  let ok;
  try {
    ok = request instanceof Request;
  } catch (cause) {
    throw misuse(`${who}: request could not be read`, cause);
  }
  if (!ok) throw misuse(`${who}: request must be a Request`);
}

export async function readRequestBody(request, limitBytes = gatewayWireTable().maxBodyBytes) {
  checkRequest(request, "readRequestBody");
  if (!Number.isSafeInteger(limitBytes) || limitBytes < 0) {
    throw misuse("readRequestBody: limitBytes must be an integer >= 0");
  }
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limitBytes) {
    await request.body?.cancel();
    return null;
  }
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limitBytes) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

export async function handleGatewayRequest(core, request, nowMs) {
  let handle;
  try {
    handle = core?.handle;
  } catch (cause) {
    throw misuse("handleGatewayRequest: core could not be read", cause);
  }
  if (typeof handle !== "function") throw misuse("handleGatewayRequest: core must be a GatewayCore");
  checkRequest(request, "handleGatewayRequest");
  const url = new URL(request.url);
  // The core's limit on a request body. A larger one is refused here, before
  // it is read in full, and never reaches the wasm: copying it in would grow
  // the wasm memory, which never shrinks, by the body's size.
  const { maxBodyBytes } = gatewayWireTable();
  const bytes = await readRequestBody(request, maxBodyBytes);
  if (bytes === null) {
    return refusal(400, `body is over ${maxBodyBytes} bytes; the limit is ${maxBodyBytes}`);
  }
  // The clock is read once the body is in: a slow upload must not make the
  // scheduler place permits at a time that has already passed.
  const now = nowMs ?? Date.now();
  const answer = core.handle(request.method, url.pathname + url.search, bytes, now);
  return new Response(answer.body, {
    status: answer.status,
    headers: { "content-type": "application/json" },
  });
}

/**
 * A transport to a GatewayCore in this isolate: each post is answered at
 * once by the core's router, on the clock `now` (default `Date.now`).
 */
export function coreTransport(core, now = Date.now) {
  let handle;
  try {
    handle = core?.handle;
  } catch (cause) {
    throw misuse("coreTransport: core could not be read", cause);
  }
  if (typeof handle !== "function") throw misuse("coreTransport: core must be a GatewayCore");
  if (typeof now !== "function") throw misuse("coreTransport: now must be a function returning milliseconds");
  return {
    post: async (path, body) => core.handle("POST", path, body, now()),
  };
}
