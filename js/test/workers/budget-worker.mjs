// A Worker that keeps one GatewayBudgetState at module scope, as an app
// would to share reserved blocks between its requests: every request
// charges one tool call to the run named in its URL.
import { GatewayBudgetState, fetchPort } from "paceline";

let budget;

export default {
  async fetch(request, env) {
    const run = new URL(request.url).searchParams.get("run");
    budget ??= new GatewayBudgetState(
      fetchPort({ fetch: (u, init) => env.GATEWAY.fetch(u, init), baseUrl: "http://gateway" }),
    );
    try {
      const charged = await budget.charge({ rootRunId: run, charges: [{ key: "toolCall", amount: 1, limit: 1000 }] });
      return Response.json(charged);
    } catch (error) {
      return Response.json({ error: { code: error.code, message: error.message } }, { status: 500 });
    }
  },
};
