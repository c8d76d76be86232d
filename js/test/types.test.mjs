// The package's TypeScript declarations, checked by tsc --strict: a typed
// use of the public API compiles, and misuses are refused.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { pkgDir } from "../lib/bundle-worker.mjs";
import { typecheck } from "../lib/typescript.mjs";

function check(source) {
  const dir = mkdtempSync(join(tmpdir(), "paceline-types-"));
  try {
    const file = join(dir, "use.ts");
    writeFileSync(file, source.replaceAll("PKG", join(pkgDir, "index.js")));
    return typecheck([file]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a typed use of the public API compiles under --strict", () => {
  const errors = check(`
import { GatewayCore, GatewayRateState, createGovernor, fetchPort, mintRateScopeToken } from "PKG";
const core = new GatewayCore({ horizonMs: 1000 });
const grant = core.acquire({ bucketId: "b", rules: [{ requestsPerWindow: 20, windowMs: 1000 }], requested: 2 }, Date.now());
const first: number | undefined = grant.scheduledAtMs?.[0];
const view = core.bucket({ bucketId: "b" }, Date.now());
const leases: number | undefined = view?.liveLeases;
const token: string = mintRateScopeToken({ secret: "s", bucketId: "b", expiresAtMs: Date.now() + 1000 });
const rateState = new GatewayRateState(fetchPort({ fetch: (url, init) => fetch(url, init), baseUrl: "http://gw" }));
const governor = createGovernor({
  adapter: "esm_workers",
  scope: { orgId: "o", rootRunId: "r" },
  rateState,
  resolvePacing: () => ({ provider: "p", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] }),
});
async function use(): Promise<number> {
  const lease = await governor.acquireToolSlot({ toolId: "p.search" });
  await lease.release();
  const answer = await governor.callTool(() => fetch("http://p"), { toolId: "p.search", retrySafe: true });
  return answer.status + (first ?? 0) + (leases ?? 0) + token.length;
}
void use;
`);
  assert.equal(errors, "", errors);
});

test("misuses of the public API are refused by the types", () => {
  const errors = check(`
import { GatewayCore, createGovernor } from "PKG";
const core = new GatewayCore({ horizonMs: "soon" });
core.acquire({ bucketId: 7, rules: [], requested: 1 }, Date.now());
createGovernor({ adapter: "lambda", scope: { orgId: "o", rootRunId: "r" } });
`);
  // One error for each misuse, on its own line.
  for (const line of [3, 4, 5]) assert.match(errors, new RegExp(`use\\.ts\\(${line},`), errors);
  assert.match(errors, /"lambda"/);
});

test("the governor's runtime-conformance options and methods are typed", () => {
  const errors = check(`
import { LocalRateState, createGovernor, type Governor, type PacingDeclaration } from "PKG";
const unpaced: PacingDeclaration = { unpaced: true };
const governor = createGovernor({
  adapter: "cjs_node20",
  scope: { orgId: "o", rootRunId: "r" },
  rateState: new LocalRateState(),
  resolvePacing: (toolId) => (toolId === "fmt" ? unpaced : null),
  resolveRateScope: () => ({ rateScopeToken: "t" }),
  builtinPacing: { "p.search": { provider: "p", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] }, "fmt": { unpaced: true } },
  toolLatencyMs: { "p.search": 800 },
  playId: "root-play",
  policy: { pacing: { suggestedMaxParallelism: 12 } },
});
async function use(): Promise<number> {
  const child: Governor = await governor.forkInlineChild({ childPlayName: "b", childRunId: "run-b" });
  child.observeToolSuccess({ toolId: "p.search", latencyMs: 120 });
  await child.chargeBudget({ kind: "retry", amount: 0 });
  await child.reportProviderBackpressure({ provider: "p", toolId: "p.search", cooldownMs: 1000, sentAtMs: Date.now() });
  return child.resolveRowConcurrency(-1) + (await governor.suggestedParallelism({ toolId: "p.search", fallback: 4 }));
}
void use;
`);
  assert.equal(errors, "", errors);
});

test("misuses of the conformance options are refused by the types", () => {
  const errors = check(`
import { LocalRateState, createGovernor } from "PKG";
const base = { adapter: "esm_workers" as const, scope: { orgId: "o", rootRunId: "r" }, rateState: new LocalRateState(), resolvePacing: () => null };
createGovernor({ ...base, builtinPacing: { t: { unpaced: false } } });
createGovernor({ ...base, toolLatencyMs: { t: "slow" } });
createGovernor({ ...base, playId: 7 });
createGovernor(base).forkInlineChild({ childPlayName: "b" });
`);
  for (const line of [4, 5, 6, 7]) assert.match(errors, new RegExp(`use\\.ts\\(${line},`), errors);
});

test("the API takes named fields: the positional shapes and retryAfterMs are refused by the types", () => {
  const errors = check(`
import { GatewayCore, LocalRateState, createGovernor, mintRateScopeToken } from "PKG";
const g = createGovernor({ rateState: new LocalRateState(), resolvePacing: () => null });
void g.acquireToolSlot("p.search");
void g.callTool("p.search", () => ({ status: 200 }));
void g.suggestedParallelism("p.search", 4);
void g.chargeBudget("retry", 1);
void g.reportProviderBackpressure({ provider: "p", retryAfterMs: 1000 });
void g.callTool(() => ({ status: 200 }), { retrySafe: true });
void mintRateScopeToken("secret", "bucket", Date.now());
void new GatewayCore().bucket("b", Date.now());
`);
  for (const line of [4, 5, 6, 7, 8, 9, 10, 11]) assert.match(errors, new RegExp(`use\\.ts\\(${line},`), errors);
});

test("the front door's API is typed: limiter, gatewayPort, generic callTool, waitUntil, the error guard", () => {
  const errors = check(`
import { createGovernor, createLimiter, gatewayPort, isPacelineError, GatewayRateState, type PacelineGatewayNamespace } from "PKG";
declare const env: { PACELINE_GATEWAY: PacelineGatewayNamespace };
declare const ctx: { waitUntil(promise: Promise<unknown>): void };
const limiter = createLimiter({ port: gatewayPort(env), bucketId: "api", rules: [{ requestsPerWindow: 20, windowMs: 1000 }] });
const rateState = new GatewayRateState(gatewayPort(env), { waitUntil: ctx.waitUntil.bind(ctx) });
const governor = createGovernor({ rateState, resolvePacing: () => ({ unpaced: true }), waitUntil: ctx.waitUntil.bind(ctx) });
interface MyAnswer { status: number; items: string[] }
async function use(): Promise<number> {
  const n: number = await limiter.schedule(async () => 3, { waitUntil: ctx.waitUntil.bind(ctx) });
  const status: number = await limiter.schedule(async (call) => {
    const sent: number = call.sentAtMs;
    await call.refused({ cooldownMs: 1000 });
    return sent > 0 ? 429 : 0;
  });
  const answer = await governor.callTool(async (): Promise<MyAnswer> => ({ status: 200, items: ["a"] }), { toolId: "t" });
  const items: string[] = answer.items;
  const row = await governor.acquireRowSlot();
  const released: Promise<void> = row.release();
  await released;
  rateState.observeSuccess({ bucketId: "api" });
  try { await limiter.acquire(); } catch (e) { if (isPacelineError(e, "ABORTED")) return e.code.length; }
  return n + items.length + status;
}
void use;
`);
  assert.equal(errors, "", errors);
});

test("misuses of the front door are refused by the types", () => {
  const errors = check(`
import { createLimiter, LocalRateState, createGovernor } from "PKG";
createLimiter({ rules: [{ requestsPerWindow: 20, windowMs: 1000 }] });
new LocalRateState().observeSuccess("bucket");
createGovernor({ rateState: new LocalRateState(), resolvePacing: () => null, resolveRateScope: () => ({ token: "t" }) });
void new LocalRateState().stateHandle;
`);
  for (const line of [3, 4, 5, 6]) assert.match(errors, new RegExp(`use\\.ts\\(${line},`), errors);
});

test("the typings use camelCase parameter names and carry no doc artifacts", () => {
  // The API, without the raw module's export list that follows it.
  const typings = readFileSync(join(pkgDir, "paceline.d.ts"), "utf8").split("export type InitInput")[0];
  assert.doesNotMatch(typings, /[(,]\s*[a-z]+_[a-z_]+\??:/, "a snake_case parameter");
  assert.doesNotMatch(typings, /r" /, "a raw-string doc artifact");
  assert.doesNotMatch(typings, /stateHandle|GatewayPortLike/);
  assert.match(typings, /acquire\(req: AcquireRequest, nowMs: number\)/);
});

// The glue modules this package writes by hand are JSDoc-typed against their
// own declarations; checkJs holds the two together.
const CHECKED_GLUE = ["errors.js", "gateway-port.js", "limiter.js"];

test("the hand-written glue type-checks against its own .d.ts under checkJs", () => {
  const errors = typecheck(CHECKED_GLUE, { cwd: join(pkgDir, "glue"), options: ["--allowJs", "--checkJs"] });
  assert.equal(errors, "", errors);
});
