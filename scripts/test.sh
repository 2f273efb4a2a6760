#!/usr/bin/env bash
# Set everything up and run every check: formatting, clippy (host and plugins), the Rust unit,
# table, snapshot and end-to-end suites (real GDAL, real wasm components, the rmcp client over
# stdio), the cross-implementation check with the official Python MCP SDK in both
# protocol eras, the hydrology outputs against independent implementations, and zonal
# statistics against exactextract and rasterstats, the measuring tools (geodesic and planar
# figures, buffers, overlays, joins, band math, table points) against GeographicLib, PROJ, shapely
# and numpy, the TypeScript SDK 1.x client (what most hosts embed) and the size of the
# model-facing tool list. Exits non-zero on the first failure.
#
# `./scripts/test.sh quick` is the quick tier: formatting, clippy, and the Rust unit, table and
# snapshot tests (host and plugins), with no end-to-end suite, no Debian packages installed, no
# Python venv and no Node. It needs GDAL's headers and Rust already on the machine and says so if
# they are not.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ "${1:-}" = quick ]; then
  if ! pkg-config --exists gdal 2>/dev/null; then
    log "the quick tier installs nothing: GDAL's headers (libgdal-dev) are missing; run ./scripts/test.sh once"
    exit 1
  fi
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; fi
  if ! command -v cargo >/dev/null || ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    log "the quick tier installs nothing: Rust stable with wasm32-wasip2 is missing; run ./scripts/test.sh once"
    exit 1
  fi
  cd "$ROOT"
  log "quick: cargo fmt --check"
  cargo fmt --all -- --check
  cargo fmt --manifest-path plugins/Cargo.toml --all -- --check
  log "quick: cargo clippy (host workspace, then plugins for wasm32-wasip2)"
  cargo clippy --locked --all-targets -- -D warnings
  cargo clippy --locked --manifest-path plugins/Cargo.toml --target wasm32-wasip2 \
    --target-dir target/plugins -- -D warnings
  log "quick: host unit, table and snapshot tests"
  cargo test --locked -p gdal-mcp
  log "quick: the domains' own classification tests (plugins, native)"
  cargo test --locked --manifest-path plugins/Cargo.toml --target-dir target/plugins-native
  log "quick tier passed (the full run, ./scripts/test.sh, adds the end-to-end suite and the cross-checks)"
  exit 0
elif [ -n "${1:-}" ]; then
  log "unknown tier '$1': use no argument (everything) or 'quick'"
  exit 2
fi

ensure_debian_packages python3-venv proj-bin  # proj-bin: `geod`, a reference of measure_references.py
ensure_rust
ensure_node
cd "$ROOT"

log "test data (real rasters and vectors from Debian's r-cran-stars and r-cran-sf)"
bash tests/fixtures/fetch-data.sh "$ROOT/target/testdata" >&2

log "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path plugins/Cargo.toml --all -- --check

log "building"
cargo build --locked --workspace --bins

log "cargo test"
rm -rf target/provenance
cargo test --locked --workspace

log "cargo test: the domains' own classification tests (plugins, native)"
cargo test --locked --manifest-path plugins/Cargo.toml --target-dir target/plugins-native

log "cargo clippy (host workspace, then plugins for wasm32-wasip2)"
cargo clippy --locked --all-targets -- -D warnings
cargo clippy --locked --manifest-path plugins/Cargo.toml --target wasm32-wasip2 \
  --target-dir target/plugins -- -D warnings

log "cross-implementation check with the Python MCP SDK"
venv="$ROOT/target/pyvenv"
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv" >&2; fi
"$venv/bin/pip" install -q -r tests/python/requirements.txt >&2
ws="$(mktemp -d)"
trap 'rm -rf "$ws"' EXIT
"$venv/bin/python" tests/python/cross_client.py --server target/debug/gdal-mcp \
  --workspace "$ws" --data "$ROOT/target/testdata"

log "PROV-JSON of the end-to-end chain against the W3C PROV-JSON schema (and the checker's own negatives)"
"$venv/bin/python" tests/python/prov_check.py target/provenance/chain.prov.json
for bad in tests/fixtures/prov-json/invalid_*.json; do
  if "$venv/bin/python" tests/python/prov_check.py "$bad" >/dev/null 2>&1; then
    echo "prov_check accepted $bad, which must fail" >&2; exit 1
  fi
done

log "cross-check with the TypeScript MCP SDK 1.x client (errors and refusals must be readable)"
npm ci --silent --no-audit --no-fund --prefix tests/ts >&2
mkdir -p "$ws/ts"
node tests/ts/cross_client.mjs --server target/debug/gdal-mcp --workspace "$ws/ts" \
  --data "$ROOT/target/testdata"

log "a person's sign-off through the host's forms (issue 20): Python SDK in both eras, TypeScript SDK 1.x"
"$venv/bin/python" tests/python/sign_off.py --server target/debug/gdal-mcp --workspace "$ws/sign_off"
node tests/ts/sign_off.mjs --server target/debug/gdal-mcp --workspace "$ws/ts_sign_off"

log "size of the model-facing tool list (at most 48000 characters)"
"$venv/bin/python" tests/python/tool_list_size.py --server target/debug/gdal-mcp \
  --max-model-facing 48000

log "hydrology against independent implementations (RichDEM fill, numpy steepest descent)"
"$venv/bin/python" tests/python/hydrology_anchors.py --server target/debug/gdal-mcp \
  --data "$ROOT/target/testdata"

log "zonal statistics against exactextract and rasterstats (real Olinda tracts)"
"$venv/bin/python" tests/python/zonal_references.py --server target/debug/gdal-mcp \
  --workspace "$ws/zonal" --data "$ROOT/target/testdata"

log "measuring tools against independent implementations (GeographicLib, PROJ geod, shapely, numpy)"
"$venv/bin/python" tests/python/measure_references.py --server target/debug/gdal-mcp \
  --workspace "$ws/measure"
