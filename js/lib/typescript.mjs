// The one TypeScript check the tests run: tsc --strict, as a user's project
// on lib es2022 (no esnext) with skipLibCheck false sees the package.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "./bundle-worker.mjs";

const tsc = join(repoRoot, "js/node_modules/typescript/bin/tsc");
const STRICT = [
  "--noEmit",
  "--strict",
  "--target",
  "es2022",
  "--lib",
  "es2022,dom",
  "--module",
  "nodenext",
  "--moduleResolution",
  "nodenext",
  "--skipLibCheck",
  "false",
];

/**
 * Type-checks `files` (relative to `cwd`) with `options` after the strict
 * ones (e.g. `--allowJs --checkJs`); returns tsc's report, "" when clean.
 */
export function typecheck(files, { cwd, options = [] } = {}) {
  try {
    execFileSync(process.execPath, [tsc, ...STRICT, ...options, ...files], { cwd, encoding: "utf8", stdio: "pipe" });
    return "";
  } catch (error) {
    return `${error.stdout}${error.stderr}`;
  }
}
