// The code blocks of a README, by the file name written after the fence's
// language (```js src/index.js): tests run the documented code itself, so
// the documentation cannot drift from what works.
import { readFileSync } from "node:fs";

/** The body of the one code block labelled `name` in the markdown file at `path`. */
export function codeBlock(path, name) {
  const text = readFileSync(path, "utf8");
  const blocks = [...text.matchAll(/^```\w+ (\S+)\n([\s\S]*?)^```$/gm)].filter((m) => m[1] === name);
  if (blocks.length !== 1) throw new Error(`${path}: expected one code block labelled ${name}, found ${blocks.length}`);
  return blocks[0][2];
}
