// The gateway module ("paceline/gateway"): the crate with its gateway-host
// bindings and nothing of the pacer, for what hosts the scheduler: a
// gateway Worker and its Durable Object, the Node dev gateway. In a real
// workerd, a gateway Worker bundled from it ships only the gateway .wasm;
// a one-Worker setup pairs it with paceline/client, and the two modules
// meet only through a transport's bytes. Real time; the assertions are
// invariants of the schedule, not durations.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Miniflare } from "miniflare";
import { bundleWorker, bundleWorkerSource, pkgDir, repoRoot } from "../lib/bundle-worker.mjs";
import { assertFivePerSecond } from "../lib/module-entries.mjs";

// A client Worker that paces through a gateway Worker over a service binding.
const clientWorker = `
import { createLimiter, fetchPort } from "paceline/client";
export default {
  async fetch(request, env) {
    const port = fetchPort({ fetch: (url, init) => env.GATEWAY.fetch(url, init), baseUrl: "http://gateway" });
    const limiter = createLimiter({ port, bucketId: "gateway-module", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
    const times = await Promise.all(Array.from({ length: 8 }, () => limiter.schedule(() => Date.now())));
    return Response.json(times);
  },
};`;

// One Worker that exports the gateway's Durable Object and paces through it
// in-process: the pacer from paceline/client, the host from paceline/gateway.
const oneWorker = `
import { createLimiter } from "paceline/client";
import { gatewayPort } from "paceline/gateway";
export { PacelineGateway } from "paceline/gateway";
export default {
  async fetch(request, env) {
    const limiter = createLimiter({ port: gatewayPort(env), bucketId: "one-worker", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
    const times = await Promise.all(Array.from({ length: 8 }, () => limiter.schedule(() => Date.now())));
    return Response.json(times);
  },
};`;

// What only a pacer needs, which the gateway module leaves out.
const pacerOnly = [
  "GatewayBudgetState",
  "GatewayClient",
  "GatewayRateState",
  "Governor",
  "LocalBudgetState",
  "LocalRateState",
  "Permit",
  "ToolLease",
  "WorkLease",
  "createGovernor",
  "createLimiter",
];

describe("the gateway module's package entries", () => {
  test("package.json routes paceline/gateway's workerd, node and default conditions to its entries", () => {
    const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
    assert.deepEqual(pkg.exports["./gateway"], {
      types: "./gateway.d.ts",
      workerd: "./paceline_gateway_workerd.js",
      node: "./paceline_gateway_node.js",
      default: "./gateway.js",
    });
    const entry = readFileSync(join(pkgDir, "paceline_gateway_workerd.js"), "utf8");
    assert.ok(entry.includes('import wasm from "./paceline_gateway_bg.wasm"'), entry);
  });

  test("its Node entry has the full module's API less the pacer's", async () => {
    const gateway = await import(join(pkgDir, "paceline_gateway_node.js"));
    const full = await import(join(pkgDir, "paceline_node.js"));
    const expected = Object.keys(full)
      .filter((name) => !pacerOnly.includes(name))
      .sort();
    assert.deepEqual(Object.keys(gateway).sort(), expected);
    for (const name of pacerOnly) assert.ok(name in full, `${name} is no longer in paceline`);
  });

  test("its GatewayCore serves the client module's GatewayRateState through coreTransport", async () => {
    const gateway = await import(join(pkgDir, "paceline_gateway_node.js"));
    const client = await import(join(pkgDir, "paceline_client_node.js"));
    const core = new gateway.GatewayCore();
    const state = new client.GatewayRateState(gateway.coreTransport(core));
    assert.equal(core.bucket({ bucketId: "b" }, Date.now()), null);
    const permit = await state.acquire({ bucketId: "b", rules: [{ requestsPerWindow: 10, windowMs: 1000 }] });
    assert.ok(permit instanceof client.Permit);
    // The acquire reached this core: it now holds the bucket, with its rule.
    const view = core.bucket({ bucketId: "b" }, Date.now());
    assert.equal(view?.configuredRequestsPerSecond, 10);
    await permit.release();
    state.free();
    core.free();
  });

  test("the package's dev gateway runs on the gateway module", () => {
    const server = readFileSync(join(pkgDir, "node-gateway.mjs"), "utf8");
    assert.match(server, /import \* as paceline from "\.\/paceline_gateway_node\.js";/);
  });
});

describe("the gateway module in workerd", () => {
  let mf;
  let gatewayOptions;
  let oneOptions;
  before(async () => {
    const clientOptions = await bundleWorkerSource("client-worker.mjs", clientWorker);
    gatewayOptions = await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"));
    oneOptions = await bundleWorkerSource("one-worker.mjs", oneWorker);
    const gatewayObject = {
      durableObjects: { PACELINE_GATEWAY: "PacelineGateway" },
      bindings: { PACELINE_WINDOW_GUARD_MS: "0" },
    };
    mf = new Miniflare({
      workers: [
        { name: "client", ...clientOptions, serviceBindings: { GATEWAY: "gateway" } },
        { name: "gateway", ...gatewayOptions, ...gatewayObject },
        { name: "one", ...oneOptions, ...gatewayObject },
      ],
    });
  });
  after(() => mf?.dispose());

  test("a gateway Worker importing paceline/gateway ships the gateway .wasm and no other", () => {
    const bundled = readFileSync(gatewayOptions.scriptPath, "utf8");
    assert.match(bundled, /from "\.\/paceline_gateway_bg\.wasm"/);
    assert.doesNotMatch(bundled, /paceline_bg\.wasm|paceline_client_bg\.wasm|paceline_limiter_bg\.wasm/);
  });

  test("a client Worker paces through it: at most 5 calls in any 1 s window", async () => {
    const res = await mf.dispatchFetch("http://client/");
    assert.equal(res.status, 200, await res.clone().text());
    assertFivePerSecond(await res.json());
  });

  test("one Worker with paceline/client and paceline/gateway paces through its own Durable Object", async () => {
    const bundled = readFileSync(oneOptions.scriptPath, "utf8");
    assert.match(bundled, /from "\.\/paceline_gateway_bg\.wasm"/);
    assert.match(bundled, /from "\.\/paceline_client_bg\.wasm"/);
    assert.doesNotMatch(bundled, /paceline_bg\.wasm/);
    const res = await (await mf.getWorker("one")).fetch("http://one/");
    assert.equal(res.status, 200, await res.clone().text());
    assertFivePerSecond(await res.json());
  });
});
