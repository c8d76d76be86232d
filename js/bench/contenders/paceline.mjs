// paceline through the Node dev gateway: one gateway for every process, each
// process a client with its own block-leasing pacer over fetchPort. A 429
// goes to the gateway as a penalty (its timeline then waits, so the caller
// does not sleep as well), and the provider's quota headers go there too.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { paceline } from "../../lib/node-package.mjs";

export const label = "paceline (Node dev gateway)";

export function describe({ rps, maxConcurrency }) {
  return `one shared gateway; rule ${rps} req/s with maxConcurrency ${maxConcurrency}; blocks of permits per process`;
}

// The gateway runs in a process of its own, as it would in production: in
// the runner's process its work would delay the provider stub's stamps of
// arrivals (the referee's clock), and bunch them.
export async function startService() {
  const script = fileURLToPath(new URL("../../gateway/node-server.mjs", import.meta.url));
  const child = spawn(process.execPath, [script, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  const url = await new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the dev gateway exited (${code}) before listening`)));
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const found = /on (http:\/\/\S+)/.exec(out);
      if (found) resolve(found[1]);
    });
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await once(child, "exit");
  };
  return { config: { gatewayUrl: url }, stop };
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
  // `--max-concurrency 0`: a rule with no bound on calls in flight.
  const bound = config.maxConcurrency > 0 ? { maxConcurrency: config.maxConcurrency } : {};
  const rules = [{ requestsPerWindow: config.rps, windowMs: 1000, ...bound }];
  return {
    acquire: () => pacer.acquire({ bucketId, rules }),
    async report(permit, { status, retryAfterMs, headers, sentAtMs }) {
      try {
        // What the provider says of its limit (its `X-RateLimit-*` or
        // `RateLimit` fields), before the answer itself is reported.
        if (headers) pacer.observeHeaders({ bucketId, headers });
        if (status === 429) await pacer.penalize({ bucketId, cooldownMs: Math.max(1, retryAfterMs), sentAtMs });
        else pacer.observeSuccess({ bucketId });
      } finally {
        permit.release();
      }
    },
    roundTrips: () => roundTrips,
    async close() {},
  };
}
