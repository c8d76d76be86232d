// Plain pacing: one bucket, its rules, and `schedule(fn)`. The governor is
// for budgets and plays; a caller that only wants "at most N calls a
// window across my isolates" needs a rate state and nothing else.
import * as paceline from "../paceline.js";
import { isPacelineError } from "./errors.js";

const OPTIONS = new Set([
  "port",
  "bucketId",
  "rules",
  "rateScopeToken",
  "waitUntil",
  "maxWaitMs",
  "blockHorizonMs",
  "releaseLingerMs",
]);
const PACER_OPTIONS = /** @type {const} */ (["maxWaitMs", "blockHorizonMs", "releaseLingerMs", "waitUntil"]);

/**
 * @param {string} message
 * @param {unknown} [cause]
 */
function misuse(message, cause) {
  const error = /** @type {import("./errors.js").PacelineError} */ (
    new Error(message, cause === undefined ? undefined : { cause })
  );
  error.name = "PacelineError";
  error.code = "INVALID_INPUT";
  return error;
}

/**
 * @param {unknown} options
 * @returns {import("./limiter.js").LimiterOptions}
 */
function readOptions(options) {
  if (typeof options !== "object" || options === null) {
    throw misuse("createLimiter takes { bucketId, rules, port?, rateScopeToken?, waitUntil?, maxWaitMs? }");
  }
  /** @type {Record<string, any>} */
  const read = {};
  try {
    for (const key of Object.keys(options)) {
      if (!OPTIONS.has(key)) {
        throw misuse(`createLimiter: ${key} is not a known option; known: ${[...OPTIONS].join(", ")}`);
      }
      read[key] = /** @type {Record<string, unknown>} */ (options)[key];
    }
  } catch (cause) {
    throw isPacelineError(cause, "INVALID_INPUT")
      ? cause
      : misuse("createLimiter: its options could not be read", cause);
  }
  if (typeof read.bucketId !== "string" || read.bucketId === "") {
    throw misuse("createLimiter: bucketId must be a non-empty string (the limit's name, shared by every isolate)");
  }
  let rulesIsList;
  try {
    rulesIsList = Array.isArray(read.rules) && read.rules.length > 0;
  } catch (cause) {
    // A revoked Proxy cannot even be asked whether it is an array.
    throw misuse("createLimiter: rules could not be read", cause);
  }
  if (!rulesIsList) {
    throw misuse("createLimiter: rules must be a non-empty array, e.g. [{ requestsPerWindow: 20, windowMs: 1000 }]");
  }
  if (read.waitUntil !== undefined && typeof read.waitUntil !== "function") {
    throw misuse("createLimiter: waitUntil must be a function (ctx.waitUntil.bind(ctx))");
  }
  return /** @type {import("./limiter.js").LimiterOptions} */ (read);
}

/**
 * Reads a call's `{ signal?, waitUntil? }`.
 * @param {unknown} options
 * @returns {import("./limiter.js").LimiterCallOptions}
 */
function callOptions(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== "object") throw misuse("the call's options must be { signal?, waitUntil? }");
  /** @type {AbortSignal | undefined} */
  let signal;
  /** @type {((promise: Promise<unknown>) => void) | undefined} */
  let waitUntil;
  try {
    for (const key of Object.keys(options)) {
      if (key !== "signal" && key !== "waitUntil") {
        throw misuse(`${key} is not a known call option; known: signal, waitUntil`);
      }
    }
    ({ signal, waitUntil } = /** @type {import("./limiter.js").LimiterCallOptions} */ (options));
  } catch (cause) {
    throw isPacelineError(cause, "INVALID_INPUT") ? cause : misuse("the call's options could not be read", cause);
  }
  if (waitUntil !== undefined && typeof waitUntil !== "function") {
    throw misuse("waitUntil must be a function (ctx.waitUntil.bind(ctx))");
  }
  return { signal, waitUntil };
}

/**
 * A limit held in this isolate alone. The client and limiter modules
 * ("paceline/client", "paceline/limiter") have no in-process scheduler:
 * their limiters pace through a gateway.
 * @param {import("../paceline.js").PacerOptions} pacer
 */
function localState(pacer) {
  // Looked up by name, so that a bundler does not warn that the client
  // module lacks it.
  const LocalRateState = Reflect.get(paceline, "LocalRateState");
  if (typeof LocalRateState !== "function") {
    throw misuse(
      "createLimiter: port is required with paceline/client and paceline/limiter, which pace through a shared gateway " +
        '(port: fetchPort({ fetch, baseUrl })); a limit held in this isolate alone needs "paceline"',
    );
  }
  return /** @type {import("../paceline.js").LocalRateState} */ (new LocalRateState(pacer));
}

/**
 * @param {import("./limiter.js").LimiterOptions} options
 * @returns {import("./limiter.js").Limiter}
 */
export function createLimiter(options) {
  const read = readOptions(options);
  /** @type {import("../paceline.js").PacerOptions} */
  const pacer = {};
  for (const key of PACER_OPTIONS) {
    if (read[key] !== undefined) Object.assign(pacer, { [key]: read[key] });
  }
  // Each rule's fields are checked by the state at every acquire (wrong
  // ones are INVALID_INPUT naming the field there).
  const state = read.port === undefined ? localState(pacer) : new paceline.GatewayRateState(read.port, pacer);
  /** @type {import("../paceline.js").BucketRef} */
  const bucketRef = { bucketId: read.bucketId };
  if (read.rateScopeToken !== undefined && read.rateScopeToken !== null) bucketRef.rateScopeToken = read.rateScopeToken;
  /** @type {import("../paceline.js").AcquireInput} */
  const bucket = { ...bucketRef, rules: read.rules };

  /** @param {{ signal?: AbortSignal }} [options] */
  async function acquire(options) {
    const { signal } = callOptions(options);
    return state.acquire(signal === undefined ? bucket : { ...bucket, signal });
  }

  /** A permit due now, or when to ask again; never waits. */
  function tryAcquire() {
    return state.tryAcquire(bucket);
  }

  /**
   * The handle `schedule` gives its call (when it went out, and the one
   * way to report that the provider refused it), and whether it did.
   * @param {number} sentAtMs
   * @returns {{ call: import("./limiter.js").ScheduledCall, wasRefused: () => boolean }}
   */
  function scheduledCall(sentAtMs) {
    /** @type {Promise<void> | undefined} */
    let report;
    const call = Object.freeze({
      sentAtMs,
      /** @param {{ cooldownMs: number }} input */
      refused(input) {
        if (report !== undefined) return report;
        /** @type {unknown} */
        let cooldownMs;
        try {
          ({ cooldownMs } = input);
        } catch (cause) {
          return Promise.reject(misuse("refused takes { cooldownMs } (the 429's Retry-After, in ms)", cause));
        }
        // The refused call's send time: the cut reads what the provider
        // took in the second before it, not calls sent since.
        report = Promise.resolve().then(() =>
          state.penalize({ ...bucketRef, cooldownMs: /** @type {number} */ (cooldownMs), sentAtMs }),
        );
        return report;
      },
    });
    return { call, wasRefused: () => report !== undefined };
  }

  /**
   * @template T
   * @param {(call: import("./limiter.js").ScheduledCall) => Promise<T> | T} fn
   * @param {import("./limiter.js").LimiterCallOptions} [options]
   * @returns {Promise<T>}
   */
  async function schedule(fn, options) {
    if (typeof fn !== "function") throw misuse("schedule takes a function: limiter.schedule(() => fetch(...))");
    const { signal, waitUntil } = callOptions(options);
    const permit = await state.acquire(signal === undefined ? bucket : { ...bucket, signal });
    try {
      const { call, wasRefused } = scheduledCall(Date.now());
      const result = await fn(call);
      // The call is over: told so, the pacer learns how long calls take
      // and keeps the permits a caller back from one will draw, rather
      // than giving them back to the gateway and asking again. A refused
      // call was reported as such; a call that throws tells nothing (its
      // failure may not be the provider's).
      if (!wasRefused()) state.observeSuccess(bucketRef);
      return result;
    } finally {
      const released = permit.release();
      if (waitUntil !== undefined) {
        try {
          waitUntil(released);
        } catch {
          // A request that is already over cannot keep anything alive; the
          // release still runs.
        }
      }
    }
  }

  return { acquire, tryAcquire, schedule, state, bucketId: read.bucketId };
}
