// Due permits without timers: tryAcquire() on the rate states and the
// limiter (a permit, or { retryAfterMs } — never an exception for "not
// yet"), acquire() of a due permit with no timer behind it, pure-rate
// permits that hold nothing, and the input read once per shape still
// reading every call's own values.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { paceline as P } from "../lib/node-package.mjs";

const FAST = [{ requestsPerWindow: 1_000_000, windowMs: 1000 }];
const SLOW = [{ requestsPerWindow: 2, windowMs: 1000 }];

/** Lets the in-process gateway answer the refill a refusal started. */
const tick = () => new Promise((resolve) => setImmediate(resolve));

function invalid(work, says) {
  assert.throws(work, (error) => {
    assert.equal(error.code, "INVALID_INPUT", `${error.name}: ${error.message}`);
    if (says) assert.match(error.message, says);
    return true;
  });
}

/** Counts the setTimeout calls `work` makes. */
async function timersSetBy(work) {
  const original = globalThis.setTimeout;
  let set = 0;
  globalThis.setTimeout = (...args) => {
    set++;
    return original(...args);
  };
  try {
    await work();
  } finally {
    globalThis.setTimeout = original;
  }
  return set;
}

describe("tryAcquire", () => {
  for (const name of ["LocalRateState", "GatewayRateState"]) {
    test(`${name}: refuses with retryAfterMs while nothing is cached, then hands out a permit synchronously`, async () => {
      const state =
        name === "LocalRateState"
          ? new P.LocalRateState()
          : new P.GatewayRateState(P.coreTransport(new P.GatewayCore({ windowGuardMs: 25 })));
      const input = { bucketId: "try", rules: FAST };
      const first = state.tryAcquire(input);
      assert.ok(!(first instanceof P.Permit));
      assert.equal(typeof first.retryAfterMs, "number");
      assert.ok(first.retryAfterMs >= 1, `${first.retryAfterMs}`);
      let permit = first;
      for (let i = 0; i < 50 && !(permit instanceof P.Permit); i++) {
        // As a caller would: ask again when the refusal says.
        await new Promise((resolve) => setTimeout(resolve, permit.retryAfterMs));
        permit = state.tryAcquire(input);
      }
      assert.ok(permit instanceof P.Permit, "the refill the refusal started brought permits");
      assert.equal(permit.leaseId, undefined);
      assert.equal(await permit.release(), undefined);
      assert.equal(await permit.release(), undefined, "release is idempotent");
      state.free();
    });
  }

  test("a permit not yet due is refused with the wait until it is", async () => {
    const state = new P.LocalRateState();
    const input = { bucketId: "slow", rules: SLOW };
    await (await state.acquire(input)).release();
    let refusal = state.tryAcquire(input);
    for (let i = 0; i < 50 && refusal.retryAfterMs !== undefined && refusal.retryAfterMs < 100; i++) {
      await tick();
      refusal = state.tryAcquire(input);
    }
    assert.ok(!(refusal instanceof P.Permit), "2 a second: the next is half a second away");
    assert.ok(refusal.retryAfterMs > 100 && refusal.retryAfterMs <= 1000, `${refusal.retryAfterMs}`);
    state.free();
  });

  test("hostile input is INVALID_INPUT, thrown synchronously", () => {
    const state = new P.LocalRateState();
    invalid(() => state.tryAcquire());
    invalid(() => state.tryAcquire("b"));
    invalid(() => state.tryAcquire({ bucketId: 7, rules: FAST }), /bucketId/);
    invalid(() => state.tryAcquire({ bucketId: "b" }), /rules/);
    invalid(() => state.tryAcquire({ bucketId: "b", rules: FAST, signal: new AbortController().signal }), /signal/);
    invalid(() =>
      state.tryAcquire({
        get bucketId() {
          throw new Error("boom");
        },
        rules: FAST,
      }),
    );
    invalid(() =>
      state.tryAcquire(
        new Proxy(
          {},
          {
            ownKeys() {
              throw new Error("trap");
            },
          },
        ),
      ),
    );
    const revocable = Proxy.revocable({ bucketId: "b", rules: FAST }, {});
    revocable.revoke();
    invalid(() => state.tryAcquire(revocable.proxy));
    state.free();
  });

  test("a rule with a field no rule has (a misspelt maxConcurrency) is INVALID_INPUT naming it, not a rule without a bound", async () => {
    const state = new P.LocalRateState();
    const rules = [{ requestsPerWindow: 20, windowMs: 1000, maxConcurency: 2 }];
    invalid(
      () => state.tryAcquire({ bucketId: "b", rules }),
      /rules\[0\]\.maxConcurency is not a known field; known here: requestsPerWindow, windowMs, maxConcurrency, adaptiveMaxRps/,
    );
    await assert.rejects(state.acquire({ bucketId: "b", rules }), (e) => e.code === "INVALID_INPUT");
    const permit = await state.acquire({ bucketId: "b", rules: [{ requestsPerWindow: 20, windowMs: 1000 }] });
    assert.ok(permit instanceof P.Permit, "a well-formed rule is still served after the refusal");
    await permit.release();
    state.free();
  });

  test("createLimiter's limiter has tryAcquire", async () => {
    const limiter = P.createLimiter({ bucketId: "lim", rules: FAST });
    let permit = limiter.tryAcquire();
    for (let i = 0; i < 50 && !(permit instanceof P.Permit); i++) {
      await tick();
      permit = limiter.tryAcquire();
    }
    assert.ok(permit instanceof P.Permit);
    await permit.release();
    limiter.state.free();
  });
});

describe("acquire of a due permit", () => {
  test("sets no timer per call: 500 acquires of a 1,000,000/s rule set fewer than 25 timers", async () => {
    const state = new P.LocalRateState();
    const input = { bucketId: "hot", rules: FAST };
    for (let i = 0; i < 200; i++) await (await state.acquire(input)).release();
    const set = await timersSetBy(async () => {
      for (let i = 0; i < 500; i++) await (await state.acquire(input)).release();
    });
    assert.ok(set < 25, `${set} timers for 500 permits`);
    state.free();
  });

  test("a pure-rate permit holds nothing: instanceof Permit, free() and dispose do nothing, others' brand checks still hold", async () => {
    const state = new P.LocalRateState();
    const permit = await state.acquire({ bucketId: "p", rules: FAST });
    assert.ok(permit instanceof P.Permit);
    permit.free();
    if (Symbol.dispose) permit[Symbol.dispose]();
    assert.equal(await permit.release(), undefined, "still releasable after free()");
    const other = await state.acquire({ bucketId: "p", rules: FAST });
    assert.notEqual(other, permit, "each acquire hands out its own permit");
    assert.throws(
      () => P.Permit.prototype.release.call({}),
      (e) => e.code === "INVALID_INPUT",
    );
    state.free();
  });

  test("a leased permit is still the full Permit: its release hands the lease back", async () => {
    const state = new P.LocalRateState();
    const rules = [{ requestsPerWindow: 1000, windowMs: 1000, maxConcurrency: 1 }];
    const first = await state.acquire({ bucketId: "c", rules });
    assert.equal(typeof first.leaseId, "string");
    let second = state.tryAcquire({ bucketId: "c", rules });
    assert.ok(!(second instanceof P.Permit), "the one slot is held");
    await first.release();
    second = await state.acquire({ bucketId: "c", rules });
    assert.equal(typeof second.leaseId, "string");
    await second.release();
    state.free();
  });

  test("the same input object read again: a changed field is what applies", async () => {
    const state = new P.LocalRateState();
    const input = { bucketId: "same", rules: [{ requestsPerWindow: 1_000_000, windowMs: 1000 }] };
    await (await state.acquire(input)).release();
    input.rules[0].requestsPerWindow = -1;
    await assert.rejects(
      state.acquire(input),
      (e) => e.code === "INVALID_INPUT" && /requestsPerWindow/.test(e.message),
    );
    input.rules[0].requestsPerWindow = 1_000_000;
    input.bucketId = "";
    await assert.rejects(state.acquire(input), (e) => e.code === "INVALID_INPUT" && /bucketId/.test(e.message));
    input.bucketId = "same";
    input.extra = 1;
    await assert.rejects(state.acquire(input), (e) => e.code === "INVALID_INPUT" && /extra/.test(e.message));
    delete input.extra;
    await (await state.acquire(input)).release();
    state.free();
  });

  test("the same input object edited in place after a due permit: each edit is read as a first call reads it", async () => {
    const state = new P.LocalRateState();
    const rule = { requestsPerWindow: 1_000_000, windowMs: 1000 };
    const input = { bucketId: "edits", rules: [rule] };
    const due = async () => {
      const permit = await state.acquire(input);
      assert.ok(permit instanceof P.Permit);
      await permit.release();
    };
    const refused = (says) =>
      assert.rejects(state.acquire(input), (e) => e.code === "INVALID_INPUT" && says.test(e.message));
    await due();
    rule.requestsPerWindow = "1000000";
    await refused(/requestsPerWindow/);
    rule.requestsPerWindow = 1_000_000;
    input.bucketId = new String("edits");
    await refused(/bucketId/);
    input.bucketId = "edits";
    Object.defineProperty(rule, "windowMs", {
      enumerable: true,
      configurable: true,
      get() {
        throw new Error("boom");
      },
    });
    await refused(/rules/);
    Object.defineProperty(rule, "windowMs", { value: 1000, enumerable: true, writable: true });
    input.rateScopeToken = 7;
    await refused(/rateScopeToken/);
    delete input.rateScopeToken;
    // Fields in another order are the same rule.
    input.rules = [{ windowMs: 1000, requestsPerWindow: 1_000_000 }];
    await due();
    // A new rule in place applies: one permit a minute, so the second is
    // not due.
    input.rules[0].requestsPerWindow = 1;
    input.rules[0].windowMs = 60_000;
    input.bucketId = "edits-slow";
    await due();
    const next = state.tryAcquire(input);
    assert.ok(!(next instanceof P.Permit), "the one-a-minute rule applies");
    assert.ok(next.retryAfterMs > 1000, `retryAfterMs ${next.retryAfterMs}`);
    state.free();
  });

  test("an aborted signal is refused even when a permit is due", async () => {
    const state = new P.LocalRateState();
    const input = { bucketId: "ab", rules: FAST };
    await (await state.acquire(input)).release();
    const controller = new AbortController();
    controller.abort(new Error("gone"));
    await assert.rejects(state.acquire({ ...input, signal: controller.signal }), (e) => e.code === "ABORTED");
    state.free();
  });
});
