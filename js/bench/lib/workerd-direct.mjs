// A Worker served by workerd itself, with no Miniflare in the path.
// Miniflare routes every request through an entry Worker of its own in the
// same process, whose first request is as cold as the Worker's, so a first
// request timed through it carries that Worker's cold start too (about
// 2-3 ms on a 2-core machine). Timing against `workerd serve` leaves only
// the runtime's own first-request cost under the Worker's.
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import workerd from "workerd";
import { median, timeIt } from "./time-it.mjs";

// The package is CommonJS built from ESM: its binary's path is the
// `default` export of its exports object.
const workerdPath = workerd.default;

/**
 * A folder `workerd serve` can run: the bundle's modules (from
 * bundleWorker's options) and a config naming them.
 */
export function workerdFolder(bundle) {
  const dir = mkdtempSync(join(tmpdir(), "paceline-workerd-"));
  cpSync(dirname(bundle.scriptPath), dir, { recursive: true });
  return dir;
}

function config(dir, port, compatibilityDate, v8Flags) {
  const wasm = readdirSync(dir).filter((f) => f.endsWith(".wasm"));
  const modules = [
    '(name = "worker.mjs", esModule = embed "worker.mjs")',
    ...wasm.map((f) => `(name = "${f}", wasm = embed "${f}")`),
  ];
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "main", worker = .worker) ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
  v8Flags = [ ${v8Flags.map((f) => JSON.stringify(f)).join(", ")} ],
);
const worker :Workerd.Worker = (
  modules = [ ${modules.join(", ")} ],
  compatibilityDate = "${compatibilityDate}",
);
`;
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

const listening = (port) =>
  new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.on("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
  });

/** A GET of `/` on a new connection, read to its end; throws unless 200. */
function get(port) {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/", agent: false }, (res) => {
      res.resume();
      res.on("end", () => {
        if (res.statusCode === 200) resolve();
        else reject(new Error(`workerd answered ${res.statusCode}`));
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * A fresh `workerd serve` of the Worker in `dir`: its first request, sent
 * `idleMs` after workerd listens, less the median of `warm` later ones,
 * each on a connection of its own. (An isolate left idle before its first
 * request serves it more slowly, with or without paceline.) `v8Flags` go
 * to workerd's V8, through its config.
 */
export async function firstRequestLessWarm(dir, { compatibilityDate, idleMs = 0, warm = 5, v8Flags = [] }) {
  const port = await freePort();
  writeFileSync(join(dir, "config.capnp"), config(dir, port, compatibilityDate, v8Flags));
  const workerd = spawn(workerdPath, ["serve", "config.capnp"], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise((resolve) => workerd.on("exit", resolve));
  try {
    const deadline = performance.now() + 30_000;
    while (!(await listening(port))) {
      if (workerd.exitCode !== null || performance.now() > deadline) throw new Error("workerd did not start");
      await new Promise((r) => setTimeout(r, 5));
    }
    if (idleMs) await new Promise((r) => setTimeout(r, idleMs));
    const first = await timeIt(() => get(port));
    const later = [];
    for (let i = 0; i < warm; i++) later.push(await timeIt(() => get(port)));
    return first - median(later);
  } finally {
    workerd.kill();
    await exited;
  }
}
