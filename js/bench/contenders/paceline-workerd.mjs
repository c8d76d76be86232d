// paceline with its production gateway: the PacelineGateway Durable Object
// in workerd (through miniflare, on a loopback port). The processes use the
// same client as the Node dev gateway contender; only the gateway differs.
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundleWorker, repoRoot } from "../../lib/bundle-worker.mjs";

export { createContender } from "./paceline.mjs";

export const label = "paceline (Durable Object gateway in workerd)";

export function describe({ rps, maxConcurrency }) {
  return `one PacelineGateway Durable Object; rule ${rps} req/s with maxConcurrency ${maxConcurrency}; blocks of permits per process`;
}

export async function startService() {
  const options = await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"));
  const mf = new Miniflare({ ...options, port: 0, durableObjects: { PACELINE_GATEWAY: "PacelineGateway" } });
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { config: { gatewayUrl: url }, stop: () => mf.dispose() };
}
