#!/usr/bin/env bash
# Benchmarks rate limiters side by side against one provider stub (see
# js/bench/README.md): sets up, makes sure Debian's redis-server is there, and
# runs the harness, which prints a Markdown table and writes it with SVG
# charts to js/bench/results/. All traffic stays on 127.0.0.1; about seven
# minutes. Arguments go to js/bench/run.mjs (e.g. --only naive,bottleneck);
# a run with any of them writes to js/.out/bench/ instead, leaving the
# published figures as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh demo
if ! command -v redis-server >/dev/null; then
  echo "bench: installing Debian's redis-server"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
fi
exec node js/bench/run.mjs "$@"
