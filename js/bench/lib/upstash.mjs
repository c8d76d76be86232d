// @upstash/ratelimit against a real redis-server. The library talks to Redis
// only through the handful of methods of an @upstash/redis client that its
// single-region limiters call (evalsha, then eval when Redis answers
// NOSCRIPT), so a small ioredis-backed object stands in for that REST client.
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import Redis from "ioredis";
import { Ratelimit } from "@upstash/ratelimit";
import { countRedisCommands } from "./redis-count.mjs";

// Upstash's scripts open with `#!lua flags=allow-key-locking`, a flag that
// Redis 7.0 (Debian bookworm's) rejects. It only lets newer servers run the
// script with finer locking, so it is dropped and the rest sent as is. The
// library addresses scripts by the SHA of its own text; the adapter maps that
// SHA to the one Redis knows, so the usual evalsha-first path still costs one
// command per call once a script is loaded.
const UNSUPPORTED_FLAG = /^#!lua flags=allow-key-locking\n/;

function upstashRedisAdapter(client) {
  const loadedSha = new Map();
  const toRedis = (script) => script.replace(UNSUPPORTED_FLAG, "#!lua\n");
  return {
    async evalsha(sha, keys, args) {
      return client.evalsha(loadedSha.get(sha) ?? sha, keys.length, ...keys, ...args);
    },
    async eval(script, keys, args) {
      const sent = toRedis(script);
      const theirs = createHash("sha1").update(script).digest("hex");
      const result = await client.eval(sent, keys.length, ...keys, ...args);
      loadedSha.set(theirs, createHash("sha1").update(sent).digest("hex"));
      return result;
    },
  };
}

/**
 * A contender that waits with `blockUntilReady`, as the library's docs show
 * for delaying (rather than rejecting) a request.
 * @param {(config: object) => unknown} algorithm builds the Ratelimit limiter
 */
export async function createUpstashContender(config, algorithm) {
  const sentCommands = countRedisCommands();
  const client = new Redis({ host: config.redis.host, port: config.redis.port });
  await client.ping();
  const ratelimit = new Ratelimit({
    redis: upstashRedisAdapter(client),
    limiter: algorithm(config),
    prefix: `bench:${config.runId}`,
    analytics: false,
    enableTelemetry: false,
  });
  const errors = [];

  return {
    async acquire() {
      for (;;) {
        const result = await ratelimit.blockUntilReady("provider", 30_000);
        // "timeout" means Redis took longer than the library's 5 s timeout and
        // it let the call through unchecked; worth seeing if it ever happens.
        if (result.reason === "timeout") errors.push("ratelimit timed out and allowed a call");
        if (result.success) return {};
      }
    },
    async report(_permit, { status, retryAfterMs, retry }) {
      // The library has no notion of a provider's 429 or of concurrency, so
      // all a caller can do is honour Retry-After before trying again.
      if (status === 429 && retry) await sleep(retryAfterMs);
      return undefined;
    },
    roundTrips: sentCommands,
    errors: () => errors,
    async close() {
      await client.quit();
    },
  };
}
