// paceline through the Node dev gateway: one gateway for every process, each
// process a client with its own block-leasing pacer over fetchPort. A 429
// goes to the gateway as a penalty (its timeline then waits, so the caller
// does not sleep as well).
import { startDevGateway } from "../../gateway/node-server.mjs";
import { paceline } from "../../lib/node-package.mjs";

export const label = "paceline (Node dev gateway)";

export function describe({ rps, maxConcurrency }) {
  return `one shared gateway; rule ${rps} req/s with maxConcurrency ${maxConcurrency}; blocks of permits per process`;
}

export async function startService() {
  const gateway = await startDevGateway({ port: 0 });
  return { config: { gatewayUrl: gateway.url }, stop: () => gateway.close() };
}

export async function createContender(config) {
  let roundTrips = 0;
  const countingFetch = (url, init) => {
    roundTrips += 1;
    return fetch(url, init);
  };
  const pacer = new paceline.GatewayRateState(
    paceline.fetchPort({ fetch: countingFetch, baseUrl: config.service.gatewayUrl }),
  );
  const bucketId = `bench:${config.runId}`;
  const rules = [{ requestsPerWindow: config.rps, windowMs: 1000, maxConcurrency: config.maxConcurrency }];
  return {
    acquire: () => pacer.acquire({ bucketId, rules }),
    async report(permit, { status, retryAfterMs }) {
      try {
        if (status === 429) await pacer.penalize({ bucketId, cooldownMs: Math.max(1, retryAfterMs) });
        else pacer.observeSuccess({ bucketId });
      } finally {
        permit.release();
      }
    },
    roundTrips: () => roundTrips,
    async close() {},
  };
}
