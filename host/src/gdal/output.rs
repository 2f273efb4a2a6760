//! Atomic outputs: nothing is lost or half-written.
//!
//! A runner writes into a fresh hidden folder next to the final path (same filesystem), under
//! the final file name, so drivers that write sidecar files (`.aux.xml`, `.ovr`, `.prj`...)
//! keep their names. On success every file is fsynced and renamed into place, sidecars first
//! and the main file last, then the folder is fsynced. On failure or drop the staging folder
//! disappears with everything in it.

use super::GdalError;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

/// A staging area for one output.
pub struct Staging {
    dir: tempfile::TempDir,
    final_path: PathBuf,
    staged: PathBuf,
}

impl Staging {
    /// Prepare to write `final_path`.
    pub fn new(final_path: &Path) -> Result<Self, GdalError> {
        let io = |source| GdalError::Io {
            operation: format!("staging {}", final_path.display()),
            source,
        };
        let parent = final_path.parent().unwrap_or(Path::new("."));
        let name = final_path.file_name().ok_or_else(|| {
            GdalError::Arguments(format!("{} does not name a file", final_path.display()))
        })?;
        let dir = tempfile::Builder::new()
            .prefix(".gdal-mcp-")
            .tempdir_in(parent)
            .map_err(io)?;
        let staged = dir.path().join(name);
        Ok(Self {
            dir,
            final_path: final_path.to_path_buf(),
            staged,
        })
    }

    /// Where the runner must write.
    pub fn path(&self) -> &Path {
        &self.staged
    }

    /// Move everything written into place; returns the files created, main file last.
    pub fn commit(self) -> Result<Vec<PathBuf>, GdalError> {
        let io = |source| GdalError::Io {
            operation: format!("moving the output into {}", self.final_path.display()),
            source,
        };
        let parent = self
            .final_path
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let mut entries: Vec<PathBuf> = fs::read_dir(self.dir.path())
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        if !entries.iter().any(|p| p == &self.staged) {
            return Err(GdalError::Arguments(format!(
                "the driver wrote no file at {}",
                self.final_path.display()
            )));
        }
        entries.sort_by_key(|p| p == &self.staged);
        let mut moved = Vec::with_capacity(entries.len());
        for entry in entries {
            if entry.is_file() {
                File::open(&entry).and_then(|f| f.sync_all()).map_err(io)?;
            }
            let name = entry.file_name().map(PathBuf::from).unwrap_or_default();
            let dest = parent.join(name);
            fs::rename(&entry, &dest).map_err(io)?;
            moved.push(dest);
        }
        File::open(&parent).and_then(|d| d.sync_all()).map_err(io)?;
        Ok(moved)
    }
}
