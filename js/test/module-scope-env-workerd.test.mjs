// The README's Worker builds its GatewayRateState over gatewayPort(env),
// which needs the Worker's bindings. With `env` imported from
// "cloudflare:workers" it can build it at the module's top level, during
// startup, so that the first request only uses it (the cold-start bench's
// "state built at module scope" case): gatewayPort and the constructor do
// no I/O, draw no random values and set no timer. Real workerd, real time;
// the assertions are outcomes, not durations.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Miniflare } from "miniflare";
import { bundleWorkerSource } from "../lib/bundle-worker.mjs";

const worker = `
import { env } from "cloudflare:workers";
import { GatewayRateState, PacelineGateway, gatewayPort } from "paceline";
export { PacelineGateway };
const rules = [{ requestsPerWindow: 100, windowMs: 1000 }];
const rateState = new GatewayRateState(gatewayPort(env));
export default {
  async fetch() {
    let granted = 0;
    for (let i = 0; i < 3; i++) {
      (await rateState.acquire({ bucketId: "handler", rules })).release();
      granted += 1;
    }
    return Response.json({ granted });
  },
};`;

describe("a GatewayRateState over gatewayPort(env) built at a Worker's top level", () => {
  let mf;
  before(async () => {
    const options = await bundleWorkerSource("module-scope-env-worker.mjs", worker);
    mf = new Miniflare({ ...options, durableObjects: { PACELINE_GATEWAY: "PacelineGateway" } });
    await mf.ready;
  });
  after(() => mf?.dispose());

  test("with env from cloudflare:workers, paces every request's acquires through the Durable Object", async () => {
    for (const request of [1, 2]) {
      const res = await mf.dispatchFetch("http://worker/");
      assert.equal(res.status, 200, `request ${request}`);
      assert.deepEqual(await res.json(), { granted: 3 }, `request ${request}`);
    }
  });
});
