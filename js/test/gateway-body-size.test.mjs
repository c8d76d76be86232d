// A gateway host refuses an oversized body before copying it into the
// wasm: the wasm memory never shrinks, so a 100 MB POST copied in would
// hold 100 MB for the life of the isolate.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { fakeDurableObjectState } from "../lib/fake-durable-object.mjs";
import { paceline as P, wasmMemory } from "../lib/node-package.mjs";

const MB = 1024 * 1024;
const URL_ACQUIRE = "http://gw/v1/rate/acquire";

/** A 100 MB body as a stream of 1 MB chunks, with no declared length. */
function streamed100MB() {
  const chunk = new Uint8Array(MB).fill(0x20);
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent === 100) return controller.close();
      sent++;
      controller.enqueue(chunk);
    },
  });
}

function post(body, headers = {}) {
  return new Request(URL_ACQUIRE, { method: "POST", body, headers, duplex: "half" });
}

async function refusedAsTooLarge(response) {
  assert.equal(response.status, 400);
  const { error } = await response.json();
  assert.equal(error.code, "INVALID_INPUT");
  assert.match(error.message, /the limit is 65536/);
}

describe("a 100 MB POST", () => {
  const core = new P.GatewayCore();
  const ok = () =>
    post(JSON.stringify({ bucketId: "b", rules: [{ requestsPerWindow: 10, windowMs: 1000 }], requested: 1 }));

  test("handleGatewayRequest refuses it streamed, and the wasm memory stays where it was", async () => {
    assert.equal((await P.handleGatewayRequest(core, ok())).status, 200);
    const before = wasmMemory.buffer.byteLength;
    await refusedAsTooLarge(await P.handleGatewayRequest(core, post(streamed100MB())));
    assert.equal(wasmMemory.buffer.byteLength, before, `${before} -> ${wasmMemory.buffer.byteLength} bytes`);
    assert.equal((await P.handleGatewayRequest(core, ok())).status, 200, "the core still answers");
  });

  test("handleGatewayRequest refuses it by its Content-Length without reading it", async () => {
    let pulled = 0;
    const body = new ReadableStream({
      pull(controller) {
        pulled++;
        controller.enqueue(new Uint8Array(MB));
      },
    });
    const before = wasmMemory.buffer.byteLength;
    await refusedAsTooLarge(await P.handleGatewayRequest(core, post(body, { "content-length": String(100 * MB) })));
    assert.ok(pulled <= 1, `read ${pulled} chunks of a body declared too long`);
    assert.equal(wasmMemory.buffer.byteLength, before);
  });

  test("PacelineGateway.fetch refuses it and stores nothing", async () => {
    const gateway = new P.PacelineGateway(fakeDurableObjectState(), {});
    await Promise.resolve();
    const before = wasmMemory.buffer.byteLength;
    await refusedAsTooLarge(await gateway.fetch(post(streamed100MB())));
    assert.equal(wasmMemory.buffer.byteLength, before);
  });

  test("a body of exactly 64 KiB still reaches the core (refused there only for what it says)", async () => {
    const padded = JSON.stringify({
      bucketId: "b",
      rules: [{ requestsPerWindow: 10, windowMs: 1000 }],
      requested: 1,
      pad: "",
    });
    const body = padded.replace('"pad":""', `"pad":"${"x".repeat(64 * 1024 - padded.length)}"`);
    assert.equal(new TextEncoder().encode(body).length, 64 * 1024);
    assert.equal((await P.handleGatewayRequest(core, post(body))).status, 200);
  });
});
