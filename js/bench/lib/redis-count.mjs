// Counts the Redis commands this process sends through ioredis, whoever
// created the client: Bottleneck builds its own clients (and duplicates them
// with the base class), so wrapping the prototype is the one place that sees
// them all. Pipelined commands count one each; a script counts as one
// command, whatever it calls inside Redis.
import Redis from "ioredis";

let sent = 0;
let installed = false;

export function countRedisCommands() {
  if (!installed) {
    const original = Redis.prototype.sendCommand;
    Redis.prototype.sendCommand = function countedSendCommand(...args) {
      sent += 1;
      return original.apply(this, args);
    };
    installed = true;
  }
  return () => sent;
}
