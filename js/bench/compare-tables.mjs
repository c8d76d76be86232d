// Compares two runs of a benchmark that prints Markdown tables
// (`cargo bench --bench fleet`, `js/bench/run.mjs`) row by row: a change
// to the adaptive rate reshuffles where probes land, so its effect is read
// as which rows moved and by how much, not from one figure. A row is known
// by the text above its table, its first cell (the case) and, for a case
// named more than once there (one per horizon, say), how many times it was
// named before; a column named "wall time" is left out.
// Prints each row whose cells differ, each such cell under its column's
// name as it was and as it is, then the rows only one run has.
// Usage: node js/bench/compare-tables.mjs BEFORE AFTER
import { readFileSync } from "node:fs";

const [beforePath, afterPath] = process.argv.slice(2);
if (!beforePath || !afterPath) {
  console.error("usage: node js/bench/compare-tables.mjs BEFORE AFTER");
  process.exit(2);
}

const isDivider = (cells) => cells.every((c) => /^:?-+:?$/.test(c));

// Row key -> { shown, columns, cells }, in the order the run printed them.
function rows(path) {
  const found = new Map();
  let heading = "(first table)";
  let columns = null;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.startsWith("|")) {
      if (line.trim()) heading = line.trim().slice(0, 80);
      columns = null;
      continue;
    }
    const cells = line
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
    if (isDivider(cells)) continue;
    if (!columns) {
      columns = cells;
      continue;
    }
    const name = `${heading}\n  ${cells[0]}`;
    let key = name;
    for (let n = 2; found.has(key); n++) key = `${name} (#${n})`;
    const kept = (_, i) => !/wall time/i.test(columns[i] ?? "");
    const shown = `${heading}\n  ${cells.slice(0, 2).join(" | ")}`;
    found.set(key, { shown, columns: columns.filter(kept), cells: cells.filter(kept) });
  }
  return found;
}

const before = rows(beforePath);
const after = rows(afterPath);
let moved = 0;
for (const [key, { shown, columns, cells }] of before) {
  const now = after.get(key)?.cells;
  if (!now) continue;
  const changes = [];
  for (let i = 1; i < Math.max(cells.length, now.length); i++) {
    if (cells[i] !== now[i]) {
      changes.push(`  ${columns[i] ?? `column ${i + 1}`}:\n    ${cells[i] ?? "(none)"}\n    ${now[i] ?? "(none)"}`);
    }
  }
  if (changes.length > 0) {
    moved++;
    console.log(`${shown}\n${changes.join("\n")}\n`);
  }
}
const onlyIn = (a, b) => [...a.keys()].filter((k) => !b.has(k));
for (const key of onlyIn(before, after)) console.log(`only before: ${key.replace("\n ", "")}`);
for (const key of onlyIn(after, before)) console.log(`only after: ${key.replace("\n ", "")}`);
console.log(`${moved} of ${before.size} rows moved`);
