// Wall-clock milliseconds one awaited call takes, for the benches that
// time a Worker's first and later requests.
export async function timeIt(fn) {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

/** The middle of the times (the upper one of an even count). */
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
