#!/usr/bin/env bash
# Set everything up (Debian GDAL, the wasm32-wasip2 target, a release build with the built-in
# risk domains) and run the MCP server over stdio. Arguments go to `gdal-mcp serve`, e.g.
#   ./scripts/run.sh --workspace ~/data
# Setup output goes to stderr; stdout is the server's JSON-RPC stream.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_debian_packages
ensure_rust
log "building gdal-mcp (release)"
cargo build --release --locked --manifest-path "$ROOT/Cargo.toml" -p gdal-mcp >&2
exec "$ROOT/target/release/gdal-mcp" serve "$@"
