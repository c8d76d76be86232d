// A stand-in for a rate-limited provider API, on loopback only. It is the
// referee of the benchmark: it enforces a true limit that the contenders only
// know by configuration, and it records every arrival so that overshoot is
// measured where it matters (at the provider), not where a limiter thinks it
// dispatched.
import http from "node:http";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";

const WINDOW_MS = 1000;

/** Milliseconds since the epoch with sub-millisecond resolution; comparable across processes. */
export const nowMs = () => performance.timeOrigin + performance.now();

/**
 * @param {{rps: number, maxConcurrency: number, latencyMs?: [number, number], answerDelayMs?: number}} options
 *   the true limit at the start, the range an accepted call is held for, and
 *   how much longer every answer takes to reach the caller (a provider far
 *   away: the call no longer holds the provider meanwhile)
 */
export async function startProvider({ rps, maxConcurrency, latencyMs = [20, 60], answerDelayMs = 0 }) {
  let schedule = [{ atMs: -Infinity, rps, maxConcurrency }];
  // Whether every answer states the rate in force (`X-RateLimit-Limit`).
  let statesLimit = false;
  let records = [];
  // Accepted arrivals of the last window, oldest first: what the rate rule counts.
  let acceptedTimes = [];
  let inFlight = 0;

  const limitAt = (t) => {
    let current = schedule[0];
    for (const entry of schedule) if (entry.atMs <= t) current = entry;
    return current;
  };

  const answer = (send) => (answerDelayMs > 0 ? setTimeout(send, answerDelayMs) : send());
  const server = http.createServer((req, res) => {
    const t = nowMs();
    const limit = limitAt(t);
    while (acceptedTimes.length > 0 && acceptedTimes[0] <= t - WINDOW_MS) acceptedTimes.shift();
    const record = { t, status: 200, reason: null, inFlight: inFlight + 1 };
    records.push(record);
    // Rejected calls do not count against the rate, as with most providers;
    // the arrival is still recorded, since the limiter did send it.
    let retryAfterMs = 0;
    // A bound of 0 is none (`--max-concurrency 0`).
    if (limit.maxConcurrency > 0 && inFlight >= limit.maxConcurrency) {
      record.reason = "concurrency";
      retryAfterMs = 1000;
    } else if (acceptedTimes.length >= limit.rps) {
      record.reason = "rate";
      retryAfterMs = acceptedTimes[acceptedTimes.length - limit.rps] + WINDOW_MS - t;
    }
    req.resume();
    // Only the limit: the window slides, so no reset time would be true (in
    // whole seconds it would say 1 almost always), and what remains of the
    // window says no more than the limit does.
    const stated = statesLimit ? { "x-ratelimit-limit": String(limit.rps) } : {};
    if (record.reason) {
      record.status = 429;
      // HTTP allows only whole seconds here, so a client learns "about one
      // second" even when the window frees up sooner.
      const headers = { ...stated, "retry-after": String(Math.max(1, Math.ceil(retryAfterMs / 1000))) };
      answer(() => {
        res.writeHead(429, headers);
        res.end(record.reason);
      });
      return;
    }
    acceptedTimes.push(t);
    inFlight += 1;
    const [lo, hi] = latencyMs;
    setTimeout(
      () => {
        inFlight -= 1;
        answer(() => {
          res.writeHead(200, { ...stated, "content-type": "text/plain" });
          res.end("ok");
        });
      },
      lo + Math.random() * (hi - lo),
    );
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${server.address().port}/`;

  return {
    url,
    /** Changes the true limit from `atMs` on (now by default); earlier arrivals keep the old one. */
    setLimit(limit, atMs = nowMs()) {
      schedule = [...schedule.filter((e) => e.atMs < atMs), { atMs, ...limit }];
    },
    /**
     * Forgets all arrivals and sets one limit, for the next contender; with
     * `statesLimit`, every answer states the rate in force.
     */
    reset(limit, options = {}) {
      statesLimit = options.statesLimit === true;
      schedule = [{ atMs: -Infinity, ...limit }];
      records = [];
      acceptedTimes = [];
    },
    /** Arrivals in [fromMs, toMs), oldest first. */
    records(fromMs, toMs) {
      return records.filter((r) => r.t >= fromMs && r.t < toMs);
    },
    /**
     * For each arrival in [fromMs, toMs), the arrivals (accepted or not) in
     * the 1 s window ending with it, (t - 1 s, t], and the rate in force at
     * t. These windows are exact: every busiest window ends at an arrival,
     * while windows on a fixed grid miss bursts that straddle their edges.
     */
    windowCounts(fromMs, toMs) {
      const arrivals = this.records(fromMs, toMs);
      let lo = 0;
      return arrivals.map((r, hi) => {
        while (arrivals[lo].t <= r.t - WINDOW_MS) lo += 1;
        return { t: r.t, count: hi - lo + 1, rps: limitAt(r.t).rps };
      });
    },
    /** The figures the provider itself can vouch for, over [fromMs, toMs). */
    stats(fromMs, toMs) {
      const arrivals = this.records(fromMs, toMs);
      const windows = this.windowCounts(fromMs, toMs);
      const worst = windows.reduce(
        (w, x) => (x.count - x.rps > w.overshoot ? { ...x, overshoot: x.count - x.rps } : w),
        { t: fromMs, count: 0, rps: limitAt(fromMs).rps, overshoot: -Infinity },
      );
      let capacity = 0;
      for (let i = 0; i < schedule.length; i += 1) {
        const a = Math.max(fromMs, schedule[i].atMs);
        const b = Math.min(toMs, schedule[i + 1]?.atMs ?? Infinity);
        if (b > a) capacity += (schedule[i].rps * (b - a)) / 1000;
      }
      return {
        arrivals: arrivals.length,
        accepted: arrivals.filter((r) => r.status === 200).length,
        rejectedRate: arrivals.filter((r) => r.reason === "rate").length,
        rejectedConcurrency: arrivals.filter((r) => r.reason === "concurrency").length,
        windows: windows.length,
        windowsOver: windows.filter((w) => w.count > w.rps).length,
        worstWindow: worst,
        peakInFlight: Math.max(0, ...arrivals.map((r) => r.inFlight)),
        capacity,
      };
    },
    /** Resolves once no accepted call is still being held. */
    async drain(timeoutMs = 5000) {
      const deadline = nowMs() + timeoutMs;
      while (inFlight > 0 && nowMs() < deadline) await sleep(10);
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
}
