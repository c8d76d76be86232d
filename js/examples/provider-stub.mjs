// A provider stub that records every call. With TRUE_LIMIT_RPS set it
// enforces that limit over a sliding second, which its callers are not
// told, and answers 429 with Retry-After: 1 above it. GET /calls returns
// the record; DELETE /calls forgets it.
const calls = [];
const accepted = [];

function overLimit(env, now) {
  const limit = Number(env.TRUE_LIMIT_RPS ?? Infinity);
  while (accepted.length > 0 && accepted[0] <= now - 1000) accepted.shift();
  return accepted.length >= limit;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/calls") {
      if (request.method === "DELETE") calls.length = 0;
      return Response.json(calls);
    }
    const at = Date.now();
    if (overLimit(env, at)) {
      calls.push({ at, status: 429 });
      return new Response("slow down", { status: 429, headers: { "retry-after": "1" } });
    }
    accepted.push(at);
    calls.push({ at, status: 200 });
    return Response.json({ row: url.searchParams.get("row"), enriched: true });
  },
};
