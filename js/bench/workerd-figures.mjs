// Figures measured in workerd, from outside: workerd's clocks only move
// across I/O, so a Worker cannot time its own compute.
//  - cold start: the first request to a fresh Worker (which instantiates the
//    .wasm) minus a warm request's time, beside the same for a Worker
//    without paceline (the floor under it), through Miniflare and against
//    `workerd serve` itself (see lib/workerd-direct.mjs: Miniflare's own
//    entry Worker is cold on a first request too);
//  - a cached-permit acquire from JS: one request lands a block of permits,
//    the next draws N of them, all due by then, and its time (less an
//    empty request's) is divided by N;
//  - Durable Object gateway acquires per second for one bucket, once warm.
// Usage: node js/bench/workerd-figures.mjs (after node js/scripts/build.mjs)
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundleWorker, bundleWorkerSource, repoRoot } from "../lib/bundle-worker.mjs";
import { median, timeIt } from "./lib/time-it.mjs";
import { firstRequestLessWarm, workerdFolder } from "./lib/workerd-direct.mjs";

const DRAWS = 900;
const COLD_RUNS = 11;
const WARM_UP_MS = 5_000;

const probeSource = `
import { LocalRateState } from "paceline";
let pacer;
export default {
  async fetch(request) {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") ?? "0");
    const bucketId = url.searchParams.get("b") ?? "b";
    // A million a second: a block's permits share a millisecond, so once it
    // lands every draw is due at once and none waits.
    pacer ??= new LocalRateState({ blockHorizonMs: 1000 });
    const rules = [{ requestsPerWindow: 1000000, windowMs: 1000 }];
    for (let i = 0; i < n; i++) (await pacer.acquire({ bucketId, rules })).release();
    return new Response("ok");
  },
};`;

// workerd's own first request, the floor under the probe's: the same
// Worker without paceline (it reads the same query).
const plainSource = `
export default {
  async fetch(request) {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") ?? "0");
    const bucketId = url.searchParams.get("b") ?? "b";
    return new Response(n > 0 ? bucketId : "ok");
  },
};`;

const probeOptions = await bundleWorkerSource("probe.mjs", probeSource);
const plainOptions = await bundleWorkerSource("plain.mjs", plainSource);

/** A fresh Worker's first request less a warm one's, medians over runs. */
async function coldStart(options) {
  const cold = [];
  const warm = [];
  for (let i = 0; i < COLD_RUNS; i++) {
    const mf = new Miniflare(options);
    await mf.ready;
    cold.push(await timeIt(async () => (await mf.dispatchFetch("http://probe/?n=0")).text()));
    for (let j = 0; j < 5; j++)
      warm.push(await timeIt(async () => (await mf.dispatchFetch("http://probe/?n=0")).text()));
    await mf.dispose();
  }
  return median(cold) - median(warm);
}
/**
 * The same against `workerd serve`, with no Miniflare in the path: the
 * first request as soon as workerd listens (as a Worker started for a
 * request serves it), or `idleMs` later; `v8Flags` for workerd's V8.
 */
async function directColdStart(options, { idleMs = 0, v8Flags = [] } = {}) {
  const dir = workerdFolder(options);
  const firsts = [];
  for (let i = 0; i < COLD_RUNS; i++) {
    firsts.push(await firstRequestLessWarm(dir, { compatibilityDate: options.compatibilityDate, idleMs, v8Flags }));
  }
  return median(firsts);
}
// V8 compiles a wasm function at its first call; with this flag it
// compiles them all with the module, at startup, so what is left of the
// first request's cost is not compiling.
const EAGER = ["--no-wasm-lazy-compilation"];
const IDLE_MS = 300;
// The ways a first request is timed against workerd serve, each for the
// probe and for the Worker without paceline.
const directCases = [
  {
    label: "cold start as above, against workerd serve (no Miniflare), the first request as soon as it listens",
    plainLabel: "the same for a Worker without paceline: workerd's own",
    how: {},
  },
  {
    label: `cold start against workerd serve, the first request ${IDLE_MS} ms after it listens`,
    how: { idleMs: IDLE_MS },
  },
  {
    label: `cold start against workerd serve at once, V8 compiling the wasm at startup (${EAGER.join(" ")})`,
    how: { v8Flags: EAGER },
  },
].map((c) => ({ ...c, probe: [], plain: [] }));

// Alternated, so that load on the machine falls on both alike.
const probeCold = [];
const plainCold = [];
for (let round = 0; round < 3; round++) {
  probeCold.push(await coldStart(probeOptions));
  plainCold.push(await coldStart(plainOptions));
  for (const c of directCases) {
    c.probe.push(await directColdStart(probeOptions, c.how));
    c.plain.push(await directColdStart(plainOptions, c.how));
  }
}

const mf = new Miniflare(probeOptions);
const perDraw = [];
for (let i = 0; i < 15; i++) {
  // A fresh bucket each round: the first draw lands a block of 1,000.
  await (await mf.dispatchFetch(`http://probe/?n=1&b=${i}`)).text();
  await new Promise((r) => setTimeout(r, 10));
  const empty = await timeIt(async () => (await mf.dispatchFetch("http://probe/?n=0")).text());
  const full = await timeIt(async () => (await mf.dispatchFetch(`http://probe/?n=${DRAWS}&b=${i}`)).text());
  perDraw.push(((full - empty) * 1000) / DRAWS);
}
await mf.dispose();

const gatewayOptions = await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"));
const gw = new Miniflare({ ...gatewayOptions, durableObjects: { PACELINE_GATEWAY: "PacelineGateway" } });
await gw.ready;
const body = JSON.stringify({
  bucketId: "org:p",
  rules: [{ requestsPerWindow: 1000000, windowMs: 1000 }],
  requested: 1,
});
const acquire = () =>
  gw.dispatchFetch("http://gateway/v1/rate/acquire", { method: "POST", body }).then((r) => r.text());
// Eight callers, acquiring back to back for `ms`; how many were served.
const load = async (ms) => {
  let served = 0;
  const until = performance.now() + ms;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (performance.now() < until) {
        await acquire();
        served++;
      }
    }),
  );
  return served;
};
// The object's first seconds run unoptimised code (its rate climbs from
// about 300 to 500-600 a second over them): the figure is the warm rate.
await load(WARM_UP_MS);
const served = await load(5_000);
await gw.dispose();

const rounds = (xs) => `${xs.map((ms) => ms.toFixed(1)).join(", ")} ms`;
console.log("| figure (workerd, measured from outside; through Miniflare unless said) | value |");
console.log("|---|---|");
console.log(
  `| cold start: a fresh Worker's first request (it builds a LocalRateState), less a warm one (medians of ${COLD_RUNS}, three rounds) | ${rounds(probeCold)} |`,
);
console.log(`| the same for a Worker without paceline, alternated with it | ${rounds(plainCold)} |`);
for (const c of directCases) {
  console.log(`| ${c.label} | ${rounds(c.probe)} |`);
  console.log(`| ${c.plainLabel ?? "the same for a Worker without paceline"} | ${rounds(c.plain)} |`);
}
console.log(`| cached-permit acquire + release from JS (median of 15 x ${DRAWS}) | ${median(perDraw).toFixed(2)} µs |`);
console.log(
  `| Durable Object gateway acquires for one bucket, 8 concurrent callers, after ${WARM_UP_MS / 1000} s of the same | ${(served / 5).toFixed(0)} req/s |`,
);
