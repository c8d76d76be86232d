// The client module ("paceline/client"): the crate without its gateway-host
// bindings and without LocalRateState's in-process scheduler, for isolates
// that pace their calls through a shared gateway. In a real workerd,
// a client Worker bundled from `import ... from "paceline/client"` ships
// only the client .wasm and paces its calls through a gateway Worker (the
// full module, in a Durable Object) over a service binding; in Node, its
// entry exports the full entry's API less those parts. Real time;
// the assertions are invariants of the schedule, not durations.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { bundleWorker, bundleWorkerSource, repoRoot } from "../lib/bundle-worker.mjs";
import { assertFivePerSecond, describeModuleEntries } from "../lib/module-entries.mjs";

const clientWorker = `
import * as client from "paceline/client";
const { createLimiter, fetchPort } = client;
export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/exports") return Response.json(Object.keys(client).sort());
    const port = fetchPort({ fetch: (url, init) => env.GATEWAY.fetch(url, init), baseUrl: "http://gateway" });
    const limiter = createLimiter({ port, bucketId: "client-module", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
    const times = await Promise.all(Array.from({ length: 8 }, () => limiter.schedule(() => Date.now())));
    return Response.json(times);
  },
};`;

// What the client module leaves out: what only a gateway's host needs (the
// GatewayCore class, its routing and token helpers, the one-call-at-a-time
// GatewayClient for admin tools and tests, and the glue built on them), and
// LocalRateState, which holds a scheduler of its own, and the grant decoder
// for clients written in JS (its limiters decode grants in the wasm).
const leftOut = [
  "DEFAULT_WINDOW_GUARD_MS",
  "GatewayClient",
  "GatewayCore",
  "LocalRateState",
  "PacelineGateway",
  "coreTransport",
  "decodeAcquireResponse",
  "gatewayObjectName",
  "gatewayPort",
  "gatewayWireTable",
  "handleGatewayRequest",
  "mintRateScopeToken",
  "mintRunScopeToken",
  "readRequestBody",
  "routeGatewayRequest",
];

describe("the client module in workerd, beside a gateway Worker", () => {
  let mf;
  let clientOptions;
  before(async () => {
    clientOptions = await bundleWorkerSource("client-worker.mjs", clientWorker);
    const gatewayOptions = await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"));
    mf = new Miniflare({
      workers: [
        { name: "client", ...clientOptions, serviceBindings: { GATEWAY: "gateway" } },
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

  test("a Worker importing paceline/client ships the client .wasm and not the full one", () => {
    const bundled = readFileSync(clientOptions.scriptPath, "utf8");
    assert.match(bundled, /from "\.\/paceline_client_bg\.wasm"/);
    assert.doesNotMatch(bundled, /paceline_bg\.wasm/);
  });

  test("esbuild bundles it without a warning (wrangler would show them to the user)", async () => {
    const result = await build({
      stdin: { contents: clientWorker, resolveDir: dirname(clientOptions.scriptPath), loader: "js" },
      bundle: true,
      write: false,
      format: "esm",
      platform: "neutral",
      conditions: ["workerd", "worker", "browser"],
      external: ["*.wasm"],
      nodePaths: [join(dirname(clientOptions.scriptPath), "../node_modules")],
      logLevel: "silent",
    });
    assert.deepEqual(result.warnings, []);
  });

  test("its exports are the full entry's less the gateway host's, LocalRateState and the grant decoder", async () => {
    const exports = await (await mf.dispatchFetch("http://client/exports")).json();
    const { paceline } = await import("../lib/node-package.mjs");
    const expected = Object.keys(paceline)
      .filter((name) => !leftOut.includes(name))
      .sort();
    assert.deepEqual(exports, expected);
  });

  test("its limiter paces calls through the gateway Worker: at most 5 in any 1 s window", async () => {
    const res = await mf.dispatchFetch("http://client/");
    assert.equal(res.status, 200, await res.clone().text());
    assertFivePerSecond(await res.json());
  });
});

describeModuleEntries("client", "GatewayCore");
