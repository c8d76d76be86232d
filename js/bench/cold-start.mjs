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
// fetchPort to a gateway Worker (the full module, in a Durable Object)
// bound beside it, and their first permit includes that gateway's own first
// request; in Node, over a GatewayCore of the full module loaded untimed.
// Another column builds the full module's LocalRateState at the module's
// top level instead, so startup pays for it and the first request only
// uses it.
// Runs alternate between the packages so load on the machine falls on all
// alike.
// Usage: node js/bench/cold-start.mjs [--baseline DIR] [--runs N]
//   (after node js/scripts/build.mjs)
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { Miniflare } from "miniflare";
import { bundleWorker, pkgDir, repoRoot } from "../lib/bundle-worker.mjs";
import { timeIt } from "./lib/time-it.mjs";

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
});
if (values.baseline)
  packages.push({ name: "baseline", dir: values.baseline, specifier: "paceline", module: "paceline" });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const newState = (p) =>
  p.remote
    ? 'new GatewayRateState(fetchPort({ fetch: (url, init) => env.GATEWAY.fetch(url, init), baseUrl: "http://gateway" }), { blockHorizonMs: 1000 })'
    : "new LocalRateState({ blockHorizonMs: 1000 })";

const probeSource = (p) => `
import { ${p.remote ? "GatewayRateState, fetchPort" : "LocalRateState"} } from "${p.specifier}";
let pacer${p.atModuleScope ? ` = ${newState(p)}` : ""};
export default {
  async fetch(request, env) {
    pacer ??= ${newState(p)};
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
// function at its first call, in Node and in workerd, which also drops
// what startup compiled before the first request: what a first request
// runs, it compiles, and that is most of its cost. Counted from V8's
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

const work = mkdtempSync(join(tmpdir(), "paceline-cold-"));
const emptyPath = join(work, "empty.mjs");
writeFileSync(emptyPath, emptySource);
const empty = { options: await bundleWorker(emptyPath), workerd: [], workerdPermit: [], startup: [] };
const gateway = {
  name: "gateway",
  ...(await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"))),
  durableObjects: { PACELINE_GATEWAY: "PacelineGateway" },
};
for (const [i, p] of packages.entries()) {
  const probePath = join(work, `probe-${i}.mjs`);
  writeFileSync(probePath, probeSource(p));
  p.options = await bundleWorker(probePath, p.dir);
  if (p.remote)
    p.options = { workers: [{ name: "probe", ...p.options, serviceBindings: { GATEWAY: "gateway" } }, gateway] };
  const importOnlyPath = join(work, `import-only-${i}.mjs`);
  writeFileSync(importOnlyPath, importOnlySource(p.specifier));
  p.importOnly = { options: await bundleWorker(importOnlyPath, p.dir), workerd: [], workerdPermit: [], startup: [] };
  p.workerd = [];
  p.workerdPermit = [];
  p.startup = [];
  p.node = { compile: [], instantiate: [], firstPermit: [], total: [] };
  const wasmPath = join(p.dir, `${p.module}_bg.wasm`);
  p.size = `${statSync(wasmPath).size} B raw, ${gzipSync(readFileSync(wasmPath), { level: 9 }).length} B gzip -9`;
}

async function inWorkerd(p) {
  const start = performance.now();
  const mf = new Miniflare(p.options);
  await mf.ready;
  p.startup.push(performance.now() - start);
  const get = (url) => timeIt(async () => (await mf.dispatchFetch(url)).text());
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
    if (p.atModuleScope) continue;
    await inWorkerd(p.importOnly);

    const out = JSON.parse(
      execFileSync(process.execPath, ["--input-type=module", "-e", nodeProbe, p.dir, p.module], { encoding: "utf8" }),
    );
    for (const k of ["compile", "instantiate", "firstPermit"]) p.node[k].push(out[k]);
    p.node.total.push(out.compile + out.instantiate);
  }
}

for (const p of packages) if (!p.atModuleScope) p.compiled = compiledByPhase(p);

const f = (x) => `${x.toFixed(2)} ms`;
console.log(
  "(*) a LocalRateState; for paceline/client and paceline/limiter, which have none, a GatewayRateState over a gateway (see above)",
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
