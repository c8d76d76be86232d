// An example Workers entry: each request enriches rows by calling a
// rate-limited provider, pacing every call through the shared gateway.
// The pacer lives at module scope, so every request in this isolate shares
// its cached block of permits (one gateway round trip per block).
import { GatewayRateState, fetchPort } from "paceline";

const BUCKET = "org_demo:provider";

let pacer;
function pacerFor(env) {
  pacer ??= new GatewayRateState(
    fetchPort({ fetch: (url, init) => env.GATEWAY.fetch(url, init), baseUrl: "http://gateway" }),
  );
  return pacer;
}

function retryAfterMs(response) {
  const seconds = Number(response.headers.get("retry-after"));
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 1000;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const rows = Number(url.searchParams.get("rows") ?? "10");
    const rateScopeToken = url.searchParams.get("token") ?? undefined;
    const pacer = pacerFor(env);
    // What the client is told about the provider; the provider may allow less.
    const RULES = [{ requestsPerWindow: Number(env.RULE_RPS ?? "20"), windowMs: 1000 }];
    let enriched = 0;
    let throttled = 0;
    try {
      for (let row = 0; row < rows; row++) {
        // A throttled row is tried again on a later permit, up to 3 times.
        for (let attempt = 0; attempt < 3; attempt++) {
          const permit = await pacer.acquire({ bucketId: BUCKET, rateScopeToken, rules: RULES });
          try {
            const res = await fetch(`${env.PROVIDER_URL}/enrich?row=${row}`);
            await res.arrayBuffer();
            if (res.status !== 429) {
              enriched++;
              pacer.observeSuccess(BUCKET);
              break;
            }
            throttled++;
            await pacer.penalize({ bucketId: BUCKET, rateScopeToken, cooldownMs: retryAfterMs(res) });
          } finally {
            permit.release();
          }
        }
      }
      return Response.json({ enriched, throttled });
    } catch (error) {
      const status = error.code === "FORBIDDEN_SCOPE" ? 403 : 500;
      return Response.json({ error: { code: error.code, message: error.message }, enriched }, { status });
    }
  },
};
