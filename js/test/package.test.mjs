// The built package in a real workerd: a Worker bundled from
// `import ... from "paceline"` loads the .wasm through the "workerd" export
// condition and calls the exported protocol functions from a request handler.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Miniflare } from "miniflare";
import { bundleWorker, pkgDir, repoRoot } from "../lib/bundle-worker.mjs";

const fixture = (name) => readFileSync(join(repoRoot, "tests/fixtures", name), "utf8");
const cargoVersion = /^version = "(.+)"$/m.exec(readFileSync(join(repoRoot, "Cargo.toml"), "utf8"))[1];

describe("paceline package in workerd", () => {
  let mf;
  before(async () => {
    mf = new Miniflare(await bundleWorker(join(repoRoot, "js/examples/protocol-echo.mjs")));
  });
  after(() => mf?.dispose());

  test("package.json routes the workerd condition to the initSync entry", () => {
    const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
    assert.equal(pkg.exports["."].workerd, "./paceline_workerd.js");
    const entry = readFileSync(join(pkgDir, "paceline_workerd.js"), "utf8");
    assert.match(entry, /import wasm from "\.\/paceline_bg\.wasm"/);
    assert.match(entry, /initSync\(\{ module: wasm \}\)/);
  });

  test("a request handler calls the exported version()", async () => {
    const res = await mf.dispatchFetch("http://worker/");
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { version: cargoVersion });
  });

  test("a scheduled grant is decoded to a plain object", async () => {
    const res = await mf.dispatchFetch("http://worker/", {
      method: "POST",
      body: fixture("acquire-response-scheduled.json"),
    });
    assert.equal(res.status, 200);
    const { grant } = await res.json();
    assert.deepEqual(grant, JSON.parse(fixture("acquire-response-scheduled.json")));
  });

  test("an older gateway's grant without a schedule decodes without one", async () => {
    const res = await mf.dispatchFetch("http://worker/", {
      method: "POST",
      body: fixture("acquire-response-legacy.json"),
    });
    const { grant } = await res.json();
    assert.equal(grant.granted, 2);
    assert.equal("scheduledAtMs" in grant, false);
    assert.deepEqual(grant.leaseIds, ["lease-a", "lease-b"]);
  });

  test("a bad grant throws an Error with code INVALID_INPUT naming the field", async () => {
    const res = await mf.dispatchFetch("http://worker/", {
      method: "POST",
      body: JSON.stringify({ granted: 1, waitMs: 0, leaseIds: [42] }),
    });
    assert.equal(res.status, 400);
    const { error } = await res.json();
    assert.equal(error.code, "INVALID_INPUT");
    assert.equal(error.isError, true);
    assert.match(error.message, /^leaseIds\[0\] must be a non-empty lease id string/);
  });

  test("a body over the size cap is refused, not parsed", async () => {
    const res = await mf.dispatchFetch("http://worker/", {
      method: "POST",
      body: JSON.stringify({ granted: 0, waitMs: 0, pad: "x".repeat(70_000) }),
    });
    const { error } = await res.json();
    assert.equal(error.code, "INVALID_INPUT");
    assert.match(error.message, /the limit is 65536/);
  });
});
