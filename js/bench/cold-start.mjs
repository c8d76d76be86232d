// Cold start of the module: what a fresh isolate pays before its first
// permit, for the built package and, beside it in the same run, a baseline
// package (another build's pkg/ directory).
//  - workerd (through miniflare, timed from outside, since workerd's clocks
//    only move across I/O): the first request to a fresh Worker, which
//    makes a LocalRateState (V8 compiles the module's functions as they
//    first run), less a warm request to the same Worker; and the first
//    permit, a fresh Worker's first acquire + release less a warm one;
//  - Node: a fresh process compiles the .wasm, instantiates it (initSync)
//    and takes and releases its first permit (median of the runs, each
//    phase timed with performance.now()).
// A Worker that does not import paceline, timed the same way, gives
// workerd's own first-request cost, the floor under the module's figures;
// one that imports paceline but calls nothing in its first request shows
// what the module's presence costs that request (workerd compiles and
// instantiates the module at startup, before the Worker is ready: the
// "startup" row, the time to Miniflare's ready, includes that). This
// build's client and limiter modules ("paceline/client",
// "paceline/limiter") are timed beside the full one; they have no
// LocalRateState, so their probe makes a GatewayRateState over a
// fetchPort to a gateway Worker (js/examples/gateway-worker.mjs, the
// gateway module "paceline/gateway", in a Durable Object) bound beside it,
// and their first permit includes that gateway's own first request; in
// Node, over a GatewayCore of the full module loaded untimed. A pacer's
// first permit from a gateway also waits out its default dispatch lead
// (20 ms: the gateway grants no earlier than its now plus the lead, and
// the pacer has not yet timed a round trip), a warm one the few ms of the
// trip it timed; so about 15 ms of those first permits is that wait.
// Another column builds the full module's LocalRateState at the module's
// top level instead, so startup pays for it and the first request only
// uses it. A last one builds what would stand in for LocalRateState if
// no module held both the pacer and the scheduler: a GatewayRateState of
// the client module over coreTransport to a GatewayCore of the gateway
// module, both in the Worker's isolate (two modules, each under 100 KB,
// meeting only through the transport's bytes; the pacer cannot tell that
// scheduler shares its clock, so its first permit waits the default lead).
// A second table times, in the same runs, the Workers that host the
// gateway, each as its first request less a warm one and its startup:
//  - the gateway Worker alone (js/examples/gateway-worker.mjs), sent the
//    wire protocol's acquire (a POST to /v1/rate/acquire, one permit of a
//    rule it never reaches, no lease, so nothing to release): the first
//    routes it (the router reads the bucket from the body in wasm), makes
//    the Durable Object and its GatewayCore, and grants; a warm one goes to
//    the same object. Built from "paceline/gateway", as shipped, and the
//    same source from "paceline" (the full module);
//  - one Worker that exports PacelineGateway and paces through
//    gatewayPort(env), its own Durable Object in the same isolate: its
//    first request makes a GatewayRateState and takes and releases a first
//    permit through the object, a warm one takes and releases another
//    through it. That first permit waits the default dispatch lead (see
//    above), so the first request is also timed less a warm one that makes
//    a new GatewayRateState of its own, whose first permit waits the same
//    lead: that difference is the code's first run alone. Built from
//    "paceline" alone (the union module) and from "paceline/client" +
//    "paceline/gateway" (two modules, which meet only through the
//    transport's bytes);
//  - a Worker that forwards each request to a Durable Object without
//    paceline (which lists its storage when made and writes a key per
//    request, as the gateway's does): what workerd itself pays to make an
//    object, the floor under the others' figures, as the Worker without
//    paceline is under the first table's.
// Runs alternate between the packages so load on the machine falls on all
// alike.
// Usage: node js/bench/cold-start.mjs [--baseline DIR] [--runs N]
//   (after node js/scripts/build.mjs)
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { Miniflare } from "miniflare";
import { bundleWorker, bundleWorkerSource, pkgDir, repoRoot } from "../lib/bundle-worker.mjs";
import { median, timeIt } from "./lib/time-it.mjs";

const { values } = parseArgs({ options: { baseline: { type: "string" }, runs: { type: "string", default: "11" } } });
const runs = Number(values.runs);
const packages = [
  { name: "this build", dir: pkgDir, specifier: "paceline", module: "paceline" },
  {
    name: "this build, paceline/client",
    dir: pkgDir,
    specifier: "paceline/client",
    module: "paceline_client",
    remote: true,
  },
  {
    name: "this build, paceline/limiter",
    dir: pkgDir,
    specifier: "paceline/limiter",
    module: "paceline_limiter",
    remote: true,
  },
];
// The same full module, its state built at the module's top level (during
// startup), as a Worker can since no constructor draws random values: the
// first request only uses it. workerd only, the Node rows would repeat.
packages.push({
  name: "this build, state built at module scope",
  dir: pkgDir,
  specifier: "paceline",
  module: "paceline",
  atModuleScope: true,
  workerdOnly: true,
});
packages.push({
  name: "this build, paceline/client + paceline/gateway in one isolate",
  dir: pkgDir,
  specifier: "paceline/client",
  module: "paceline_client",
  pair: true,
  workerdOnly: true,
});
if (values.baseline)
  packages.push({ name: "baseline", dir: values.baseline, specifier: "paceline", module: "paceline" });

// Workers that host the gateway: a first request less a warm one, and
// startup (see above). `modules` names the .wasm each must ship, and
// only those (checked against its bundle).
const gatewayWorkerSource = readFileSync(join(repoRoot, "js/examples/gateway-worker.mjs"), "utf8");
const rules = [{ requestsPerWindow: 1000000, windowMs: 1000 }];
const acquireRequest = [
  "http://gateway/v1/rate/acquire",
  {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ bucketId: "b", rules, requested: 1 }),
  },
];
const oneWorkerSource = (client, gateway) => `
import { GatewayRateState } from "${client}";
import { gatewayPort } from "${gateway}";
export { PacelineGateway } from "${gateway}";
let pacer;
export default {
  async fetch(request, env) {
    const fresh = new URL(request.url).searchParams.has("fresh");
    if (fresh || !pacer) pacer = new GatewayRateState(gatewayPort(env), { blockHorizonMs: 1000 });
    (await pacer.acquire({ bucketId: "b", rules: ${JSON.stringify(rules)} })).release();
    return new Response("ok");
  },
};`;
const objectOnlySource = `
export class PacelineGateway {
  #ctx;
  constructor(ctx) {
    this.#ctx = ctx;
    ctx.blockConcurrencyWhile(() => ctx.storage.list());
  }
  async fetch() {
    await this.#ctx.storage.put("b", 1);
    return new Response("ok");
  }
}
export default {
  fetch: (request, env) => env.PACELINE_GATEWAY.get(env.PACELINE_GATEWAY.idFromName("b")).fetch(request),
};`;
const hosts = [
  {
    name: "gateway Worker, paceline/gateway",
    source: gatewayWorkerSource,
    modules: ["paceline_gateway"],
    request: acquireRequest,
  },
  {
    name: "gateway Worker, paceline",
    source: gatewayWorkerSource.replaceAll('"paceline/gateway"', '"paceline"'),
    modules: ["paceline"],
    request: acquireRequest,
  },
  {
    name: "one Worker, paceline",
    source: oneWorkerSource("paceline", "paceline"),
    modules: ["paceline"],
    request: ["http://one/"],
    fresh: ["http://one/?fresh"],
  },
  {
    name: "one Worker, paceline/client + paceline/gateway",
    source: oneWorkerSource("paceline/client", "paceline/gateway"),
    modules: ["paceline_client", "paceline_gateway"],
    request: ["http://one/"],
    fresh: ["http://one/?fresh"],
  },
  { name: "a Durable Object without paceline", source: objectOnlySource, modules: [], request: ["http://object/"] },
];

// What a probe imports and the expression that makes its rate state.
function stateOf(p) {
  if (p.remote)
    return {
      imports: `import { GatewayRateState, fetchPort } from "${p.specifier}";`,
      make: 'new GatewayRateState(fetchPort({ fetch: (url, init) => env.GATEWAY.fetch(url, init), baseUrl: "http://gateway" }), { blockHorizonMs: 1000 })',
    };
  if (p.pair)
    return {
      imports: `import { GatewayRateState } from "${p.specifier}";\nimport { GatewayCore, coreTransport } from "paceline/gateway";`,
      make: "new GatewayRateState(coreTransport(new GatewayCore()), { blockHorizonMs: 1000 })",
    };
  return {
    imports: `import { LocalRateState } from "${p.specifier}";`,
    make: "new LocalRateState({ blockHorizonMs: 1000 })",
  };
}

const probeSource = (p, { imports, make } = stateOf(p)) => `
${imports}
let pacer${p.atModuleScope ? ` = ${make}` : ""};
export default {
  async fetch(request, env) {
    pacer ??= ${make};
    if (new URL(request.url).searchParams.has("permit")) {
      const rules = [{ requestsPerWindow: 1000000, windowMs: 1000 }];
      (await pacer.acquire({ bucketId: "b", rules })).release();
    }
    return new Response("ok");
  },
};`;

const emptySource = `export default { fetch() { return new Response("ok"); } };`;

const importOnlySource = (specifier) => `
import * as paceline from "${specifier}";
export default { fetch() { return new Response(typeof paceline.GatewayRateState); } };`;

// Runs in a fresh Node process: argv[1] is the package directory, argv[2]
// the module's name (its glue and .wasm); argv[3], if given, the phase
// after which it stops ("init", "state" or "permit"; see compiledByPhase).
const nodeProbe = `
const t0 = performance.now();
const [dir, name, stopAfter] = process.argv.slice(1);
const mark = (phase) => phase === stopAfter && process.exit(0);
const { readFileSync } = await import("node:fs");
const bytes = readFileSync(dir + "/" + name + "_bg.wasm");
const gateway = name !== "paceline" ? await import(dir + "/paceline_node.js") : undefined;
const { initSync, LocalRateState, GatewayRateState } = await import(dir + "/" + name + ".js");
const t1 = performance.now();
const module = new WebAssembly.Module(bytes);
const t2 = performance.now();
initSync({ module });
const t3 = performance.now();
mark("init");
const pacer = gateway
  ? new GatewayRateState(gateway.coreTransport(new gateway.GatewayCore()), { blockHorizonMs: 1000 })
  : new LocalRateState({ blockHorizonMs: 1000 });
const t4 = performance.now();
mark("state");
(await pacer.acquire({ bucketId: "b", rules: [{ requestsPerWindow: 1000000, windowMs: 1000 }] })).release();
const t5 = performance.now();
mark("permit");
console.log(JSON.stringify({ compile: t2 - t1, instantiate: t4 - t2, firstPermit: t5 - t4 }));
`;

// The wasm code a first state and a first permit run. V8 compiles each
// function at its first call, in Node and in workerd, so what a first
// request runs for the first time, it compiles: against workerd itself
// that is most of the request's cost (workerd-figures.mjs times it with
// the module compiled at startup), though through Miniflare a state
// built in the first request after one built and dropped at startup
// still costs most of what it did. Counted from V8's
// trace in Node (workerd takes no V8 flags from Miniflare): a probe that
// stops after each phase, each phase's figure the difference. V8 writes
// its trace through a buffer of its own, so markers in the output could
// not separate the phases. The count does not vary between runs as times do.
function compiledByPhase(p) {
  const upTo = (phase) => {
    const args = ["--trace-wasm-compilation-times", "--input-type=module", "-e", nodeProbe, p.dir, p.module, phase];
    const compiled = { functions: 0, bytes: 0 };
    for (const line of execFileSync(process.execPath, args, { encoding: "utf8" }).split("\n")) {
      const body = /^Compiled function .* bodysize (\d+)/.exec(line);
      if (body) {
        compiled.functions += 1;
        compiled.bytes += Number(body[1]);
      }
    }
    return compiled;
  };
  const [init, state, permit] = ["init", "state", "permit"].map(upTo);
  const less = (a, b) => ({ functions: a.functions - b.functions, bytes: a.bytes - b.bytes });
  return { state: less(state, init), permit: less(permit, state) };
}

function sizeOf(dir, module) {
  const wasmPath = join(dir, `${module}_bg.wasm`);
  return { raw: statSync(wasmPath).size, gzip: gzipSync(readFileSync(wasmPath), { level: 9 }).length };
}

// The .wasm files a Worker ships, each and in all.
function shippedSize(dir, modules) {
  if (!modules.length) return "";
  const sizes = modules.map((m) => sizeOf(dir, m));
  const sum = (k) =>
    sizes.length > 1 ? `${sizes.map((s) => s[k]).join(" + ")} = ${sizes.reduce((a, s) => a + s[k], 0)}` : sizes[0][k];
  return `${sum("raw")} B raw, ${sum("gzip")} B gzip -9`;
}

const empty = {
  options: await bundleWorkerSource("empty.mjs", emptySource),
  workerd: [],
  workerdPermit: [],
  startup: [],
};
const gateway = {
  name: "gateway",
  ...(await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"))),
  durableObjects: { PACELINE_GATEWAY: "PacelineGateway" },
};
for (const [i, p] of packages.entries()) {
  p.options = await bundleWorkerSource(`probe-${i}.mjs`, probeSource(p), p.dir);
  if (p.remote)
    p.options = { workers: [{ name: "probe", ...p.options, serviceBindings: { GATEWAY: "gateway" } }, gateway] };
  const importOnly = await bundleWorkerSource(`import-only-${i}.mjs`, importOnlySource(p.specifier), p.dir);
  p.importOnly = { options: importOnly, workerd: [], workerdPermit: [], startup: [] };
  p.workerd = [];
  p.workerdPermit = [];
  p.startup = [];
  p.node = { compile: [], instantiate: [], firstPermit: [], total: [] };
  p.size = shippedSize(p.dir, p.pair ? [p.module, "paceline_gateway"] : [p.module]);
}
for (const [i, h] of hosts.entries()) {
  const bundle = await bundleWorkerSource(`host-${i}.mjs`, h.source);
  const shipped = [...readFileSync(bundle.scriptPath, "utf8").matchAll(/from "\.\/(\w+)_bg\.wasm"/g)].map((m) => m[1]);
  assert.deepEqual(shipped.sort(), [...h.modules].sort(), `${h.name} ships ${shipped}`);
  h.options = { ...bundle, durableObjects: { PACELINE_GATEWAY: "PacelineGateway" } };
  h.workerd = [];
  h.lessFresh = [];
  h.startup = [];
  h.size = shippedSize(pkgDir, h.modules);
}

async function inWorkerd(p) {
  const start = performance.now();
  const mf = new Miniflare(p.options);
  await mf.ready;
  p.startup.push(performance.now() - start);
  // A request that failed would time an error page: none may.
  const get = (url, init) =>
    timeIt(async () => {
      const response = await mf.dispatchFetch(url, init);
      const body = await response.text();
      if (!response.ok) throw new Error(`${p.name ?? "a Worker"}: ${url} answered ${response.status}: ${body}`);
    });
  if (p.request) {
    // The hosts: one kind of request, the first less a warm one.
    const first = await get(...p.request);
    const warm = [];
    for (let j = 0; j < 3; j++) warm.push(await get(...p.request));
    const fresh = [];
    for (let j = 0; p.fresh && j < 3; j++) fresh.push(await get(...p.fresh));
    await mf.dispose();
    p.workerd.push(first - median(warm));
    if (p.fresh) p.lessFresh.push(first - median(fresh));
    return;
  }
  const first = await get("http://probe/");
  const firstPermit = await get("http://probe/?permit");
  const warm = [];
  for (let j = 0; j < 3; j++) warm.push(await get("http://probe/"));
  const warmPermit = [];
  for (let j = 0; j < 3; j++) warmPermit.push(await get("http://probe/?permit"));
  await mf.dispose();
  p.workerd.push(first - median(warm));
  p.workerdPermit.push(firstPermit - median(warmPermit));
}

for (let i = 0; i < runs; i++) {
  await inWorkerd(empty);
  for (const p of packages) {
    await inWorkerd(p);
    if (p.workerdOnly) continue;
    await inWorkerd(p.importOnly);

    const out = JSON.parse(
      execFileSync(process.execPath, ["--input-type=module", "-e", nodeProbe, p.dir, p.module], { encoding: "utf8" }),
    );
    for (const k of ["compile", "instantiate", "firstPermit"]) p.node[k].push(out[k]);
    p.node.total.push(out.compile + out.instantiate);
  }
  for (const h of hosts) await inWorkerd(h);
}

for (const p of packages) if (!p.workerdOnly) p.compiled = compiledByPhase(p);

const f = (x) => `${x.toFixed(2)} ms`;
console.log(
  "(*) a LocalRateState; for paceline/client and paceline/limiter, which have none, a GatewayRateState over a gateway Worker; for paceline/client + paceline/gateway, one over a GatewayCore in the same isolate (see above)",
);
console.log(`| cold start (median of ${runs}) | ${packages.map((p) => p.name).join(" | ")} |`);
console.log(`|---|${packages.map(() => "---").join("|")}|`);
console.log(`| module | ${packages.map((p) => p.size).join(" | ")} |`);
const row = (label, pick) =>
  console.log(`| ${label} | ${packages.map((p) => (pick(p).length ? f(median(pick(p))) : "")).join(" | ")} |`);
row("workerd: cold start, first request (a new rate state*) less a warm one", (p) => p.workerd);
row("workerd: first acquire + release less a warm one (*: through the gateway Worker)", (p) => p.workerdPermit);
row("workerd: the same, a Worker that imports paceline and calls nothing", (p) => p.importOnly.workerd);
console.log(`| workerd: the same first request to a Worker without paceline | ${f(median(empty.workerd))} |`);
row(
  "workerd: startup, new Miniflare to ready (compiles and instantiates the module; *: and the gateway Worker)",
  (p) => p.startup,
);
console.log(`| workerd: startup of a Worker without paceline | ${f(median(empty.startup))} |`);
row("Node: compile the .wasm", (p) => p.node.compile);
row("Node: instantiate (initSync) + a new rate state*", (p) => p.node.instantiate);
row("Node: cold start, compile + instantiate", (p) => p.node.total);
row("Node: first acquire + release (*: through the full module's GatewayCore)", (p) => p.node.firstPermit);
const compiledRow = (label, phase) =>
  console.log(
    `| ${label} | ${packages
      .map((p) => (p.compiled ? `${p.compiled[phase].functions} functions, ${p.compiled[phase].bytes} B` : ""))
      .join(" | ")} |`,
  );
compiledRow(
  "Node: wasm compiled at first call by a new rate state* (functions, code bytes; *: both modules')",
  "state",
);
compiledRow("Node: the same by the first acquire + release (*: both modules')", "permit");

console.log();
console.log(`| the gateway's hosts, cold start (median of ${runs}) | ${hosts.map((h) => h.name).join(" | ")} |`);
console.log(`|---|${hosts.map(() => "---").join("|")}|`);
console.log(`| modules | ${hosts.map((h) => h.size).join(" | ")} |`);
const hostRow = (label, pick) =>
  console.log(`| ${label} | ${hosts.map((h) => (pick(h).length ? f(median(pick(h))) : "")).join(" | ")} |`);
hostRow(
  "workerd: first request less a warm one (gateway Worker: an acquire, which makes the Durable Object and its GatewayCore; one Worker: a new GatewayRateState over gatewayPort(env), a first acquire + release through its own Durable Object)",
  (h) => h.workerd,
);
hostRow(
  "workerd: one Worker: the same first request less a warm one that makes a new GatewayRateState too (its first permit waits the same 20 ms lead)",
  (h) => h.lessFresh,
);
hostRow("workerd: startup, new Miniflare to ready (compiles and instantiates the modules)", (h) => h.startup);
