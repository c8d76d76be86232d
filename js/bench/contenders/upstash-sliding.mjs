// @upstash/ratelimit's sliding window, the algorithm its README leads with:
// slidingWindow(N, "1 s") for N requests per second, shared through Redis.
import { Ratelimit } from "@upstash/ratelimit";
import { createUpstashContender } from "../lib/upstash.mjs";

export const label = "@upstash/ratelimit 2.2.0 slidingWindow";

export function describe({ rps }) {
  return `slidingWindow(${rps}, "1 s"), blockUntilReady, no concurrency limit (the library has none)`;
}

export function createContender(config) {
  return createUpstashContender(config, ({ rps }) => Ratelimit.slidingWindow(rps, "1 s"));
}
