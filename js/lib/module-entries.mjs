// The package-entry checks every smaller module ("paceline/client",
// "paceline/limiter") passes the same way: package.json routes its
// workerd, node and default conditions to its entries, its web entry works
// once initSync({ module }) is given its .wasm, its Node entry's
// GatewayRateState hands out a permit and takes it back through a gateway
// in this process (the gateway module's, reached over a plain transport), and
// a limiter without a port is INVALID_INPUT saying a port is required.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { pkgDir } from "./bundle-worker.mjs";

/**
 * The pacing check every module's Worker test makes: its 8 calls under a
 * rule of 5 a second, dispatched at `times`, hold at most 5 in any 1 s
 * window (5 ms of timer slack).
 * @param {number[]} times
 */
export function assertFivePerSecond(times) {
  assert.equal(times.length, 8);
  const sorted = [...times].sort((a, b) => a - b);
  for (let i = 5; i < sorted.length; i++) {
    assert.ok(sorted[i] - sorted[i - 5] >= 1000 - 5, `6 calls within ${sorted[i] - sorted[i - 5]} ms: ${sorted}`);
  }
}

/**
 * The entry tests of module `name` ("client" or "limiter"); `leftOut` is an
 * export of the full module that its Node entry must not have.
 */
export function describeModuleEntries(name, leftOut) {
  describe(`the ${name} module's package entries`, () => {
    test(`package.json routes paceline/${name}'s workerd, node and default conditions to its entries`, () => {
      const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
      assert.deepEqual(pkg.exports[`./${name}`], {
        types: `./${name}.d.ts`,
        workerd: `./paceline_${name}_workerd.js`,
        node: `./paceline_${name}_node.js`,
        default: `./${name}.js`,
      });
      const entry = readFileSync(join(pkgDir, `paceline_${name}_workerd.js`), "utf8");
      assert.ok(entry.includes(`import wasm from "./paceline_${name}_bg.wasm"`), entry);
      assert.match(entry, /initSync\(\{ module: wasm \}\)/);
    });

    const gatewayTransport = async () => {
      const { GatewayCore, coreTransport } = await import(join(pkgDir, "paceline_gateway_node.js"));
      return coreTransport(new GatewayCore());
    };
    const rules = [{ requestsPerWindow: 10, windowMs: 1000 }];

    test(`its web entry works once initSync({ module }) is given the ${name} .wasm`, async () => {
      const web = await import(join(pkgDir, `${name}.js`));
      web.initSync({ module: new WebAssembly.Module(readFileSync(join(pkgDir, `paceline_${name}_bg.wasm`))) });
      const state = new web.GatewayRateState(await gatewayTransport());
      const permit = await state.acquire({ bucketId: "b", rules });
      assert.ok(permit instanceof web.Permit);
      await permit.release();
      state.free();
    });

    test("a GatewayRateState from the Node entry hands out a permit and takes it back", async () => {
      const entry = await import(join(pkgDir, `paceline_${name}_node.js`));
      assert.equal(entry[leftOut], undefined);
      const state = new entry.GatewayRateState(await gatewayTransport());
      const permit = await state.acquire({ bucketId: "b", rules });
      assert.ok(permit instanceof entry.Permit);
      await permit.release();
      state.free();
    });

    test("a limiter without a port is INVALID_INPUT saying a port is required there", async () => {
      const entry = await import(join(pkgDir, `paceline_${name}_node.js`));
      assert.equal(entry.LocalRateState, undefined);
      assert.throws(
        () => entry.createLimiter({ bucketId: "b", rules }),
        (e) =>
          e.code === "INVALID_INPUT" && /port is required with paceline\/client and paceline\/limiter/.test(e.message),
      );
    });
  });
}
