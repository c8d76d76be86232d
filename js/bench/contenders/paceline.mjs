// paceline's place in the benchmark, waiting for the package's client API.
// Until this module exports createContender, the runner prints why it is
// skipped and measures the others.
//
// What it must implement (the common contract is in js/bench/README.md):
//
// - startService({ limit }): runs once in the runner, before the processes
//   fork, because all of them must share one gateway. Start the Node dev
//   gateway with startDevGateway from js/gateway/node-server.mjs on
//   127.0.0.1 and an ephemeral port; return
//   { config: { gatewayUrl }, stop: () => closes it }. Each process then sees
//   that config as `config.service`.
// - createContender(config), in each process: the package's client for one
//   bucket per run (`bench:${config.runId}`) with the rule
//   { requestsPerWindow: config.rps, windowMs: 1000,
//     maxConcurrency: config.maxConcurrency }, reaching the gateway through
//   fetchPort({ fetch, baseUrl: config.service.gatewayUrl }) with a fetch
//   wrapper that counts calls.
//   - acquire(): takes one permit and waits until its dispatch time; resolves
//     to whatever report needs (its concurrency lease).
//   - report(permit, { status, retryAfterMs, retry }): a 429 is handed to the
//     gateway as a penalty of retryAfterMs (its timeline then waits, so do
//     not sleep here as well); any other status counts as a success; release
//     the lease either way and resolve undefined.
//   - roundTrips(): gateway requests this process made (the fetch count).
//   - close(): hand back leases and stop timers.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const label = "paceline (gateway)";

const gatewayModule = fileURLToPath(new URL("../../gateway/node-server.mjs", import.meta.url));

export function unavailable() {
  if (!existsSync(gatewayModule)) {
    return "not yet available: js/gateway/node-server.mjs (startDevGateway) does not exist yet";
  }
  return "not yet available: the dev gateway exists, but this contender is not written yet (contract at the top of js/bench/contenders/paceline.mjs)";
}
