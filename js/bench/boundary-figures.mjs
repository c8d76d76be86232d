// Figures for the hardened JS boundary, against the built package:
//   node --expose-gc js/bench/boundary-figures.mjs
// - wasm memory around a 100 MB POST to handleGatewayRequest and
//   PacelineGateway.fetch (the body must never reach the wasm);
// - wasm memory after 200k rate and budget states made and freed, by
//   free() and by the garbage collector (the registry must forget them);
// - the cost of the glue's brand check per method call.
import { paceline as P, wasmMemory } from "../lib/node-package.mjs";

const MB = 1024 * 1024;
const mb = (bytes) => `${(bytes / MB).toFixed(1)} MB`;

function body100MB() {
  const chunk = new Uint8Array(MB).fill(0x20);
  let sent = 0;
  return new ReadableStream({
    pull(c) {
      if (sent++ === 100) c.close();
      else c.enqueue(chunk);
    },
  });
}

const post = (body) => new Request("http://gw/v1/rate/acquire", { method: "POST", body, duplex: "half" });

async function bigPost() {
  const core = new P.GatewayCore();
  const before = wasmMemory.buffer.byteLength;
  const direct = await P.handleGatewayRequest(core, post(body100MB()));
  const stored = new Map();
  const gateway = new P.PacelineGateway(
    {
      storage: { get: async (k) => stored.get(k), put: async (k, v) => void stored.set(k, v) },
      blockConcurrencyWhile: (f) => f(),
    },
    {},
  );
  await Promise.resolve();
  const viaObject = await gateway.fetch(post(body100MB()));
  console.log(
    `100 MB POST: handleGatewayRequest ${direct.status}, PacelineGateway.fetch ${viaObject.status}; ` +
      `wasm memory ${mb(before)} -> ${mb(wasmMemory.buffer.byteLength)}`,
  );
}

async function collect() {
  for (let i = 0; i < 5; i++) {
    globalThis.gc?.();
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function freedStates(n) {
  const before = wasmMemory.buffer.byteLength;
  for (let i = 0; i < n; i++) {
    const s = new P.LocalRateState();
    const b = new P.LocalBudgetState();
    s.free();
    b.free();
  }
  const afterFree = wasmMemory.buffer.byteLength;
  // Dropped states go when the collector runs their finalizers; the memory
  // (which never shrinks) shows the peak of one batch, and a second round
  // must not raise it.
  const rounds = [];
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < n; i++) {
      new P.LocalRateState();
      new P.LocalBudgetState();
      if (i % 10_000 === 9_999) await collect();
    }
    await collect();
    rounds.push(mb(wasmMemory.buffer.byteLength));
  }
  console.log(
    `${n} rate + ${n} budget states: freed by free(): wasm memory ${mb(before)} -> ${mb(afterFree)}; ` +
      `dropped for the collector${globalThis.gc ? "" : " (run with --expose-gc)"}, two rounds: -> ${rounds.join(" -> ")}`,
  );
}

function brandCost() {
  const g = P.createGovernor({
    adapter: "cjs_node20",
    scope: { orgId: "o", rootRunId: "r" },
    rateState: new P.LocalRateState(),
    resolvePacing: () => null,
  });
  const owned = new WeakMap([[g, 1]]);
  const N = 2_000_000;
  let sink = 0;
  // What the brand check adds to a call: one WeakMap lookup and a test.
  let t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) sink += owned.get(g) ? 1 : 0;
  const check = Number(process.hrtime.bigint() - t) / N;
  // A whole cheap call through the branded glue, for scale.
  for (let i = 0; i < 10_000; i++) sink += g.resolveRowConcurrency(4);
  t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) sink += g.resolveRowConcurrency(4);
  const call = Number(process.hrtime.bigint() - t) / N;
  console.log(
    `brand check: ${check.toFixed(1)} ns per call; a whole resolveRowConcurrency call ${call.toFixed(1)} ns (${sink > 0 ? "ok" : ""})`,
  );
}

await bigPost();
await freedStates(200_000);
brandCost();
