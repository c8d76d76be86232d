// The Node dev gateway, started in this process on a free port and called
// over real loopback HTTP through fetchPort and a GatewayClient; and once
// as a CLI.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, test } from "node:test";
import { startDevGateway } from "../gateway/node-server.mjs";
import { paceline } from "../lib/node-package.mjs";
import { repoRoot } from "../lib/bundle-worker.mjs";

const { fetchPort, mintRateScopeToken, mintRunScopeToken, GatewayBudgetState, GatewayClient } = paceline;
const rules = [{ requestsPerWindow: 20, windowMs: 1000 }];

const gaps = (times) => times.slice(1).map((t, i) => t - times[i]);

describe("node dev gateway", () => {
  let gateway;
  let port;
  before(async () => {
    // No window guard, so the spacing is exactly the rule's.
    gateway = await startDevGateway({ options: { windowGuardMs: 0 } });
    port = new GatewayClient(fetchPort({ fetch: globalThis.fetch, baseUrl: gateway.url }));
  });
  after(() => gateway?.close());

  test("listens on loopback at the port it reports", () => {
    assert.match(gateway.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(gateway.url, "http://127.0.0.1:0");
  });

  test("two acquires draw from one timeline spaced 50 ms for a 20/1000 rule", async () => {
    // The first grant runs the timeline 500 ms ahead, so the second lands on
    // it however long the round trip takes (up to that).
    const first = await port.acquire({ bucketId: "org-1:openai", rules, requested: 10 });
    const second = await port.acquire({ bucketId: "org-1:openai", rules, requested: 5 });
    for (const grant of [first, second]) {
      assert.equal(grant.granted, grant.scheduledAtMs.length);
      assert.equal(typeof grant.serverNowMs, "number");
      assert.ok(grant.scheduledAtMs[0] >= grant.serverNowMs, "no permit before the gateway's now");
    }
    assert.equal(first.granted, 10);
    assert.equal(second.granted, 5);
    assert.ok(first.scheduledAtMs[0] - first.serverNowMs <= 1, "a fresh bucket's first permit is now");
    const times = [...first.scheduledAtMs, ...second.scheduledAtMs];
    assert.deepEqual(gaps(times), Array(times.length - 1).fill(50));
    assert.ok(second.serverNowMs >= first.serverNowMs);
  });

  test("a bad body is a 400 INVALID_INPUT, over HTTP and through the port", async () => {
    const res = await fetch(`${gateway.url}/v1/rate/acquire`, { method: "POST", body: "not json" });
    assert.equal(res.status, 400);
    assert.equal(res.headers.get("content-type"), "application/json");
    const { error } = await res.json();
    assert.equal(error.code, "INVALID_INPUT");
    assert.match(error.message, /not valid JSON/);

    const transport = fetchPort({ fetch: globalThis.fetch, baseUrl: gateway.url });
    const reply = await transport.post("/v1/rate/acquire", new TextEncoder().encode('{"bucketId":"b","requested":1}'));
    assert.equal(reply.status, 400);
    assert.match(JSON.parse(new TextDecoder().decode(reply.body)).error.message, /rules/);
    // The client's codec refuses the same request before sending it.
    await assert.rejects(port.acquire({ bucketId: "org-1:openai", requested: 1 }), (e) => {
      assert.equal(e.code, "INVALID_INPUT");
      assert.match(e.message, /rules/);
      return true;
    });
  });

  test("a body over the core's limit is a 400 naming the limit", async () => {
    const res = await fetch(`${gateway.url}/v1/rate/acquire`, { method: "POST", body: "x".repeat(200_000) });
    assert.equal(res.status, 400);
    const { error } = await res.json();
    assert.equal(error.code, "INVALID_INPUT");
    assert.match(error.message, /the limit is 65536/);
  });

  test("the bucket view reflects the grants", async () => {
    const res = await fetch(`${gateway.url}/v1/rate/buckets/${encodeURIComponent("org-1:openai")}`);
    assert.equal(res.status, 200);
    const view = await res.json();
    assert.equal(view.bucketId, "org-1:openai");
    assert.deepEqual(view.rules, rules);
    assert.equal(view.liveLeases, 0);
  });
});

describe("node dev gateway with a secret", () => {
  const secret = "dev-secret";
  let gateway;
  before(async () => {
    gateway = await startDevGateway({ secret });
  });
  after(() => gateway?.close());

  test("a rate call needs the bucket's token", async () => {
    const port = new GatewayClient(fetchPort({ fetch: globalThis.fetch, baseUrl: gateway.url }));
    const req = { bucketId: "org-2:openai", rules, requested: 1 };
    await assert.rejects(port.acquire(req), { code: "FORBIDDEN_SCOPE" });
    const other = mintRateScopeToken({ secret, bucketId: "org-3:openai", expiresAtMs: Date.now() + 60_000 });
    await assert.rejects(port.acquire({ ...req, rateScopeToken: other }), { code: "FORBIDDEN_SCOPE" });
    const token = mintRateScopeToken({ secret, bucketId: "org-2:openai", expiresAtMs: Date.now() + 60_000 });
    const grant = await port.acquire({ ...req, rateScopeToken: token });
    assert.equal(grant.granted, 1);
  });

  test("a charge needs the run's token, which a GatewayBudgetState sends from its options", async () => {
    const port = fetchPort({ fetch: globalThis.fetch, baseUrl: gateway.url });
    const charges = [{ key: "toolCall", amount: 1, limit: 1000 }];
    const bare = new GatewayBudgetState(port);
    await assert.rejects(bare.charge({ rootRunId: "run-7", charges }), { code: "FORBIDDEN_SCOPE" });
    const runScopeToken = mintRunScopeToken({ secret, rootRunId: "run-7", expiresAtMs: Date.now() + 60_000 });
    const scoped = new GatewayBudgetState(port, { runScopeToken });
    const { counters } = await scoped.charge({ rootRunId: "run-7", charges });
    assert.equal(counters.toolCall, 256, "the gateway counted the client's first block of 256");
    await assert.rejects(scoped.charge({ rootRunId: "run-8", charges }), { code: "FORBIDDEN_SCOPE" });
  });
});

test("the CLI prints the address it serves on and answers there", async () => {
  const child = spawn(process.execPath, [join(repoRoot, "js/gateway/node-server.mjs"), "--port", "0"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const [line] = await once(createInterface({ input: child.stdout }), "line");
    const match = /^paceline dev gateway on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
    assert.ok(match, line);
    const res = await fetch(`${match[1]}/v1/rate/buckets/nobody`);
    assert.equal(res.status, 404);
    assert.equal((await res.json()).error.code, "INVALID_INPUT");
  } finally {
    child.kill();
  }
});
