// The package README's one-Worker quick start, as a user runs it: its two
// code blocks (src/index.js, wrangler.toml) copied out of the README into a
// fresh directory with the packed package installed, bundled by
// `wrangler deploy --dry-run`, then served by wrangler's local dev server
// (unstable_startWorker, offline, no account), with a local stand-in for
// the provider counting the calls that reach it.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { pkgDir, repoRoot } from "../lib/bundle-worker.mjs";
import { densestWindow } from "../lib/metrics.mjs";
import { codeBlock } from "../lib/readme-blocks.mjs";

process.env.WRANGLER_SEND_METRICS = "false";
const wranglerBin = join(repoRoot, "js/node_modules/wrangler/bin/wrangler.js");
const readme = join(pkgDir, "README.md");
const RULE = { requestsPerWindow: 20, windowMs: 1000 };
const JITTER_MS = 50;

const npm = (args, cwd) =>
  execFileSync("npm", [...args, "--offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8" });

describe("the README's one-Worker quick start under wrangler", () => {
  let app, provider, arrivals, worker;
  before(async () => {
    arrivals = [];
    provider = createServer((_request, res) => {
      arrivals.push(Date.now());
      res.end("ok");
    });
    await new Promise((resolve) => provider.listen(0, "127.0.0.1", resolve));
    app = mkdtempSync(join(tmpdir(), "paceline-quick-start-"));
    const tarball = npm(["pack", pkgDir, "--pack-destination", app], app).trim().split("\n").pop();
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    npm(["install", join(app, tarball)], app);
    mkdirSync(join(app, "src"));
    writeFileSync(join(app, "src/index.js"), codeBlock(readme, "src/index.js"));
    const toml = codeBlock(readme, "wrangler.toml");
    // The one change to the documented files: the API is a local stand-in.
    const local = toml.replace(/^API_URL = ".*"$/m, `API_URL = "http://127.0.0.1:${provider.address().port}/"`);
    assert.notEqual(local, toml, "the README's wrangler.toml sets API_URL");
    writeFileSync(join(app, "wrangler.toml"), local);
  });
  after(async () => {
    await worker?.dispose();
    provider?.close();
    rmSync(app, { recursive: true, force: true });
  });

  test("wrangler deploy --dry-run bundles it, the .wasm as its own module", () => {
    const out = execFileSync(process.execPath, [wranglerBin, "deploy", "--dry-run", "--outdir", "dist"], {
      cwd: app,
      encoding: "utf8",
      env: { ...process.env, CLOUDFLARE_API_TOKEN: "", CLOUDFLARE_ACCOUNT_ID: "" },
    });
    assert.match(out, /--dry-run: exiting now/);
    assert.match(out, /PACELINE_GATEWAY/);
    assert.ok(existsSync(join(app, "dist/index.js")));
  });

  test("served by wrangler's local dev server, 45 calls reach the API at most 20 a second (50 ms of arrival jitter allowed)", async (t) => {
    const { unstable_startWorker } = await import(join(repoRoot, "js/node_modules/wrangler/wrangler-dist/cli.js"));
    worker = await unstable_startWorker({
      config: join(app, "wrangler.toml"),
      dev: { server: { port: 0 }, inspector: false },
    });
    await worker.ready;
    const answers = await Promise.all(
      Array.from({ length: 45 }, () => worker.fetch("http://worker/").then((r) => r.text())),
    );
    assert.deepEqual(new Set(answers), new Set(["the API answered 200\n"]));
    assert.equal(arrivals.length, 45);
    // The gateway spaces dispatch times; arrivals here add the trip from
    // workerd to this process, which on a loaded machine wanders by tens of
    // milliseconds. So the rule is checked over any window shorter by that
    // allowance (a call dispatched late by more would show up).
    const densest = densestWindow(arrivals, RULE.windowMs - JITTER_MS);
    const spanMs = Math.max(...arrivals) - Math.min(...arrivals);
    t.diagnostic(
      `45 calls over ${spanMs} ms; at most ${densest} in any ${RULE.windowMs - JITTER_MS} ms, ` +
        `${densestWindow(arrivals, RULE.windowMs)} in any ${RULE.windowMs} ms`,
    );
    assert.ok(densest <= RULE.requestsPerWindow, `${densest} calls within ${RULE.windowMs - JITTER_MS} ms`);
    // 45 calls at 20 a second span at least two windows.
    assert.ok(spanMs >= 2 * RULE.windowMs - 100, `45 calls within ${spanMs} ms`);
  });
});
