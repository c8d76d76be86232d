// A throwaway redis-server (Debian's) on a free loopback port, with nothing
// persisted.
import { spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import Redis from "ioredis";

// redis-server runs under a small bash guard that reads its stdin: when the
// runner goes away for any reason, even SIGKILL, the pipe closes, the read
// returns and the guard stops redis-server, so no daemon outlives a run.
const GUARD = `"$@" & r=$!
trap 'kill $r 2>/dev/null; wait $r' EXIT
trap 'exit 1' TERM INT HUP
read -r _ || true`;

async function freePort() {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  await once(server, "close");
  return port;
}

export async function startRedis() {
  const host = "127.0.0.1";
  const port = await freePort();
  const args = ["--port", String(port), "--bind", host, "--save", "", "--appendonly", "no", "--logfile", ""];
  const guard = spawn("bash", ["-c", GUARD, "redis-guard", "redis-server", ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  let log = "";
  const keep = (chunk) => {
    log = (log + chunk).slice(-4000);
  };
  guard.stdout.on("data", keep);
  guard.stderr.on("data", keep);
  let exited = false;
  guard.on("exit", () => {
    exited = true;
  });

  const stop = async () => {
    if (exited) return;
    guard.stdin.end();
    const timer = setTimeout(() => guard.kill("SIGKILL"), 5000);
    await once(guard, "exit").catch(() => {});
    clearTimeout(timer);
  };

  const admin = new Redis({ host, port, lazyConnect: true, retryStrategy: null, maxRetriesPerRequest: 0 });
  admin.on("error", () => {});
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      await admin.connect();
      await admin.ping();
      break;
    } catch (error) {
      if (exited || Date.now() > deadline) {
        admin.disconnect();
        await stop();
        throw new Error(`redis-server did not start on ${host}:${port}: ${error.message}\n${log}`);
      }
      admin.disconnect();
      await sleep(50);
    }
  }

  return {
    host,
    port,
    version: (await admin.info("server")).match(/redis_version:(\S+)/)?.[1] ?? "?",
    /** Forgets every key and script, so each contender starts from an empty Redis. */
    async flush() {
      await admin.flushall();
      await admin.script("FLUSH");
    },
    async stop() {
      admin.disconnect();
      await stop();
    },
  };
}
