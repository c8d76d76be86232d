// Bundles a Worker entry script the way wrangler does: esbuild resolves
// `import ... from "paceline"` through node_modules with the "workerd"
// export condition, and the .wasm stays a separate module that workerd
// compiles (module rule CompiledWasm).
import { build } from "esbuild";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const pkgDir = join(repoRoot, "pkg");

// workerd reads a bundle's files after bundleWorker returns, whenever a
// Miniflare starts or restarts its Worker, so they stay until the process
// exits.
const bundles = new Set();
process.on("exit", () => {
  for (const dir of bundles) rmSync(dir, { recursive: true, force: true });
});

/**
 * Installs the built package (`pkg`, by default pkg/) as `node_modules/paceline` in a fresh folder (as
 * `npm install ./pkg` would, by link), bundles `entryPath` there, and
 * returns Miniflare options for the result.
 */
export function bundleWorker(entryPath, pkg = pkgDir) {
  return bundle(basename(entryPath), (to) => copyFileSync(entryPath, to), pkg);
}

/** {@link bundleWorker} for an entry given as its source text, as file `name`. */
export function bundleWorkerSource(name, source, pkg = pkgDir) {
  return bundle(name, (to) => writeFileSync(to, source), pkg);
}

async function bundle(entryName, placeEntry, pkg) {
  const work = mkdtempSync(join(tmpdir(), "paceline-worker-"));
  bundles.add(work);
  mkdirSync(join(work, "node_modules"));
  symlinkSync(pkg, join(work, "node_modules", "paceline"), "dir");
  const out = join(work, "out");
  placeEntry(join(work, entryName));
  await build({
    entryPoints: [join(work, entryName)],
    outfile: join(out, "worker.mjs"),
    bundle: true,
    format: "esm",
    platform: "neutral",
    conditions: ["workerd", "worker", "browser"],
    external: ["*.wasm", "cloudflare:*"],
    logLevel: "warning",
  });
  // Each module's .wasm (the full one, and the smaller ones "paceline/client" and
  // "paceline/limiter" import).
  for (const wasm of readdirSync(pkg).filter((f) => f.endsWith(".wasm")))
    copyFileSync(join(pkg, wasm), join(out, wasm));
  return {
    modules: true,
    scriptPath: join(out, "worker.mjs"),
    modulesRoot: out,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: "2026-04-01",
  };
}
