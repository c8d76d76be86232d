// fetchPort against a fake fetch: what it sends, what it resolves to, and
// which Error each kind of bad answer becomes.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { fetchPort } from "../../pkg/index.js";

const acquireReq = {
  bucketId: "org-1:openai",
  rules: [{ requestsPerWindow: 20, windowMs: 1000 }],
  requested: 2,
};

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

describe("fetchPort", () => {
  test("posts JSON to the acquire endpoint and resolves to the parsed grant", async () => {
    const grant = { granted: 2, waitMs: 0, scheduledAtMs: [1000, 1050], serverNowMs: 1000 };
    const { fetch, calls } = fakeFetch(200, JSON.stringify(grant));
    const port = fetchPort({ fetch, baseUrl: "https://gw.example/", headers: { authorization: "Bearer t" } });
    assert.deepEqual(await port.acquire(acquireReq), grant);
    assert.equal(calls.length, 1);
    const [{ self, url, init }] = calls;
    assert.equal(self, undefined, "fetch is called as a plain function");
    assert.equal(url, "https://gw.example/v1/rate/acquire");
    assert.equal(init.method, "POST");
    assert.equal(init.headers.get("content-type"), "application/json");
    assert.equal(init.headers.get("authorization"), "Bearer t");
    assert.deepEqual(JSON.parse(init.body), acquireReq);
  });

  test("each call has its own endpoint", async () => {
    const { fetch, calls } = fakeFetch(200, "{}");
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await port.acquire(acquireReq);
    await port.release({ bucketId: "b", rules: acquireReq.rules, leaseIds: ["l1"] });
    await port.penalize({ bucketId: "b", cooldownMs: 1000 });
    await port.charge({ rootRunId: "r", reservationId: "x", charges: [{ key: "toolCall", amount: 1, limit: 3 }] });
    assert.deepEqual(
      calls.map((c) => c.url),
      ["http://gw/v1/rate/acquire", "http://gw/v1/rate/release", "http://gw/v1/rate/penalize", "http://gw/v1/budget/charge"],
    );
  });

  test("a 409 budget answer rejects with BUDGET_EXCEEDED and its key, observed and limit", async () => {
    const message = "Play execution toolCall budget exceeded (4/3).";
    const { fetch } = fakeFetch(
      409,
      errorJson({ code: "BUDGET_EXCEEDED", message, key: "toolCall", observed: 4, limit: 3 }),
    );
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await assert.rejects(
      port.charge({ rootRunId: "r", reservationId: "x", charges: [{ key: "toolCall", amount: 1, limit: 3 }] }),
      (error) => {
        assert.ok(error instanceof Error);
        assert.equal(error.code, "BUDGET_EXCEEDED");
        assert.equal(error.message, message);
        assert.equal(error.status, 409);
        assert.equal(error.key, "toolCall");
        assert.equal(error.observed, 4);
        assert.equal(error.limit, 3);
        assert.equal("cooldownUntilMs" in error, false);
        return true;
      },
    );
  });

  test("a 403 answer rejects with FORBIDDEN_SCOPE and the gateway's message", async () => {
    const { fetch } = fakeFetch(
      403,
      errorJson({ code: "FORBIDDEN_SCOPE", message: "rateScopeToken does not grant bucket org-1:openai" }),
    );
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await assert.rejects(port.acquire(acquireReq), {
      code: "FORBIDDEN_SCOPE",
      status: 403,
      message: "rateScopeToken does not grant bucket org-1:openai",
    });
  });

  test("a cooldown answer carries cooldownUntilMs", async () => {
    const { fetch } = fakeFetch(
      429,
      errorJson({ code: "PROVIDER_EXHAUSTED", message: "cooling down", cooldownUntilMs: 123456 }),
    );
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await assert.rejects(port.acquire(acquireReq), { code: "PROVIDER_EXHAUSTED", status: 429, cooldownUntilMs: 123456 });
  });

  test("a non-JSON 502 is GATEWAY_UNAVAILABLE naming the status and endpoint", async () => {
    const { fetch } = fakeFetch(502, "<html><body>Bad Gateway</body></html>");
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await assert.rejects(port.acquire(acquireReq), (error) => {
      assert.ok(error instanceof Error);
      assert.equal(error.code, "GATEWAY_UNAVAILABLE");
      assert.equal(error.status, 502);
      assert.match(error.message, /HTTP 502/);
      assert.match(error.message, /\/v1\/rate\/acquire/);
      assert.match(error.message, /Bad Gateway/);
      return true;
    });
  });

  test("a truncated JSON body on a 200 is GATEWAY_UNAVAILABLE, not a parse exception", async () => {
    const { fetch } = fakeFetch(200, '{"granted":2,"waitMs":0,"scheduledAtMs":[10');
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await assert.rejects(port.acquire(acquireReq), (error) => {
      assert.equal(error.code, "GATEWAY_UNAVAILABLE");
      assert.equal(error.status, 200);
      assert.match(error.message, /HTTP 200 to POST \/v1\/rate\/acquire/);
      return true;
    });
  });

  test("an empty body, a JSON non-object and an error without a code are GATEWAY_UNAVAILABLE", async () => {
    const cases = [
      [503, "", /an empty body/],
      [200, "[1,2]", /not a JSON object/],
      [200, "null", /not a JSON object/],
      [500, JSON.stringify({ message: "internal" }), /without an error code/],
    ];
    for (const [status, body, why] of cases) {
      const port = fetchPort({ fetch: fakeFetch(status, body).fetch, baseUrl: "http://gw" });
      await assert.rejects(port.penalize({ bucketId: "b", cooldownMs: 1 }), (error) => {
        assert.equal(error.code, "GATEWAY_UNAVAILABLE", body);
        assert.equal(error.status, status);
        assert.match(error.message, why);
        return true;
      });
    }
  });

  test("a code this client does not know surfaces as GATEWAY_UNAVAILABLE with that code in the message", async () => {
    const { fetch } = fakeFetch(418, errorJson({ code: "TEAPOT", message: "short and stout" }));
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await assert.rejects(port.acquire(acquireReq), (error) => {
      assert.equal(error.code, "GATEWAY_UNAVAILABLE");
      assert.equal(error.status, 418);
      assert.match(error.message, /TEAPOT: short and stout/);
      return true;
    });
  });

  test("a body that fails while streaming is GATEWAY_UNAVAILABLE with the cause", async () => {
    const broken = new Error("connection reset");
    const fetch = async () => ({ status: 200, text: () => Promise.reject(broken) });
    const port = fetchPort({ fetch, baseUrl: "http://gw" });
    await assert.rejects(port.acquire(acquireReq), (error) => {
      assert.equal(error.code, "GATEWAY_UNAVAILABLE");
      assert.equal(error.status, 200);
      assert.equal(error.cause, broken);
      return true;
    });
  });

  test("an exception from fetch itself passes through as the same object", async () => {
    const boom = new TypeError("fetch failed");
    const rejecting = fetchPort({ fetch: async () => Promise.reject(boom), baseUrl: "http://gw" });
    await assert.rejects(rejecting.acquire(acquireReq), (error) => error === boom);
    const throwing = fetchPort({
      fetch: () => {
        throw boom;
      },
      baseUrl: "http://gw",
    });
    await assert.rejects(throwing.charge({ rootRunId: "r", reservationId: "x", charges: [] }), (error) => error === boom);
  });

  test("a missing fetch or baseUrl is refused with INVALID_INPUT when the port is made", () => {
    assert.throws(() => fetchPort({ baseUrl: "http://gw" }), { code: "INVALID_INPUT", message: /fetch must be a function/ });
    assert.throws(() => fetchPort({ fetch: globalThis.fetch }), { code: "INVALID_INPUT", message: /baseUrl must be a string/ });
    assert.throws(() => fetchPort(undefined), { code: "INVALID_INPUT" });
    assert.throws(() => fetchPort({ fetch, baseUrl: "http://gw", headers: 42 }), { code: "INVALID_INPUT" });
  });
});
