// The client module ("paceline/client"): the crate without its gateway-host
// bindings and without LocalRateState's in-process scheduler, for isolates
// that pace their calls through a shared gateway. In a real workerd,
// a client Worker bundled from `import ... from "paceline/client"` ships
// only the client .wasm and paces its calls through a gateway Worker (the
// full module, in a Durable Object) over a service binding; in Node, its
// entry exports the full entry's API less those parts. Real time;
// the assertions are invariants of the schedule, not durations.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { bundleWorker, pkgDir, repoRoot } from "../lib/bundle-worker.mjs";

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
// LocalRateState, which holds a scheduler of its own.
const leftOut = [
  "DEFAULT_WINDOW_GUARD_MS",
  "GatewayClient",
  "GatewayCore",
  "LocalRateState",
  "PacelineGateway",
  "coreTransport",
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
    const work = mkdtempSync(join(tmpdir(), "paceline-client-module-"));
    const entry = join(work, "client-worker.mjs");
    writeFileSync(entry, clientWorker);
    clientOptions = await bundleWorker(entry);
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

  test("its exports are the full entry's less the gateway host's and LocalRateState", async () => {
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
    const times = (await res.json()).sort((a, b) => a - b);
    assert.equal(times.length, 8);
    for (let i = 5; i < times.length; i++) {
      assert.ok(times[i] - times[i - 5] >= 1000 - 5, `6 calls within ${times[i] - times[i - 5]} ms: ${times}`);
    }
  });
});

describe("the client module's package entries", () => {
  test("package.json routes paceline/client's workerd, node and default conditions to its entries", () => {
    const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
    assert.deepEqual(pkg.exports["./client"], {
      types: "./client.d.ts",
      workerd: "./paceline_client_workerd.js",
      node: "./paceline_client_node.js",
      default: "./client.js",
    });
    const entry = readFileSync(join(pkgDir, "paceline_client_workerd.js"), "utf8");
    assert.match(entry, /import wasm from "\.\/paceline_client_bg\.wasm"/);
    assert.match(entry, /initSync\(\{ module: wasm \}\)/);
  });

  // A gateway in this process, from the full module, reached over a plain
  // transport: the client module talks to it as to any other.
  const gatewayTransport = async () => {
    const { GatewayCore, coreTransport } = await import("../lib/node-package.mjs").then((m) => m.paceline);
    return coreTransport(new GatewayCore());
  };
  const rules = [{ requestsPerWindow: 10, windowMs: 1000 }];

  test("its web entry works once initSync({ module }) is given the client .wasm", async () => {
    const web = await import(join(pkgDir, "client.js"));
    web.initSync({ module: new WebAssembly.Module(readFileSync(join(pkgDir, "paceline_client_bg.wasm"))) });
    const state = new web.GatewayRateState(await gatewayTransport());
    const permit = await state.acquire({ bucketId: "b", rules });
    assert.ok(permit instanceof web.Permit);
    await permit.release();
    state.free();
  });

  test("a GatewayRateState from the Node entry hands out a permit and takes it back", async () => {
    const client = await import(join(pkgDir, "paceline_client_node.js"));
    assert.equal(client.GatewayCore, undefined);
    const state = new client.GatewayRateState(await gatewayTransport());
    const permit = await state.acquire({ bucketId: "b", rules });
    assert.ok(permit instanceof client.Permit);
    await permit.release();
    state.free();
  });

  test("a limiter without a port is INVALID_INPUT saying a port is required there", async () => {
    const client = await import(join(pkgDir, "paceline_client_node.js"));
    assert.equal(client.LocalRateState, undefined);
    assert.throws(
      () => client.createLimiter({ bucketId: "b", rules }),
      (e) => e.code === "INVALID_INPUT" && /port is required with paceline\/client/.test(e.message),
    );
  });
});
