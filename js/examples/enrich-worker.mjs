// An example Workers entry: each request is one play run that enriches rows
// by calling a rate-limited provider. Every call goes through the run's
// governor (`callTool`: a paced permit, a tool slot, the tool-call budget,
// 429 feedback and retries). The rate state lives at module scope, so all
// runs in this isolate share its cached block of permits: one gateway round
// trip per block, not per call.
import { GatewayRateState, createGovernor, fetchPort } from "paceline/client";

const ORG = "org_demo";
const PROVIDER = "provider";

let rateState;

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const rows = Number(url.searchParams.get("rows") ?? "10");
    const token = url.searchParams.get("token");
    rateState ??= new GatewayRateState(
      fetchPort({ fetch: (u, init) => env.GATEWAY.fetch(u, init), baseUrl: "http://gateway" }),
    );
    // What the client is told about the provider; the provider may allow less.
    const rules = [{ requestsPerWindow: Number(env.RULE_RPS ?? "20"), windowMs: 1000 }];
    const governor = createGovernor({
      adapter: "esm_workers",
      scope: { orgId: ORG, rootRunId: url.searchParams.get("run") ?? crypto.randomUUID() },
      rateState,
      resolvePacing: () => ({ provider: PROVIDER, rules }),
      // With a credential-scoped token the run draws from that bucket.
      resolveRateScope: token ? () => ({ bucketId: `${ORG}:${PROVIDER}`, rateScopeToken: token }) : undefined,
      // Each release callTool makes outlives this response.
      waitUntil: ctx.waitUntil.bind(ctx),
    });
    let enriched = 0;
    let gaveUp = 0;
    try {
      for (let row = 0; row < rows; row++) {
        const answer = await governor.callTool(() => fetch(`${env.PROVIDER_URL}/enrich?row=${row}`), {
          toolId: "provider.enrich",
          retrySafe: true,
          maxAttempts: 3,
        });
        await answer.arrayBuffer();
        if (answer.status === 200) enriched++;
        else gaveUp++;
      }
      return Response.json({ enriched, gaveUp, snapshot: governor.snapshot() });
    } catch (error) {
      const status = error.code === "FORBIDDEN_SCOPE" ? 403 : 500;
      return Response.json({ error: { code: error.code, message: error.message }, enriched }, { status });
    }
  },
};
