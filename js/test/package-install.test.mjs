// The package as a user installs it: `npm pack`, `npm install <tarball>` in
// an empty directory (offline: the package has no dependencies), then the
// package README's Node example and the shipped dev gateway run from plain
// Node, and the typings compile under lib es2022 with skipLibCheck false.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { pkgDir } from "../lib/bundle-worker.mjs";
import { codeBlock } from "../lib/readme-blocks.mjs";
import { typecheck } from "../lib/typescript.mjs";

const npm = (args, cwd) =>
  execFileSync("npm", [...args, "--offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8" });

describe("the packed package, installed in an empty directory", () => {
  let app;
  before(() => {
    app = mkdtempSync(join(tmpdir(), "paceline-install-"));
    const tarball = npm(["pack", pkgDir, "--pack-destination", app], app).trim().split("\n").pop();
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    npm(["install", join(app, tarball)], app);
  });
  after(() => rmSync(app, { recursive: true, force: true }));

  test("the README's Node example runs unchanged under plain Node", () => {
    const example = codeBlock(join(pkgDir, "README.md"), "node-example.mjs");
    writeFileSync(join(app, "node-example.mjs"), example);
    const out = execFileSync(process.execPath, ["node-example.mjs"], { cwd: app, encoding: "utf8" });
    const lastMs = Number(/the last after (\d+) ms/.exec(out)?.[1]);
    // 10 calls at 5 a second: the tenth is at least one window after the first.
    assert.ok(lastMs >= 900 && lastMs < 5000, out);
  });

  test("a CommonJS require of the package works too", () => {
    const out = execFileSync(process.execPath, ["-e", "console.log(typeof require('paceline').createLimiter)"], {
      cwd: app,
      encoding: "utf8",
    });
    assert.equal(out.trim(), "function");
  });

  test("the dev gateway runs from node_modules and paces a fetchPort client, from paceline, paceline/client and paceline/limiter", async () => {
    const server = spawn(process.execPath, [join(app, "node_modules/.bin/paceline-gateway"), "--port", "0"], {
      cwd: app,
    });
    try {
      const url = await new Promise((resolve, reject) => {
        let text = "";
        server.stdout.on("data", (chunk) => {
          text += chunk;
          const match = /http:\/\/[\d.]+:\d+/.exec(text);
          if (match) resolve(match[0]);
        });
        server.on("exit", (code) => reject(new Error(`the gateway exited (${code}): ${text}`)));
      });
      const script = `
        import { createLimiter, fetchPort } from "paceline";
        const limiter = createLimiter({ port: fetchPort({ fetch, baseUrl: ${JSON.stringify(url)} }), bucketId: "x", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
        console.log(await limiter.schedule(() => "through the gateway"));`;
      const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: app, encoding: "utf8" });
      assert.equal(out.trim(), "through the gateway");
      // The same through the client module, which has no gateway host in it.
      const clientScript = script.replace('from "paceline"', 'from "paceline/client"');
      const viaClient = execFileSync(process.execPath, ["--input-type=module", "-e", clientScript], {
        cwd: app,
        encoding: "utf8",
      });
      assert.equal(viaClient.trim(), "through the gateway");
      // And through the limiter module, which has no governor either.
      const limiterScript = script.replace('from "paceline"', 'from "paceline/limiter"');
      const viaLimiter = execFileSync(process.execPath, ["--input-type=module", "-e", limiterScript], {
        cwd: app,
        encoding: "utf8",
      });
      assert.equal(viaLimiter.trim(), "through the gateway");
    } finally {
      server.kill();
    }
  });

  test("the README's Worker code type-checks against the package's typings (checkJs)", () => {
    mkdirSync(join(app, "src"), { recursive: true });
    writeFileSync(join(app, "src/index.js"), codeBlock(join(pkgDir, "README.md"), "src/index.js"));
    writeFileSync(join(app, "governor-example.js"), codeBlock(join(pkgDir, "README.md"), "governor-example.js"));
    // Worker handlers' env and ctx are untyped in plain JS; everything the
    // code does with paceline is checked.
    const options = ["--allowJs", "--checkJs", "--noImplicitAny", "false"];
    const errors = typecheck(["src/index.js", "governor-example.js"], { cwd: app, options });
    assert.equal(errors, "", errors);
  });

  test("the typings, paceline/client's, paceline/limiter's and paceline/gateway's too, compile under lib es2022 with skipLibCheck false", () => {
    writeFileSync(
      join(app, "use.ts"),
      `import { createLimiter, isPacelineError, type PacelineError } from "paceline";
import { startDevGateway } from "paceline/node-gateway";
import { GatewayRateState, createLimiter as createClientLimiter, fetchPort, type Permit } from "paceline/client";
import { type GatewayRateState as PacingState, createLimiter as createPacingLimiter, fetchPort as limiterFetchPort } from "paceline/limiter";
import { GatewayCore, coreTransport, routeGatewayRequest } from "paceline/gateway";
export { PacelineGateway } from "paceline/gateway";
const limiterPort = limiterFetchPort({ fetch, baseUrl: "http://127.0.0.1:8787" });
// The client module's pacer over the gateway module's core: a transport is all they share.
export const inProcess: GatewayRateState = new GatewayRateState(coreTransport(new GatewayCore()));
export const gatewayWorker = { fetch: (request: Request, env: { PACELINE_GATEWAY: any }) => routeGatewayRequest(request, env) };
export const gateway: Promise<{ url: string }> = startDevGateway({ port: 0 });
const port = fetchPort({ fetch, baseUrl: "http://127.0.0.1:8787" });
const remote = new GatewayRateState(port);
export const permit: Promise<Permit> = remote.acquire({ bucketId: "b", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
const clientLimiter = createClientLimiter({ port, bucketId: "b", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
export const clientState: GatewayRateState = clientLimiter.state;
const paced = createPacingLimiter({ port: limiterPort, bucketId: "b", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
export const pacedState: PacingState = paced.state;
const limiter = createLimiter({ bucketId: "b", rules: [{ requestsPerWindow: 5, windowMs: 1000 }] });
export async function use(): Promise<number> {
  try {
    return await limiter.schedule(async () => 1);
  } catch (e) {
    if (isPacelineError(e, "PROVIDER_EXHAUSTED")) return (e satisfies PacelineError).cooldownUntilMs ?? 0;
    throw e;
  }
}
`,
    );
    const errors = typecheck(["use.ts"], { cwd: app });
    assert.equal(errors, "", errors);
    assert.match(readFileSync(join(app, "node_modules/paceline/README.md"), "utf8"), /^# paceline/);
  });
});
