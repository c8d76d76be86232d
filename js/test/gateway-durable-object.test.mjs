// PacelineGateway and routeGatewayRequest in Node, against a fake object
// state and a fake namespace: when state is stored, what a restart
// continues from, and where the router sends each request.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { fakeDurableObjectState } from "../lib/fake-durable-object.mjs";
import { paceline } from "../lib/node-package.mjs";

const { PacelineGateway, routeGatewayRequest, mintRateScopeToken, mintRunScopeToken } = paceline;
const rules = [{ requestsPerWindow: 20, windowMs: 1000 }];

async function startObject(env = {}, store = new Map()) {
  const state = fakeDurableObjectState({ store, lateWrites: true });
  const object = new PacelineGateway(state, env);
  await state.ready;
  return { state, object };
}

const post = (path, body) =>
  new Request(`https://gateway${path}`, {
    method: "POST",
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

async function call(object, path, body) {
  const res = await object.fetch(post(path, body));
  return { status: res.status, body: await res.json() };
}

describe("PacelineGateway", () => {
  test("a grant is stored before its response is returned", async () => {
    const { state, object } = await startObject();
    const res = await object.fetch(post("/v1/rate/acquire", { bucketId: "b", rules, requested: 3 }));
    assert.equal(state.puts, 1, "the write had landed when fetch resolved");
    assert.ok(state.store.get("bucket:b") instanceof Uint8Array);
    assert.ok(state.store.get("meta") instanceof Uint8Array);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/json");
    assert.equal((await res.json()).granted, 3);
  });

  test("a restarted object continues the stored timeline", async () => {
    const store = new Map();
    const before = await startObject({}, store);
    const { body: grant } = await call(before.object, "/v1/rate/acquire", { bucketId: "b", rules, requested: 10 });
    const last = grant.scheduledAtMs.at(-1);

    const after = await startObject({}, store);
    const { body: next } = await call(after.object, "/v1/rate/acquire", { bucketId: "b", rules, requested: 1 });
    assert.ok(
      next.scheduledAtMs[0] >= last + 50,
      `${next.scheduledAtMs[0]} re-enters the stored timeline (last ${last})`,
    );
  });

  test("a restarted object spaces a freed slot's next call from its last", async () => {
    // Five slots, each a fifth of 20 calls a second: calls on one slot are
    // at least 250 ms apart, and the stored bucket record says when each
    // freed slot may start again.
    const store = new Map();
    const slotRules = [{ requestsPerWindow: 20, windowMs: 1000, maxConcurrency: 5 }];
    const before = await startObject({}, store);
    const { body: grant } = await call(before.object, "/v1/rate/acquire", {
      bucketId: "b",
      rules: slotRules,
      requested: 5,
    });
    assert.equal(grant.granted, 5);
    const last = grant.scheduledAtMs.at(-1);
    const leaseIds = [grant.leaseIds.at(-1)];
    const released = await call(before.object, "/v1/rate/release", { bucketId: "b", rules: slotRules, leaseIds });
    assert.deepEqual(released.body, { released: 1 });

    const after = await startObject({}, store);
    const { body: next } = await call(after.object, "/v1/rate/acquire", {
      bucketId: "b",
      rules: slotRules,
      requested: 1,
    });
    assert.equal(next.granted, 1);
    assert.ok(next.scheduledAtMs[0] >= last + 250, `${next.scheduledAtMs[0]} is a spacing after ${last}`);
  });

  test("requests that change nothing cost no write; a refused charge is state", async () => {
    const secret = "object-secret";
    const { state, object } = await startObject({ PACELINE_SECRET: secret });
    assert.equal((await call(object, "/v1/rate/acquire", { bucketId: "b", rules, requested: 1 })).status, 403);
    assert.equal((await call(object, "/v1/rate/acquire", "{")).status, 400);
    const rateScopeToken = mintRateScopeToken({ secret, bucketId: "b", expiresAtMs: Date.now() + 60_000 });
    const released = await call(object, "/v1/rate/release", {
      bucketId: "b",
      rateScopeToken,
      rules,
      leaseIds: ["nope"],
    });
    assert.deepEqual(released, { status: 200, body: { released: 0 } });
    assert.equal(state.puts, 0);

    const charges = [{ key: "toolCall", amount: 4, limit: 3 }];
    const forged = await call(object, "/v1/budget/charge", { rootRunId: "run-1", reservationId: "r0", charges });
    assert.equal(forged.status, 403, "with a secret a charge needs the run's token");
    assert.equal(state.puts, 0);
    const runScopeToken = mintRunScopeToken({ secret, rootRunId: "run-1", expiresAtMs: Date.now() + 60_000 });
    const charge = { rootRunId: "run-1", runScopeToken, reservationId: "r1", charges };
    const refused = await call(object, "/v1/budget/charge", charge);
    assert.equal(refused.status, 409);
    assert.equal(state.puts, 1, "the ledger remembers the refused reservation");

    // The remembered answer survives a restart: the retry is refused the same way.
    const restarted = await startObject({ PACELINE_SECRET: secret }, state.store);
    const retried = await call(restarted.object, "/v1/budget/charge", charge);
    assert.deepEqual(retried, refused);
  });

  test("an acquire writes only its bucket's record, however many buckets the object holds", async () => {
    const { state, object } = await startObject();
    const grant = (bucketId) => call(object, "/v1/rate/acquire", { bucketId, rules, requested: 1 });
    await grant("b-0");
    const alone = state.written;
    for (let i = 1; i < 200; i++) await grant(`b-${i}`);
    const before = state.written;
    await grant("b-0");
    const oneOf200 = state.written - before;
    assert.equal(state.store.size, 201, "200 bucket records and the meta record");
    assert.ok(oneOf200 <= alone, `an acquire among 200 buckets wrote ${oneOf200} bytes, alone ${alone}`);
  });

  test("an object that stored one snapshot moves it to records and continues from them", async () => {
    const { GatewayCore } = paceline;
    const core = new GatewayCore({ windowGuardMs: 25 });
    const answer = core.handle(
      "POST",
      "/v1/rate/acquire",
      JSON.stringify({ bucketId: "b", rules, requested: 10 }),
      Date.now(),
    );
    const last = JSON.parse(new TextDecoder().decode(answer.body)).scheduledAtMs.at(-1);
    const store = new Map([["snapshot", core.snapshot()]]);
    const { object } = await startObject({}, store);
    assert.equal(store.has("snapshot"), false);
    assert.ok(store.get("bucket:b") instanceof Uint8Array);
    const again = await startObject({}, store);
    const { body: next } = await call(again.object, "/v1/rate/acquire", { bucketId: "b", rules, requested: 1 });
    assert.ok(next.scheduledAtMs[0] >= last + 50, `${next.scheduledAtMs[0]} continues after ${last}`);
    void object;
  });

  test("the env sets the horizon; numbers may come as strings", async () => {
    const { object } = await startObject({ PACELINE_HORIZON_MS: "5000" });
    const { body } = await call(object, "/v1/rate/acquire", { bucketId: "b", rules, requested: 60 });
    // 60 permits at 20 per second reach 3 s ahead; the default 1 s horizon stops near 20.
    assert.equal(body.granted, 60);
  });

  test("a malformed env value fails the object with INVALID_INPUT", () => {
    assert.throws(() => new PacelineGateway(fakeDurableObjectState(), { PACELINE_HORIZON_MS: "soon" }), {
      code: "INVALID_INPUT",
      message: /PACELINE_HORIZON_MS/,
    });
    assert.throws(() => new PacelineGateway(fakeDurableObjectState(), { PACELINE_LEASE_TTL_MS: "" }), {
      code: "INVALID_INPUT",
    });
  });
});

/** A namespace that records which names were asked for and what each object was sent. */
function fakeNamespace() {
  const names = [];
  const sent = [];
  return {
    names,
    sent,
    idFromName(name) {
      names.push(name);
      return { name };
    },
    get(id) {
      return {
        async fetch(request) {
          sent.push({ name: id.name, method: request.method, url: request.url, body: await request.text() });
          return new Response('{"forwarded":true}');
        },
      };
    },
  };
}

describe("routeGatewayRequest", () => {
  test("rate calls go to the object named by bucketId, with the body unchanged", async () => {
    const ns = fakeNamespace();
    const body = JSON.stringify({ bucketId: "org-1:openai", rules, requested: 2 });
    const res = await routeGatewayRequest(new Request("https://gw/v1/rate/acquire", { method: "POST", body }), {
      PACELINE_GATEWAY: ns,
    });
    assert.deepEqual(await res.json(), { forwarded: true });
    assert.deepEqual(ns.sent, [{ name: "org-1:openai", method: "POST", url: "https://gw/v1/rate/acquire", body }]);
  });

  test("charges go to the run's object, bucket views to the bucket's, under any binding name", async () => {
    const ns = fakeNamespace();
    const env = { GATE: ns };
    const charge = JSON.stringify({ rootRunId: "run-9", reservationId: "x", charges: [] });
    await routeGatewayRequest(
      new Request("https://gw/v1/budget/charge", { method: "POST", body: charge }),
      env,
      "GATE",
    );
    await routeGatewayRequest(new Request("https://gw/v1/rate/buckets/org-1%3Aopenai?token=t"), env, "GATE");
    assert.deepEqual(ns.names, ["run:run-9", "org-1:openai"]);
    assert.equal(ns.sent[1].url, "https://gw/v1/rate/buckets/org-1%3Aopenai?token=t");
    assert.equal(ns.sent[1].method, "GET");
  });

  test("a body that is not JSON or lacks the id is a 400 that wakes no object", async () => {
    const ns = fakeNamespace();
    const cases = [
      ["/v1/rate/acquire", "{not json", /not valid JSON/],
      ["/v1/rate/penalize", JSON.stringify({ cooldownMs: 10 }), /bucketId is required/],
      ["/v1/rate/release", JSON.stringify({ bucketId: 7 }), /bucketId is required/],
      ["/v1/rate/acquire", "null", /bucketId is required/],
      ["/v1/budget/charge", JSON.stringify({ bucketId: "b" }), /rootRunId is required/],
    ];
    for (const [path, body, why] of cases) {
      const res = await routeGatewayRequest(new Request(`https://gw${path}`, { method: "POST", body }), {
        PACELINE_GATEWAY: ns,
      });
      assert.equal(res.status, 400, body);
      assert.equal(res.headers.get("content-type"), "application/json");
      const { error } = await res.json();
      assert.equal(error.code, "INVALID_INPUT");
      assert.match(error.message, why);
    }
    assert.deepEqual(ns.names, []);
  });

  test("unknown paths and wrong methods are answered here in the error shape", async () => {
    const ns = fakeNamespace();
    const env = { PACELINE_GATEWAY: ns };
    const notFound = await routeGatewayRequest(new Request("https://gw/v2/other", { method: "POST", body: "{}" }), env);
    assert.equal(notFound.status, 404);
    assert.equal((await notFound.json()).error.code, "INVALID_INPUT");
    const wrongMethod = await routeGatewayRequest(new Request("https://gw/v1/rate/acquire"), env);
    assert.equal(wrongMethod.status, 405);
    const badEscape = await routeGatewayRequest(new Request("https://gw/v1/rate/buckets/%E0%A4%A"), env);
    assert.equal(badEscape.status, 400);
    assert.deepEqual(ns.names, []);
  });

  test("a missing binding is a configuration error, not a 4xx", async () => {
    await assert.rejects(
      routeGatewayRequest(new Request("https://gw/v1/rate/acquire", { method: "POST", body: "{}" }), {}),
      /env\.PACELINE_GATEWAY is not a Durable Object namespace binding/,
    );
  });
});
