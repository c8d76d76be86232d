// Every JS host of a GatewayCore answers HTTP through the core's own router,
// so the Durable Object, the Node dev server and tests cannot drift apart.

// The core's limit on a request body. A larger one is refused here, before
// it is read in full, and never reaches the wasm: copying it in would grow
// the wasm memory, which never shrinks, by the body's size.
const MAX_BODY_BYTES = 64 * 1024;

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

export async function readRequestBody(request, limitBytes = MAX_BODY_BYTES) {
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
  const bytes = await readRequestBody(request, MAX_BODY_BYTES);
  if (bytes === null) {
    return refusal(400, `body is over ${MAX_BODY_BYTES} bytes; the limit is ${MAX_BODY_BYTES}`);
  }
  // The clock is read once the body is in: a slow upload must not make the
  // scheduler place permits at a time that has already passed.
  const now = nowMs ?? Date.now();
  const answer = core.handle(request.method, url.pathname + url.search, new TextDecoder().decode(bytes), now);
  return new Response(answer.body, {
    status: answer.status,
    headers: { "content-type": "application/json" },
  });
}
