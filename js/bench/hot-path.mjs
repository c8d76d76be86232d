// The hot path as a Node caller meets it, each figure beside its baseline
// in one run:
//
// 1. µs per acquire + release of a permit already cached and due: one
//    caller looping on a LocalRateState (after a warm-up, so the pacer has
//    sized its blocks), `acquire` and `tryAcquire`, beside a minimal JS
//    async limiter doing the same bookkeeping. Target: <= 2 µs. The rule
//    is a million per millisecond, far above what one caller draws, so
//    every permit is cached and due: under a 1,000,000/s rule a caller
//    faster than 1 µs empties each millisecond's block and then waits for
//    a timer, which measures the rule, not the path.
// 2. How much of a rule one isolate paces with 1 and with 20 callers
//    looping, over the whole run from a fresh state and after its first
//    second, with the JS timers it set per second (one per wake-up time,
//    not one per caller). Target at 50,000/s: >= 95%. The local scheduler
//    spaces every window as if 25 ms longer (jitter guard), so 97.6% is the
//    most any caller can get.
//
//   node js/scripts/build.mjs && node js/bench/hot-path.mjs [seconds]
import { paceline } from "../lib/node-package.mjs";

const seconds = Number(process.argv[2] ?? 2);
const { LocalRateState, Permit } = paceline;

/**
 * The least a JS limiter can do per call: a GCRA check (a window's worth
 * of burst) and an async return, with a timer only when the rule is spent.
 */
class MinimalLimiter {
  constructor(perSecond) {
    this.interval = 1000 / perSecond;
    this.tat = 0;
  }
  async acquire() {
    const now = performance.now();
    const tat = Math.max(this.tat, now) + this.interval;
    if (tat - now > 1000) await new Promise((r) => setTimeout(r, tat - now - 1000));
    this.tat = tat;
    return { release() {} };
  }
}

/** Counts the setTimeout calls made while `work` runs. */
async function counting(work) {
  const original = globalThis.setTimeout;
  let timers = 0;
  globalThis.setTimeout = (...args) => {
    timers++;
    return original(...args);
  };
  try {
    return { result: await work(), timers };
  } finally {
    globalThis.setTimeout = original;
  }
}

async function loop(until, acquireRelease) {
  let n = 0;
  while (performance.now() < until) {
    for (let i = 0; i < 100; i++) await acquireRelease();
    n += 100;
  }
  return n;
}

/** µs per call over `seconds`, after a second of warm-up. */
async function perCall(name, acquireRelease) {
  await loop(performance.now() + 1000, acquireRelease);
  const start = performance.now();
  const { result: n, timers } = await counting(() => loop(start + seconds * 1000, acquireRelease));
  const us = ((performance.now() - start) * 1000) / n;
  return { name, calls: n, us, timers };
}

async function paced(perSecond, callers) {
  const state = new LocalRateState();
  const input = { bucketId: "fast", rules: [{ requestsPerWindow: perSecond, windowMs: 1000 }] };
  const start = performance.now();
  const end = start + (seconds + 1) * 1000;
  let n = 0;
  let afterFirst = 0;
  const { timers } = await counting(() =>
    Promise.all(
      Array.from({ length: callers }, async () => {
        while (performance.now() < end) {
          const permit = await state.acquire(input);
          n++;
          if (afterFirst === 0 && performance.now() - start >= 1000) afterFirst = n;
          permit.release();
        }
      }),
    ),
  );
  const elapsed = (performance.now() - start) / 1000;
  state.free();
  return {
    whole: n / elapsed,
    steady: (n - afterFirst) / (elapsed - 1),
    timersPerSecond: timers / elapsed,
  };
}

const rules = [{ requestsPerWindow: 1_000_000, windowMs: 1 }];
// A rule it never reaches, so its figure is its bookkeeping alone.
const minimal = new MinimalLimiter(1_000_000_000);
const state = new LocalRateState();
const input = { bucketId: "hot", rules };
const tryState = new LocalRateState();
const tryInput = { bucketId: "hot", rules };
const rows = [
  await perCall("minimal JS limiter (baseline)", async () => {
    (await minimal.acquire()).release();
  }),
  await perCall("LocalRateState acquire + release", async () => {
    const permit = await state.acquire(input);
    permit.release();
  }),
  await perCall("LocalRateState tryAcquire + release", async () => {
    const permit = tryState.tryAcquire(tryInput);
    if (permit instanceof Permit) permit.release();
    else await new Promise((r) => setTimeout(r, permit.retryAfterMs));
  }),
];
state.free();
tryState.free();

console.log(`Node ${process.version}, ${seconds} s per figure after 1 s of warm-up; 1,000,000 per ms rule`);
console.log();
console.log("| path | calls | µs per call | × baseline | timers set |");
console.log("|---|---|---|---|---|");
for (const r of rows) {
  const times = (r.us / rows[0].us).toFixed(1);
  console.log(`| ${r.name} | ${r.calls} | ${r.us.toFixed(2)} | ${times} | ${r.timers} |`);
}
console.log();
console.log(
  "| rule | callers | paced per second (whole run) | share | after the first second | share | timers per second |",
);
console.log("|---|---|---|---|---|---|---|");
for (const perSecond of [5_000, 50_000]) {
  for (const callers of [1, 20]) {
    const r = await paced(perSecond, callers);
    const share = (rate) => `${((100 * rate) / perSecond).toFixed(1)}%`;
    console.log(
      `| ${perSecond}/s | ${callers} | ${r.whole.toFixed(0)} | ${share(r.whole)} | ${r.steady.toFixed(0)} | ${share(r.steady)} | ${r.timersPerSecond.toFixed(0)} |`,
    );
  }
}
