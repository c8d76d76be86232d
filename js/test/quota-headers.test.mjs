// observeHeaders: a host that calls a provider itself hands the answer's
// headers to its rate state, which relays what they say to the gateway.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { paceline } from "../lib/node-package.mjs";

/**
 * A gateway transport that records what it is sent and grants nothing;
 * without observe it answers that endpoint as an older gateway does (404).
 */
function recordingPort({ withObserve = true } = {}) {
  const sent = [];
  const answers = {
    acquire: () => ({ granted: 0, waitMs: 10, serverNowMs: Date.now() }),
    release: () => ({ released: 0 }),
    penalize: () => ({ cooldownUntilMs: Date.now() }),
    charge: () => ({ counters: {} }),
    observe: () => ({ effectiveRequestsPerSecond: 15 }),
  };
  const reply = (status, message) => ({ status, body: new TextEncoder().encode(JSON.stringify(message)) });
  const port = {
    async post(path, body) {
      const name = path.slice(path.lastIndexOf("/") + 1);
      if (name === "observe" && !withObserve) {
        return reply(404, { error: { code: "INVALID_INPUT", message: `no gateway endpoint at POST ${path}` } });
      }
      sent.push([name, JSON.parse(new TextDecoder().decode(body))]);
      return reply(200, answers[name]());
    },
  };
  return { port, sent };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

describe("observeHeaders", () => {
  test("a stated limit goes to the gateway at once, read from a Headers object", async () => {
    const { port, sent } = recordingPort();
    const state = new paceline.GatewayRateState(port);
    const before = Date.now();
    state.observeHeaders({
      bucketId: "org:p",
      headers: new Headers({ "X-RateLimit-Limit": "15", "X-RateLimit-Remaining": "9", "X-RateLimit-Reset": "2" }),
    });
    await tick();
    const observes = sent.filter(([kind]) => kind === "observe").map(([, req]) => req);
    assert.equal(observes.length, 1);
    const { bucketId, quota } = observes[0];
    assert.equal(bucketId, "org:p");
    assert.equal(quota.limit, 15);
    assert.equal(quota.remaining, 9);
    assert.ok(quota.observedAtMs >= before && quota.observedAtMs <= Date.now());
    assert.ok(Math.abs(quota.resetAtMs - (quota.observedAtMs + 2000)) <= 50, JSON.stringify(quota));
  });

  test("a plain record of IETF fields is read without regard to case", async () => {
    const { port, sent } = recordingPort();
    const state = new paceline.GatewayRateState(port);
    state.observeHeaders({
      bucketId: "org:p",
      headers: { ratelimit: '"default";r=0;t=3', "RateLimit-Policy": '"default";q=100;w=60' },
    });
    await tick();
    const [, req] = sent.find(([kind]) => kind === "observe");
    assert.equal(req.quota.remaining, 0);
    assert.equal(req.quota.limit, 100);
    assert.equal(req.quota.windowMs, 60000);
  });

  test("a gateway without observe keeps the report for the next acquire", async () => {
    const { port, sent } = recordingPort({ withObserve: false });
    const state = new paceline.GatewayRateState(port);
    state.observeHeaders({ bucketId: "org:p", headers: { "x-ratelimit-limit": "5" } });
    await tick();
    const controller = new AbortController();
    const pending = state.acquire({
      bucketId: "org:p",
      rules: [{ requestsPerWindow: 20, windowMs: 1000 }],
      signal: controller.signal,
    });
    await tick();
    controller.abort();
    await assert.rejects(pending);
    const acquires = sent.filter(([kind]) => kind === "acquire").map(([, req]) => req);
    assert.equal(acquires[0].quota.limit, 5);
  });

  test("hostile input is refused as INVALID_INPUT, hostile headers read as absent", async () => {
    const { port, sent } = recordingPort();
    const state = new paceline.GatewayRateState(port);
    for (const input of [
      undefined,
      null,
      7,
      "org:p",
      { bucketId: 7, headers: {} },
      { bucketId: "b" },
      { bucketId: "b", headers: 3 },
    ]) {
      assert.throws(
        () => state.observeHeaders(input),
        (e) => e.code === "INVALID_INPUT",
        String(input),
      );
    }
    const throwing = {
      get bucketId() {
        throw new Error("boom");
      },
      headers: {},
    };
    assert.throws(
      () => state.observeHeaders(throwing),
      (e) => e.code === "INVALID_INPUT",
    );
    const hostileHeaders = [
      {
        get: () => {
          throw new Error("boom");
        },
      },
      new Proxy(
        {},
        {
          ownKeys: () => {
            throw new Error("boom");
          },
        },
      ),
      { "x-ratelimit-limit": 15n },
      { "x-ratelimit-limit": "1e9999" },
      { "x-ratelimit-remaining": "0", "x-ratelimit-reset": "-1" },
    ];
    for (const headers of hostileHeaders) {
      state.observeHeaders({ bucketId: "org:p", headers });
    }
    await tick();
    assert.equal(sent.filter(([kind]) => kind === "observe").length, 0);
  });
});
