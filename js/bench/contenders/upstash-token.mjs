// @upstash/ratelimit's token bucket for N requests per second, written the
// way its docs describe the parameters: refill N every second, hold at most N.
import { Ratelimit } from "@upstash/ratelimit";
import { createUpstashContender } from "../lib/upstash.mjs";

export const label = "@upstash/ratelimit 2.2.0 tokenBucket";

export function describe({ rps }) {
  return `tokenBucket(${rps}, "1 s", ${rps}), blockUntilReady, no concurrency limit (the library has none)`;
}

export function createContender(config) {
  return createUpstashContender(config, ({ rps }) => Ratelimit.tokenBucket(rps, "1 s", rps));
}
