// The fleet's traffic shapes in real time through the JS API, as a user
// would run them: isolates are `GatewayRateState`s (kept across calls, or
// built per call) or limiters whose callers loop, the gateway a
// `GatewayCore` behind `fetchPort` with
// 15 ms each way, the rule 20 req/s. Each call's dispatch instant is when
// its permit resolved (the moment a provider would see it); windows are
// counted on those instants and waits set beside an ideal central FIFO
// computed from the same arrivals.
//
//   node js/scripts/build.mjs && node js/bench/fleet-realtime.mjs [seconds]
import { paceline } from "../lib/node-package.mjs";

const { GatewayCore, GatewayRateState, createLimiter, fetchPort, handleGatewayRequest } = paceline;

const ONE_WAY_MS = 15;
const RULES = [{ requestsPerWindow: 20, windowMs: 1000 }];
const RATE = 20;
const SECONDS = Number(process.argv[2] ?? 30);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** splitmix-style seeded uniform numbers, so each run draws the same arrivals. */
function rng(seed) {
  let s = BigInt(seed);
  return () => {
    s = (s + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  };
}

function poisson(isolates, rate, seconds, seed) {
  const next = rng(seed);
  const out = [];
  for (let t = 0; ; ) {
    t += (-Math.log(1 - next()) / rate) * 1000;
    if (t >= seconds * 1000) return out;
    out.push({ at: t, isolate: Math.floor(next() * isolates) });
  }
}

function bursts(isolates, burst, periodMs, seconds, seed) {
  const next = rng(seed);
  const out = [];
  for (let isolate = 0; isolate < isolates; isolate++) {
    for (let at = next() * periodMs; at < seconds * 1000; at += periodMs) {
      for (let i = 0; i < burst; i++) out.push({ at, isolate });
    }
  }
  return out.sort((a, b) => a.at - b.at);
}

/** One gateway, reached over a simulated network; counts round trips. */
function gateway() {
  const core = new GatewayCore({ windowGuardMs: 25 });
  const counted = { trips: 0 };
  const fetch = async (url, init) => {
    counted.trips++;
    await sleep(ONE_WAY_MS);
    const response = await handleGatewayRequest(core, new Request(url, init));
    const body = await response.text();
    await sleep(ONE_WAY_MS);
    return new Response(body, { status: response.status, headers: response.headers });
  };
  return { port: () => fetchPort({ fetch, baseUrl: "http://gateway.invalid" }), counted };
}

function densest(instants) {
  const d = [...instants].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < d.length; i++) {
    while (j < d.length && d[j] < d[i] + 1000) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

function percentile(values, p) {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
}

function oracleWaits(arrivals) {
  let previous = -Infinity;
  return arrivals.map((at) => {
    const dispatch = Math.max(at, previous + 1000 / RATE);
    previous = dispatch;
    return dispatch - at;
  });
}

async function openLoop(name, arrivals) {
  const { port, counted } = gateway();
  const states = new Map();
  const stateOf = (i) => {
    if (!states.has(i)) states.set(i, new GatewayRateState(port()));
    return states.get(i);
  };
  const start = performance.now();
  const dispatches = [];
  const waits = [];
  let failed = 0;
  await Promise.all(
    arrivals.map(async ({ at, isolate }) => {
      await sleep(at);
      const arrived = performance.now();
      try {
        const permit = await stateOf(isolate).acquire({ bucketId: "org:provider", rules: RULES });
        const now = performance.now();
        dispatches.push(now - start);
        waits.push(now - arrived);
        await permit.release();
      } catch {
        failed++;
      }
    }),
  );
  const oracle = oracleWaits(arrivals.map((a) => a.at));
  report(name, {
    densest: densest(dispatches),
    utilization: dispatches.length / arrivals.length,
    waits,
    oracle,
    trips: counted.trips / Math.max(1, dispatches.length),
    failed,
  });
}

async function perRequestState(handlers, seconds) {
  const { port, counted } = gateway();
  const start = performance.now();
  const dispatches = [];
  const waits = [];
  await Promise.all(
    Array.from({ length: handlers }, async () => {
      while (performance.now() - start < seconds * 1000) {
        const arrived = performance.now();
        const state = new GatewayRateState(port());
        const permit = await state.acquire({ bucketId: "org:provider", rules: RULES });
        dispatches.push(performance.now() - start);
        waits.push(performance.now() - arrived);
        await permit.release();
        state.free();
      }
    }),
  );
  reportClosedLoop(`per-request state: ${handlers} handlers back to back`, { start, dispatches, waits, counted });
}

/** A closed loop's row: its utilization is of the rule over the whole run; no oracle. */
function reportClosedLoop(name, { start, dispatches, waits, counted }) {
  report(name, {
    densest: densest(dispatches),
    utilization: dispatches.length / ((RATE * (performance.now() - start)) / 1000),
    waits,
    oracle: null,
    trips: counted.trips / Math.max(1, dispatches.length),
    failed: 0,
  });
}

/**
 * Isolates whose callers each loop over one call of `callMs`, through
 * `createLimiter`: with `schedule`, which tells the pacer when each call
 * is done, or with `acquire` + `release`, which tell it nothing.
 */
async function closedLoop(way, isolates, callers, callMs, seconds) {
  const { port, counted } = gateway();
  const start = performance.now();
  const dispatches = [];
  const waits = [];
  const call = async () => {
    dispatches.push(performance.now() - start);
    await sleep(callMs);
  };
  await Promise.all(
    Array.from({ length: isolates }, async () => {
      const limiter = createLimiter({ port: port(), bucketId: "org:provider", rules: RULES });
      await Promise.all(
        Array.from({ length: callers }, async () => {
          while (performance.now() - start < seconds * 1000) {
            const asked = performance.now();
            const timed = () => {
              waits.push(performance.now() - asked);
              return call();
            };
            if (way === "schedule") {
              await limiter.schedule(timed);
            } else {
              const permit = await limiter.acquire();
              await timed();
              await permit.release();
            }
          }
        }),
      );
    }),
  );
  reportClosedLoop(`closed loop, ${isolates} x ${callers} callers, calls of ${callMs} ms: ${way}`, {
    start,
    dispatches,
    waits,
    counted,
  });
}

function report(name, r) {
  const oracle = r.oracle
    ? `${percentile(r.oracle, 50).toFixed(0)} / ${percentile(r.oracle, 99).toFixed(0)} ms`
    : "closed loop";
  console.log(
    `| ${name} | ${r.densest}/20 | ${(r.utilization * 100).toFixed(1)}% | ` +
      `${percentile(r.waits, 50).toFixed(0)} / ${percentile(r.waits, 99).toFixed(0)} ms | ${oracle} | ` +
      `${r.trips.toFixed(3)} | ${r.failed} |`,
  );
}

console.log(
  `Real time, Node ${process.version}, ${SECONDS} s per shape, gateway ${ONE_WAY_MS} ms each way, rule 20 req/s.`,
);
console.log("");
console.log(
  "| shape | densest 1 s window / rule | utilization | added wait p50 / p99 | oracle p50 / p99 | round trips / permit | failed calls |",
);
console.log("|---|---|---|---|---|---|---|");
await openLoop("bursty: 4 isolates, 8 calls every 2 s", bursts(4, 8, 2000, SECONDS, 12));
await openLoop("sparse: 40 isolates, Poisson, 90%", poisson(40, RATE * 0.9, SECONDS, 11));
await openLoop("sparse: 100 isolates, Poisson, 50%", poisson(100, RATE * 0.5, SECONDS, 13));
await perRequestState(8, Math.min(SECONDS, 15));
await closedLoop("schedule", 8, 2, 80, SECONDS);
await closedLoop("acquire + release", 8, 2, 80, SECONDS);
