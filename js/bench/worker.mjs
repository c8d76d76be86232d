// One of the N processes of a contender run, forked by run.mjs. It stands for
// one worker isolate: C callers, each of which always wants to make its next
// provider call, paced by the contender under test.
import { setTimeout as sleep } from "node:timers/promises";
import { nowMs } from "./provider.mjs";

// Without the runner there is nothing to report to: leave at once rather
// than keep calling the provider.
process.on("disconnect", () => process.exit(1));

function retryAfterMs(header) {
  if (header == null) return 1000;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isFinite(date) ? Math.max(0, date - Date.now()) : 1000;
}

async function callProvider(url) {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    await response.text();
    return {
      status: response.status,
      retryAfterMs: response.status === 429 ? retryAfterMs(response.headers.get("retry-after")) : 0,
      headers: response.headers,
    };
  } catch (error) {
    return { status: 0, retryAfterMs: 0, error: String(error) };
  }
}

async function run({ module, config, callers, providerUrl }) {
  const { createContender } = await import(module);
  const contender = await createContender(config);
  process.send({ type: "ready" });
  const { startAt, endAt } = await new Promise((resolve) => process.once("message", resolve));
  await sleep(Math.max(0, startAt - nowMs()));

  const roundTripsAtStart = contender.roundTrips();
  // Time from wanting to call to holding a permit, for calls dispatched
  // before the end. A call "wants" to go when the caller is free, or, after a
  // 429, once Retry-After has passed: waiting out the provider's own answer
  // is not the limiter's doing, whichever side of the interface waits it.
  const waits = [];
  let dispatched = 0;
  const fetchErrors = [];

  const caller = async () => {
    let wantAt = nowMs();
    let permit = await contender.acquire();
    for (;;) {
      const dispatchAt = nowMs();
      if (dispatchAt < endAt) waits.push(Math.max(0, dispatchAt - wantAt));
      dispatched += 1;
      const outcome = await callProvider(providerUrl);
      const answeredAt = nowMs();
      if (outcome.error && fetchErrors.length < 5) fetchErrors.push(outcome.error);
      const retry = answeredAt < endAt;
      // The provider's headers go along: a contender that reads what the
      // provider says of its limit may use them; so does when the call went
      // out, for one that reads what the provider took before it.
      const next = await contender.report(permit, {
        status: outcome.status,
        retryAfterMs: outcome.retryAfterMs,
        headers: outcome.headers,
        sentAtMs: Math.floor(dispatchAt),
        retry,
      });
      wantAt = outcome.status === 429 ? answeredAt + outcome.retryAfterMs : nowMs();
      if (next) {
        permit = next;
        continue;
      }
      if (nowMs() >= endAt) return;
      permit = await contender.acquire();
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));

  const result = {
    type: "result",
    waits,
    dispatched,
    roundTrips: contender.roundTrips() - roundTripsAtStart,
    errors: [...(contender.errors?.() ?? []).slice(0, 5), ...fetchErrors],
  };
  await contender.close();
  return result;
}

process.once("message", (message) => {
  run(message).then(
    (result) => process.send(result, () => process.exit(0)),
    (error) => process.send({ type: "failed", error: error?.stack ?? String(error) }, () => process.exit(1)),
  );
});
