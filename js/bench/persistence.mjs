// What the Durable Object gateway pays to keep its state, measured in Node
// on the built package, beside a baseline in the same run:
//  - storage bytes one acquire writes with 1 and with 1,000 buckets held:
//    the records the object now writes, beside the whole snapshot it wrote
//    before (what `snapshot()` returns after the same acquire);
//  - the time to restore 100,000 live leases (100 buckets of 1,000): from
//    the records, from one snapshot, and from one snapshot in the baseline
//    package given as --baseline <pkg dir> (e.g. the main checkout's pkg/).
// Usage: node js/bench/persistence.mjs [--baseline /work/main/pkg]
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { fakeDurableObjectState } from "../lib/fake-durable-object.mjs";
import { paceline } from "../lib/node-package.mjs";

const { values } = parseArgs({ options: { baseline: { type: "string" } } });
const { GatewayCore, PacelineGateway } = paceline;
const T0 = Date.now();
const encode = (value) => new TextEncoder().encode(JSON.stringify(value));

function acquireBody(bucketId, requested, maxConcurrency) {
  return encode({ bucketId, rules: [{ requestsPerWindow: 1_000_000, windowMs: 1000, maxConcurrency }], requested });
}

async function bytesPerAcquire(buckets) {
  const state = fakeDurableObjectState();
  const object = new PacelineGateway(state, {});
  await state.ready;
  const twin = new GatewayCore({});
  const post = async (bucketId) => {
    const body = acquireBody(bucketId, 1, 1000);
    await object.fetch(new Request("https://gw/v1/rate/acquire", { method: "POST", body }));
    twin.handle("POST", "/v1/rate/acquire", body, Date.now());
  };
  for (let b = 0; b < buckets; b++) await post(`org-${b}:provider`);
  const before = state.written;
  await post("org-0:provider");
  return { records: state.written - before, snapshot: twin.snapshot().byteLength };
}

function held(Core, buckets, leases) {
  const core = new Core({ leaseTtlMs: 86_400_000 });
  for (let b = 0; b < buckets; b++) {
    const answer = core.handle(
      "POST",
      "/v1/rate/acquire",
      new TextDecoder().decode(acquireBody(`org-${b}:p`, leases, 1000)),
      T0,
    );
    if (answer.status !== 200) throw new Error(`acquire answered ${answer.status}`);
  }
  return core;
}

function timed(fn, runs = 3) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    fn();
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b)[1].toFixed(1);
}

async function loadBaseline(dir) {
  const { initSync } = await import(new URL(`file://${dir}/paceline.js`).href);
  initSync({ module: new WebAssembly.Module(readFileSync(`${dir}/paceline_bg.wasm`)) });
  return (await import(new URL(`file://${dir}/paceline.js`).href)).GatewayCore;
}

console.log("| figure | records (now) | whole snapshot (before) |");
console.log("| --- | --- | --- |");
for (const buckets of [1, 1000]) {
  const { records, snapshot } = await bytesPerAcquire(buckets);
  console.log(`| storage bytes written by one acquire, ${buckets} bucket(s) held | ${records} B | ${snapshot} B |`);
}
const core = held(GatewayCore, 100, 1000);
const snapshot = core.snapshot();
const records = core.records();
const fromRecords = timed(() => GatewayCore.restoreRecords(records, {}).free());
const fromSnapshot = timed(() => GatewayCore.restore(snapshot, {}).free());
let baseline = "not run (pass --baseline <pkg dir>)";
if (values.baseline !== undefined) {
  const Baseline = await loadBaseline(values.baseline);
  const old = held(Baseline, 100, 1000).snapshot();
  baseline = `${timed(() => Baseline.restore(old, {}).free())} ms`;
}
console.log(
  `| restore 100,000 live leases | ${fromRecords} ms from ${records.length} records; ${fromSnapshot} ms from one snapshot | ${baseline} |`,
);
