//! The on-disk cache of compiled components.
//!
//! Cranelift takes 0.1-0.2 s per component in a release build (far more in a debug one), which
//! would blow the cold-start budget on every start. A compiled component is stored as
//! `<dir>/<key>.cwasm`, where the key is the SHA-256 of the component bytes and of the engine's
//! precompile compatibility hash, so a different wasmtime version or configuration never loads
//! a stale artifact. Writes are atomic; an unreadable entry is recompiled and replaced.
//!
//! Deserialising an artifact is running native code, so the cache trusts nothing by file name:
//! `index.json` records the SHA-256 of every artifact this process family wrote, and an
//! artifact is loaded only from the bytes whose digest matches the index (read once, hashed,
//! deserialised from memory). A folder that other users can write to is not used at all.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::Engine;

/// Feeds `Hash` output into SHA-256 (for the engine's compatibility hash).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        0
    }
}

/// The cache key of `bytes` compiled by `engine`.
pub fn key(engine: &Engine, bytes: &[u8]) -> String {
    let mut hasher = ShaHasher(Sha256::new());
    hasher.0.update(bytes);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex::encode(hasher.0.finalize())
}

/// Where compiled components live; `None` compiles in memory every time.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
}

impl ComponentCache {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// The compiled component for `bytes`, from the cache or freshly compiled.
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        let Some(dir) = self.dir.as_ref().filter(|d| usable(d)) else {
            return Component::new(engine, bytes);
        };
        let key = key(engine, bytes);
        let path = dir.join(format!("{key}.cwasm"));
        if let Some(artifact) = verified_artifact(dir, &key, &path) {
            // SAFETY: these are the very bytes whose SHA-256 the index recorded when this
            // cache serialised the component compiled from `bytes` by this engine
            // configuration (both in the key); wasmtime still checks header and compatibility.
            match unsafe { Component::deserialize(engine, &artifact) } {
                Ok(component) => return Ok(component),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "recompiling unreadable cache entry: {e}");
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Err(e) = store(dir, &key, &path, &component) {
            tracing::warn!(path = %path.display(), "cannot cache compiled component: {e}");
        }
        Ok(component)
    }
}

/// Whether the cache folder may be used: absent (it will be created) or not writable by
/// group or others.
fn usable(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(dir) {
        Ok(meta) if meta.permissions().mode() & 0o022 != 0 => {
            tracing::warn!(
                dir = %dir.display(),
                "not using the component cache: the folder is writable by group or others"
            );
            false
        }
        _ => true,
    }
}

fn index_path(dir: &Path) -> PathBuf {
    dir.join("index.json")
}

fn read_index(dir: &Path) -> serde_json::Map<String, serde_json::Value> {
    std::fs::read(index_path(dir))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The artifact's bytes, if its digest is the one the index recorded for `key`.
fn verified_artifact(dir: &Path, key: &str, path: &Path) -> Option<Vec<u8>> {
    let expected = read_index(dir)
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_string)?;
    let artifact = std::fs::read(path).ok()?;
    let digest = hex::encode(Sha256::digest(&artifact));
    if digest == expected {
        Some(artifact)
    } else {
        tracing::warn!(path = %path.display(), "recompiling a cache entry whose digest does not match the index");
        None
    }
}

fn store(dir: &Path, key: &str, path: &Path, component: &Component) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    let bytes = component.serialize().map_err(|e| e.to_string())?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| e.to_string())?;
    let write = |target: &Path, content: &[u8]| -> Result<(), String> {
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| e.to_string())?;
        file.write_all(content).map_err(|e| e.to_string())?;
        file.as_file().sync_all().map_err(|e| e.to_string())?;
        file.persist(target).map_err(|e| e.to_string())?;
        Ok(())
    };
    write(path, &bytes)?;
    let mut index = read_index(dir);
    index.insert(
        key.to_string(),
        serde_json::Value::String(hex::encode(Sha256::digest(&bytes))),
    );
    let text = serde_json::to_vec_pretty(&index).map_err(|e| e.to_string())?;
    write(&index_path(dir), &text)
}
