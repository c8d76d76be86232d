// The example gateway Worker in a real workerd: the router, one
// PacelineGateway Durable Object per bucket with on-disk storage, the
// rate-scope secret, and a restart on the same storage. Real time; the
// assertions are invariants of the schedule, not durations.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Miniflare } from "miniflare";
import { bundleWorker, repoRoot } from "../lib/bundle-worker.mjs";
import { paceline } from "../lib/node-package.mjs";

const { fetchPort, mintRateScopeToken, mintRunScopeToken, GatewayClient } = paceline;
const secret = "workerd-test-secret";
const rules = [{ requestsPerWindow: 20, windowMs: 1000 }];
const token = (bucketId) => mintRateScopeToken({ secret, bucketId, expiresAtMs: Date.now() + 3_600_000 });
const gaps = (times) => times.slice(1).map((t, i) => t - times[i]);

describe("gateway Worker with Durable Objects in workerd", () => {
  let workerOptions;
  let persistDir;
  let mf;
  let port;

  function start() {
    mf = new Miniflare({
      ...workerOptions,
      durableObjects: { PACELINE_GATEWAY: "PacelineGateway" },
      durableObjectsPersist: persistDir,
      // A long horizon keeps each bucket's timeline ahead of real time, so a
      // slow test machine cannot open gaps in the schedule.
      bindings: { PACELINE_SECRET: secret, PACELINE_HORIZON_MS: "60000", PACELINE_WINDOW_GUARD_MS: "0" },
    });
    port = new GatewayClient(
      fetchPort({ fetch: (url, init) => mf.dispatchFetch(url, init), baseUrl: "http://gateway" }),
    );
  }

  before(async () => {
    workerOptions = await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"));
    persistDir = mkdtempSync(join(tmpdir(), "paceline-do-"));
    start();
  });
  after(async () => {
    await mf?.dispose();
    rmSync(persistDir, { recursive: true, force: true });
  });

  const bucketId = "org-a:openai";
  let lastBeforeRestart;

  test("concurrent acquires for one bucket get distinct, evenly spaced times", async () => {
    const rateScopeToken = token(bucketId);
    // 200 permits run the timeline 10 s ahead of real time, so every later
    // permit lands on it, one interval after the previous one, and a fresh
    // timeline after a lost restart would start well before its end.
    const first = await port.acquire({ bucketId, rateScopeToken, rules, requested: 200 });
    assert.equal(first.granted, 200);
    const grants = await Promise.all(
      Array.from({ length: 12 }, () => port.acquire({ bucketId, rateScopeToken, rules, requested: 1 })),
    );
    const times = [...first.scheduledAtMs];
    for (const grant of grants) {
      assert.equal(grant.granted, 1);
      assert.equal(typeof grant.serverNowMs, "number");
      times.push(...grant.scheduledAtMs);
    }
    times.sort((a, b) => a - b);
    assert.equal(new Set(times).size, 212, "every permit has its own time");
    assert.deepEqual(gaps(times), Array(211).fill(50));
    lastBeforeRestart = times.at(-1);
  });

  test("after a restart on the same storage the timeline continues past every granted time", async () => {
    assert.ok(lastBeforeRestart !== undefined, "runs after the concurrency test");
    await mf.dispose();
    start();
    const grant = await port.acquire({ bucketId, rateScopeToken: token(bucketId), rules, requested: 2 });
    assert.equal(grant.granted, 2);
    assert.ok(
      grant.scheduledAtMs[0] >= lastBeforeRestart + 50,
      `first time after restart ${grant.scheduledAtMs[0]} keeps the spacing after ${lastBeforeRestart}`,
    );
  });

  test("a forged or other bucket's token is 403 FORBIDDEN_SCOPE and changes nothing", async () => {
    const victim = "org-b:openai";
    const valid = token(victim);
    // 100 permits run the timeline 5 s ahead, so its next free time stays put
    // while the refused calls run.
    await port.acquire({ bucketId: victim, rateScopeToken: valid, rules, requested: 100 });
    const view = async () => {
      const res = await mf.dispatchFetch(
        `http://gateway/v1/rate/buckets/${encodeURIComponent(victim)}?token=${encodeURIComponent(valid)}`,
      );
      assert.equal(res.status, 200);
      const { serverNowMs, ...state } = await res.json();
      assert.equal(typeof serverNowMs, "number");
      return state;
    };
    const before = await view();

    const otherToken = token("org-c:openai");
    const forged = mintRateScopeToken({
      secret: "not-the-secret",
      bucketId: victim,
      expiresAtMs: Date.now() + 3_600_000,
    });
    const refused = [
      () => port.acquire({ bucketId: victim, rateScopeToken: forged, rules, requested: 5 }),
      () => port.acquire({ bucketId: victim, rateScopeToken: otherToken, rules, requested: 5 }),
      () => port.acquire({ bucketId: victim, rules, requested: 5 }),
      () => port.penalize({ bucketId: victim, rateScopeToken: otherToken, cooldownMs: 30_000 }),
      () => port.release({ bucketId: victim, rateScopeToken: forged, rules, leaseIds: ["x"] }),
    ];
    for (const call of refused) {
      await assert.rejects(call(), (error) => {
        assert.equal(error.code, "FORBIDDEN_SCOPE");
        return true;
      });
    }
    const res = await mf.dispatchFetch(
      `http://gateway/v1/rate/buckets/${encodeURIComponent(victim)}?token=${encodeURIComponent(otherToken)}`,
    );
    assert.equal(res.status, 403);
    assert.equal((await res.json()).error.code, "FORBIDDEN_SCOPE");
    assert.deepEqual(await view(), before);
  });

  test("a charge over its limit is 409 BUDGET_EXCEEDED with the budget message clients parse", async () => {
    const rootRunId = "run-42";
    const runScopeToken = mintRunScopeToken({ secret, rootRunId, expiresAtMs: Date.now() + 3_600_000 });
    const charge = (reservationId, amount, token = runScopeToken) =>
      port.charge({ rootRunId, runScopeToken: token, reservationId, charges: [{ key: "toolCall", amount, limit: 3 }] });
    await assert.rejects(charge("r0", 1, null), (error) => error.code === "FORBIDDEN_SCOPE");
    assert.deepEqual(await charge("r1", 3), { counters: { toolCall: 3 } });
    await assert.rejects(charge("r2", 1), (error) => {
      assert.equal(error.code, "BUDGET_EXCEEDED");
      assert.ok(error.message.startsWith("Play execution toolCall budget exceeded (4/3)."), error.message);
      assert.equal(error.key, "toolCall");
      assert.equal(error.observed, 4);
      assert.equal(error.limit, 3);
      return true;
    });
    assert.deepEqual(await charge("r1", 3), { counters: { toolCall: 3 } }, "a retry counts once");
  });

  test("the router answers a body without an id itself", async () => {
    const res = await mf.dispatchFetch("http://gateway/v1/rate/acquire", {
      method: "POST",
      body: JSON.stringify({ rules, requested: 1 }),
    });
    assert.equal(res.status, 400);
    const { error } = await res.json();
    assert.equal(error.code, "INVALID_INPUT");
    assert.match(error.message, /bucketId/);
  });
});
