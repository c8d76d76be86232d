// The JS boundary against hostile callers: every finding of the hardening
// review, one test each, against the built package. Each wrong input must
// come back as an Error with code INVALID_INPUT (thrown, or as a rejection
// of a method that returns a promise), never as a raw TypeError, a wasm
// trap, an uncaught exception or a promise that never settles.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { paceline as P, wasmMemory } from "../lib/node-package.mjs";

const R = [{ requestsPerWindow: 10, windowMs: 1000 }];
const NOW = 1_767_225_600_000;

/** Settles `work` (a value, a promise, or a throw) within `ms`, or fails. */
async function outcome(work, ms = 2000) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not settle within ${ms} ms`)), ms);
  });
  try {
    return { value: await Promise.race([Promise.resolve().then(work), late]) };
  } catch (error) {
    if (error?.message?.startsWith("did not settle")) throw error;
    return { error };
  } finally {
    clearTimeout(timer);
  }
}

async function refused(work, code = "INVALID_INPUT", says) {
  const { value, error } = await outcome(work);
  assert.ok(error !== undefined, `expected ${code}, got ${String(value)}`);
  assert.ok(error instanceof Error, `not an Error: ${String(error)}`);
  assert.equal(error.code, code, `${error.name}: ${error.message}`);
  if (says) assert.match(error.message, says);
  return error;
}

function governor(overrides = {}) {
  return P.createGovernor({
    adapter: "cjs_node20",
    scope: { orgId: "o", rootRunId: "r" },
    rateState: new P.LocalRateState(),
    resolvePacing: () => ({ provider: "p", rules: R }),
    ...overrides,
  });
}

describe("a signal that is not an AbortSignal", () => {
  const fakes = {
    "a plain object": {},
    "a look-alike whose removeEventListener throws": {
      aborted: false,
      addEventListener() {},
      removeEventListener() {
        throw new Error("remove");
      },
    },
    "an object made from AbortSignal.prototype": Object.create(AbortSignal.prototype),
    "a number": 42,
  };
  for (const [what, signal] of Object.entries(fakes)) {
    test(`${what} is INVALID_INPUT up front from acquire, acquireToolSlot and callTool`, async () => {
      await refused(
        () => new P.LocalRateState().acquire({ bucketId: "x", rules: R, signal }),
        "INVALID_INPUT",
        /signal must be an AbortSignal/,
      );
      const port = { post() {} };
      await refused(() => new P.GatewayRateState(port).acquire({ bucketId: "x", rules: R, signal }));
      await refused(() => governor().acquireToolSlot({ toolId: "t", signal }));
      await refused(() => governor().callTool(() => ({ status: 200 }), { toolId: "t", signal }));
    });
  }

  test("a real AbortSignal whose own listener methods throw still gets its permit", async () => {
    const { signal } = new AbortController();
    signal.addEventListener = () => {
      throw new Error("add");
    };
    signal.removeEventListener = () => {
      throw new Error("remove");
    };
    const state = new P.LocalRateState();
    const permit = await state.acquire({ bucketId: "x", rules: [{ ...R[0], maxConcurrency: 1 }], signal });
    assert.ok(permit instanceof P.Permit);
    await permit.release();
    const next = await outcome(() => state.acquire({ bucketId: "x", rules: [{ ...R[0], maxConcurrency: 1 }] }));
    assert.ok(next.value instanceof P.Permit, "the lease went back");
  });
});

describe("an aborted wait", () => {
  test("is ABORTED, names the bucket waited on, and carries the signal's reason as cause", async () => {
    const state = new P.LocalRateState();
    const rules = [{ requestsPerWindow: 1, windowMs: 60_000 }];
    await state.acquire({ bucketId: "slow", rules });
    const controller = new AbortController();
    const waiting = state.acquire({ bucketId: "slow", rules, signal: controller.signal });
    const reason = new Error("the user left");
    setTimeout(() => controller.abort(reason), 10);
    const error = await refused(() => waiting, "ABORTED", /a permit of bucket slow/);
    assert.equal(error.cause, reason);
  });

  test("of a tool slot names the slot and keeps a non-Error reason", async () => {
    // An unpaced tool waits on nothing but its slot.
    const g = governor({
      resolvePacing: () => ({ unpaced: true }),
      policy: { concurrency: { maxToolConcurrency: 1 } },
    });
    const held = await g.acquireToolSlot({ toolId: "t" });
    const controller = new AbortController();
    const waiting = g.acquireToolSlot({ toolId: "t", signal: controller.signal });
    setTimeout(() => controller.abort("timeout"), 10);
    const error = await refused(() => waiting, "ABORTED", /a tool slot/);
    assert.equal(error.cause, "timeout");
    await held.release();
  });
});

describe("an input whose getter throws, or a Proxy", () => {
  const thrown = new Error("getter");
  const throwing = () => {
    throw thrown;
  };
  const trap = new Proxy({}, { get: throwing, ownKeys: throwing });
  const { proxy: revoked, revoke } = Proxy.revocable({}, {});
  revoke();

  test("a charge whose rootRunId getter throws is INVALID_INPUT with what it threw as cause", async () => {
    const error = await refused(() =>
      new P.LocalBudgetState().charge({
        get rootRunId() {
          throw thrown;
        },
        charges: [],
      }),
    );
    assert.equal(error.cause, thrown);
  });

  test("throwing Proxies and revoked Proxies are INVALID_INPUT at every kind of entry", async () => {
    for (const hostile of [trap, revoked]) {
      await refused(() => new P.LocalRateState().acquire(hostile));
      await refused(() => new P.LocalRateState(hostile));
      await refused(() => new P.GatewayCore(hostile));
      await refused(() => new P.GatewayCore().acquire(hostile, NOW));
      await refused(() => new P.GatewayCore().acquire({ bucketId: "b", rules: R, requested: 1, extra: hostile }, NOW));
      await refused(() => P.createGovernor(hostile));
      await refused(() => governor().callTool(() => ({ status: 200 }), hostile));
      await refused(() => new P.GatewayRateState(hostile));
    }
  });

  test("a callback answering with a thenable whose then throws rejects, and nothing escapes", async () => {
    // biome-ignore lint/suspicious/noThenProperty: a thenable whose then throws is the hostile input under test
    const g = governor({ resolvePacing: () => ({ then: throwing }) });
    const { error } = await outcome(() => g.acquireToolSlot({ toolId: "t" }));
    assert.equal(error, thrown, "the callback's own exception reaches the caller unchanged");
  });
});

describe("wrong types at the boundary", () => {
  test("observeSuccess({}), bucket({ bucketId: 42 }) and restore({length: 2**31}) are INVALID_INPUT, not a trap", async () => {
    await refused(
      () => new P.LocalRateState().observeSuccess({}),
      "INVALID_INPUT",
      /bucketId must be a non-empty string/,
    );
    await refused(
      () => new P.GatewayCore().bucket({ bucketId: 42 }, NOW),
      "INVALID_INPUT",
      /bucketId must be a string/,
    );
    await refused(() => new P.GatewayCore().bucket("b", NOW), "INVALID_INPUT", /bucket must be an object/);
    await refused(() => P.GatewayCore.restore({ length: 2 ** 31 }), "INVALID_INPUT", /Uint8Array/);
    await refused(() => new P.GatewayCore().handle("POST", "/v1/rate/acquire", { length: 2 ** 31 }, NOW));
  });

  test("mintRateScopeToken({ secret: [] }) is INVALID_INPUT: an array is not the empty secret", async () => {
    await refused(
      () => P.mintRateScopeToken({ secret: [], bucketId: "b", expiresAtMs: NOW }),
      "INVALID_INPUT",
      /secret must be a string/,
    );
    await refused(
      () => P.mintRateScopeToken({ secret: "s", bucketId: ["b"], expiresAtMs: NOW }),
      "INVALID_INPUT",
      /bucketId must be a string/,
    );
    // Positional arguments are refused: a swapped secret and id would mint a token for the wrong scope.
    await refused(() => P.mintRateScopeToken("s", "b", NOW), "INVALID_INPUT", /input must be an object/);
    await refused(
      () => P.mintRunScopeToken({ secret: "s", rootRunId: "r" }),
      "INVALID_INPUT",
      /expiresAtMs is required/,
    );
  });

  test("a tool id, a budget kind or a call of the wrong type is INVALID_INPUT", async () => {
    const g = governor();
    await refused(() => g.acquireToolSlot({ toolId: 42 }), "INVALID_INPUT", /input\.toolId must be a string/);
    await refused(() => g.callTool("not a function", { toolId: "t" }), "INVALID_INPUT", /call must be a function/);
    await refused(() => g.chargeBudget({ kind: { toString: () => "toolCall" } }), "INVALID_INPUT", /input\.kind/);
    await refused(() => g.suggestedParallelism({ toolId: "t", fallback: "4" }), "INVALID_INPUT", /input\.fallback/);
  });

  test("the positional shapes of the TypeScript runtime are refused with the object to pass instead", async () => {
    const g = governor();
    await refused(() => g.acquireToolSlot("t"), "INVALID_INPUT", /input must be an object \{ toolId, signal\? \}/);
    await refused(() => g.chargeBudget("retry", 1), "INVALID_INPUT", /input must be an object \{ kind, amount\? \}/);
    await refused(() => g.suggestedParallelism("t", 4), "INVALID_INPUT", /\{ toolId, fallback \}/);
    await refused(() => g.callTool("t", () => ({ status: 200 })), "INVALID_INPUT", /callTool takes \(call, \{ toolId/);
    await refused(
      () => g.reportProviderBackpressure({ provider: "p", retryAfterMs: 1000 }),
      "INVALID_INPUT",
      /input\.retryAfterMs is not a known field; known here: provider, toolId, cooldownMs/,
    );
    assert.equal(g.snapshot().retryCount, 0, "nothing was charged");
  });
});

describe("loose numbers and options", () => {
  const core = new P.GatewayCore();
  const req = { bucketId: "b", rules: R, requested: 1 };
  for (const [what, nowMs] of [
    ['"1000" (no coercion)', "1000"],
    ["1.5 (not a whole ms)", 1.5],
    ["-1", -1],
    ["1e16 (past year 10000)", 1e16],
    ["2**53", 2 ** 53],
    ["NaN", NaN],
  ]) {
    test(`nowMs ${what} is refused at the boundary`, async () => {
      await refused(() => core.acquire(req, nowMs), "INVALID_INPUT", /nowMs must be/);
      await refused(() => core.handle("GET", "/v1/rate/buckets/b", "", nowMs), "INVALID_INPUT", /nowMs/);
    });
  }

  test("GatewayCore({horizonMs: NaN}) is refused, naming horizonMs", async () => {
    await refused(() => new P.GatewayCore({ horizonMs: NaN }), "INVALID_INPUT", /options\.horizonMs .*NaN/);
    await refused(() => new P.GatewayCore({ horizonMs: "1000" }), "INVALID_INPUT", /options\.horizonMs/);
  });

  test("misspelt option names are refused, naming them", async () => {
    await refused(
      () => new P.GatewayCore({ horizonMS: 1000 }),
      "INVALID_INPUT",
      /options\.horizonMS is not a known field/,
    );
    await refused(
      () => new P.LocalRateState({ maxWait: 10 }),
      "INVALID_INPUT",
      /options\.maxWait is not a known field/,
    );
    await refused(
      () => new P.LocalRateState().acquire({ bucketId: "x", rules: R, singal: null }),
      "INVALID_INPUT",
      /input\.singal/,
    );
    await refused(
      () => governor().callTool(() => ({ status: 200 }), { toolId: "t", retrySafely: true }),
      "INVALID_INPUT",
      /options\.retrySafely/,
    );
    await refused(
      () => governor({ resolvePacings: () => null }),
      "INVALID_INPUT",
      /options\.resolvePacings is not a known field/,
    );
  });
});

describe("brand checks", () => {
  test("createGovernor({rateState: {stateHandle: 0}}) is INVALID_INPUT", async () => {
    await refused(() => governor({ rateState: { stateHandle: 0 } }), "INVALID_INPUT", /rateState must be a live/);
    await refused(() => governor({ rateState: Object.create(P.LocalRateState.prototype) }), "INVALID_INPUT");
    await refused(() => governor({ rateState: new P.LocalBudgetState() }), "INVALID_INPUT", /rateState/);
    await refused(() => governor({ budgetState: new P.LocalRateState() }), "INVALID_INPUT", /budgetState/);
  });

  test("GatewayCore.prototype.acquire.call(new LocalRateState(), …) is INVALID_INPUT", async () => {
    const other = new P.LocalRateState();
    await refused(
      () => P.GatewayCore.prototype.acquire.call(other, { bucketId: "b", rules: R, requested: 1 }, NOW),
      "INVALID_INPUT",
      /not a GatewayCore/,
    );
    await refused(() => P.GatewayCore.prototype.free.call(other), "INVALID_INPUT");
    await refused(() => P.LocalRateState.prototype.acquire.call({ __wbg_ptr: 8 }, { bucketId: "b", rules: R }));
    // The object itself is untouched and still works.
    assert.ok((await other.acquire({ bucketId: "b", rules: R })) instanceof P.Permit);
  });

  test("a freed object is refused, a second free() does nothing, and its state is no governor's", async () => {
    const state = new P.LocalRateState();
    state.free();
    state.free();
    await refused(() => state.acquire({ bucketId: "b", rules: R }), "INVALID_INPUT", /has been freed/);
    await refused(() => governor({ rateState: state }), "INVALID_INPUT", /rateState must be a live/);
  });

  test("a governor keeps working after the state it was built from is freed", async () => {
    const rateState = new P.LocalRateState();
    const g = governor({ rateState });
    rateState.free();
    const lease = await g.acquireToolSlot({ toolId: "t" });
    await lease.release();
  });
});

describe("the client never forgets (the JS part)", () => {
  test("20k states made and freed leave the wasm memory within 1 MiB of where it was", () => {
    // Warm up: the first states size the allocator's pools.
    for (let i = 0; i < 2000; i++) new P.LocalRateState().free();
    const before = wasmMemory.buffer.byteLength;
    for (let i = 0; i < 20_000; i++) {
      const s = new P.LocalRateState();
      const b = new P.LocalBudgetState();
      s.free();
      b.free();
    }
    const grown = wasmMemory.buffer.byteLength - before;
    assert.ok(grown <= 1 << 20, `wasm memory grew ${grown} bytes`);
  });
});
