# Shared setup for scripts/run.sh and scripts/test.sh: install what is missing, idempotently.
# Everything here logs to stderr: stdout may be an MCP client's JSON-RPC stream.

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'gdal-mcp setup: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    log "need root for: $*"; return 1; fi
}

# Debian packages: GDAL 3.6 (library, headers, CLI for the test oracles) and a C toolchain.
ensure_debian_packages() {
  local wanted=(gdal-bin libgdal-dev libsqlite3-dev sqlite3 pkg-config gcc libc6-dev "$@") missing=()
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  fi
}

# Rust stable with the wasm32-wasip2 target (the risk domains are WebAssembly components).
ensure_rust() {
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; fi
  if ! command -v cargo >/dev/null; then
    log "cargo is missing: install Rust stable with rustup (https://rustup.rs), then rerun"
    return 1
  fi
  if command -v rustup >/dev/null; then
    if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
      log "adding the wasm32-wasip2 Rust target"
      rustup target add wasm32-wasip2 >&2
    fi
  fi
}

# Node.js and npm, for the cross-check with the TypeScript MCP SDK (most hosts embed it).
# Debian 12's nodejs (18) is enough; an existing node/npm on PATH is used as it is.
ensure_node() {
  if command -v node >/dev/null && command -v npm >/dev/null; then return 0; fi
  log "installing Debian packages: nodejs npm"
  as_root apt-get update -qq >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >&2
}
