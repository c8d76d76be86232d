// A concurrency-bound rule in real time through the JS API: isolates
// (`GatewayRateState`s) with callers looping, the gateway a `GatewayCore`
// behind `fetchPort` with 10 ms each way, each call held at a stand-in
// provider that counts how many it holds at once. Two shapes:
// - `8x4` (the default): 8 isolates x 4 callers, {20/s, maxConcurrency 5},
//   calls of 300 ms: the slots bind at 5 / 0.3 s = 16.7 calls/s, one or no
//   slot per isolate;
// - `10-slots`: 4 isolates x 4 callers, {20/s, maxConcurrency 10}, calls
//   of 1 s: the slots bind at 10 calls/s, two and a half per isolate.
// - `8x4-cut`: the `8x4` fleet against a provider that takes 12 calls a
//   second (a 429 with `Retry-After: 1` for a call past 12 accepted in the
//   last second), fed back through `penalize` and `observeSuccess`: the
//   rate is cut under both the rule and the slots, so the bound is 12.
// Runs the fleet twice, one lease per permit and with kept leases (the
// default), and reports for each calls per second beside that bound,
// gateway round trips per call, the most calls the provider held at once,
// the densest second, and how far the isolate with the share furthest from
// an equal one is from it.
//
//   node js/scripts/build.mjs && node js/bench/slots-realtime.mjs [seconds] [8x4|10-slots|8x4-cut]
import { densestWindow } from "../lib/metrics.mjs";
import { paceline } from "../lib/node-package.mjs";

const { GatewayCore, GatewayRateState, fetchPort, handleGatewayRequest } = paceline;

const SHAPES = {
  "8x4": { isolates: 8, callers: 4, holdMs: 300, maxConcurrency: 5 },
  "10-slots": { isolates: 4, callers: 4, holdMs: 1000, maxConcurrency: 10 },
  "8x4-cut": { isolates: 8, callers: 4, holdMs: 300, maxConcurrency: 5, limitRps: 12 },
};
const SECONDS = Number(process.argv[2] ?? 30);
const shape = SHAPES[process.argv[3] ?? "8x4"];
if (!shape) throw new Error(`unknown shape "${process.argv[3]}"; known: ${Object.keys(SHAPES).join(", ")}`);

const ONE_WAY_MS = 10;
const HOLD_MS = shape.holdMs;
const ISOLATES = shape.isolates;
const CALLERS = shape.callers;
const MAX = shape.maxConcurrency;
const RULES = [{ requestsPerWindow: 20, windowMs: 1000, maxConcurrency: MAX }];
const LIMIT_RPS = shape.limitRps ?? Number.POSITIVE_INFINITY;
const BOUND = Math.min(MAX / (HOLD_MS / 1000), LIMIT_RPS);
const BUCKET = "org:provider";
const WARMUP_MS = 3000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// Calls counted: after the warm-up, and before the run's end (callers
// waiting then still make one more call each, as the queue drains).
const counts = (at) => at >= WARMUP_MS && at < SECONDS * 1000;

/** One run of the fleet, each state keeping its leases or not; returns its table row. */
async function run(keepLeases) {
  const core = new GatewayCore({ windowGuardMs: 25 });
  let trips = 0;
  const fetch = async (url, init) => {
    trips++;
    await sleep(ONE_WAY_MS);
    const response = await handleGatewayRequest(core, new Request(url, init));
    const body = await response.arrayBuffer();
    await sleep(ONE_WAY_MS);
    return new Response(body, { status: response.status, headers: response.headers });
  };
  const provider = { held: 0, most: 0, accepted: [], refused: 0 };
  const dispatches = [];
  // Every call that reached the provider, refused ones too.
  const arrivals = [];
  const shares = new Array(ISOLATES).fill(0);
  const start = performance.now();
  const end = start + SECONDS * 1000;
  async function caller(state, isolate) {
    while (performance.now() < end) {
      const permit = await state.acquire({ bucketId: BUCKET, rules: RULES });
      const at = performance.now() - start;
      arrivals.push(at);
      while (provider.accepted.length > 0 && provider.accepted[0] <= at - 1000) provider.accepted.shift();
      if (provider.accepted.length >= LIMIT_RPS) {
        provider.refused++;
        await state.penalize({ bucketId: BUCKET, cooldownMs: 1000 });
        await permit.release();
        continue;
      }
      provider.accepted.push(at);
      provider.held++;
      provider.most = Math.max(provider.most, provider.held);
      dispatches.push(at);
      if (counts(at)) shares[isolate]++;
      await sleep(HOLD_MS);
      provider.held--;
      if (Number.isFinite(LIMIT_RPS)) state.observeSuccess({ bucketId: BUCKET });
      await permit.release();
    }
  }
  const isolates = Array.from(
    { length: ISOLATES },
    () => new GatewayRateState(fetchPort({ fetch, baseUrl: "http://gateway.invalid" }), { keepLeases }),
  );
  await Promise.all(isolates.flatMap((state, i) => Array.from({ length: CALLERS }, () => caller(state, i))));
  for (const state of isolates) state.free();
  core.free();
  const counted = dispatches.filter(counts).length;
  const rate = counted / (SECONDS - WARMUP_MS / 1000);
  const mean = shares.reduce((a, b) => a + b, 0) / ISOLATES;
  const spread = Math.max(...shares.map((n) => Math.abs(n / mean - 1)));
  const mode = keepLeases ? "kept leases (default)" : "one lease per permit (`keepLeases: false`)";
  return `| ${mode} | ${rate.toFixed(1)} | ${((100 * rate) / BOUND).toFixed(1)}% of ${BOUND.toFixed(1)} | ${provider.refused} | ${(trips / dispatches.length).toFixed(3)} | ${provider.most} of ${MAX} | ${densestWindow(arrivals, 1000)} of 20 | ${(100 * spread).toFixed(0)}% |`;
}

const rows = [];
for (const keepLeases of [false, true]) rows.push(await run(keepLeases));
console.log(
  "| leases | calls/s | share of the bound | 429s | round trips / call | most held at once | densest 1 s | widest isolate share from equal |",
);
console.log("|---|---|---|---|---|---|---|---|");
for (const row of rows) console.log(row);
