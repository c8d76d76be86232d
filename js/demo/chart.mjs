// A small hand-made SVG line chart: no dependency, one file a person can
// open in a browser.
const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea"];

/**
 * series: [{ name, points: [[xSeconds, y], ...], dashed? }]
 */
export function lineChart({ title, xLabel, yLabel, series, width = 900, height = 360 }) {
  const pad = { left: 56, right: 170, top: 36, bottom: 44 };
  const xs = series.flatMap((s) => s.points.map(([x]) => x));
  const ys = series.flatMap((s) => s.points.map(([, y]) => y));
  const xMax = Math.max(1, ...xs);
  const yMax = Math.max(1, ...ys) * 1.1;
  const px = (x) => pad.left + (x / xMax) * (width - pad.left - pad.right);
  const py = (y) => height - pad.bottom - (y / yMax) * (height - pad.top - pad.bottom);
  const ticks = (max, n) => Array.from({ length: n + 1 }, (_, i) => (max * i) / n);
  const lines = series.map((s, i) => {
    const d = s.points.map(([x, y], j) => `${j ? "L" : "M"}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join("");
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : "";
    return `<path d="${d}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2"${dash}/>`;
  });
  const legend = series.map(
    (s, i) =>
      `<g transform="translate(${width - pad.right + 16},${pad.top + i * 22})"><rect width="14" height="4" y="5" fill="${COLORS[i % COLORS.length]}"/><text x="20" y="11" font-size="12">${s.name}</text></g>`,
  );
  const xTicks = ticks(xMax, 6).map(
    (x) => `<text x="${px(x)}" y="${height - pad.bottom + 16}" font-size="11" text-anchor="middle">${x.toFixed(0)}</text>`,
  );
  const yTicks = ticks(yMax, 5).map(
    (y) =>
      `<line x1="${pad.left}" x2="${width - pad.right}" y1="${py(y)}" y2="${py(y)}" stroke="#e5e7eb"/><text x="${pad.left - 6}" y="${py(y) + 4}" font-size="11" text-anchor="end">${y.toFixed(0)}</text>`,
  );
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="${pad.left}" y="22" font-size="15" font-weight="bold">${title}</text>
${yTicks.join("\n")}
${xTicks.join("\n")}
<text x="${(pad.left + width - pad.right) / 2}" y="${height - 8}" font-size="12" text-anchor="middle">${xLabel}</text>
<text x="14" y="${(pad.top + height - pad.bottom) / 2}" font-size="12" transform="rotate(-90 14 ${(pad.top + height - pad.bottom) / 2})" text-anchor="middle">${yLabel}</text>
${lines.join("\n")}
${legend.join("\n")}
</svg>
`;
}
