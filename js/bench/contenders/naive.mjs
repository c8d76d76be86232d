// The baseline: no coordination at all. Each of the N processes owns a token
// bucket with 1/N of the rate and 1/N of the concurrency, as one would split
// a limit by hand across replicas.
import { setTimeout as sleep } from "node:timers/promises";

export const label = "naive per-process token bucket";

export function describe({ rps, maxConcurrency, processes }) {
  const share = perProcess({ rps, maxConcurrency, processes });
  return `each of ${processes} processes: ${share.rps} req/s, bucket of ${share.burst} starting full, ${share.maxConcurrency} concurrent`;
}

function perProcess({ rps, maxConcurrency, processes }) {
  const share = rps / processes;
  // A bucket holding one second of tokens is the textbook default; flooring
  // the concurrency share keeps the sum at or under the real limit.
  return {
    rps: share,
    burst: Math.max(1, Math.floor(share)),
    maxConcurrency: Math.max(1, Math.floor(maxConcurrency / processes)),
  };
}

export async function createContender(config) {
  const { rps, burst, maxConcurrency } = perProcess(config);
  let tokens = burst;
  let refilledAt = performance.now();
  let inFlight = 0;
  const waiters = [];
  let timer = null;

  const pump = () => {
    const now = performance.now();
    tokens = Math.min(burst, tokens + ((now - refilledAt) * rps) / 1000);
    refilledAt = now;
    while (waiters.length > 0 && tokens >= 1 && inFlight < maxConcurrency) {
      tokens -= 1;
      inFlight += 1;
      waiters.shift()();
    }
    if (waiters.length > 0 && tokens < 1 && timer === null) {
      timer = setTimeout(
        () => {
          timer = null;
          pump();
        },
        Math.ceil(((1 - tokens) * 1000) / rps),
      );
    }
  };

  return {
    acquire() {
      return new Promise((resolve) => {
        waiters.push(() => resolve({}));
        pump();
      });
    },
    async report(_permit, { status, retryAfterMs }) {
      inFlight -= 1;
      pump();
      if (status === 429) await sleep(retryAfterMs);
    },
    roundTrips: () => 0,
    async close() {
      clearTimeout(timer);
    },
  };
}
