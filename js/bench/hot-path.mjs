// The hot path as a Node caller meets it: a LocalRateState acquire +
// release whose permit is already due, beside a minimal JS async limiter
// doing the same bookkeeping, in one run; then how much of a fast rule one
// isolate actually paces with 1 and with 20 callers looping.
//
//   node js/scripts/build.mjs && node js/bench/hot-path.mjs [seconds]
import { paceline } from "../lib/node-package.mjs";

const seconds = Number(process.argv[2] ?? 2);
const { LocalRateState } = paceline;

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

async function perCall(name, acquireRelease) {
  for (let i = 0; i < 2000; i++) await acquireRelease();
  const end = performance.now() + seconds * 1000;
  let n = 0;
  const start = performance.now();
  while (performance.now() < end) {
    for (let i = 0; i < 100; i++) await acquireRelease();
    n += 100;
  }
  const us = ((performance.now() - start) * 1000) / n;
  return { name, calls: n, us };
}

async function paced(perSecond, callers) {
  const state = new LocalRateState();
  const rules = [{ requestsPerWindow: perSecond, windowMs: 1000 }];
  const end = performance.now() + seconds * 1000;
  let n = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < end) {
        const permit = await state.acquire({ bucketId: "fast", rules });
        n++;
        permit.release();
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  state.free();
  return n / elapsed;
}

const rules = [{ requestsPerWindow: 1_000_000, windowMs: 1000 }];
const minimal = new MinimalLimiter(1_000_000);
const state = new LocalRateState();
const rows = [
  await perCall("minimal JS limiter (1,000,000/s)", async () => {
    (await minimal.acquire()).release();
  }),
  await perCall("LocalRateState (1,000,000/s)", async () => {
    const permit = await state.acquire({ bucketId: "hot", rules });
    permit.release();
  }),
];

state.free();

console.log("| path | calls | µs per acquire + release |");
console.log("|---|---|---|");
for (const r of rows) console.log(`| ${r.name} | ${r.calls} | ${r.us.toFixed(2)} |`);
console.log();
console.log("| rule | callers | paced per second | share of the rule |");
console.log("|---|---|---|---|");
for (const perSecond of [5_000, 50_000]) {
  for (const callers of [1, 20]) {
    const rate = await paced(perSecond, callers);
    console.log(`| ${perSecond}/s | ${callers} | ${rate.toFixed(0)} | ${((100 * rate) / perSecond).toFixed(1)}% |`);
  }
}
