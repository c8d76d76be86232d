// A dependency-free SVG line chart, one file a person can open in a
// browser: the demo's rates over time and the benchmark's dispatches per
// bucket both draw with it.

const COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
const escapeXml = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A round step for about `count` ticks up to `max`: 1, 2 or 5 times a power of ten. */
function tickStep(max, count) {
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= raw);
}

/**
 * One line per series over a shared x axis. A series with `color` keeps it
 * (a reference line in black, say); the others take the palette in order.
 *
 * @param {{title: string, xLabel: string, yLabel: string,
 *          series: {name: string, points: [number, number][], dashed?: boolean, color?: string}[]}} chart
 */
export function lineChart({ title, xLabel, yLabel, series }) {
  const width = 960;
  const height = 360;
  const margin = { left: 56, right: 250, top: 40, bottom: 44 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const xMax = Math.max(1, ...series.flatMap((s) => s.points.map(([px]) => px)));
  const peak = Math.max(1, ...series.flatMap((s) => s.points.map(([, py]) => py)));
  const yStep = tickStep(peak * 1.1, 5);
  const yMax = Math.ceil((peak * 1.1) / yStep) * yStep;
  const x = (v) => margin.left + (v / xMax) * plotW;
  const y = (v) => margin.top + plotH - (v / yMax) * plotH;

  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="${margin.left}" y="22" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
  ];
  for (let v = 0; v <= yMax + 1e-9; v += yStep) {
    parts.push(
      `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#e5e5e5"/>`,
      `<text x="${margin.left - 6}" y="${y(v) + 4}" text-anchor="end">${+v.toFixed(1)}</text>`,
    );
  }
  const xStep = tickStep(xMax, 8);
  for (let v = 0; v <= xMax + 1e-9; v += xStep) {
    parts.push(`<text x="${x(v)}" y="${margin.top + plotH + 16}" text-anchor="middle">${+v.toFixed(1)}</text>`);
  }
  parts.push(
    `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${y(0)}" y2="${y(0)}" stroke="#333"/>`,
    `<line x1="${margin.left}" x2="${margin.left}" y1="${margin.top}" y2="${y(0)}" stroke="#333"/>`,
    `<text x="${margin.left + plotW / 2}" y="${height - 8}" text-anchor="middle">${escapeXml(xLabel)}</text>`,
    `<text transform="translate(14 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(yLabel)}</text>`,
  );
  let palette = 0;
  series.forEach((s, i) => {
    const color = s.color ?? COLORS[palette++ % COLORS.length];
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : "";
    const points = s.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(" ");
    parts.push(
      `<polyline points="${points}" fill="none" stroke="${color}" stroke-width="2"${dash} stroke-linejoin="round"/>`,
    );
    const ly = margin.top + 10 + i * 20;
    const lx = margin.left + plotW + 16;
    parts.push(
      `<line x1="${lx}" x2="${lx + 24}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`,
      `<text x="${lx + 30}" y="${ly + 4}">${escapeXml(s.name)}</text>`,
    );
  });
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}
