// A Worker may build its rate states and its GatewayCore at its module's
// top level, during startup, so that its first request only uses them: no
// constructor draws random values or sets a timer, which workerd refuses
// there. What does need them (an acquire that must wait, a tryAcquire, which
// may start a refill, any other call that returns a promise, a GatewayCore's
// first call, createGovernor without a scope) is refused at the top level
// with INVALID_INPUT saying to call it from a handler: never a raw
// exception, a wasm trap or a promise that never settles. Real workerd,
// real time; the assertions are outcomes, not durations.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Miniflare } from "miniflare";
import { bundleWorkerSource } from "../lib/bundle-worker.mjs";

const worker = `
import { GatewayCore, GatewayRateState, LocalRateState, coreTransport, createGovernor } from "paceline";
const rules = [{ requestsPerWindow: 100, windowMs: 1000 }];
const outcome = (f) => {
  try {
    f();
    return "ok";
  } catch (e) {
    return { code: e.code, message: e.message, name: e.name };
  }
};
// Built at the top level: the states a handler then uses.
const local = new LocalRateState({ blockHorizonMs: 1000 });
const core = new GatewayCore();
const remote = new GatewayRateState(coreTransport(core), { blockHorizonMs: 1000 });
// What needs random values or timers, tried at the top level.
const topLevel = {
  snapshotOfAnotherCore: outcome(() => new GatewayCore().snapshot()),
  governorWithoutScope: outcome(() => createGovernor({ rateState: new LocalRateState() })),
  tryAcquire: outcome(() => remote.tryAcquire({ bucketId: "top-level", rules })),
  acquire: "pending",
  penalize: "pending",
};
local.acquire({ bucketId: "top-level", rules }).then(
  (permit) => { topLevel.acquire = "granted"; permit.release(); },
  (e) => { topLevel.acquire = { code: e.code, message: e.message }; },
);
remote.penalize({ bucketId: "top-level", cooldownMs: 10 }).then(
  () => { topLevel.penalize = "done"; },
  (e) => { topLevel.penalize = { code: e.code, message: e.message }; },
);
export default {
  async fetch(request) {
    if (new URL(request.url).pathname === "/top-level") return Response.json(topLevel);
    let granted = 0;
    for (const state of [local, remote]) {
      for (let i = 0; i < 3; i++) {
        (await state.acquire({ bucketId: "handler", rules })).release();
        granted += 1;
      }
    }
    return Response.json({ granted, records: core.records().length });
  },
};`;

describe("states built at a Worker's top level", () => {
  let mf;
  before(async () => {
    mf = new Miniflare(await bundleWorkerSource("module-scope-worker.mjs", worker));
    await mf.ready;
  });
  after(() => mf?.dispose());

  test("LocalRateState, GatewayCore and GatewayRateState built at the top level pace a handler's acquires", async () => {
    const res = await mf.dispatchFetch("http://worker/");
    const body = await res.json();
    assert.equal(res.status, 200);
    assert.equal(body.granted, 6);
    assert.ok(body.records > 0, "the core holds the handler's bucket");
  });

  test("what needs random values or timers at the top level is INVALID_INPUT saying to call it from a handler", async () => {
    const top = await (await mf.dispatchFetch("http://worker/top-level")).json();
    for (const [what, outcome] of Object.entries(top)) {
      assert.equal(outcome.code, "INVALID_INPUT", `${what}: ${JSON.stringify(outcome)}`);
      assert.match(outcome.message, /from a handler/, what);
    }
    assert.match(top.snapshotOfAnotherCore.message, /GatewayCore/);
    assert.match(top.governorWithoutScope.message, /createGovernor/);
    assert.match(top.acquire.message, /acquire waits on timers/);
    assert.match(top.tryAcquire.message, /tryAcquire waits on timers/);
    assert.match(top.penalize.message, /waits on timers/);
  });
});
