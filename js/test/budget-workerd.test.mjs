// A GatewayBudgetState shared by concurrent requests of one isolate in
// workerd. Its charges take turns; a request must be woken for its turn by
// its own timer, not by the request before it finishing: workerd runs a
// continuation in the I/O context of whatever woke it, so a charge woken by
// another request would send its reservation on behalf of a request that
// has already answered, and never hear back.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Miniflare } from "miniflare";
import { bundleWorker, repoRoot } from "../lib/bundle-worker.mjs";

const REQUESTS = 12;
const TIMEOUT_MS = 20_000;

describe("a module-scope GatewayBudgetState in workerd", () => {
  let mf;
  let persistDir;

  before(async () => {
    persistDir = mkdtempSync(join(tmpdir(), "paceline-budget-"));
    const appOptions = await bundleWorker(join(repoRoot, "js/test/workers/budget-worker.mjs"));
    const gatewayOptions = await bundleWorker(join(repoRoot, "js/examples/gateway-worker.mjs"));
    mf = new Miniflare({
      workers: [
        { ...appOptions, name: "app", serviceBindings: { GATEWAY: "gateway" } },
        { ...gatewayOptions, name: "gateway", durableObjects: { PACELINE_GATEWAY: "PacelineGateway" } },
      ],
      durableObjectsPersist: persistDir,
    });
    await mf.ready;
  });

  after(async () => {
    await mf?.dispose();
    rmSync(persistDir, { recursive: true, force: true });
  });

  const charge = async (run) => {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the charge for ${run} never answered`)), TIMEOUT_MS);
    });
    try {
      const response = await Promise.race([mf.dispatchFetch(`http://app/?run=${run}`), timeout]);
      const text = await response.text();
      try {
        return { status: response.status, body: JSON.parse(text) };
      } catch {
        return { status: response.status, body: text.slice(0, 300) };
      }
    } finally {
      clearTimeout(timer);
    }
  };
  const runs = Array.from({ length: REQUESTS }, (_, i) => `run-${i}`);

  test("concurrent requests that queue for their turn each reserve one block and all answer", async () => {
    const answers = await Promise.all(runs.map(charge));
    for (const [i, answer] of answers.entries()) {
      assert.equal(answer.status, 200, `${runs[i]}: ${JSON.stringify(answer.body)}`);
      assert.deepEqual(answer.body.counters, { toolCall: 256 }, runs[i]);
    }
  });

  test("a second round is served from the blocks the first reserved, without the gateway", async () => {
    const answers = await Promise.all(runs.map(charge));
    for (const [i, answer] of answers.entries()) {
      assert.equal(answer.status, 200, `${runs[i]}: ${JSON.stringify(answer.body)}`);
      assert.deepEqual(answer.body.counters, {}, runs[i]);
    }
  });
});
