#!/usr/bin/env bash
# The main job: set up, build the package, and run the demo in a local
# workerd (through miniflare; no account, no network).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
scripts/bootstrap.sh demo
node js/scripts/build.mjs
node js/demo/main.mjs
