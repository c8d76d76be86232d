// A GatewayBudgetState whose charge never hears back (its request was
// cancelled while the reservation was at the gateway) holds the state's
// turn for a bounded time only: the next charge takes the turn after 30 s,
// asks the gateway again for the lost reservation under its id, and is
// served from the block it reserved. Timers and the clock are node:test's
// fake ones, so the 30 s pass at once.
import assert from "node:assert/strict";
import { test } from "node:test";
import { paceline } from "../lib/node-package.mjs";

const { fetchPort, GatewayBudgetState, GatewayCore } = paceline;
const TURN_TIMEOUT_MS = 30_000;
const charges = [{ key: "toolCall", amount: 1, limit: 1000 }];

test("a charge whose answer never comes holds the budget's turn for 30 s, not for good", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_767_225_600_000 });
  const core = new GatewayCore();
  const sent = [];
  const fetch = (url, init) => {
    sent.push(JSON.parse(new TextDecoder().decode(init.body)).reservationId);
    const answer = core.handle("POST", new URL(url).pathname, init.body, Date.now());
    // The first reservation is counted, and its answer never comes back.
    if (sent.length === 1) return new Promise(() => {});
    return Promise.resolve(new Response(answer.body, { status: answer.status }));
  };
  const budget = new GatewayBudgetState(fetchPort({ fetch, baseUrl: "http://gw" }));
  budget.charge({ rootRunId: "run", charges });
  const start = Date.now();
  let answeredAt;
  const next = budget.charge({ rootRunId: "run", charges }).finally(() => {
    answeredAt = Date.now();
  });
  for (let waited = 0; waited <= 2 * TURN_TIMEOUT_MS && answeredAt === undefined; waited += 5) {
    t.mock.timers.tick(5);
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.ok(answeredAt !== undefined, "the next charge answered");
  const waited = answeredAt - start;
  assert.ok(waited >= TURN_TIMEOUT_MS && waited < TURN_TIMEOUT_MS + 100, `answered after ${waited} ms`);
  assert.deepEqual((await next).counters, {}, "served from the lost charge's block");
  assert.equal(sent.length, 2);
  assert.equal(sent[1], sent[0], "the lost reservation, asked for again under its id");
});
