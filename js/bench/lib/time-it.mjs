// Wall-clock milliseconds one awaited call takes, for the benches that
// time a Worker's first and later requests.
export async function timeIt(fn) {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}
