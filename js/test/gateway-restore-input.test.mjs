import assert from "node:assert/strict";
import { test } from "node:test";
import { paceline as P } from "../lib/node-package.mjs";

test("restoreRecords refuses an array-like that is not iterable (a claimed length of 2^31 exhausted the JS heap)", () => {
  for (const records of [{ length: 2 ** 31 }, { length: 1, 0: ["meta", new Uint8Array()] }, 7, null]) {
    assert.throws(
      () => P.GatewayCore.restoreRecords(records),
      (e) => e.code === "INVALID_INPUT" && /must be an iterable/.test(e.message),
    );
  }
});

test("restoreRecords still takes a Map and an array of pairs", () => {
  const core = new P.GatewayCore();
  const records = core.records();
  assert.ok(P.GatewayCore.restoreRecords(records) instanceof P.GatewayCore);
  assert.ok(P.GatewayCore.restoreRecords(new Map(records)) instanceof P.GatewayCore);
});

test("restoreRecords refuses an endless iterator promptly (it used to loop until the memory ran out)", () => {
  const meta = new P.GatewayCore().records()[0];
  let yielded = 0;
  const endless = {
    *[Symbol.iterator]() {
      for (;;) {
        yielded += 1;
        yield meta;
      }
    },
  };
  assert.throws(
    () => P.GatewayCore.restoreRecords(endless),
    (e) => e.code === "INVALID_INPUT" && /more than 20001, the most a gateway with maxBuckets 10000/.test(e.message),
  );
  assert.equal(yielded, 20_002, "it stopped one past the most a gateway stores");
});

test("restoreRecords turns an iterator that throws into INVALID_INPUT", () => {
  const throwing = {
    [Symbol.iterator]() {
      return {
        next() {
          throw new Error("boom");
        },
      };
    },
  };
  assert.throws(
    () => P.GatewayCore.restoreRecords(throwing),
    (e) => e.code === "INVALID_INPUT" && /must be an iterable/.test(e.message),
  );
});
