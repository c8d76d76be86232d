// The main job: a fleet of request handlers in a local workerd (through
// miniflare: no account, no network) enriches 600 rows by calling a
// provider whose true limit (15 req/s) is lower than the rule the clients
// are given (25 req/s). Every call is paced through one gateway Durable
// Object; the provider's 429s teach the gateway the real limit. Live
// progress, then a summary table and an SVG chart. Exits 1 if any second
// ever held more calls than the rule allows.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundleWorker, repoRoot } from "../lib/bundle-worker.mjs";
import { lineChart } from "../lib/line-chart.mjs";
import { densestWindow, windowsOver } from "../lib/metrics.mjs";

const RULE_RPS = 25;
const TRUE_LIMIT_RPS = 15;
const RUNS = 4;
const ROWS = 600;
const BUCKET = "org_demo:provider";
const outDir = join(repoRoot, "js/.out");

const [appOptions, gatewayOptions, stubOptions] = await Promise.all(
  ["enrich-worker.mjs", "gateway-worker.mjs", "provider-stub.mjs"].map((f) =>
    bundleWorker(join(repoRoot, "js/examples", f)),
  ),
);
const provider = new Miniflare({ ...stubOptions, port: 0, bindings: { TRUE_LIMIT_RPS: String(TRUE_LIMIT_RPS) } });
const providerUrl = (await provider.ready).toString().replace(/\/$/, "");
const app = new Miniflare({
  workers: [
    {
      ...appOptions,
      name: "app",
      serviceBindings: { GATEWAY: "gateway" },
      bindings: { PROVIDER_URL: providerUrl, RULE_RPS: String(RULE_RPS) },
    },
    { ...gatewayOptions, name: "gateway", durableObjects: { PACELINE_GATEWAY: "PacelineGateway" } },
  ],
});
await app.ready;
const gateway = await app.getWorker("gateway");

console.log(
  `paceline demo: ${RUNS} concurrent runs enrich ${ROWS} rows through one gateway in local workerd.\n` +
    `The clients are told ${RULE_RPS} req/s; the provider really allows ${TRUE_LIMIT_RPS} req/s and answers 429 above it.\n`,
);

const started = Date.now();
const samples = [];
let calls = [];
let done = false;
const runs = Promise.all(
  Array.from({ length: RUNS }, (_, i) =>
    app.dispatchFetch(`http://app/?rows=${ROWS / RUNS}&run=${i}`).then((r) => r.json()),
  ),
).finally(() => {
  done = true;
});

async function sample() {
  calls = await (await provider.dispatchFetch("http://provider/calls")).json();
  const view = await gateway.fetch(`http://gateway/v1/rate/buckets/${encodeURIComponent(BUCKET)}`);
  const effective = view.ok ? ((await view.json()).effectiveRequestsPerSecond ?? RULE_RPS) : RULE_RPS;
  const now = Date.now();
  const lastSecond = calls.filter((c) => c.at > now - 1000);
  const sampleRow = {
    t: (now - started) / 1000,
    dispatchRate: lastSecond.length,
    acceptedRate: lastSecond.filter((c) => c.status === 200).length,
    effective,
  };
  samples.push(sampleRow);
  const rows = calls.filter((c) => c.status === 200).length;
  const throttled = calls.length - rows;
  const line =
    `t=${sampleRow.t.toFixed(1).padStart(5)}s  rows ${String(rows).padStart(3)}/${ROWS}  ` +
    `dispatch ${String(sampleRow.dispatchRate).padStart(2)}/s  429s ${String(throttled).padStart(3)}  ` +
    `effective rate ${effective.toFixed(1)} req/s`;
  if (process.stdout.isTTY) process.stdout.write(`\r${line}`);
  else if (samples.length % 4 === 1) console.log(line);
}

while (!done) {
  await sample();
  await new Promise((r) => setTimeout(r, 500));
}
await sample();
if (process.stdout.isTTY) process.stdout.write("\n");
const results = await runs;

const times = calls.map((c) => c.at).sort((a, b) => a - b);
const seconds = (times.at(-1) - times[0]) / 1000;
const accepted = calls.filter((c) => c.status === 200).length;
const enriched = results.reduce((n, r) => n + (r.enriched ?? 0), 0);
const failed = results.filter((r) => r.error);
const overRule = windowsOver(times, RULE_RPS, 1000);
const summary = [
  ["runs", String(RUNS)],
  ["rows enriched", `${enriched} of ${ROWS}`],
  ["rows given up after 3 attempts", String(ROWS - enriched)],
  ["provider calls", String(calls.length)],
  ["429s", `${calls.length - accepted} (${(((calls.length - accepted) / calls.length) * 100).toFixed(1)}%)`],
  ["wall time", `${seconds.toFixed(1)} s`],
  ["accepted rate", `${(accepted / seconds).toFixed(1)} req/s (true limit ${TRUE_LIMIT_RPS})`],
  ["busiest 1 s window", `${densestWindow(times, 1000)} calls (rule ${RULE_RPS})`],
  ["1 s windows over the rule", String(overRule)],
  ["final effective rate", `${samples.at(-1).effective.toFixed(1)} req/s`],
];
console.log("\n| figure | value |\n|---|---|");
for (const [k, v] of summary) console.log(`| ${k} | ${v} |`);

// Second by second from the first call: a dip shows here as a low count.
const perSecond = [];
for (const c of calls) {
  const s = Math.floor((c.at - times[0]) / 1000);
  perSecond[s] ??= { accepted: 0, refused: 0 };
  if (c.status === 200) perSecond[s].accepted++;
  else perSecond[s].refused++;
}
const row = (f) => Array.from(perSecond, (s) => String(s ? f(s) : 0).padStart(2)).join(" ");
console.log(`\nper second   ${Array.from(perSecond, (_, i) => String(i).padStart(2)).join(" ")}`);
console.log(`accepted     ${row((s) => s.accepted)}`);
console.log(`429s         ${row((s) => s.refused)}`);

mkdirSync(outDir, { recursive: true });
const chartPath = join(outDir, "demo.svg");
const end = samples.at(-1).t;
writeFileSync(
  chartPath,
  lineChart({
    title: `paceline: ${RUNS} runs, one gateway, a provider that allows ${TRUE_LIMIT_RPS} of the ${RULE_RPS} req/s it claims`,
    xLabel: "seconds",
    yLabel: "requests per second",
    series: [
      { name: "dispatched /s", points: samples.map((s) => [s.t, s.dispatchRate]) },
      { name: "accepted /s", points: samples.map((s) => [s.t, s.acceptedRate]) },
      { name: "gateway effective rate", points: samples.map((s) => [s.t, s.effective]) },
      {
        name: `true limit ${TRUE_LIMIT_RPS}/s`,
        points: [
          [0, TRUE_LIMIT_RPS],
          [end, TRUE_LIMIT_RPS],
        ],
        dashed: true,
        color: "#000",
      },
    ],
  }),
);
console.log(`\nchart: ${chartPath}`);
// PACELINE_DEMO_LOG=file keeps the provider's call log and the samples, to
// read a run's figures second by second afterwards.
if (process.env.PACELINE_DEMO_LOG) {
  writeFileSync(process.env.PACELINE_DEMO_LOG, JSON.stringify({ started, calls, samples }));
  console.log(`call log: ${process.env.PACELINE_DEMO_LOG}`);
}

await app.dispose();
await provider.dispose();
if (failed.length > 0) {
  console.error(`${failed.length} runs failed: ${failed.map((r) => `${r.error.code}: ${r.error.message}`).join("; ")}`);
  process.exit(1);
}
if (overRule > 0) {
  console.error(`${overRule} one-second windows held more than ${RULE_RPS} calls`);
  process.exit(1);
}
