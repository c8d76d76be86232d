// The gateway as a Worker: each request goes to the Durable Object that owns
// its bucket (or its run's budget), which answers from its own GatewayCore.
// Deploy with js/examples/wrangler.toml.
import { routeGatewayRequest } from "paceline/gateway";

export { PacelineGateway } from "paceline/gateway";

export default {
  fetch: (request, env) => routeGatewayRequest(request, env),
};
