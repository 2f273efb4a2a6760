//! The on-disk cache of compiled components.
//!
//! Cranelift takes 0.1-0.2 s per component in a release build (far more in a debug one), which
//! would blow the cold-start budget on every start. A compiled component is stored as
//! `<dir>/<key>.cwasm`, where the key is the SHA-256 of the component bytes and of the engine's
//! precompile compatibility hash, so a different wasmtime version or configuration never loads
//! a stale artifact. Writes are atomic; an unreadable entry is recompiled and replaced.

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
        let Some(dir) = &self.dir else {
            return Component::new(engine, bytes);
        };
        let path = dir.join(format!("{}.cwasm", key(engine, bytes)));
        if path.is_file() {
            // SAFETY: the file was written by `store` below from `Component::serialize` of
            // the same bytes and engine configuration (both are in its name), in a directory
            // only this user writes; wasmtime still checks its header and compatibility.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok(component),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "recompiling unreadable cache entry: {e}");
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Err(e) = store(dir, &path, &component) {
            tracing::warn!(path = %path.display(), "cannot cache compiled component: {e}");
        }
        Ok(component)
    }
}

fn store(dir: &Path, path: &Path, component: &Component) -> Result<(), String> {
    let bytes = component.serialize().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| e.to_string())?;
    file.write_all(&bytes).map_err(|e| e.to_string())?;
    file.as_file().sync_all().map_err(|e| e.to_string())?;
    file.persist(path).map_err(|e| e.to_string())?;
    Ok(())
}
