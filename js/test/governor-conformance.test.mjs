// The governor's JS surface where it matches the TypeScript play runtime:
// default pacing for undeclared tools, explicit opt-out, edge inputs, the
// inline child, the root's play id, latency hints and the penalize error.
// A GatewayCore in this process stands behind a transport that records what the
// pacer asked.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { paceline } from "../lib/node-package.mjs";

const { GatewayCore, GatewayRateState, Governor, coreTransport, createGovernor } = paceline;

const apollo = { provider: "apollo", rules: [{ requestsPerWindow: 20, windowMs: 1000 }] };

/** The endpoint's name (`acquire`, `charge`, ...) and the request a transport was handed. */
function sentRequest(path, body) {
  return [path.slice(path.lastIndexOf("/") + 1), JSON.parse(new TextDecoder().decode(body))];
}

/**
 * A transport to an in-process gateway that records every acquire and
 * penalize; a call by name (`penalize`) may be answered by an override.
 */
function recordingPort(overrides = {}) {
  const inner = coreTransport(new GatewayCore({}));
  const seen = { acquire: [], penalize: [] };
  const port = {
    post(path, body) {
      const [name, req] = sentRequest(path, body);
      seen[name]?.push(req);
      return overrides[name] ? overrides[name](req) : inner.post(path, body);
    },
  };
  return { port, seen, rateState: new GatewayRateState(port) };
}

function governor(rateState, options = {}) {
  return createGovernor({
    adapter: "esm_workers",
    scope: { orgId: "org", rootRunId: "run" },
    rateState,
    resolvePacing: (toolId) => (toolId.startsWith("apollo.") ? apollo : null),
    ...options,
  });
}

async function expectCode(promiseOrFn, code) {
  const error = await (async () => {
    try {
      await (typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn);
    } catch (e) {
      return e;
    }
    assert.fail(`expected ${code}`);
  })();
  assert.ok(error instanceof Error, `not an Error: ${error}`);
  assert.equal(error.code, code, error.message);
  return error;
}

describe("pacing as the TypeScript runtime resolves it", () => {
  test("a tool without declared pacing draws from its own bucket at the default pace, stamped with suggestedMaxParallelism", async () => {
    const { seen, rateState } = recordingPort();
    const gov = governor(rateState, { policy: { pacing: { suggestedMaxParallelism: 3 } } });
    const lease = await gov.acquireToolSlot({ toolId: "web.scrape" });
    assert.equal(lease.provider, "tool:web.scrape");
    await lease.release();
    assert.equal(seen.acquire[0].bucketId, "org:tool:web.scrape");
    assert.deepEqual(seen.acquire[0].rules, [{ requestsPerWindow: 5, windowMs: 1000, adaptiveMaxRps: 3 }]);
  });

  test("{ unpaced: true } from resolvePacing opts a tool out of pacing", async () => {
    const { seen, rateState } = recordingPort();
    const gov = governor(rateState, { resolvePacing: () => ({ unpaced: true }) });
    const lease = await gov.acquireToolSlot({ toolId: "local.format" });
    assert.equal(lease.provider, undefined);
    await lease.release();
    assert.equal(seen.acquire.length, 0);
  });

  test("a blank provider from resolvePacing is treated as none", async () => {
    const { seen, rateState } = recordingPort();
    const gov = governor(rateState, { resolvePacing: () => ({ provider: "  ", rules: [] }) });
    await (await gov.acquireToolSlot({ toolId: "x.lookup" })).release();
    assert.equal(seen.acquire[0].bucketId, "org:tool:x.lookup");
  });

  test("a rate scope without bucketId falls back to the org bucket, keeping its token", async () => {
    const { seen, rateState } = recordingPort();
    const gov = governor(rateState, { resolveRateScope: () => ({ rateScopeToken: "tok" }) });
    await (await gov.acquireToolSlot({ toolId: "apollo.search" })).release();
    assert.equal(seen.acquire[0].bucketId, "org:apollo");
    assert.equal(seen.acquire[0].rateScopeToken, "tok");
    const long = governor(rateState, {
      resolveRateScope: () => ({ bucketId: "org:apollo:cred", rateScopeToken: "t".repeat(600) }),
    });
    await (await long.acquireToolSlot({ toolId: "apollo.search" })).release();
    assert.equal(seen.acquire.at(-1).rateScopeToken.length, 600, "a token may be longer than an id");
    const bad = governor(rateState, { resolveRateScope: () => ({ bucketId: 7 }) });
    await expectCode(bad.acquireToolSlot({ toolId: "apollo.search" }), "INVALID_INPUT");
  });

  test("builtinPacing is an option and wins over resolvePacing", async () => {
    const { seen, rateState } = recordingPort();
    const asked = [];
    const gov = governor(rateState, {
      builtinPacing: {
        "apollo.search": { provider: "apollo", rules: [{ requestsPerWindow: 2, windowMs: 1000 }] },
        "local.format": { unpaced: true },
      },
      resolvePacing: (toolId) => {
        asked.push(toolId);
        return apollo;
      },
    });
    await (await gov.acquireToolSlot({ toolId: "apollo.search" })).release();
    await (await gov.acquireToolSlot({ toolId: "local.format" })).release();
    assert.deepEqual(asked, []);
    assert.deepEqual(
      seen.acquire.map((r) => r.rules),
      [[{ requestsPerWindow: 2, windowMs: 1000 }]],
    );
    const error = await expectCode(
      () => governor(rateState, { builtinPacing: { "a.b": { provider: "p", rules: [{ windowMs: 1000 }] } } }),
      "INVALID_INPUT",
    );
    assert.match(error.message, /^builtinPacing\.a\.b\.rules\[0\]\.requestsPerWindow is required/);
  });
});

describe("edge inputs", () => {
  test("resolveRowConcurrency clamps -1 to 1 and a huge request to the maximum", () => {
    const gov = governor(recordingPort().rateState);
    assert.equal(gov.resolveRowConcurrency(-1), 1);
    assert.equal(gov.resolveRowConcurrency(0), 1);
    assert.equal(gov.resolveRowConcurrency(1e12), 50);
    assert.equal(gov.resolveRowConcurrency(7), 7);
    assert.equal(gov.resolveRowConcurrency(), 6);
    for (const bad of [Number.NaN, "3"]) {
      assert.throws(
        () => gov.resolveRowConcurrency(bad),
        (e) => e.code === "INVALID_INPUT",
      );
    }
  });

  test("chargeBudget({ kind, amount: 0 }) is nothing to charge, even at the limit", async () => {
    const gov = governor(recordingPort().rateState, { policy: { budgets: { maxRetryCount: 0 } } });
    await gov.chargeBudget({ kind: "retry", amount: 0 });
    assert.equal(gov.snapshot().retryCount, 0);
    await expectCode(gov.chargeBudget({ kind: "retry", amount: 1 }), "BUDGET_EXCEEDED");
    await expectCode(gov.chargeBudget({ kind: "retry", amount: -1 }), "INVALID_INPUT");
  });
});

describe("the rest of the runtime's governor surface", () => {
  test("forkInlineChild returns a governor that shares the root's budgets", async () => {
    const gov = governor(recordingPort().rateState);
    const child = await gov.forkInlineChild({ childPlayName: "b", childRunId: "run-b" });
    assert.ok(child instanceof Governor);
    assert.deepEqual([child.snapshot().currentRunId, child.snapshot().depth], ["run-b", 1]);
    await child.chargeBudget({ kind: "toolCall" });
    assert.equal(gov.snapshot().toolCallCount, 1);
    await expectCode(gov.forkInlineChild({ childPlayName: "c" }), "INVALID_INPUT");
  });

  test("playId seeds the root's play into the cycle guard without resume", async () => {
    const gov = governor(recordingPort().rateState, { playId: "a" });
    assert.deepEqual(gov.snapshot().ancestryPlayIds, ["a"]);
    const child = await gov.forkInlineChild({ childPlayName: "b", childRunId: "run-b" });
    await expectCode(child.forkChild({ childPlayName: "a", childRunId: "run-a2" }), "CYCLE_DETECTED");
    await expectCode(() => governor(recordingPort().rateState, { playId: 5 }), "INVALID_INPUT");
  });

  test("suggestedParallelism follows toolLatencyMs hints, then observed latencyMs", async () => {
    const gov = governor(recordingPort().rateState, {
      policy: { concurrency: { maxToolConcurrency: 40 } },
      toolLatencyMs: { "web.scrape": 3000 },
    });
    // The default pace, 5 a second: 3 s calls keep 15 busy, 200 ms calls 1.
    assert.equal(await gov.suggestedParallelism({ toolId: "web.scrape", fallback: 1 }), 15);
    gov.observeToolSuccess({ toolId: "web.scrape", latencyMs: 200 });
    assert.equal(await gov.suggestedParallelism({ toolId: "web.scrape", fallback: 1 }), 1);
    assert.throws(
      () => gov.observeToolSuccess({ toolId: "web.scrape", latencyMs: -1 }),
      (e) => e.code === "INVALID_INPUT",
    );
    await expectCode(() => governor(recordingPort().rateState, { toolLatencyMs: { t: "slow" } }), "INVALID_INPUT");
  });
});

describe("a failed penalize", () => {
  test("reaches JS with the bucket in its message, the port's code, and the port's error as cause", async () => {
    const refusal = Object.assign(new Error("scope token expired"), { code: "FORBIDDEN_SCOPE" });
    const { rateState } = recordingPort({ penalize: () => Promise.reject(refusal) });
    const gov = governor(rateState);
    await (await gov.acquireToolSlot({ toolId: "apollo.search" })).release();
    const error = await expectCode(
      gov.reportProviderBackpressure({ provider: "apollo", toolId: "apollo.search", cooldownMs: 1000 }),
      "FORBIDDEN_SCOPE",
    );
    assert.match(error.message, /penalize failed for org:apollo: scope token expired/);
    assert.equal(error.cause, refusal);
  });

  test("a port error without a paceline code is GATEWAY_UNAVAILABLE, still with its cause", async () => {
    const down = new TypeError("fetch failed");
    const { rateState } = recordingPort({ penalize: () => Promise.reject(down) });
    const gov = governor(rateState);
    const error = await expectCode(
      gov.reportProviderBackpressure({ provider: "apollo", cooldownMs: 1000 }),
      "GATEWAY_UNAVAILABLE",
    );
    assert.match(error.message, /org:apollo: fetch failed/);
    assert.equal(error.cause, down);
  });

  test("a 429 for a tool lands in its remembered scope under another provider name", async () => {
    const { seen, rateState } = recordingPort();
    const gov = governor(rateState, {
      resolveRateScope: (toolId) => ({ bucketId: `org:apollo:${toolId}`, rateScopeToken: "t" }),
    });
    await (await gov.acquireToolSlot({ toolId: "apollo.search" })).release();
    await gov.reportProviderBackpressure({ provider: "Apollo.io", toolId: "apollo.search", cooldownMs: 1000 });
    assert.equal(seen.penalize[0].bucketId, "org:apollo:apollo.search");
  });

  test("a 429 reported with sentAtMs reaches the gateway with the refused call's send time; one that is no whole number is refused and sends nothing", async () => {
    const { seen, rateState } = recordingPort();
    const gov = governor(rateState);
    await (await gov.acquireToolSlot({ toolId: "apollo.search" })).release();
    const sentAtMs = Date.now() - 300;
    await gov.reportProviderBackpressure({ provider: "apollo", toolId: "apollo.search", cooldownMs: 1000, sentAtMs });
    assert.equal(seen.penalize.length, 1);
    // The in-process gateway's clock is this isolate's, give or take the
    // offset the pacer measured.
    const sent = seen.penalize[0].sentAtMs;
    assert.ok(Math.abs(sent - sentAtMs) <= 50, `${sent} for ${sentAtMs}`);
    await gov.reportProviderBackpressure({ provider: "apollo", cooldownMs: 1000 });
    assert.equal(seen.penalize[1].sentAtMs, undefined, "no send time given, none sent");
    for (const bad of [-1, 1.5, "0", Number.NaN, 2 ** 60]) {
      const error = await expectCode(
        gov.reportProviderBackpressure({ provider: "apollo", cooldownMs: 1000, sentAtMs: bad }),
        "INVALID_INPUT",
      );
      assert.match(error.message, /input\.sentAtMs/);
    }
    assert.equal(seen.penalize.length, 2, "a refused report reaches no gateway");
  });
});

describe("a 429 that asked for no wait", () => {
  test("reaches the gateway and cuts the rate, from the governor and from a rate state alike", async () => {
    const inner = coreTransport(new GatewayCore({}));
    const penalties = [];
    const port = {
      async post(path, body) {
        const answer = await inner.post(path, body);
        const [name, req] = sentRequest(path, body);
        if (name === "penalize") {
          const { effectiveRequestsPerSecond } = JSON.parse(new TextDecoder().decode(answer.body));
          penalties.push({ cooldownMs: req.cooldownMs, effectiveRequestsPerSecond });
        }
        return answer;
      },
    };
    const rateState = new GatewayRateState(port);
    const gov = governor(rateState);
    await (await gov.acquireToolSlot({ toolId: "apollo.search" })).release();
    await gov.reportProviderBackpressure({ provider: "apollo", cooldownMs: 0 });
    await rateState.penalize({ bucketId: "org:apollo", cooldownMs: 0 });
    assert.equal(penalties.length, 2, "each 429 reached the gateway");
    for (const { cooldownMs, effectiveRequestsPerSecond } of penalties) {
      assert.equal(cooldownMs, 1, "the shortest cooldown the gateway takes");
      assert.ok(effectiveRequestsPerSecond < 20, `the rule's 20/s was not cut: ${effectiveRequestsPerSecond}`);
    }
  });
});
