// Figures derived from what a provider saw (arrival times and records) and
// from the callers' samples, for the demo, the benchmark and the workerd
// tests.

const ascending = (times) => Float64Array.from(times).sort();

/** The most arrivals in any window of windowMs (a window holds t with start <= t < start + windowMs). */
export function densestWindow(times, windowMs) {
  const sorted = ascending(times);
  let best = 0;
  for (let start = 0, end = 0; end < sorted.length; end++) {
    while (sorted[end] >= sorted[start] + windowMs) start++;
    best = Math.max(best, end - start + 1);
  }
  return best;
}

/** How many arrivals open a window of windowMs that holds more than `limit` arrivals. */
export function windowsOver(times, limit, windowMs) {
  const sorted = ascending(times);
  let over = 0;
  for (let start = 0, end = 0; start < sorted.length; start++) {
    while (end < sorted.length && sorted[end] < sorted[start] + windowMs) end++;
    if (end - start > limit) over++;
  }
  return over;
}

/** Nearest-rank percentile of unsorted samples; NaN when there are none. */
export function percentile(samples, p) {
  if (samples.length === 0) return Number.NaN;
  const sorted = Float64Array.from(samples).sort();
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Arrivals per bucket of bucketMs over [fromMs, toMs). */
export function dispatchSeries(records, fromMs, toMs, bucketMs) {
  const counts = new Array(Math.ceil((toMs - fromMs) / bucketMs)).fill(0);
  for (const r of records) {
    const i = Math.floor((r.t - fromMs) / bucketMs);
    if (i >= 0 && i < counts.length) counts[i] += 1;
  }
  return counts;
}

/**
 * How long after fromMs the share of 429s settles under `threshold` for good:
 * the start of the first window (windowMs long, sliding by stepMs inside
 * [fromMs, toMs)) from which on every window stays under it. A window with no
 * arrivals counts as settled. Null when even the last window is over.
 */
export function convergenceMs(records, fromMs, toMs, { windowMs = 2000, stepMs = 250, threshold = 0.02 } = {}) {
  const starts = [];
  for (let s = fromMs; s + windowMs <= toMs; s += stepMs) starts.push(s);
  const settled = starts.map((s) => {
    const inWindow = records.filter((r) => r.t >= s && r.t < s + windowMs);
    const rejected = inWindow.filter((r) => r.status === 429).length;
    return inWindow.length === 0 || rejected / inWindow.length < threshold;
  });
  let first = settled.length;
  while (first > 0 && settled[first - 1]) first -= 1;
  return first === settled.length ? null : starts[first] - fromMs;
}
