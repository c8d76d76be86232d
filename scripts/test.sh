#!/usr/bin/env bash
# Every test, in the three places the package must work: native Rust, the
# wasm build in headless Chromium, and the built npm package in workerd.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
step() { printf '\n== %s\n' "$*"; }

step "bootstrap"
scripts/bootstrap.sh test

step "format and lints (native and wasm32)"
cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
cargo clippy --all-targets --target wasm32-unknown-unknown -- -D warnings
# The client module ("paceline/client") is the crate without its gateway
# host; the limiter module ("paceline/limiter") is that without the
# governor; the gateway module ("paceline/gateway") is the host without
# the pacer.
cargo clippy --lib --target wasm32-unknown-unknown --no-default-features --features governor -- -D warnings
cargo clippy --lib --target wasm32-unknown-unknown --no-default-features --features pacer -- -D warnings
cargo clippy --lib --target wasm32-unknown-unknown --no-default-features --features gateway-host,wire-decoder -- -D warnings

step "JS format and lints (Biome, pinned in js/package.json; all of js/)"
(cd js && node_modules/.bin/biome check .)

step "the native core builds without the JS binding crates"
if cargo tree -e normal --prefix none | grep -E '^(wasm-bindgen|js-sys|web-sys|wasm-bindgen-futures) '; then
  echo "a JS binding crate is in the native dependency tree" >&2
  exit 1
fi

step "tier 1: native (cargo test)"
cargo test --all-targets

step "build the npm package"
# Exit 3 is a package built but over its size budget (the build's report
# above says which module): the tiers below still run on it, so one run
# tells what else is wrong, and the script fails at the end.
build_status=0
node js/scripts/build.mjs || build_status=$?
if [ "$build_status" -ne 0 ] && [ "$build_status" -ne 3 ]; then
  exit "$build_status"
fi

step "tier 2: wasm in headless Chromium (wasm-pack test)"
CHROMEDRIVER="$(command -v chromedriver)" wasm-pack test --headless --chrome -- --test web

step "tier 3: the package in workerd (node --test)"
(cd js && node --test test/*.test.mjs)

if [ "$build_status" -eq 3 ]; then
  echo "every tier passed, but a .wasm is over its gzip size budget (see the build's size report)" >&2
  exit 1
fi
