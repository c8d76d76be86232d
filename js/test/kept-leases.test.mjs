// Kept leases from JS (`keepLeases: true`): one state hands a concurrency
// slot between its callers without a gateway round trip per call, serves
// them in arrival order, never holds more than the rule allows, and takes
// only a boolean for the option.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { paceline as P } from "../lib/node-package.mjs";

const RULES = [{ requestsPerWindow: 20, windowMs: 1000, maxConcurrency: 2 }];
const HOLD_MS = 150;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A transport to an in-process gateway that counts its round trips. */
function countingTransport(core) {
  const inner = P.coreTransport(core);
  const transport = {
    posts: 0,
    post(path, body, signal) {
      transport.posts++;
      return inner.post(path, body, signal);
    },
  };
  return transport;
}

describe("keepLeases", () => {
  test("callers of one state share its kept slots in turn, with far fewer round trips than calls", async () => {
    const core = new P.GatewayCore({ windowGuardMs: 25 });
    const transport = countingTransport(core);
    const state = new P.GatewayRateState(transport, { keepLeases: true });
    const calls = [0, 0, 0, 0];
    let held = 0;
    let most = 0;
    const end = performance.now() + 3000;
    await Promise.all(
      calls.map(async (_, i) => {
        while (performance.now() < end) {
          const permit = await state.acquire({ bucketId: "org:kept", rules: RULES });
          held++;
          most = Math.max(most, held);
          calls[i]++;
          await sleep(HOLD_MS);
          held--;
          await permit.release();
        }
      }),
    );
    state.free();
    core.free();
    const total = calls.reduce((a, b) => a + b, 0);
    assert.ok(most <= 2, `${most} calls held at once against maxConcurrency 2`);
    assert.ok(total >= 20, `${total} calls in 3 s on two slots held ${HOLD_MS} ms each`);
    assert.ok(transport.posts * 2 < total, `${transport.posts} round trips for ${total} calls`);
    assert.ok(Math.min(...calls) * 2 >= Math.max(...calls), `callers served in turn: ${calls}`);
  });

  test("a keepLeases that is not a boolean is INVALID_INPUT", () => {
    const core = new P.GatewayCore();
    for (const keepLeases of ["yes", 1, {}]) {
      assert.throws(
        () => new P.GatewayRateState(P.coreTransport(core), { keepLeases }),
        (error) => error.code === "INVALID_INPUT" && /keepLeases/.test(error.message),
      );
    }
    core.free();
  });
});
