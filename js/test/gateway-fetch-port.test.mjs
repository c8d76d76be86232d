// fetchPort against a fake fetch: what it sends and hands back (bytes both
// ways), what a failing fetch becomes; and the client's codec behind it,
// through a GatewayClient: which Error each kind of answer becomes.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { paceline } from "../lib/node-package.mjs";

const { fetchPort, GatewayClient, GatewayRateState } = paceline;

const acquireReq = {
  bucketId: "org-1:openai",
  rules: [{ requestsPerWindow: 20, windowMs: 1000 }],
  requested: 2,
};
const bytes = (text) => new TextEncoder().encode(text);
const text = (body) => new TextDecoder().decode(body);

/** A fetch that answers every call with `status` and `body`, and records each call. */
function fakeFetch(status, body) {
  const calls = [];
  function fetch(url, init) {
    calls.push({ self: this, url, init });
    return Promise.resolve(new Response(body, { status }));
  }
  return { fetch, calls };
}

const errorJson = (error) => JSON.stringify({ error });
const client = (status, body) =>
  new GatewayClient(fetchPort({ fetch: fakeFetch(status, body).fetch, baseUrl: "http://gw" }));

describe("fetchPort", () => {
  test("posts the bytes to base + path and hands back status and bytes unread", async () => {
    const { fetch, calls } = fakeFetch(409, "not even JSON");
    const port = fetchPort({ fetch, baseUrl: "https://gw.example/", headers: { authorization: "Bearer t" } });
    const body = bytes('{"bucketId":"b"}');
    const reply = await port.post("/v1/rate/acquire", body);
    assert.equal(reply.status, 409);
    assert.ok(reply.body instanceof Uint8Array);
    assert.equal(text(reply.body), "not even JSON");
    const [{ self, url, init }] = calls;
    assert.equal(self, undefined, "fetch is called as a plain function");
    assert.equal(url, "https://gw.example/v1/rate/acquire");
    assert.equal(init.method, "POST");
    assert.equal(init.headers.get("content-type"), "application/json");
    assert.equal(init.headers.get("authorization"), "Bearer t");
    assert.equal(init.body, body);
  });

  test("a rate state sends each call once, as JSON, to its own endpoint", async () => {
    const grant = { granted: 2, waitMs: 0, scheduledAtMs: [Date.now(), Date.now()], serverNowMs: Date.now() };
    const { fetch, calls } = fakeFetch(200, JSON.stringify(grant));
    const state = new GatewayRateState(fetchPort({ fetch, baseUrl: "http://gw" }));
    const permit = await state.acquire({ bucketId: "b", rules: acquireReq.rules });
    await permit.release();
    assert.equal(calls[0].url, "http://gw/v1/rate/acquire");
    const sent = JSON.parse(text(calls[0].init.body));
    assert.equal(sent.bucketId, "b");
    assert.deepEqual(sent.rules, acquireReq.rules);
  });

  test("an exception from fetch is GATEWAY_UNAVAILABLE with that exception as cause", async () => {
    const boom = new TypeError("fetch failed");
    const rejecting = fetchPort({ fetch: async () => Promise.reject(boom), baseUrl: "http://gw" });
    const throwing = fetchPort({
      fetch: () => {
        throw boom;
      },
      baseUrl: "http://gw",
    });
    for (const port of [rejecting, throwing]) {
      await assert.rejects(port.post("/v1/rate/acquire", bytes("{}")), (error) => {
        assert.equal(error.code, "GATEWAY_UNAVAILABLE");
        assert.equal(error.cause, boom);
        assert.match(error.message, /POST \/v1\/rate\/acquire/);
        return true;
      });
      await assert.rejects(new GatewayClient(port).acquire(acquireReq), { code: "GATEWAY_UNAVAILABLE", cause: boom });
    }
  });

  test("a body that fails while streaming is GATEWAY_UNAVAILABLE with the cause", async () => {
    const broken = new Error("connection reset");
    const fetch = async () => ({ status: 200, arrayBuffer: () => Promise.reject(broken) });
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await assert.rejects(port.post("/v1/rate/acquire", bytes("{}")), { code: "GATEWAY_UNAVAILABLE", cause: broken });
  });

  test("a missing fetch or baseUrl is refused with INVALID_INPUT when the port is made", () => {
    assert.throws(() => fetchPort({ baseUrl: "http://gw" }), {
      code: "INVALID_INPUT",
      message: /fetch must be a function/,
    });
    assert.throws(() => fetchPort({ fetch: globalThis.fetch }), {
      code: "INVALID_INPUT",
      message: /baseUrl must be a string/,
    });
    assert.throws(() => fetchPort(undefined), { code: "INVALID_INPUT" });
    assert.throws(() => fetchPort({ fetch, baseUrl: "http://gw", headers: 42 }), { code: "INVALID_INPUT" });
  });

  test("a port in the old shape (methods per call) is refused with INVALID_INPUT naming the transport", () => {
    const old = { acquire() {}, release() {}, penalize() {}, charge() {} };
    assert.throws(() => new GatewayRateState(old), { code: "INVALID_INPUT", message: /post\(path, body\)/ });
  });
});

describe("the client's codec, through a GatewayClient", () => {
  test("a 2xx answer resolves to the decoded message", async () => {
    const grant = { granted: 2, waitMs: 0, scheduledAtMs: [1000, 1050], serverNowMs: 1000 };
    assert.deepEqual(await client(200, JSON.stringify(grant)).acquire(acquireReq), grant);
  });

  test("a 409 budget answer rejects with BUDGET_EXCEEDED and its key, observed and limit", async () => {
    const message = "Play execution toolCall budget exceeded (4/3).";
    const port = client(409, errorJson({ code: "BUDGET_EXCEEDED", message, key: "toolCall", observed: 4, limit: 3 }));
    await assert.rejects(
      port.charge({ rootRunId: "r", reservationId: "x", charges: [{ key: "toolCall", amount: 1, limit: 3 }] }),
      (error) => {
        assert.ok(error instanceof Error);
        assert.equal(error.code, "BUDGET_EXCEEDED");
        assert.ok(error.message.startsWith(message), error.message);
        assert.equal(error.key, "toolCall");
        assert.equal(error.observed, 4);
        assert.equal(error.limit, 3);
        assert.equal("cooldownUntilMs" in error, false);
        return true;
      },
    );
  });

  test("a 403 answer rejects with FORBIDDEN_SCOPE and the gateway's message", async () => {
    const port = client(
      403,
      errorJson({ code: "FORBIDDEN_SCOPE", message: "rateScopeToken does not grant bucket org-1:openai" }),
    );
    await assert.rejects(port.acquire(acquireReq), {
      code: "FORBIDDEN_SCOPE",
      message: "rateScopeToken does not grant bucket org-1:openai",
    });
  });

  test("a cooldown answer carries cooldownUntilMs", async () => {
    const port = client(
      429,
      errorJson({ code: "PROVIDER_EXHAUSTED", message: "cooling down", cooldownUntilMs: 123456 }),
    );
    await assert.rejects(port.acquire(acquireReq), { code: "PROVIDER_EXHAUSTED", cooldownUntilMs: 123456 });
  });

  test("a non-JSON 502 is GATEWAY_UNAVAILABLE naming the status, the endpoint and the body", async () => {
    await assert.rejects(client(502, "<html><body>Bad Gateway</body></html>").acquire(acquireReq), (error) => {
      assert.equal(error.code, "GATEWAY_UNAVAILABLE");
      assert.match(error.message, /HTTP 502 to POST \/v1\/rate\/acquire/);
      assert.match(error.message, /Bad Gateway/);
      return true;
    });
  });

  test("a truncated, empty or non-object body and an error without a code are GATEWAY_UNAVAILABLE", async () => {
    const cases = [
      [200, '{"granted":2,"waitMs":0,"scheduledAtMs":[10', /not its answer/],
      [503, "", /an empty body/],
      [200, "[1,2]", /not its answer/],
      [200, "null", /not its answer/],
      [500, JSON.stringify({ message: "internal" }), /without an error code/],
    ];
    for (const [status, body, why] of cases) {
      await assert.rejects(client(status, body).penalize({ bucketId: "b", cooldownMs: 1 }), (error) => {
        assert.equal(error.code, "GATEWAY_UNAVAILABLE", body);
        assert.match(error.message, new RegExp(`HTTP ${status} to POST`));
        assert.match(error.message, why);
        return true;
      });
    }
  });

  test("a code this client does not know surfaces as GATEWAY_UNAVAILABLE with the gateway's message", async () => {
    await assert.rejects(
      client(418, errorJson({ code: "TEAPOT", message: "short and stout" })).acquire(acquireReq),
      (error) => {
        assert.equal(error.code, "GATEWAY_UNAVAILABLE");
        assert.match(error.message, /short and stout/);
        return true;
      },
    );
  });

  test("a transport answering the wrong shape is GATEWAY_UNAVAILABLE naming what was wrong", async () => {
    for (const [answer, why] of [
      [{ status: 200, body: "{}" }, /body must be a Uint8Array/],
      [{ status: "200", body: new Uint8Array() }, /status must be an integer/],
      [null, /must be an object/],
      [{ status: 200, body: new Uint8Array(70_000) }, /the limit is 65536/],
    ]) {
      const port = new GatewayClient({ post: async () => answer });
      await assert.rejects(port.acquire(acquireReq), (error) => {
        assert.equal(error.code, "GATEWAY_UNAVAILABLE");
        assert.match(error.message, why);
        return true;
      });
    }
  });
});
