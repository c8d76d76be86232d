// The limiter module ("paceline/limiter"): the client module without the
// governor, for isolates that only pace their calls through a shared
// gateway. In a real workerd, a Worker bundled from `import ... from
// "paceline/limiter"` ships only the limiter .wasm and paces its calls
// through a gateway Worker (the full module, in a Durable Object) over a
// service binding; in Node, its entry exports the client entry's API less
// the governor's. Real time; the assertions are invariants of the
// schedule, not durations.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Miniflare } from "miniflare";
import { bundleWorker, bundleWorkerSource, pkgDir, repoRoot } from "../lib/bundle-worker.mjs";
import { assertFivePerSecond, describeModuleEntries } from "../lib/module-entries.mjs";

const limiterWorker = `
import * as limiterModule from "paceline/limiter";
const { createLimiter, fetchPort } = limiterModule;
export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/exports") return Response.json(Object.keys(limiterModule).sort());
    const port = fetchPort({ fetch: (url, init) => env.GATEWAY.fetch(url, init), baseUrl: "http://gateway" });
    const limiter = createLimiter({ port, bucketId: "limiter-module", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
    const times = await Promise.all(Array.from({ length: 8 }, () => limiter.schedule(() => Date.now())));
    return Response.json(times);
  },
};`;

// What the limiter module leaves out of the client module's API: the
// governor, its leases and the budget states it charges.
const leftOut = ["GatewayBudgetState", "Governor", "LocalBudgetState", "ToolLease", "WorkLease", "createGovernor"];

describe("the limiter module in workerd, beside a gateway Worker", () => {
  let mf;
  let limiterOptions;
  before(async () => {
    limiterOptions = await bundleWorkerSource("limiter-worker.mjs", limiterWorker);
    const gatewayOptions = await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"));
    mf = new Miniflare({
      workers: [
        { name: "limiter", ...limiterOptions, serviceBindings: { GATEWAY: "gateway" } },
        {
          name: "gateway",
          ...gatewayOptions,
          durableObjects: { PACELINE_GATEWAY: "PacelineGateway" },
          bindings: { PACELINE_WINDOW_GUARD_MS: "0" },
        },
      ],
    });
  });
  after(() => mf?.dispose());

  test("a Worker importing paceline/limiter ships the limiter .wasm and no other", () => {
    const bundled = readFileSync(limiterOptions.scriptPath, "utf8");
    assert.match(bundled, /from "\.\/paceline_limiter_bg\.wasm"/);
    assert.doesNotMatch(bundled, /paceline_bg\.wasm|paceline_client_bg\.wasm/);
  });

  test("its exports are the client module's less the governor's", async () => {
    const exports = await (await mf.dispatchFetch("http://limiter/exports")).json();
    const client = await import(join(pkgDir, "paceline_client_node.js"));
    const expected = Object.keys(client)
      .filter((name) => !leftOut.includes(name))
      .sort();
    assert.deepEqual(exports, expected);
    for (const name of leftOut) assert.ok(name in client, `${name} is no longer in paceline/client`);
  });

  test("its limiter paces calls through the gateway Worker: at most 5 in any 1 s window", async () => {
    const res = await mf.dispatchFetch("http://limiter/");
    assert.equal(res.status, 200, await res.clone().text());
    assertFivePerSecond(await res.json());
  });
});

describeModuleEntries("limiter", "createGovernor");
