//! Atomic outputs: nothing is lost or half-written.
//!
//! A runner writes into a fresh hidden folder next to the final path (same filesystem), under
//! the final file name, so drivers that write sidecar files (`.aux.xml`, `.ovr`, `.prj`...)
//! keep their names. On success every file is fsynced and renamed into place, sidecars first
//! and the main file last, then the folder is fsynced. On failure or drop the staging folder
//! disappears with everything in it.

use super::GdalError;
use std::cell::RefCell;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a commit may replace. Set for the duration of one job on its worker thread
/// ([`with_rules`]); without rules, nothing that exists may be replaced.
#[derive(Debug, Clone, Default)]
pub struct WriteRules {
    /// The call's `overwrite`: an existing file may be replaced at all.
    pub overwrite: bool,
    /// (device, inode) of every input file: never replaced, whatever its name.
    pub inputs: Vec<(u64, u64)>,
    /// (device, inode) of every file that belongs to an input by name (`nc.dbf` beside
    /// `nc.shp`, `dem.tif.ovr`, `dem.hdr`...): replaced only when declared as an output.
    pub sidecars: Vec<(u64, u64)>,
    /// Outputs the call declared (they may replace a sidecar of an input, with `overwrite`).
    pub declared: Vec<PathBuf>,
    /// Folders no output may land in (the capsule store, the component cache).
    pub protected_roots: Vec<PathBuf>,
}

impl WriteRules {
    /// The rules for a call that reads `inputs`, declares `outputs` and may `overwrite`.
    pub fn for_call(
        inputs: &[PathBuf],
        outputs: &[PathBuf],
        overwrite: bool,
        protected_roots: Vec<PathBuf>,
    ) -> Self {
        let id = |p: &Path| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        let mut rules = Self {
            overwrite,
            declared: outputs.to_vec(),
            protected_roots,
            ..Self::default()
        };
        for input in inputs {
            rules.inputs.extend(id(input));
            for sidecar in sidecars_of(input) {
                rules.sidecars.extend(id(&sidecar));
            }
        }
        rules
    }
}

/// Files beside `input` that belong to it by name: `<stem>.*` and `<name>.*`.
fn sidecars_of(input: &Path) -> Vec<PathBuf> {
    let (Some(parent), Some((name, stem))) = (input.parent(), super::name_and_stem(input)) else {
        return Vec::new();
    };
    let prefixes = [format!("{stem}."), format!("{name}.")];
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().to_string())
                .is_some_and(|n| prefixes.iter().any(|pre| n.starts_with(pre.as_str())))
        })
        .collect()
}

thread_local! {
    static RULES: RefCell<Option<WriteRules>> = const { RefCell::new(None) };
    /// The staging folders of the job on this thread, as I/O names them
    /// (`/proc/self/fd/N/.gdal-mcp-XXXXXX`), with the folder of the output the caller named.
    static STAGED: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
    /// Whether an output of the job on this thread passed the point of no return: its commit
    /// saw the call still wanted, and moves it into place whatever comes after.
    static COMMITTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `text` (an error message) with every staging folder of the job on this thread replaced by
/// the folder of the output the caller named, and every pinned folder's `/proc/self/fd/N` by
/// its real path: "opening /proc/self/fd/23/.gdal-mcp-ZUxJ7e/f.xyz failed" reads "opening
/// /w/f.xyz failed" (attack round 12's notes). Applied once, to the error a job returns.
pub fn agent_text(text: &str) -> String {
    let staged = STAGED.with(|s| {
        s.borrow()
            .iter()
            .rev()
            .fold(text.to_string(), |out, (io, real)| {
                out.replace(io.as_str(), real)
            })
    });
    super::policy::unpin_text(&staged)
}

/// Forget the job's staging folders (at the end of the job).
pub fn forget_staged() {
    STAGED.with(|s| s.borrow_mut().clear());
}

/// Debug builds only: sleep `GDAL_MCP_TEST_PAUSE_BEFORE_SYNC_MS` between a commit's first
/// look at the client and the sync of its staged files (a second for 200 MB), so that the
/// end-to-end tests can cancel in that window. A no-op in release builds.
fn pause_before_sync() {
    #[cfg(debug_assertions)]
    {
        static PAUSE: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
        let pause = PAUSE.get_or_init(|| {
            std::env::var("GDAL_MCP_TEST_PAUSE_BEFORE_SYNC_MS")
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map(std::time::Duration::from_millis)
        });
        if let Some(pause) = pause {
            std::thread::sleep(*pause);
        }
    }
}

/// Run `job` with `rules` in force for every commit on this thread (through the job guard,
/// [`super::Job`], so the rules are gone however `job` ends); with whether an output of it
/// passed the point of no return. A cancellation that arrives after that point is too late:
/// the output is in place, and the call answers as done, with its lineage (attack round 21,
/// R21-C3: a cancel during the staged file's fsync got no answer and no lineage record, yet
/// the output was committed and had replaced the file the user kept).
pub fn with_rules<T>(rules: WriteRules, job: impl FnOnce() -> T) -> (T, bool) {
    let _job = super::Job::new().rules(rules).enter();
    COMMITTED.with(|c| c.set(false));
    let out = job();
    (out, COMMITTED.with(|c| c.replace(false)))
}

/// Put `rules` in force on this thread, giving back those they replace (for [`super::Job`]).
pub(super) fn swap_rules(rules: Option<WriteRules>) -> Option<WriteRules> {
    RULES.with(|r| std::mem::replace(&mut *r.borrow_mut(), rules))
}

/// Whether write rules are in force on this thread.
pub fn rules_in_force() -> bool {
    RULES.with(|r| r.borrow().is_some())
}

/// Refuse moving a staged file to `dest` (reached through `dest_io`, the pinned folder) if it
/// would replace something it must not.
fn check_destination(dest: &Path, dest_io: &Path) -> Result<(), GdalError> {
    RULES.with(|rules| {
        let rules = rules.borrow();
        let default = WriteRules::default();
        let rules = rules.as_ref().unwrap_or(&default);
        if let Some(root) = rules.protected_roots.iter().find(|r| dest.starts_with(r)) {
            return Err(GdalError::Arguments(format!(
                "output: {} lies in {}, which belongs to the server (capsule store or component \
                 cache); write elsewhere",
                dest.display(),
                root.display()
            )));
        }
        let Ok(meta) = fs::symlink_metadata(dest_io) else {
            return Ok(());
        };
        let id = (meta.dev(), meta.ino());
        if rules.inputs.contains(&id) {
            return Err(GdalError::Arguments(format!(
                "output: writing it would replace {}, a file of an input of this call; write \
                 to a new path",
                dest.display()
            )));
        }
        if !rules.overwrite {
            return Err(GdalError::Arguments(format!(
                "output: the driver also writes {}, which already exists; pass \"overwrite\": \
                 true to replace it, or choose another output name",
                dest.display()
            )));
        }
        if rules.sidecars.contains(&id) && !rules.declared.iter().any(|d| d == dest) {
            return Err(GdalError::Arguments(format!(
                "output: writing it would replace {}, which belongs to an input of this call \
                 (a sidecar); choose another output name",
                dest.display()
            )));
        }
        Ok(())
    })
}

/// A staging area for one output.
pub struct Staging {
    // Dropped first: the staging folder is removed through the anchor, which closes last.
    dir: tempfile::TempDir,
    final_path: PathBuf,
    staged: PathBuf,
    /// The output folder as I/O reaches it: `/proc/self/fd/N` of the anchor.
    parent_io: PathBuf,
    _anchor: Option<OwnedFd>,
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
        // The output folder is pinned (opened without following links): staging, writing and
        // the final renames all go through that descriptor, so a folder swapped for a link
        // after the path was checked cannot send the output elsewhere.
        let anchor = super::policy::pin_dir(parent).map_err(|e| {
            GdalError::Arguments(format!(
                "output: its folder {} changed while the call was running ({e}); a folder \
                 inside the workspace was replaced by a link",
                parent.display()
            ))
        })?;
        let parent_io = match &anchor {
            Some(fd) => PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
            None => parent.to_path_buf(),
        };
        let dir = tempfile::Builder::new()
            .prefix(".gdal-mcp-")
            .tempdir_in(&parent_io)
            .map_err(io)?;
        let staged = dir.path().join(name);
        // The staging folder appears beside the output, which may be beside an input whose
        // folder is watched: the job's own folder is no change (attack round 23, R23-A9:
        // `raster_overviews` of a VRT failed on it as "replaced, linked or appeared").
        if let Some(folder) = dir.path().file_name() {
            super::policy::watch::expect(&parent.join(folder));
            super::policy::watch::own_folder(&parent.join(folder));
            super::policy::watch::own_folder(dir.path());
        }
        STAGED.with(|s| {
            s.borrow_mut().push((
                dir.path().to_string_lossy().into_owned(),
                parent.to_string_lossy().into_owned(),
            ))
        });
        Ok(Self {
            dir,
            final_path: final_path.to_path_buf(),
            staged,
            parent_io,
            _anchor: anchor,
        })
    }

    /// A new vector dataset of `driver` at the staged path; `failed` words the error when GDAL
    /// has no driver of that name or cannot create the file.
    pub fn create_vector(
        &self,
        driver: &str,
        failed: impl Fn(&str) -> GdalError,
    ) -> Result<gdal::Dataset, GdalError> {
        gdal::DriverManager::get_driver_by_name(driver)
            .map_err(|_| failed("no such driver"))?
            .create_vector_only(self.path())
            .map_err(|_| failed("cannot create the file"))
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
        // A job set aside after its open deadline was already answered as failed.
        if super::policy::deadline::set_aside() {
            return Err(GdalError::Failed {
                operation: format!("writing {}", self.final_path.display()),
                message: "the call passed its open deadline and was already answered; \
                          nothing is committed"
                    .to_string(),
            });
        }
        // A cancelled call writes nothing, however far its program got: GDAL's programs
        // finish what they are given once near their end, and a vector conversion took no
        // notice (attack round 20, R20-C2: the cancelled call's output replaced the file the
        // user meant to keep).
        if !super::keep_going(1.0) {
            return Err(super::cancelled(&format!(
                "writing {}",
                self.final_path.display()
            )));
        }
        // The inputs read are still the files that were checked (GDAL reads VRT sources by
        // name, lazily).
        super::policy::verify_listed_unchanged()?;
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
        pause_before_sync();
        // Every staged file reaches the disk before any is moved (outside the commit lock).
        for entry in entries.iter().filter(|e| e.is_file()) {
            File::open(entry).and_then(|f| f.sync_all()).map_err(io)?;
        }
        let names: Vec<PathBuf> = entries
            .iter()
            .map(|e| e.file_name().map(PathBuf::from).unwrap_or_default())
            .collect();
        // The job's own files landing beside its inputs (an external `.ovr`) are no change
        // the folder watches should report.
        for name in &names {
            super::policy::watch::expect(&parent.join(name));
        }
        // One commit at a time: two calls writing the same output at once checked it, then
        // renamed, each past the other's check, so both succeeded and the file held the last
        // (attack round 15, R15-C11), and a shapefile held one call's `.shp` and the other's
        // `.dbf` (R15-C12). The lock covers the checks and the renames only.
        let _one_at_a_time = COMMITS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Check every destination before moving anything: all or nothing.
        for name in &names {
            check_destination(&parent.join(name), &self.parent_io.join(name))?;
        }
        // The last look at the client before anything moves: a cancel that came while the
        // staged files were synced (a second for 200 MB) is honoured, and one after this point
        // is too late ([`with_rules`], attack round 21, R21-C3).
        if !super::keep_going(1.0) {
            return Err(super::cancelled(&format!(
                "writing {}",
                self.final_path.display()
            )));
        }
        COMMITTED.with(|c| c.set(true));
        let overwrite = RULES.with(|r| r.borrow().as_ref().is_some_and(|r| r.overwrite));
        self.remove_stale_sidecars(&parent, &names, overwrite)?;
        let mut moved = Vec::with_capacity(entries.len());
        for (entry, name) in entries.iter().zip(&names) {
            rename(entry, &self.parent_io.join(name), !overwrite).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    GdalError::Arguments(format!(
                        "output: {} was created by someone else while this call was \
                         committing; pass \"overwrite\": true to replace it, or choose \
                         another output name",
                        parent.join(name).display()
                    ))
                } else {
                    io(e)
                }
            })?;
            moved.push(parent.join(name));
        }
        File::open(&self.parent_io)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        Ok(moved)
    }

    /// The files GDAL would read by name beside the new output as its own (its PAM
    /// `.aux.xml`, overviews, masks, world files, `.prj`, an index...) that this write did not
    /// produce: left by an output this one replaces, or by anything before it, they would be
    /// read as the new file's (attack round 15, R15-C14: an overwritten PNG without
    /// georeferencing read as WGS 84 at 10° E through the old `o.png.aux.xml`, while its
    /// result said `crs: null`). With `overwrite` they are removed (before the new files are
    /// moved in); without it the call is refused naming them. An input's file, or a file an
    /// input owns by name, is never removed: the call is refused instead.
    fn remove_stale_sidecars(
        &self,
        parent: &Path,
        written: &[PathBuf],
        overwrite: bool,
    ) -> Result<(), GdalError> {
        let wanted = own_sidecar_names(&self.final_path);
        let written: Vec<String> = written
            .iter()
            .map(|n| n.to_string_lossy().to_lowercase())
            .collect();
        let Ok(listing) = fs::read_dir(&self.parent_io) else {
            return Ok(());
        };
        let stale: Vec<(String, fs::Metadata)> = listing
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let lower = name.to_lowercase();
                (wanted.contains(&lower) && !written.contains(&lower))
                    .then(|| entry.metadata().ok().map(|m| (name, m)))
                    .flatten()
            })
            .collect();
        for (name, meta) in stale {
            let shown = parent.join(&name);
            let id = (meta.dev(), meta.ino());
            let owned = RULES.with(|r| {
                r.borrow()
                    .as_ref()
                    .is_some_and(|r| r.inputs.contains(&id) || r.sidecars.contains(&id))
            });
            if owned || !overwrite || !meta.is_file() {
                return Err(GdalError::Arguments(format!(
                    "output: {} lies beside it, and GDAL would read it as the new file's own \
                     ({}); {}",
                    shown.display(),
                    if owned {
                        "it belongs to an input of this call"
                    } else {
                        "georeferencing, nodata, statistics, overviews or a mask of another file"
                    },
                    if owned || !meta.is_file() {
                        "choose another output name"
                    } else {
                        "pass \"overwrite\": true to replace it with the new file (it is \
                         removed), or choose another output name"
                    }
                )));
            }
            fs::remove_file(self.parent_io.join(&name)).map_err(|source| GdalError::Io {
                operation: format!(
                    "removing {}, left by the output this one replaces",
                    shown.display()
                ),
                source,
            })?;
            tracing::info!(
                "removed {}, a sidecar of the replaced output",
                shown.display()
            );
        }
        Ok(())
    }
}

/// The names (lower-cased) of the files GDAL reads beside `file` as its own and that can
/// belong to no other dataset: `<name>.aux.xml` (PAM: CRS, geotransform, nodata, statistics),
/// `<name>.ovr`, `<name>.msk`, `<name>.aux`, the extension's world files (`o.pgw`, `o.pngw`),
/// and for a shapefile its `.prj`, `.cpg`, `.qix`, `.sbn`, `.sbx` and `.shp.xml`. Names shared
/// with other datasets (`o.wld`, `o.prj` beside a raster) are left alone.
fn own_sidecar_names(file: &Path) -> Vec<String> {
    let Some((name, stem)) = super::name_and_stem(file) else {
        return Vec::new();
    };
    let (name, stem) = (name.to_lowercase(), stem.to_lowercase());
    let extension = file
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut names: Vec<String> = [".aux.xml", ".ovr", ".msk", ".aux"]
        .iter()
        .map(|s| format!("{name}{s}"))
        .collect();
    if let (Some(first), Some(last)) = (extension.chars().next(), extension.chars().last()) {
        names.push(format!("{stem}.{first}{last}w"));
        names.push(format!("{stem}.{extension}w"));
    }
    if extension == "shp" {
        names.extend([".prj", ".cpg", ".qix", ".sbn", ".sbx"].map(|s| format!("{stem}{s}")));
    }
    names
}

/// Commits run one at a time in the process ([`Staging::commit`]).
static COMMITS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Rename `from` to `to`; with `no_replace`, failing with `AlreadyExists` rather than
/// replacing a file created since the checks (by another process: commits in this one are
/// serialised).
fn rename(from: &Path, to: &Path, no_replace: bool) -> std::io::Result<()> {
    if !no_replace {
        return fs::rename(from, to);
    }
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths, resolved from the working directory (both absolute or
    // under /proc/self/fd).
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
