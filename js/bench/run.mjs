// Measures rate limiters side by side against one provider model. For each
// scenario and contender it empties Redis, resets the provider stub, forks N
// worker processes with C callers each, lets them call the provider through
// the contender for a fixed time, and reads the figures off the provider's
// records and the workers' samples. Results: a Markdown table on stdout and
// in latest.md, and one SVG chart per scenario, written to results/ (which
// the README shows) by a run of every contender and scenario with the
// default settings, and to js/.out/bench/ by any other run, so a partial
// run does not replace the published figures. --out names another place.
//
//   node js/bench/run.mjs [--duration-s 20] [--processes 4] [--callers 4]
//     [--rps 20] [--max-concurrency 10] [--only naive,bottleneck] [--scenarios a,b]
//     [--answer-delay-ms 0]
// --answer-delay-ms makes every answer of the provider stub take that much
// longer to come back, as a provider far away does. --max-concurrency 0
// bounds no calls in flight, at the stub and in paceline's rule (the peers
// all need a bound, so only paceline's contenders run with it).
import { fork } from "node:child_process";
import { once } from "node:events";
import { mkdir, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startProvider, nowMs } from "./provider.mjs";
import { startRedis } from "./lib/redis-server.mjs";
import { lineChart } from "../lib/line-chart.mjs";
import { convergenceMs, dispatchSeries, percentile } from "../lib/metrics.mjs";

const CONTENDERS = ["naive", "bottleneck", "upstash-sliding", "upstash-token", "paceline", "paceline-workerd"];
const BUCKET_MS = 250;
const LATENCY_MS = [20, 60];
const LOW_SHARE = 0.4;

// The settings of the published run (results/).
const DEFAULTS = {
  "duration-s": "20",
  processes: "4",
  callers: "4",
  rps: "20",
  "max-concurrency": "10",
  "answer-delay-ms": "0",
};
const { values: opts } = parseArgs({
  options: {
    ...Object.fromEntries(Object.entries(DEFAULTS).map(([key, value]) => [key, { type: "string", default: value }])),
    only: { type: "string" },
    scenarios: { type: "string" },
    out: { type: "string" },
  },
});
const publishedRun =
  !opts.only &&
  !opts.scenarios &&
  Object.entries(DEFAULTS).every(([key, value]) => Number(opts[key]) === Number(value));
opts.out ??= fileURLToPath(new URL(publishedRun ? "results/" : "../.out/bench/", import.meta.url));
const durationMs = Number(opts["duration-s"]) * 1000;
const processes = Number(opts.processes);
const callers = Number(opts.callers);
const configured = { rps: Number(opts.rps), maxConcurrency: Number(opts["max-concurrency"]) };
const lowLimit = { ...configured, rps: Math.max(1, Math.round(configured.rps * LOW_SHARE)) };
const wanted = opts.only ? opts.only.split(",") : CONTENDERS;
if (configured.maxConcurrency === 0 && wanted.some((name) => !name.startsWith("paceline"))) {
  console.error("bench: --max-concurrency 0 runs only paceline's contenders (--only paceline,paceline-workerd)");
  process.exit(2);
}

const SCENARIOS = [
  {
    id: "a",
    title: `true limit = configured limit (${configured.rps} req/s, ${configured.maxConcurrency} concurrent)`,
    limits: () => [{ ...configured, atMs: -Infinity }],
  },
  {
    id: "b",
    title: `true limit ${lowLimit.rps} req/s (${LOW_SHARE * 100}% of the configured ${configured.rps}) for the first half, then ${configured.rps}`,
    halves: true,
    limits: (startAt) => [
      { ...lowLimit, atMs: -Infinity },
      { ...configured, atMs: startAt + durationMs / 2 },
    ],
  },
  {
    id: "c",
    title: `as b, and every answer states the limit in force (\`X-RateLimit-Limit: ${lowLimit.rps}\`, then ${configured.rps}); no peer reads it`,
    halves: true,
    statesLimit: true,
    limits: (startAt) => [
      { ...lowLimit, atMs: -Infinity },
      { ...configured, atMs: startAt + durationMs / 2 },
    ],
  },
];

const log = (line) => process.stderr.write(`bench: ${line}\n`);

// Every process and server this run starts, so that any way out (an error,
// a signal, the watchdog) stops them all.
const liveChildren = new Set();
const stops = [];
let cleaning = null;
let interrupted = null;
function cleanup() {
  cleaning ??= (async () => {
    for (const child of liveChildren) child.kill("SIGKILL");
    for (const stop of stops.reverse()) await stop().catch((error) => log(`cleanup: ${error.message}`));
  })();
  return cleaning;
}
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.once(signal, () => {
    interrupted = signal;
    log(`${signal}: stopping`);
    cleanup().then(() => process.exit(130));
  });
}

function expectMessage(child, type, timeoutMs) {
  return new Promise((resolve, reject) => {
    const settle = (fn, value) => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
      fn(value);
    };
    const timer = setTimeout(
      () => settle(reject, new Error(`no "${type}" from a worker within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onMessage = (message) => {
      if (message.type === type) settle(resolve, message);
      else if (message.type === "failed") settle(reject, new Error(`worker failed: ${message.error}`));
    };
    const onExit = (code, signal) => settle(reject, new Error(`worker exited (${signal ?? code}) before "${type}"`));
    child.on("message", onMessage);
    child.on("exit", onExit);
  });
}

async function reap(child, timeoutMs) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  await once(child, "exit");
  clearTimeout(timer);
}

async function runContender({ name, mod }, scenario, { redis, provider }) {
  await redis.flush();
  provider.reset(scenario.limits(0)[0], { statesLimit: scenario.statesLimit });
  const service = mod.startService ? await mod.startService({ limit: configured }) : undefined;
  if (service) stops.push(service.stop);
  const children = [];
  try {
    const runId = `${scenario.id}-${name}-${process.pid}-${Date.now()}`;
    const config = {
      ...configured,
      processes,
      runId,
      redis: { host: redis.host, port: redis.port },
      service: service?.config,
    };
    const module = fileURLToPath(new URL(`contenders/${name}.mjs`, import.meta.url));
    for (let i = 0; i < processes; i += 1) {
      const child = fork(fileURLToPath(new URL("worker.mjs", import.meta.url)), {
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      });
      liveChildren.add(child);
      child.once("exit", () => liveChildren.delete(child));
      children.push(child);
    }
    const ready = children.map((child) => expectMessage(child, "ready", 20_000));
    for (const [i, child] of children.entries()) {
      child.send({ module, config: { ...config, processIndex: i }, callers, providerUrl: provider.url });
    }
    await Promise.all(ready);

    const startAt = nowMs() + 300;
    const endAt = startAt + durationMs;
    for (const limit of scenario.limits(startAt).slice(1)) provider.setLimit(limit, limit.atMs);
    const results = children.map((child) => expectMessage(child, "result", durationMs + 30_000));
    for (const child of children) child.send({ startAt, endAt });
    const reports = await Promise.all(results);
    await Promise.all(children.map((child) => reap(child, 5000)));
    await provider.drain();
    return figures({ startAt, endAt, reports, provider, scenario });
  } finally {
    for (const child of children) child.kill("SIGKILL");
    if (service) {
      stops.splice(stops.indexOf(service.stop), 1);
      await service.stop();
    }
  }
}

function figures({ startAt, endAt, reports, provider, scenario }) {
  const stats = provider.stats(startAt, endAt);
  const records = provider.records(startAt, endAt);
  const waits = reports.flatMap((r) => r.waits);
  const dispatched = reports.reduce((n, r) => n + r.dispatched, 0);
  const roundTrips = reports.reduce((n, r) => n + r.roundTrips, 0);
  const seconds = (endAt - startAt) / 1000;
  const result = {
    stats,
    sentPerS: stats.arrivals / seconds,
    rejected: stats.rejectedRate + stats.rejectedConcurrency,
    utilization: stats.accepted / stats.capacity,
    roundTripsPerCall: dispatched ? roundTrips / dispatched : Number.NaN,
    p50: percentile(waits, 50),
    p99: percentile(waits, 99),
    series: dispatchSeries(records, startAt, endAt, BUCKET_MS),
    errors: [...new Set(reports.flatMap((r) => r.errors))],
  };
  // The arrivals of the worst window over the limit, as gaps between them:
  // whether a burst or one late dispatch closing up on its successor made it.
  if (stats.windowsOver > 0) {
    const end = stats.worstWindow.t;
    const inWindow = records.filter((r) => r.t > end - 1000 && r.t <= end);
    result.worstGapsMs = inWindow.slice(1).map((r, i) => Math.round(r.t - inWindow[i].t));
  }
  if (scenario.halves) {
    // When the 429s came: a probe's just before the rise holds the rate
    // at the low limit well past it.
    result.refusedAtMs = records.filter((r) => r.status !== 200).map((r) => Math.round(r.t - startAt));
    const mid = startAt + durationMs / 2;
    const low = provider.stats(startAt, mid);
    const high = provider.stats(mid, endAt);
    result.convergedAfterMs = convergenceMs(records, startAt, mid);
    result.utilizationLow = low.accepted / low.capacity;
    result.utilizationHigh = high.accepted / high.capacity;
  }
  return result;
}

const pct = (x) => `${(x * 100).toFixed(0)}%`;
const ms = (x) => (Number.isNaN(x) ? "–" : x < 10 ? `${x.toFixed(1)}` : `${Math.round(x)}`);

function table(scenario, rows) {
  const head = [
    "contender",
    "sent/s",
    "429s (rate / conc.)",
    "1-s windows over limit",
    "worst 1-s window",
    "peak in flight",
    "utilization",
    "round trips per call",
    "added latency p50 / p99 (ms)",
  ];
  if (scenario.halves) head.push("429s settle < 2% after", "util. low / raised half");
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`];
  for (const { label, result, error } of rows) {
    if (error) {
      lines.push(`| ${label} | failed: ${error.split("\n")[0].replace(/\|/g, "\\|")} |`);
      continue;
    }
    const s = result.stats;
    const w = s.worstWindow;
    const cells = [
      label,
      result.sentPerS.toFixed(1),
      `${result.rejected} (${s.rejectedRate} / ${s.rejectedConcurrency}), ${pct(s.arrivals ? result.rejected / s.arrivals : 0)}`,
      `${s.windowsOver} of ${s.windows} (${pct(s.windows ? s.windowsOver / s.windows : 0)})`,
      s.arrivals ? `${w.count} vs ${w.rps} (${w.overshoot >= 0 ? "+" : ""}${pct(w.overshoot / w.rps)})` : "–",
      `${s.peakInFlight} vs ${configured.maxConcurrency}`,
      pct(result.utilization),
      result.roundTripsPerCall.toFixed(2),
      `${ms(result.p50)} / ${ms(result.p99)}`,
    ];
    if (scenario.halves) {
      cells.push(
        result.convergedAfterMs === null
          ? `not within ${durationMs / 2000} s`
          : `${(result.convergedAfterMs / 1000).toFixed(2)} s`,
        `${pct(result.utilizationLow)} / ${pct(result.utilizationHigh)}`,
      );
    }
    lines.push(`| ${cells.join(" | ")} |`);
  }
  return lines.join("\n");
}

function chart(scenario, rows, startAtLimits) {
  const seconds = durationMs / 1000;
  // The true limit as a step line, scaled to the same bucket.
  const limit = startAtLimits.flatMap((l, i, all) => {
    const perBucket = (l.rps * BUCKET_MS) / 1000;
    const toS = i + 1 < all.length ? all[i + 1].atMs / 1000 : seconds;
    return [
      [Math.max(0, l.atMs / 1000), perBucket],
      [toS, perBucket],
    ];
  });
  const perBucket = (counts) => counts.map((c, j) => [((j + 0.5) * BUCKET_MS) / 1000, c]);
  return lineChart({
    title: `Scenario ${scenario.id}: provider arrivals per ${BUCKET_MS} ms — ${scenario.title}`,
    xLabel: "seconds since start",
    yLabel: `dispatches per ${BUCKET_MS} ms`,
    series: [
      { name: "true limit (provider)", points: limit, dashed: true, color: "#000" },
      ...rows.filter((r) => r.result).map((r) => ({ name: r.name, points: perBucket(r.result.series) })),
    ],
  });
}

const MEASURED = `How the figures are measured:

- **sent/s**: calls that reached the provider stub (accepted or not), per second of the run.
- **429s**: the stub's answers over its rate rule (accepted calls in the last 1 s) or its concurrency rule (calls being held), and their share of all calls.
- **1-s windows over limit**: for every arrival, the 1 s window that ends with it, counted when it holds more arrivals (accepted or not) than the true rate in force then; one window per call, so none is missed, however short the burst.
- **worst 1-s window**: the most arrivals in any 1 s window against the true rate then, with the overshoot.
- **peak in flight**: the most calls the stub held at once, counting the one arriving; over the limit it answered 429.
- **utilization**: accepted calls over rate × time of the true limit (per phase in scenarios b and c). When the run starts or the limit rises, the provider's trailing window holds less than the new limit, so up to one more second's worth can be accepted: short phases can pass 100%.
- **round trips per call**: limiter requests (Redis commands sent through ioredis, counted in each process; a Lua script is one) during the run, per provider call. Pub/sub messages pushed by Redis are not counted.
- **added latency**: per dispatched call, from when the caller wanted to call (free again, or once the provider's Retry-After has passed after a 429) until the limiter let it go; nearest-rank p50 and p99 over all processes.
- **429s settle < 2% after** (scenarios b and c): the start of the first 2 s window, sliding by 250 ms through the low-limit half, from which every window has fewer than 2% 429s; "not within" when the last one still has more.`;

async function main() {
  const scenarios = opts.scenarios
    ? opts.scenarios.split(",").map((id) => {
        const scenario = SCENARIOS.find((s) => s.id === id);
        if (!scenario) throw new Error(`unknown scenario "${id}"; known: ${SCENARIOS.map((s) => s.id).join(", ")}`);
        return scenario;
      })
    : SCENARIOS;
  const runs = scenarios.length * wanted.length;
  const watchdog = setTimeout(
    () => {
      log("over the time budget, stopping everything");
      cleanup().then(() => process.exit(1));
    },
    60_000 + runs * (durationMs + 25_000),
  );
  watchdog.unref();
  const began = Date.now();

  const entries = [];
  const skipped = [];
  for (const name of wanted) {
    if (!CONTENDERS.includes(name)) throw new Error(`unknown contender "${name}"; known: ${CONTENDERS.join(", ")}`);
    const mod = await import(`./contenders/${name}.mjs`);
    const reason = mod.unavailable?.();
    if (reason) {
      log(`${name}: skipped, ${reason}`);
      skipped.push(`${name}: ${reason}`);
    } else entries.push({ name, mod });
  }

  const redis = await startRedis();
  stops.push(redis.stop);
  const provider = await startProvider({
    ...configured,
    latencyMs: LATENCY_MS,
    answerDelayMs: Number(opts["answer-delay-ms"]),
  });
  stops.push(provider.close);
  log(`redis-server ${redis.version} on ${redis.host}:${redis.port}, provider stub at ${provider.url}`);

  await mkdir(opts.out, { recursive: true });
  const sections = [];
  const charts = [];
  for (const scenario of scenarios) {
    const rows = [];
    for (const entry of entries) {
      log(
        `scenario ${scenario.id}, ${entry.name}: ${durationMs / 1000} s, ${processes} processes x ${callers} callers`,
      );
      const row = { name: entry.name, label: entry.mod.label };
      try {
        row.result = await runContender(entry, scenario, { redis, provider });
        for (const error of row.result.errors) log(`  ${entry.name} reported: ${error}`);
        if (row.result.worstGapsMs)
          log(`  ${entry.name}: worst window's gaps (ms) ${row.result.worstGapsMs.join(" ")}`);
        if (row.result.refusedAtMs)
          log(`  ${entry.name}: 429s at (ms into the run) ${row.result.refusedAtMs.join(" ")}`);
      } catch (error) {
        // A run cut short by a signal says nothing about the contender.
        if (interrupted) throw new Error(`interrupted by ${interrupted}`);
        row.error = error?.message ?? String(error);
        log(`  ${entry.name} failed: ${row.error}`);
      }
      rows.push(row);
    }
    const file = `scenario-${scenario.id}.svg`;
    await writeFile(path.join(opts.out, file), chart(scenario, rows, scenario.limits(0)));
    charts.push(file);
    sections.push(
      `### Scenario ${scenario.id}: ${scenario.title}\n\n${table(scenario, rows)}\n\n![scenario ${scenario.id}](${file})`,
    );
  }

  const configs = entries.map(
    ({ name, mod }) => `- **${mod.label}** (\`${name}\`): ${mod.describe({ ...configured, processes })}`,
  );
  const markdown = [
    `## Benchmark: ${entries.length} rate limiters against one provider model`,
    "",
    `${processes} processes × ${callers} callers each, every caller always wanting its next call; ${durationMs / 1000} s per scenario; ` +
      `limiters configured for ${configured.rps} req/s and ${configured.maxConcurrency} concurrent; the provider stub holds an accepted call ${LATENCY_MS[0]}–${LATENCY_MS[1]} ms ` +
      `and answers 429 with \`Retry-After\` (whole seconds). Redis ${redis.version} on loopback. Node ${process.version}, ${os.cpus().length} cores. ` +
      `Run took ${Math.round((Date.now() - began) / 1000)} s on ${new Date().toISOString().slice(0, 10)}.`,
    "",
    ...sections.flatMap((s) => [s, ""]),
    "Contenders, each configured as its own documentation suggests for that limit:",
    "",
    ...configs,
    ...(skipped.length ? ["", "Skipped:", "", ...skipped.map((s) => `- ${s}`)] : []),
    "",
    MEASURED,
    "",
  ].join("\n");
  await writeFile(path.join(opts.out, "latest.md"), markdown);
  process.stdout.write(markdown);
  log(`wrote latest.md, ${charts.join(", ")} in ${opts.out}`);
}

main()
  .catch((error) => {
    log(error?.stack ?? String(error));
    process.exitCode = 1;
  })
  .finally(cleanup);
