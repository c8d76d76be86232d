// Bottleneck in clustering mode: every process runs a limiter with the same
// id, and the settings and the running count live in Redis. Configured as
// its README says for "N requests per second, at most M at a time":
// minTime = 1000 / N and maxConcurrent = M, an `expiration` on every job and
// an "error" listener; a 429 is retried the documented way, by returning the
// delay from the "failed" event.
import Bottleneck from "bottleneck";
import { countRedisCommands } from "../lib/redis-count.mjs";

export const label = "bottleneck 2.19.5 (ioredis cluster)";

export function describe({ rps, maxConcurrency }) {
  return `minTime ${minTime(rps)} ms, maxConcurrent ${maxConcurrency}, datastore ioredis, one id per run, retry via "failed"`;
}

const minTime = (rps) => Math.ceil(1000 / rps);

export async function createContender({ rps, maxConcurrency, redis, runId }) {
  const sentCommands = countRedisCommands();
  const limiter = new Bottleneck({
    id: `bench-${runId}`,
    minTime: minTime(rps),
    maxConcurrent: maxConcurrency,
    datastore: "ioredis",
    // Every process joins the same cluster; letting any of them wipe it
    // would reset the others' running count. The runner empties Redis
    // between contenders instead.
    clearDatastore: false,
    clientOptions: { host: redis.host, port: redis.port },
  });
  const errors = [];
  limiter.on("error", (error) => errors.push(error));
  // Bottleneck re-runs a failed job after the returned delay without queueing
  // it again: the retry keeps its cluster slot and skips minTime, which is
  // part of what this contender is measured on.
  limiter.on("failed", (error) => (error.retry ? error.retryAfterMs : undefined));
  await limiter.ready();

  return {
    acquire() {
      return new Promise((resolve, reject) => {
        const job = { deliver: resolve, delivered: false };
        limiter
          .schedule(
            { expiration: 10_000 },
            () =>
              new Promise((finish, fail) => {
                job.delivered = true;
                job.deliver({ job, finish, fail });
              }),
          )
          .catch((error) => {
            if (!job.delivered) reject(error);
            else if (!error.provider429) errors.push(error);
          });
      });
    },
    report(permit, { status, retryAfterMs, retry }) {
      if (status !== 429) {
        permit.finish();
        return Promise.resolve(undefined);
      }
      const failure = Object.assign(new Error("provider answered 429"), { provider429: true, retryAfterMs, retry });
      if (!retry) {
        permit.fail(failure);
        return Promise.resolve(undefined);
      }
      return new Promise((resolve) => {
        permit.job.deliver = resolve;
        permit.fail(failure);
      });
    },
    roundTrips: sentCommands,
    errors: () => errors.map(String),
    async close() {
      await limiter.disconnect();
    },
  };
}
