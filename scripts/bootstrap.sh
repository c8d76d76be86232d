#!/usr/bin/env bash
# Installs what building and testing paceline need, from the registries this
# machine reaches. Idempotent: each step checks first, so a second run only
# looks. Usage: scripts/bootstrap.sh [demo|test]  (test adds the browser).
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-test}"
say() { printf 'bootstrap: %s\n' "$*"; }

export PATH="$HOME/.cargo/bin:$PATH"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi
for component in clippy rustfmt; do
  if ! rustup component list --installed | grep -q "^$component"; then
    rustup component add "$component"
  fi
done

# The CLI must be the exact version Cargo.toml pins for the wasm-bindgen crate.
bindgen_version=$(sed -n 's/^wasm-bindgen = "=\(.*\)"$/\1/p' Cargo.toml)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$bindgen_version" ]; then
  say "installing wasm-bindgen-cli $bindgen_version (about two minutes)"
  cargo install wasm-bindgen-cli --version "$bindgen_version" --force
fi
if ! command -v wasm-pack >/dev/null; then
  say "installing wasm-pack (about two minutes)"
  cargo install wasm-pack
fi

if [ "$purpose" = test ] && ! { command -v chromium && command -v chromedriver; } >/dev/null; then
  say "installing Debian's chromium and chromium-driver"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium chromium-driver >/dev/null
fi

# npm packages of js/, exactly as the committed lockfile pins them; the stamp
# remembers which lockfile the installed tree came from.
stamp=js/node_modules/.paceline-lock.sha256
want=$(sha256sum js/package-lock.json | awk '{print $1}')
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing js/ packages from js/package-lock.json"
  (cd js && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi
