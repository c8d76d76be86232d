// A fuzz of every exported function and method of the built package (each
// module's Node entry: paceline, paceline/client, paceline/limiter and
// paceline/gateway, whose wasm is built with other features and whose glue
// imports another wasm) with hostile values: wrong types, throwing getters,
// Proxies (throwing and revoked), huge lengths, NaN, symbols, BigInts,
// cycles, wrong receivers, and hostile answers from the ports and callbacks
// the package calls. Each call must return or resolve, or throw or reject
// an Error whose `code` is one of the documented ones (or exactly what the
// caller's own callback threw), and settle within a bound; nothing may be
// thrown uncaught.
//
// Runs briefly in the test command; at length with
//   PACELINE_FUZZ_CASES=100000 node --test test/boundary-fuzz.test.mjs
// (PACELINE_FUZZ_SEED=n replays a run; the seed is printed.)
import assert from "node:assert/strict";
import { test } from "node:test";
import { fakeDurableObjectState } from "../lib/fake-durable-object.mjs";
import { paceline } from "../lib/node-package.mjs";

const CASES = Number(process.env.PACELINE_FUZZ_CASES ?? 400);
const SEED = Number(process.env.PACELINE_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const SETTLE_MS = 2000;

const pkg = new URL("../../pkg/", import.meta.url);
const MODULES = {
  paceline,
  "paceline/client": await import(new URL("paceline_client_node.js", pkg).href),
  "paceline/limiter": await import(new URL("paceline_limiter_node.js", pkg).href),
  "paceline/gateway": await import(new URL("paceline_gateway_node.js", pkg).href),
};
/** The module whose GatewayCore stands behind the ports of modules without one. */
const G = MODULES["paceline/gateway"];

function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Values our own hostile code throws; seeing one come back unchanged is allowed. */
const sentinels = new Set();
function sentinel(what) {
  const e = new Error(`fuzz sentinel: ${what}`);
  sentinels.add(e);
  return e;
}

const R = [{ requestsPerWindow: 1000, windowMs: 1000 }];
const NOW = 1_767_225_600_000;

function hostileValues() {
  const thrower = () => {
    throw sentinel("trap");
  };
  const cyclic = { bucketId: "b" };
  cyclic.self = cyclic;
  const { proxy: revoked, revoke } = Proxy.revocable({}, {});
  revoke();
  const aborted = new AbortController();
  aborted.abort(sentinel("reason"));
  return [
    undefined,
    null,
    true,
    false,
    0,
    -0,
    -1,
    1.5,
    NaN,
    Infinity,
    -Infinity,
    2 ** 31,
    2 ** 53,
    1e16,
    1e308,
    "",
    "x",
    "1000",
    "NaN",
    "x".repeat(70_000),
    Symbol("s"),
    10n,
    [],
    [1, 2],
    ["b"],
    {},
    { length: 2 ** 31 },
    Object.create(null),
    new Uint8Array(4),
    new ArrayBuffer(8),
    new Date(0),
    () => {},
    async () => {},
    cyclic,
    revoked,
    new Proxy(
      {},
      { get: thrower, has: thrower, ownKeys: thrower, getOwnPropertyDescriptor: thrower, getPrototypeOf: thrower },
    ),
    new Proxy([], { get: (_target, k) => (k === "length" ? 2 ** 31 : undefined) }),
    {
      get bucketId() {
        throw sentinel("getter");
      },
      rules: R,
    },
    { toJSON: thrower },
    // biome-ignore lint/suspicious/noThenProperty: a thenable whose then throws is the hostile input under test
    { then: thrower },
    { aborted: false, addEventListener() {}, removeEventListener: thrower },
    Object.create(AbortSignal.prototype),
    aborted.signal,
    new AbortController().signal,
    { stateHandle: 0 },
    { stateHandle: {} },
    { __wbg_ptr: 8 },
    { PACELINE_GATEWAY: { idFromName: thrower, get: thrower } },
    { PACELINE_GATEWAY: { idFromName: (name) => name, get: () => ({ fetch: async () => new Response("not json") }) } },
  ];
}

/** Plausible inputs, to be mutated: the fuzz should reach past the first check. */
function validInputs() {
  return {
    acquire: { bucketId: "b", rules: R, requested: 1 },
    release: { bucketId: "b", rules: R, leaseIds: ["l"] },
    penalize: { bucketId: "b", cooldownMs: 10, sentAtMs: NOW },
    backpressure: { provider: "p", toolId: "t", cooldownMs: 10, sentAtMs: NOW },
    charge: { rootRunId: "r", reservationId: "x", charges: [{ key: "toolCall", amount: 1, limit: 5 }] },
    permit: { bucketId: "b", rules: R },
    budget: { rootRunId: "r", charges: [{ key: "toolCall", amount: 1, limit: 5 }] },
    options: {},
    limiter: { bucketId: "b", rules: R, maxWaitMs: 100 },
    string: "b",
    now: NOW,
  };
}

function pick(rand, list) {
  return list[Math.floor(rand() * list.length)];
}

/** A value: hostile outright, or a valid one with one field made hostile. */
function value(rand, hostile) {
  const r = rand();
  if (r < 0.45) return pick(rand, hostile);
  const valid = structuredClone(pick(rand, Object.values(validInputs())));
  if (r < 0.6 || typeof valid !== "object") return valid;
  const keys = Object.keys(valid);
  const target = rand() < 0.7 && keys.length > 0 ? pick(rand, keys) : pick(rand, ["signal", "extra", "rules", "nowMs"]);
  valid[target] = pick(rand, hostile);
  if (rand() < 0.3 && "rules" in valid && target !== "rules")
    valid.rules = [{ ...R[0], windowMs: pick(rand, hostile) }];
  return valid;
}

/** A transport to a real gateway core: module `M`'s own, or the gateway module's. */
function coreTransport(M) {
  const host = M.GatewayCore ? M : G;
  return host.coreTransport(new host.GatewayCore());
}

/** A transport whose answers are hostile (or a real core's). */
function hostilePort(M, rand, hostile) {
  const inner = coreTransport(M);
  const post = (path, body) => {
    const r = rand();
    if (r < 0.3) return inner.post(path, body);
    if (r < 0.4) throw sentinel("port threw");
    if (r < 0.5) return Promise.reject(pick(rand, hostile));
    if (r < 0.6) return { status: pick(rand, hostile), body: new Uint8Array(8) };
    if (r < 0.7) return { status: 200, body: pick(rand, hostile) };
    return pick(rand, hostile);
  };
  return { post };
}

/** Every way to get a live receiver of each class module `M` exports. */
async function receivers(M, rand, hostile) {
  const live = {};
  const rateState = M.LocalRateState
    ? new M.LocalRateState()
    : M.GatewayRateState && new M.GatewayRateState(coreTransport(M));
  if (M.GatewayCore) live.GatewayCore = new M.GatewayCore();
  if (M.LocalRateState) live.LocalRateState = rateState;
  if (M.GatewayRateState)
    live.GatewayRateState = new M.GatewayRateState(hostilePort(M, rand, hostile), { maxWaitMs: 100 });
  if (M.LocalBudgetState) live.LocalBudgetState = new M.LocalBudgetState();
  if (M.GatewayBudgetState) live.GatewayBudgetState = new M.GatewayBudgetState(hostilePort(M, rand, hostile));
  if (M.GatewayClient) live.GatewayClient = new M.GatewayClient(hostilePort(M, rand, hostile));
  if (M.createGovernor) {
    live.Governor = M.createGovernor({
      adapter: "cjs_node20",
      scope: { orgId: "o", rootRunId: "r" },
      rateState,
      budgetState: new M.LocalBudgetState(),
      resolvePacing: () => (rand() < 0.7 ? { provider: "p", rules: R } : pick(rand, hostile)),
      resolveRateScope: rand() < 0.5 ? undefined : () => pick(rand, hostile),
    });
    live.ToolLease = await live.Governor.acquireToolSlot({ toolId: "t" }).catch(() => undefined);
    live.WorkLease = await live.Governor.acquireRowSlot();
  }
  if (rateState) live.Permit = await rateState.acquire({ bucketId: "p", rules: R });
  if (M.PacelineGateway) live.PacelineGateway = new M.PacelineGateway(fakeDurableObjectState(), {});
  if (M.createLimiter)
    live.Limiter = M.createLimiter({ port: hostilePort(M, rand, hostile), bucketId: "b", rules: R, maxWaitMs: 100 });
  return live;
}

/** The limiter is a plain object of closures: its methods, called on any receiver. */
const LIMITER_METHODS = ["schedule", "acquire"];

/** Module `M`'s exported functions and every method of its exported classes. */
function targets(M) {
  const out = [];
  for (const [name, exported] of Object.entries(M)) {
    if (typeof exported !== "function" || name === "initSync" || name === "default") continue;
    const isClass = /^class\b/.test(Function.prototype.toString.call(exported));
    if (!isClass) {
      out.push({ name, call: (_, args) => exported(...args), arity: exported.length });
      continue;
    }
    out.push({ name: `new ${name}`, call: (_, args) => new exported(...args), arity: exported.length });
    for (const key of Object.getOwnPropertyNames(exported)) {
      if (typeof exported[key] === "function" && !key.startsWith("__")) {
        out.push({ name: `${name}.${key}`, call: (_, args) => exported[key](...args), arity: exported[key].length });
      }
    }
    for (const key of Object.getOwnPropertyNames(exported.prototype)) {
      if (key === "constructor" || key.startsWith("__")) continue;
      const d = Object.getOwnPropertyDescriptor(exported.prototype, key);
      const f = d.get ?? d.value;
      if (typeof f !== "function") continue;
      out.push({
        name: `${name}#${key}`,
        cls: name,
        call: (self, args) => f.apply(self, args),
        arity: d.get ? 0 : f.length,
      });
    }
  }
  if (M.createLimiter) {
    for (const key of LIMITER_METHODS) {
      out.push({ name: `Limiter#${key}`, cls: "Limiter", limiterMethod: key, arity: 2 });
    }
  }
  return out;
}

/** Settles one call: `{ ok: "returned" | "coded" | "passed through" }` or
 * `{ finding }`. `passedThrough` holds the
 * values the caller's own ports and callbacks may throw, which reach it
 * unchanged. */
async function judge(run, passedThrough, codes) {
  let timer;
  try {
    await Promise.race([
      (async () => run())(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject({ timeout: true }), SETTLE_MS);
      }),
    ]);
    return { ok: "returned" };
  } catch (thrown) {
    if (sentinels.has(thrown) || passedThrough.has(thrown)) return { ok: "passed through" };
    if (thrown?.timeout === true) return { finding: `did not settle within ${SETTLE_MS} ms` };
    if (thrown instanceof Error && typeof thrown.code === "string" && codes.has(thrown.code)) return { ok: "coded" };
    const name = thrown instanceof Error ? thrown.constructor.name : typeof thrown;
    const message = String(thrown?.message ?? (typeof thrown === "symbol" ? "a symbol" : thrown));
    return { finding: `${name}: ${message.slice(0, 100)}` };
  } finally {
    clearTimeout(timer);
  }
}

function describeArg(v) {
  if (typeof v === "symbol" || typeof v === "bigint") return String(v);
  if (typeof v === "string") return v.length > 20 ? `"${v.slice(0, 8)}…" (${v.length})` : JSON.stringify(v);
  if (typeof v === "function") return "function";
  try {
    const text = JSON.stringify(v);
    return text === undefined ? typeof v : text.slice(0, 80);
  } catch {
    return `a hostile ${typeof v}`;
  }
}

for (const [moduleName, M] of Object.entries(MODULES)) {
  test(`${moduleName}: every exported function and method survives ${CASES} hostile calls (seed ${SEED})`, () =>
    fuzz(M, moduleName));
}

async function fuzz(M, moduleName) {
  const rand = prng(SEED);
  const hostile = hostileValues();
  const passedThrough = new Set(hostile);
  const codes = new Set(M.ERROR_CODES);
  const all = targets(M);
  const uncaught = [];
  const onUncaught = (e) => uncaught.push(`uncaught: ${e?.stack ?? e}`);
  process.on("uncaughtException", onUncaught);
  process.on("unhandledRejection", onUncaught);
  const findings = new Map();
  const counts = { calls: 0, returned: 0, coded: 0, "passed through": 0, wrongReceiver: 0 };
  try {
    let live = await receivers(M, rand, hostile);
    for (let i = 0; i < CASES; i++) {
      if (i % 50 === 49) live = await receivers(M, rand, hostile);
      const target = all[i % all.length];
      const args = Array.from({ length: target.arity + (rand() < 0.3 ? 1 : 0) }, () => value(rand, hostile));
      if (target.name === "GatewayCore#acquire" && rand() < 0.5) args[1] = NOW;
      let self;
      if (target.cls) {
        const r = rand();
        if (r < 0.75) self = live[target.cls];
        else {
          counts.wrongReceiver++;
          self = r < 0.9 ? pick(rand, Object.values(live)) : pick(rand, hostile);
        }
      }
      counts.calls++;
      const call = target.limiterMethod
        ? () => live.Limiter[target.limiterMethod].apply(self, args)
        : () => target.call(self, args);
      const verdict = await judge(call, passedThrough, codes);
      if (verdict.finding) {
        const key = `${target.name}: ${verdict.finding}`;
        if (!findings.has(key)) findings.set(key, `case ${i}, args ${args.map(describeArg).join(", ")}`);
      } else counts[verdict.ok] = (counts[verdict.ok] ?? 0) + 1;
    }
    // Let stray microtasks and timers of the last calls run.
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    process.off("uncaughtException", onUncaught);
    process.off("unhandledRejection", onUncaught);
  }
  console.log(
    `fuzz of ${moduleName}: seed ${SEED}, ${counts.calls} calls over ${all.length} entry points: ` +
      `${counts.returned} returned, ${counts.coded} coded errors, ` +
      `${counts["passed through"]} of the caller's own exceptions passed through, ${counts.wrongReceiver} with a wrong receiver, ` +
      `${findings.size} distinct findings, ${uncaught.length} uncaught`,
  );
  const report = [...findings].map(([k, v]) => `${k}\n    (${v})`).concat(uncaught);
  assert.equal(report.length, 0, `\n${report.join("\n")}`);
}
