//! Builds the risk-domain components in `plugins/` for `wasm32-wasip2` and embeds the built-in
//! ones, so that a plain `cargo build` or `cargo install --path host` yields a complete server
//! (the approach substrate-wasm-builder takes for its runtime).
//!
//! The plugins are a separate cargo workspace built into `target/plugins/`, a target directory
//! of their own, so the nested cargo never waits on the outer build's lock.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

/// The domains compiled into the binary, in load order.
const BUILTIN: &[&str] = &[
    "crs_datum",
    "resampling",
    "hydrology",
    "format_selection",
    "aggregation",
];
const TARGET: &str = "wasm32-wasip2";

fn fail(message: &str) -> ! {
    eprintln!("\nerror: {message}\n");
    println!("cargo::error={message}");
    exit(1)
}

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let plugins = root.join("plugins");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap_or_default());
    println!("cargo::rerun-if-changed={}", plugins.display());
    println!("cargo::rerun-if-changed={}", root.join("wit").display());
    println!("cargo::rerun-if-env-changed=GDAL_MCP_PLUGIN_TARGET_DIR");

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let has_target = sysroot
        .as_ref()
        .is_some_and(|s| s.join("lib/rustlib").join(TARGET).exists());
    if !has_target {
        fail(&format!(
            "the built-in risk domains are WebAssembly components and need the `{TARGET}` \
             Rust target, which is not installed. Install it with `rustup target add {TARGET}` \
             (or run ./scripts/setup.sh), then build again."
        ));
    }

    let target_dir = env::var("GDAL_MCP_PLUGIN_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target").join("plugins"));
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--release", "--workspace", "--target", TARGET])
        .arg("--manifest-path")
        .arg(plugins.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    // The outer build's settings are for the host; the guests get their own.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        build.env_remove(var);
    }
    match build.status() {
        Ok(status) if status.success() => {}
        Ok(status) => fail(&format!(
            "building the risk-domain plugins in {} failed ({status}); see the cargo output above",
            plugins.display()
        )),
        Err(e) => fail(&format!("could not run cargo to build the plugins: {e}")),
    }

    let built = target_dir.join(TARGET).join("release");
    let mut table = String::from("/// The built-in domains: (file stem, component bytes).\n");
    table.push_str("pub static BUILTIN_COMPONENTS: &[(&str, &[u8])] = &[\n");
    for name in BUILTIN {
        let source = built.join(format!("{name}.wasm"));
        let dest = out_dir.join(format!("{name}.wasm"));
        if let Err(e) = std::fs::copy(&source, &dest) {
            fail(&format!(
                "plugin {name}: cannot copy {}: {e}",
                source.display()
            ));
        }
        let _ = writeln!(
            table,
            "    ({name:?}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.wasm\"))),"
        );
    }
    table.push_str("];\n");
    if let Err(e) = std::fs::write(out_dir.join("builtin_components.rs"), table) {
        fail(&format!("cannot write the plugin table: {e}"));
    }
}
