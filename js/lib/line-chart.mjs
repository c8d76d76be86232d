// A dependency-free line chart: dispatches per bucket over time, one line per
// contender, and the provider's true limit scaled to the same bucket.

const COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
const escape = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/**
 * @param {{title: string, bucketMs: number, series: {label: string, counts: number[]}[],
 *          limit: {fromS: number, toS: number, perBucket: number}[]}} chart
 */
export function lineChart({ title, bucketMs, series, limit }) {
  const width = 960;
  const height = 360;
  const margin = { left: 56, right: 250, top: 40, bottom: 44 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const buckets = Math.max(1, ...series.map((s) => s.counts.length));
  const seconds = (buckets * bucketMs) / 1000;
  const peak = Math.max(1, ...series.flatMap((s) => s.counts), ...limit.map((l) => l.perBucket));
  const yMax = Math.ceil((peak * 1.1) / 5) * 5;
  const x = (s) => margin.left + (s / seconds) * plotW;
  const y = (v) => margin.top + plotH - (v / yMax) * plotH;

  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="${margin.left}" y="22" font-size="14" font-weight="bold">${escape(title)}</text>`,
  ];
  for (let i = 0; i <= 5; i += 1) {
    const v = (yMax * i) / 5;
    parts.push(
      `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#e5e5e5"/>`,
      `<text x="${margin.left - 6}" y="${y(v) + 4}" text-anchor="end">${+v.toFixed(1)}</text>`,
    );
  }
  const tickEvery = seconds > 30 ? 5 : 2;
  for (let s = 0; s <= seconds + 1e-9; s += tickEvery) {
    parts.push(`<text x="${x(s)}" y="${margin.top + plotH + 16}" text-anchor="middle">${s}</text>`);
  }
  parts.push(
    `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${y(0)}" y2="${y(0)}" stroke="#333"/>`,
    `<line x1="${margin.left}" x2="${margin.left}" y1="${margin.top}" y2="${y(0)}" stroke="#333"/>`,
    `<text x="${margin.left + plotW / 2}" y="${height - 8}" text-anchor="middle">seconds since start</text>`,
    `<text transform="translate(14 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle">dispatches per ${bucketMs} ms</text>`,
  );
  const limitPath = limit.map((l, i) => `${i === 0 ? "M" : "L"}${x(l.fromS)},${y(l.perBucket)} L${x(l.toS)},${y(l.perBucket)}`).join(" ");
  parts.push(`<path d="${limitPath}" fill="none" stroke="#000" stroke-width="2" stroke-dasharray="6 4"/>`);

  const legend = [{ label: "true limit (provider)", color: "#000", dash: true }];
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const points = s.counts.map((c, j) => `${x(((j + 0.5) * bucketMs) / 1000).toFixed(1)},${y(c).toFixed(1)}`).join(" ");
    parts.push(`<polyline points="${points}" fill="none" stroke="${color}" stroke-width="1.5" stroke-linejoin="round"/>`);
    legend.push({ label: s.label, color });
  });
  legend.forEach((entry, i) => {
    const ly = margin.top + 10 + i * 20;
    const lx = margin.left + plotW + 16;
    parts.push(
      `<line x1="${lx}" x2="${lx + 24}" y1="${ly}" y2="${ly}" stroke="${entry.color}" stroke-width="2"${entry.dash ? ' stroke-dasharray="6 4"' : ""}/>`,
      `<text x="${lx + 30}" y="${ly + 4}">${escape(entry.label)}</text>`,
    );
  });
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}
