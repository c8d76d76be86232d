// The gateway for local development: one GatewayCore in a plain Node HTTP
// server on loopback, answering through the core's own router exactly as
// the Durable Object does (minus persistence: a restart starts empty).
//
//   node js/gateway/node-server.mjs [--port 8787] [--secret s]
//
// The secret may also come from PACELINE_SECRET, which keeps it out of `ps`.
import { realpathSync } from "node:fs";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { paceline } from "../lib/node-package.mjs";

const { GatewayCore, DEFAULT_WINDOW_GUARD_MS, gatewayWireTable } = paceline;

function send(res, status, body) {
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": body.byteLength ?? Buffer.byteLength(body),
  });
  res.end(body);
}

function errorBody(code, message) {
  return JSON.stringify({ error: { code, message } });
}

function serve(core, req, res) {
  // The core's own limit, checked while reading so a huge body is not buffered.
  const { maxBodyBytes } = gatewayWireTable();
  const chunks = [];
  let size = 0;
  req.on("data", (chunk) => {
    size += chunk.length;
    if (size <= maxBodyBytes) chunks.push(chunk);
  });
  req.on("error", () => res.destroy());
  req.on("end", () => {
    if (size > maxBodyBytes) {
      send(res, 400, errorBody("INVALID_INPUT", `body is ${size} bytes; the limit is ${maxBodyBytes}`));
      return;
    }
    let answer;
    try {
      answer = core.handle(req.method, req.url, Buffer.concat(chunks), Date.now());
    } catch (error) {
      // handle() answers every bad request itself; reaching here is a bug,
      // which one request must not turn into a dead dev server.
      console.error("paceline dev gateway:", error);
      send(res, 500, errorBody("GATEWAY_UNAVAILABLE", String(error?.message ?? error)));
      return;
    }
    send(res, answer.status, answer.body);
  });
}

export async function startDevGateway({ port = 0, secret, options = {} } = {}) {
  const core = new GatewayCore({
    windowGuardMs: DEFAULT_WINDOW_GUARD_MS,
    ...options,
    ...(secret === undefined ? {} : { secret }),
  });
  const server = createServer((req, res) => serve(core, req, res));
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    core,
    close: () =>
      new Promise((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Keep-alive clients would otherwise hold close() open.
        server.closeAllConnections();
      }),
  };
}

const isMain = process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const { values } = parseArgs({
    options: { port: { type: "string", default: "8787" }, secret: { type: "string" } },
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`paceline dev gateway: --port must be an integer from 0 to 65535, got ${values.port}`);
    process.exit(2);
  }
  const { url } = await startDevGateway({ port, secret: values.secret ?? process.env.PACELINE_SECRET });
  console.log(`paceline dev gateway on ${url}`);
}
