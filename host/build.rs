//! Builds the risk-domain components in `plugins/` for `wasm32-wasip2` and embeds the built-in
//! ones, so that a plain `cargo build` or `cargo install --path host` yields a complete server
//! (the approach substrate-wasm-builder takes for its runtime).
//!
//! The plugins are a separate cargo workspace built into `target/plugins/`, a target directory
//! of their own, so the nested cargo never waits on the outer build's lock.
//!
//! Which crates are built in comes from one place: `[workspace.metadata.gdal-mcp]` in
//! `plugins/Cargo.toml` (`builtin`, `test-fixtures`, `libraries`). A crate under `plugins/`
//! that is in none of those lists, or listed but not a workspace member, fails the build.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

const TARGET: &str = "wasm32-wasip2";

/// What `plugins/Cargo.toml` declares.
struct Declared {
    members: Vec<String>,
    builtin: Vec<String>,
    fixtures: Vec<String>,
    libraries: Vec<String>,
}

fn strings(value: Option<&toml::Value>) -> Vec<String> {
    value
        .and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn declared(plugins: &Path) -> Declared {
    let manifest = plugins.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", manifest.display())));
    let parsed: toml::Table = text
        .parse()
        .unwrap_or_else(|e| fail(&format!("{} is not valid TOML: {e}", manifest.display())));
    let workspace = parsed.get("workspace");
    let metadata = workspace
        .and_then(|w| w.get("metadata"))
        .and_then(|m| m.get("gdal-mcp"));
    let declared = Declared {
        members: strings(workspace.and_then(|w| w.get("members"))),
        builtin: strings(metadata.and_then(|m| m.get("builtin"))),
        fixtures: strings(metadata.and_then(|m| m.get("test-fixtures"))),
        libraries: strings(metadata.and_then(|m| m.get("libraries"))),
    };
    if declared.builtin.is_empty() {
        fail(&format!(
            "{}: [workspace.metadata.gdal-mcp] builtin lists no domain",
            manifest.display()
        ));
    }
    declared
}

/// Every crate folder below `plugins/` (one or two levels deep), relative, with `/`.
fn crate_dirs(plugins: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut visit = |dir: &Path, prefix: &str| -> Vec<(PathBuf, String)> {
        let mut next = Vec::new();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().to_string();
                if !path.is_dir() || name.starts_with('.') || name == "target" {
                    continue;
                }
                let relative = format!("{prefix}{name}");
                if path.join("Cargo.toml").is_file() {
                    found.push(relative);
                } else {
                    next.push((path, format!("{relative}/")));
                }
            }
        }
        next
    };
    for (dir, prefix) in visit(plugins, "") {
        visit(&dir, &prefix);
    }
    found.sort();
    found
}

fn check_declared(plugins: &Path, declared: &Declared) {
    for dir in crate_dirs(plugins) {
        let known = declared.builtin.contains(&dir)
            || declared.fixtures.contains(&dir)
            || declared.libraries.contains(&dir);
        if !known {
            fail(&format!(
                "plugins/{dir} is a crate but neither a built-in domain, a test fixture nor a \
                 library: add it to `builtin`, `test-fixtures` or `libraries` under \
                 [workspace.metadata.gdal-mcp] in plugins/Cargo.toml (and to the workspace \
                 members), or move it out of plugins/"
            ));
        }
    }
    for name in declared
        .builtin
        .iter()
        .chain(&declared.fixtures)
        .chain(&declared.libraries)
    {
        if !declared.members.contains(name) {
            fail(&format!(
                "plugins/Cargo.toml declares {name} under [workspace.metadata.gdal-mcp] but not \
                 as a workspace member; add it to `members`"
            ));
        }
    }
}

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
    let declared = declared(&plugins);
    check_declared(&plugins, &declared);
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
             (./scripts/run.sh and ./scripts/test.sh do that), then build again."
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
    for name in &declared.builtin {
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
