// The package's front door as a user meets it in Node: the limiter, the
// one-Worker port's errors, the error guard, the waitUntil hooks, and the
// web entry's error when nobody initialised it.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { pkgDir } from "../lib/bundle-worker.mjs";
import { paceline as P } from "../lib/node-package.mjs";

const RULES = [{ requestsPerWindow: 5, windowMs: 1000 }];

function revokedProxy() {
  const { proxy, revoke } = Proxy.revocable([], {});
  revoke();
  return proxy;
}

/** A transport to an in-process gateway that keeps each request it posts, decoded. */
function recordingPort() {
  const posted = [];
  const inner = P.coreTransport(new P.GatewayCore());
  const port = {
    post(path, body) {
      posted.push({ path, body: JSON.parse(new TextDecoder().decode(body)) });
      return inner.post(path, body);
    },
  };
  return { port, posted };
}

/**
 * Every bucket a limiter's state is told a call was done for. Each report
 * still reaches the state: a bucket it refused would fail the schedule.
 */
function recordSuccesses(limiter) {
  const reported = [];
  const observe = limiter.state.observeSuccess.bind(limiter.state);
  limiter.state.observeSuccess = (bucket) => {
    reported.push(bucket);
    observe(bucket);
  };
  return reported;
}

async function codeOf(fn) {
  try {
    await fn();
  } catch (error) {
    assert.ok(P.isPacelineError(error), `not a PacelineError: ${error}`);
    return error;
  }
  assert.fail("expected a rejection");
}

describe("createLimiter", () => {
  test("schedule runs the call, releases its permit also when the call throws, and returns its value", async () => {
    const limiter = P.createLimiter({
      bucketId: "b",
      rules: [{ requestsPerWindow: 100, windowMs: 1000, maxConcurrency: 1 }],
    });
    assert.equal(await limiter.schedule(() => 7), 7);
    await assert.rejects(
      limiter.schedule(() => {
        throw new Error("boom");
      }),
      /boom/,
    );
    // maxConcurrency 1: a permit left held would make this wait for ever.
    assert.equal(await limiter.schedule(async () => "again"), "again");
  });

  test("schedule tells the pacer each call that returned is done, and nothing of one that threw", async () => {
    const limiter = P.createLimiter({ bucketId: "b", rules: RULES });
    const reported = recordSuccesses(limiter);
    assert.equal(await limiter.schedule(() => "one"), "one");
    await assert.rejects(
      limiter.schedule(() => Promise.reject(new Error("the call failed"))),
      /the call failed/,
    );
    assert.equal(await limiter.schedule(async () => "two"), "two");
    assert.deepEqual(reported, [{ bucketId: "b" }, { bucketId: "b" }]);
  });

  test("schedule's call.refused reports the 429 with the call's send time, and not as a call done", async () => {
    const { port, posted } = recordingPort();
    const limiter = P.createLimiter({ port, bucketId: "b", rules: RULES });
    const successes = recordSuccesses(limiter);
    let sentAtMs;
    const answer = await limiter.schedule(async (call) => {
      sentAtMs = call.sentAtMs;
      const report = call.refused({ cooldownMs: 10 });
      assert.equal(call.refused({ cooldownMs: 10 }), report, "one report per call");
      await report;
      return 429;
    });
    assert.equal(answer, 429);
    assert.ok(Math.abs(sentAtMs - Date.now()) < 5_000, `${sentAtMs}`);
    const reports = posted.filter((p) => p.path.endsWith("/penalize"));
    assert.equal(reports.length, 1);
    assert.ok(Math.abs(reports[0].body.sentAtMs - sentAtMs) <= 50, `${reports[0].body.sentAtMs} for ${sentAtMs}`);
    assert.deepEqual(successes, [], "a refused call is not a call done");
    await limiter.schedule(() => "fine");
    assert.deepEqual(successes, [{ bucketId: "b" }]);
    await assert.rejects(
      limiter.schedule((call) => call.refused({ cooldownMs: "soon" })),
      (error) => P.isPacelineError(error, "INVALID_INPUT") && /cooldownMs/.test(error.message),
    );
    const hostile = new Proxy(
      {},
      {
        get: () => {
          throw new Error("getter");
        },
      },
    );
    await assert.rejects(
      limiter.schedule((call) => call.refused(hostile)),
      (error) => P.isPacelineError(error, "INVALID_INPUT"),
    );
  });

  test("acquire hands out a Permit whose release is a promise", async () => {
    const limiter = P.createLimiter({ bucketId: "b", rules: RULES });
    const permit = await limiter.acquire();
    assert.ok(permit instanceof P.Permit);
    assert.ok(permit.release() instanceof Promise);
  });

  test("schedule registers the release with the call's waitUntil", async () => {
    const limiter = P.createLimiter({ bucketId: "b", rules: RULES });
    const kept = [];
    await limiter.schedule(() => 1, { waitUntil: (p) => kept.push(p) });
    assert.equal(kept.length, 1);
    await kept[0];
  });

  test("bad options are INVALID_INPUT naming the option", async () => {
    for (const [options, pattern] of [
      [undefined, /createLimiter takes/],
      [{ rules: RULES }, /bucketId must be a non-empty string/],
      [{ bucketId: "b", rules: [] }, /rules must be a non-empty array/],
      [{ bucketId: "b", rules: RULES, maxWait: 5 }, /maxWait is not a known option/],
      [{ bucketId: "b", rules: RULES, waitUntil: 3 }, /waitUntil must be a function/],
      [{ bucketId: "b", rules: revokedProxy() }, /rules could not be read/],
      [
        new Proxy(
          {},
          {
            ownKeys() {
              throw new Error("trap");
            },
          },
        ),
        /could not be read/,
      ],
    ]) {
      const error = await codeOf(() => P.createLimiter(options));
      assert.equal(error.code, "INVALID_INPUT");
      assert.match(error.message, pattern);
    }
    const limiter = P.createLimiter({ bucketId: "b", rules: [{ requestsPerWindow: "5", windowMs: 1000 }] });
    const error = await codeOf(() => limiter.schedule(() => 1));
    assert.match(error.message, /requestsPerWindow/);
    assert.equal((await codeOf(() => limiter.schedule("not a function"))).code, "INVALID_INPUT");
    assert.equal((await codeOf(() => limiter.acquire({ signal: {} }))).code, "INVALID_INPUT");
  });

  test("five calls a second across the limit: ten calls take at least one window past the first", async () => {
    const limiter = P.createLimiter({ bucketId: "b", rules: RULES });
    const started = Date.now();
    const at = await Promise.all(Array.from({ length: 10 }, () => limiter.schedule(() => Date.now() - started)));
    assert.ok(Math.max(...at) >= 900, `the tenth call came after ${Math.max(...at)} ms`);
  });
});

describe("gatewayPort", () => {
  test("an env without the binding is INVALID_INPUT naming the wrangler.toml lines", async () => {
    const error = await codeOf(() => P.gatewayPort({}));
    assert.match(error.message, /PACELINE_GATEWAY.*durable_objects\.bindings/s);
    assert.match((await codeOf(() => P.gatewayPort({}, { bindingName: 7 }))).message, /bindingName must be a string/);
    const throwing = new Proxy(
      {},
      {
        get() {
          throw new Error("trap");
        },
      },
    );
    assert.match((await codeOf(() => P.gatewayPort({ PACELINE_GATEWAY: throwing }))).message, /could not be read/);
    assert.equal(
      (
        await codeOf(() =>
          P.gatewayPort(
            new Proxy(
              {},
              {
                get() {
                  throw new Error("trap");
                },
              },
            ),
          ),
        )
      ).code,
      "INVALID_INPUT",
    );
  });

  test("a binding's port routes each call to the object named by its bucket", async () => {
    const core = new P.GatewayCore();
    const named = [];
    const namespace = {
      idFromName: (name) => {
        named.push(name);
        return name;
      },
      get: () => ({ fetch: (request) => P.handleGatewayRequest(core, request) }),
    };
    const state = new P.GatewayRateState(P.gatewayPort({ PACELINE_GATEWAY: namespace }));
    const permit = await state.acquire({ bucketId: "org:p", rules: RULES });
    await permit.release();
    assert.deepEqual([...new Set(named)], ["org:p"]);
  });
});

describe("the API's one convention", () => {
  test("observeSuccess takes the bucket as every rate-state method does, and refuses a string", async () => {
    const state = new P.LocalRateState();
    state.observeSuccess({ bucketId: "b", rateScopeToken: null });
    assert.equal((await codeOf(() => state.observeSuccess("b"))).code, "INVALID_INPUT");
    assert.match(
      (await codeOf(() => state.observeSuccess({ bucketId: "b", token: "t" }))).message,
      /token is not a known field/,
    );
  });

  test("every release returns a promise, WorkLease's too", async () => {
    const governor = P.createGovernor({ rateState: new P.LocalRateState(), resolvePacing: () => ({ unpaced: true }) });
    const row = await governor.acquireRowSlot();
    assert.ok(row.release() instanceof Promise);
    const tool = await governor.acquireToolSlot({ toolId: "t" });
    assert.ok(tool.release() instanceof Promise);
  });

  test("createGovernor's adapter and scope have defaults; the governor's waitUntil gets callTool's release", async () => {
    const kept = [];
    const governor = P.createGovernor({
      rateState: new P.LocalRateState(),
      resolvePacing: () => ({ provider: "p", rules: RULES }),
      waitUntil: (p) => kept.push(p),
    });
    const answer = await governor.callTool(() => ({ status: 200, marker: "mine" }), { toolId: "p.search" });
    assert.equal(answer.marker, "mine");
    assert.equal(kept.length, 1);
    await kept[0];
    assert.match(governor.snapshot().rootRunId, /^run-[0-9a-f]{16}$/);
    assert.match(
      (
        await codeOf(() =>
          P.createGovernor({ rateState: new P.LocalRateState(), resolvePacing: () => null, waitUntil: "no" }),
        )
      ).message,
      /waitUntil must be a function/,
    );
  });

  test("a rate state's waitUntil gets every flush it starts: the refill, and the release that brings a lease back", async () => {
    const inner = P.coreTransport(new P.GatewayCore());
    const released = [];
    const port = {
      post: (path, body) => {
        const req = JSON.parse(new TextDecoder().decode(body));
        // Leases come back on a release or riding on the next acquire.
        released.push(...(req.leaseIds ?? []), ...(req.releasedLeaseIds ?? []));
        return inner.post(path, body);
      },
    };
    const kept = [];
    const state = new P.GatewayRateState(port, { waitUntil: (p) => kept.push(p) });
    const permit = await state.acquire({ bucketId: "b", rules: [{ ...RULES[0], maxConcurrency: 1 }] });
    const afterAcquire = kept.length;
    assert.ok(afterAcquire >= 1, "the refill that fetched the block was registered");
    const lease = permit.leaseId;
    await permit.release();
    assert.ok(kept.length > afterAcquire, "the release's flush was registered");
    await Promise.all(kept);
    assert.ok(released.includes(lease), "the lease is back at the gateway once the registered work is done");
    const error = await codeOf(() => new P.LocalRateState({ waitUntil: {} }));
    assert.match(error.message, /options\.waitUntil must be a function/);
  });

  test("a call's answer without an HTTP status is INVALID_INPUT, not a success", async () => {
    const governor = P.createGovernor({ rateState: new P.LocalRateState(), resolvePacing: () => ({ unpaced: true }) });
    const error = await codeOf(() => governor.callTool(() => ({ ok: true }), { toolId: "t" }));
    assert.match(error.message, /status from 100 to 599/);
  });

  test("a spent budget's message names the policy field to raise", async () => {
    const governor = P.createGovernor({
      rateState: new P.LocalRateState(),
      resolvePacing: () => ({ unpaced: true }),
      policy: { budgets: { maxRetryCount: 1 } },
    });
    await governor.chargeBudget({ kind: "retry" });
    const error = await codeOf(() => governor.chargeBudget({ kind: "retry" }));
    assert.equal(error.code, "BUDGET_EXCEEDED");
    assert.match(error.message, /policy\.budgets\.maxRetryCount/);
  });

  test("a wait past maxWaitMs is PROVIDER_EXHAUSTED naming maxWaitMs, with the cooldown's end", async () => {
    const state = new P.LocalRateState({ maxWaitMs: 1000 });
    await (await state.acquire({ bucketId: "b", rules: RULES })).release();
    await state.penalize({ bucketId: "b", cooldownMs: 60_000 });
    const error = await codeOf(() => state.acquire({ bucketId: "b", rules: RULES }));
    assert.equal(error.code, "PROVIDER_EXHAUSTED");
    assert.match(error.message, /bucket b .*raise maxWaitMs/);
    assert.ok(error.cooldownUntilMs >= Date.now() + 55_000, `${error.cooldownUntilMs}`);
  });

  test("penalize carries when the refused call went out (sentAtMs) to the gateway, and refuses one that is no whole number", async () => {
    const { port, posted } = recordingPort();
    const state = new P.GatewayRateState(port);
    await (await state.acquire({ bucketId: "b", rules: RULES })).release();
    const sentAtMs = Date.now() - 300;
    await state.penalize({ bucketId: "b", cooldownMs: 10, sentAtMs });
    const report = posted.find((p) => p.path.endsWith("/penalize"));
    assert.ok(report, `no penalize among ${posted.map((p) => p.path)}`);
    assert.ok(Math.abs(report.body.sentAtMs - sentAtMs) <= 50, `${report.body.sentAtMs} for ${sentAtMs}`);
    const reports = posted.length;
    for (const bad of [-1, 1.5, "0", Number.NaN, 2 ** 60]) {
      const error = await codeOf(() => state.penalize({ bucketId: "b", cooldownMs: 10, sentAtMs: bad }));
      assert.equal(error.code, "INVALID_INPUT");
      assert.match(error.message, /input\.sentAtMs/);
    }
    assert.equal(posted.length, reports, "a refused report reaches no gateway");
  });

  test("states go to createGovernor as they are, with no public handle; a freed state is refused", async () => {
    const rateState = new P.LocalRateState();
    const budgetState = new P.LocalBudgetState();
    for (const state of [rateState, budgetState, new P.GatewayRateState(P.fetchPort({ fetch, baseUrl: "http://x" }))]) {
      assert.equal("stateHandle" in state, false);
      assert.equal("pacelineStateToken" in state, false);
    }
    const governor = P.createGovernor({ rateState, budgetState, resolvePacing: () => ({ unpaced: true }) });
    assert.ok(governor instanceof P.Governor);
    const lookAlike = Object.create(P.LocalRateState.prototype);
    for (const rate of [lookAlike, { stateHandle: {} }, new P.LocalBudgetState()]) {
      const error = await codeOf(() => P.createGovernor({ rateState: rate, resolvePacing: () => null }));
      assert.match(error.message, /rateState must be a live GatewayRateState or LocalRateState/);
    }
    rateState.free();
    const error = await codeOf(() => P.createGovernor({ rateState, resolvePacing: () => null }));
    assert.match(error.message, /must be a live/);
    // The governor made before keeps its own reference to the core state.
    await (await governor.acquireToolSlot({ toolId: "t" })).release();
  });

  test("isPacelineError tells paceline's errors from others, by code too", () => {
    const error = Object.assign(new Error("x"), { name: "PacelineError", code: "ABORTED" });
    assert.equal(P.isPacelineError(error), true);
    assert.equal(P.isPacelineError(error, "ABORTED"), true);
    assert.equal(P.isPacelineError(error, "INVALID_INPUT"), false);
    assert.equal(P.isPacelineError(new Error("x")), false);
    assert.equal(P.isPacelineError({ name: "PacelineError", code: "ABORTED" }), false);
  });

  test("ERROR_CODES lists every code the guard knows, and the package README's error table lists exactly them", () => {
    const coded = (code) => Object.assign(new Error("x"), { name: "PacelineError", code });
    for (const code of P.ERROR_CODES) assert.equal(P.isPacelineError(coded(code)), true, code);
    assert.equal(P.isPacelineError(coded("NOT_A_CODE")), false);
    assert.ok(Object.isFrozen(P.ERROR_CODES));
    const readme = readFileSync(join(pkgDir, "README.md"), "utf8");
    const documented = [...readme.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    assert.deepEqual(documented.toSorted(), [...P.ERROR_CODES].sort());
  });
});

test("the web entry used uninitialised throws an Error naming the fix, not a TypeError", () => {
  const script = `import(${JSON.stringify(join(pkgDir, "index.js"))}).then((p) => { try { new p.GatewayCore(); } catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); } });`;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  const error = JSON.parse(run.stdout);
  assert.equal(error.name, "PacelineError");
  assert.equal(error.code, "INVALID_INPUT");
  assert.match(error.message, /not initialised.*"workerd" export condition.*initSync/s);
});
