// The main job, for now: start workerd locally (no account, no network),
// load a Worker that imports the built package by name, and show what it
// answers: the package version and a sample gateway grant it decoded.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundleWorker, repoRoot } from "../lib/bundle-worker.mjs";

const mf = new Miniflare(await bundleWorker(join(repoRoot, "js/examples/protocol-echo.mjs")));
try {
  const { version } = await (await mf.dispatchFetch("http://demo/")).json();
  console.log(`paceline ${version} loaded in workerd`);
  const sample = readFileSync(join(repoRoot, "tests/fixtures/acquire-response-scheduled.json"), "utf8");
  const res = await mf.dispatchFetch("http://demo/", { method: "POST", body: sample });
  const { grant, error } = await res.json();
  if (!res.ok) throw new Error(`the Worker refused the sample grant: ${error.code}: ${error.message}`);
  console.log("sample grant, decoded by the Worker:");
  console.log(`  granted ${grant.granted} permits, wait ${grant.waitMs} ms`);
  grant.scheduledAtMs.forEach((at, i) => {
    const offset = at - grant.serverNowMs;
    console.log(`  permit ${i + 1}: dispatch at ${at} (+${offset} ms), lease ${grant.leaseIds[i]}`);
  });
  console.log(`  effective rate ${grant.effectiveRequestsPerSecond} req/s`);
} finally {
  await mf.dispose();
}
