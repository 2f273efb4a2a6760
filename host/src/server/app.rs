//! What a running server shares between calls: the configuration, the workspaces, the gate,
//! and the two bounded worker pools.
//!
//! GDAL and the plugins are blocking code. Each runs on tokio's blocking threads, but behind a
//! semaphore of its own, so that neither a burst of slow GDAL jobs nor a burst of plugin calls
//! can take every blocking thread (the stdio transport needs them too), and so that at most
//! [`PLUGIN_WORKERS`] plugin instances hold memory at once.

use super::error::ToolError;
use crate::config::ServerConfig;
use crate::domains::sandbox::Limits;
use crate::domains::{LoadError, Registry};
use crate::reflection::gate::Gate;
use crate::reflection::lineage::{LineageStore, PluginRef, Versions};
use crate::reflection::store::CapsuleStore;
use crate::workspace::{PathError, Workspaces};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// GDAL jobs running at once; further jobs wait for a slot.
pub const GDAL_WORKERS: usize = 8;
/// GDAL jobs of the read-only tools (`raster_info`, `raster_stats`, `vector_info`) running at
/// once, on slots of their own: a cheap question never queues behind a burst of heavy work.
pub const READ_WORKERS: usize = 4;
/// Plugin jobs (gate decisions, validations, prompt renderings) running at once.
pub const PLUGIN_WORKERS: usize = 4;
/// Hashing jobs of `provenance_report` running at once, on slots of their own: however many
/// files it is asked to hash, the read-only tools keep theirs (issue 21).
pub const HASH_WORKERS: usize = 2;
/// Calls of the tools that write (and pass the gate) in flight at once; further calls wait for
/// a slot. Read-only tools do not take one, so they are never queued behind such a burst.
pub const MAX_CALLS_IN_FLIGHT: usize = 64;
/// The memory every call in progress may hold in parsed arguments, together (running or
/// waiting for a slot or a worker): past it a call is refused as busy before it waits. One call
/// holds its arguments' cost ([`super::argument_bytes`], at most [`super::MAX_ARGUMENT_BYTES`])
/// plus [`CALL_OVERHEAD_BYTES`], so at most 64 maximal calls, or 16,384 small ones, wait at
/// once (attack round 11, R11-1: 40 waiting calls of 1.36 MB lines held 535 MB, growing
/// linearly).
pub const MAX_ARGUMENTS_HELD: usize = 64 << 20;
/// What a call in progress costs beside its arguments (its task, its context).
pub const CALL_OVERHEAD_BYTES: usize = 4 << 10;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error(transparent)]
    Workspace(#[from] PathError),
    #[error(transparent)]
    Domains(#[from] LoadError),
    #[error(transparent)]
    Key(#[from] crate::reflection::seal::SealError),
    #[error(transparent)]
    Policy(#[from] crate::reflection::policy::PolicyError),
    /// A `--plugins` folder a tool could write into: the next start would load what the agent
    /// put there (attack round 10, R10-12).
    #[error(
        "--plugins {dir}: lies inside the workspace {workspace}, where tools write; the next \
         start would load any component written there. Keep plugin folders outside every \
         workspace and the store"
    )]
    PluginsInWorkspace { dir: String, workspace: String },
}

/// Refuse a plugin folder inside a workspace or the store (both writable by tool calls or by
/// whoever filled the workspace): a domain pack is trusted code of the operator's.
fn check_plugin_dirs(dirs: &[PathBuf], writable: &[PathBuf]) -> Result<(), StartError> {
    for dir in dirs {
        let resolved = dir.canonicalize().unwrap_or_else(|_| absolute(dir));
        for root in writable {
            let root_resolved = root.canonicalize().unwrap_or_else(|_| absolute(root));
            if resolved.starts_with(&root_resolved) {
                return Err(StartError::PluginsInWorkspace {
                    dir: dir.display().to_string(),
                    workspace: root.display().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Blocking work for one of the worker pools: run once, on a worker thread, to a value or a
/// [`ToolError`].
pub trait Job<T>: FnOnce() -> Result<T, ToolError> + Send + 'static {}

impl<T, F: FnOnce() -> Result<T, ToolError> + Send + 'static> Job<T> for F {}

/// Everything a running server shares between calls.
pub struct App {
    pub config: ServerConfig,
    pub workspaces: Workspaces,
    pub gate: Arc<Gate>,
    /// Lineage records of every output, in the store.
    pub lineage: LineageStore,
    /// What every lineage record names: the software versions and the loaded domains.
    pub provenance: Arc<(Versions, Vec<PluginRef>)>,
    gdal_slots: Arc<Semaphore>,
    read_slots: Arc<Semaphore>,
    plugin_slots: Arc<Semaphore>,
    hash_slots: Arc<Semaphore>,
    call_slots: Arc<Semaphore>,
    /// Bytes of parsed arguments held by calls in progress ([`MAX_ARGUMENTS_HELD`]).
    arguments_held: Arc<std::sync::atomic::AtomicUsize>,
    /// Folders no output may land in: the capsule store and the component cache.
    pub(super) protected_roots: Vec<PathBuf>,
}

/// What a policy file may name: every tool of the table and every loaded domain.
pub fn policy_vocabulary(registry: &Registry) -> crate::reflection::policy::Vocabulary {
    crate::reflection::policy::Vocabulary::new(
        super::registry::table().iter().map(|t| t.name),
        registry.all().iter().map(|d| {
            (
                d.info.id.as_str(),
                matches!(d.origin, crate::domains::Origin::Builtin),
            )
        }),
    )
}

/// The sealing key: `--key-file`, else the default one (created at the first start). A key that
/// is refused (a link, readable by others, inside a workspace) stops the start; where there is
/// no place for a key at all (no home, a read-only home), the server runs with a key of its
/// own process, and every record from an earlier run is then unknown (the strict side).
fn open_seal(
    config: &ServerConfig,
    workspaces: &[PathBuf],
) -> Result<crate::reflection::seal::Seal, crate::reflection::seal::SealError> {
    use crate::reflection::seal::{default_path, Seal, SealError};
    let explicit = config.key_file.is_some();
    let Some(path) = config.key_file.clone().or_else(default_path) else {
        tracing::warn!(
            "no place for the sealing key (no XDG_DATA_HOME or HOME): lineage and \
                        ledger entries are sealed for this run only"
        );
        return Ok(Seal::ephemeral());
    };
    match Seal::open(&path, workspaces) {
        Ok(seal) => Ok(seal),
        Err(e @ SealError::Io { .. }) if !explicit => {
            tracing::warn!("{e}; lineage and ledger entries are sealed for this run only");
            Ok(Seal::ephemeral())
        }
        Err(e) => Err(e),
    }
}

impl App {
    /// Resolve workspaces, load the domains, open the store.
    pub fn start(config: ServerConfig) -> Result<Self, StartError> {
        let workspaces = Workspaces::new(&config.workspaces)?;
        crate::gdal::policy::set_roots(workspaces.roots());
        for root in workspaces.roots() {
            sweep_stale_staging(root, 2);
        }
        let mut writable = workspaces.roots().to_vec();
        writable.extend(config.store.iter().cloned());
        check_plugin_dirs(&config.plugin_dirs, &writable)?;
        let registry = Registry::load(
            &config.plugin_dirs,
            config.cache_dir.clone(),
            Limits::default(),
        )?;
        // An operator's --store is trusted as given (resolved once here); the default store
        // in the workspace is used only while its folders are real folders, not links.
        let store_root = match (&config.store, workspaces.primary()) {
            (None, Some(primary)) => primary.join(".preflight"),
            (Some(store), _) => store.canonicalize().unwrap_or_else(|_| store.clone()),
            _ => config.store_root(),
        };
        let mut protected_roots = vec![absolute(&store_root)];
        protected_roots.extend(config.cache_dir.as_deref().map(absolute));
        let (gdal, proj) = crate::gdal::versions();
        let versions = Versions {
            gdal_mcp: crate::VERSION.to_string(),
            gdal,
            proj,
        };
        let plugins = registry
            .all()
            .iter()
            .map(|d| PluginRef {
                id: d.info.id.clone(),
                version: d.info.version.clone(),
                contract: d.contract().to_string(),
                digest: d.digest.clone(),
            })
            .collect();
        let seal = Arc::new(open_seal(&config, workspaces.roots())?);
        let policy = match &config.policy {
            None => None,
            Some(path) => {
                let mut forbidden = workspaces.roots().to_vec();
                forbidden.push(absolute(&store_root));
                Some(Arc::new(crate::reflection::policy::Policy::load(
                    path,
                    &forbidden,
                    &policy_vocabulary(&registry),
                )?))
            }
        };
        let lineage = LineageStore::with_seal(&store_root, seal.clone());
        let store = CapsuleStore::new(store_root);
        Ok(Self {
            protected_roots,
            lineage,
            provenance: Arc::new((versions, plugins)),
            gate: Arc::new(
                Gate::new(Arc::new(registry), store)
                    .with_stale(config.stale)
                    .with_seal(seal)
                    .with_policy(policy),
            ),
            workspaces,
            config,
            gdal_slots: Arc::new(Semaphore::new(GDAL_WORKERS)),
            read_slots: Arc::new(Semaphore::new(READ_WORKERS)),
            plugin_slots: Arc::new(Semaphore::new(PLUGIN_WORKERS)),
            hash_slots: Arc::new(Semaphore::new(HASH_WORKERS)),
            call_slots: Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT)),
            arguments_held: Arc::default(),
        })
    }

    /// Run a GDAL job on a blocking worker (one dataset handle per job), at most
    /// [`GDAL_WORKERS`] at once.
    pub async fn gdal<T: Send + 'static>(&self, job: impl Job<T>) -> Result<T, ToolError> {
        run_gdal(&self.gdal_slots, "GDAL", job).await
    }

    /// Run a read-only GDAL job on the read-only tools' own slots.
    pub async fn gdal_read<T: Send + 'static>(&self, job: impl Job<T>) -> Result<T, ToolError> {
        run_gdal(&self.read_slots, READ_POOL, job).await
    }

    /// Run plugin work (the gate, `validate`, `render-prompt`) on a blocking worker, at most
    /// [`PLUGIN_WORKERS`] at once. Every plugin call inside is bounded by the sandbox's own
    /// deadline, so a slot is always given back.
    pub async fn plugins<T: Send + 'static>(&self, job: impl Job<T>) -> Result<T, ToolError> {
        run_bounded(&self.plugin_slots, "plugin", job).await
    }

    /// Run a hashing job (`provenance_report`) on a blocking worker, at most [`HASH_WORKERS`]
    /// at once, apart from the GDAL and read-only slots.
    pub async fn hashing<T: Send + 'static>(&self, job: impl Job<T>) -> Result<T, ToolError> {
        run_bounded(&self.hash_slots, "hashing", job).await
    }

    /// Confine an input path.
    pub fn input_path(&self, argument: &str, raw: &str) -> Result<PathBuf, ToolError> {
        Ok(self.workspaces.input(argument, raw)?)
    }

    /// A slot for one tool call in flight (held until dropped); `None` only if the server is
    /// shutting down.
    pub async fn call_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.call_slots.clone().acquire_owned().await.ok()
    }

    /// Count a call's `bytes` of arguments as held until the guard is dropped; `None` when the
    /// calls in progress already hold [`MAX_ARGUMENTS_HELD`] with it.
    pub fn hold_arguments(&self, bytes: usize) -> Option<ArgumentsHeld> {
        use std::sync::atomic::Ordering;
        let bytes = bytes.saturating_add(CALL_OVERHEAD_BYTES);
        self.arguments_held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|h| *h <= MAX_ARGUMENTS_HELD)
            })
            .ok()?;
        Some(ArgumentsHeld {
            held: self.arguments_held.clone(),
            bytes,
        })
    }

    /// Bytes of arguments the calls in progress hold now.
    pub fn arguments_held(&self) -> usize {
        self.arguments_held
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Folders no output may land in: the capsule store and the component cache.
    pub fn protected_roots(&self) -> &[PathBuf] {
        &self.protected_roots
    }
}

/// Staging folders older than this were left by a process that died mid-write.
const STALE_STAGING: std::time::Duration = std::time::Duration::from_secs(3600);

/// Remove staging folders (`.gdal-mcp-*`) that a killed process left behind, `depth` levels
/// down from `dir`. Recent ones may belong to another server writing right now.
fn sweep_stale_staging(dir: &Path, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with(".gdal-mcp-") {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_STAGING);
            if old {
                tracing::info!(path = %entry.path().display(), "removing a stale staging folder");
                let _ = std::fs::remove_dir_all(entry.path());
            }
        } else if depth > 1 && !name.starts_with('.') {
            sweep_stale_staging(&entry.path(), depth - 1);
        }
    }
}

/// `path` made absolute and, where it exists, canonical (the store may not exist yet).
fn absolute(path: &Path) -> PathBuf {
    path.canonicalize()
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// The name of the read-only tools' GDAL pool.
const READ_POOL: &str = "read-only GDAL";

/// A GDAL job on `slots` (the pool named `pool`): GDAL initialised once per process, folders
/// pinned by the job released when it ends, and every open inside it under the open deadline
/// (`gdal::deadline`). When an open passes it, the call fails with the deadline error, the
/// pool gets a slot in place of the one the blocked worker holds, and that worker is set
/// aside (its slot is forgotten if it ever finishes). A pool with
/// `gdal::deadline::max_abandoned()` workers set aside refuses new calls. The deadline is
/// watched by a task of its own, so it holds even when the caller stops waiting.
async fn run_gdal<T: Send + 'static>(
    slots: &Arc<Semaphore>,
    pool: &'static str,
    job: impl Job<T>,
) -> Result<T, ToolError> {
    use crate::gdal::policy::deadline;
    let stuck = deadline::abandoned_in(pool);
    if stuck >= deadline::max_abandoned() {
        return Err(ToolError::Gdal(deadline::saturated_error(pool, stuck)));
    }
    let permit = slots
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| ToolError::Internal(format!("{pool} pool closed: {e}")))?;
    let watch = Arc::new(deadline::Watch::default());
    let on_worker = watch.clone();
    let mut worker = tokio::task::spawn_blocking(move || {
        let job_settings = crate::gdal::Job::new()
            .watch(on_worker.clone())
            .releasing_pins()
            .enter();
        crate::gdal::init();
        // Errors name the caller's output paths, not the job's staging folders (the one place
        // they are mapped back, before the job forgets them).
        let mut out = job().map_err(|e| e.map_text(crate::gdal::output::agent_text));
        // A read-only answer is withheld when a file it read changed under it (GDAL reads a
        // VRT's sources by name, after the open); writing jobs check before their commit.
        if pool == READ_POOL && out.is_ok() {
            if let Err(e) = crate::gdal::policy::verify_listed_unchanged() {
                out = Err(ToolError::Gdal(e));
            }
        }
        // The pins are released and the watch detached here, before the slot is settled.
        drop(job_settings);
        if on_worker.finish() {
            // Set aside: its replacement already holds a slot of its own.
            permit.forget();
            deadline::uncount_abandoned(pool);
            tracing::info!(pool, "a worker set aside after the open deadline finished");
        } else {
            drop(permit);
        }
        out
    });
    let slots = slots.clone();
    let limit = deadline::open_deadline();
    let tick = (limit / 4).clamp(
        std::time::Duration::from_millis(50),
        std::time::Duration::from_secs(1),
    );
    let waiter = tokio::spawn(async move {
        loop {
            tokio::select! {
                joined = &mut worker => {
                    return joined
                        .map_err(|e| ToolError::Internal(format!("{pool} worker failed: {e}")))?;
                }
                () = tokio::time::sleep(tick) => {
                    let Some(what) = watch.overdue(limit) else {
                        continue;
                    };
                    // Counted first, so that a worker finishing right now never uncounts
                    // below zero.
                    deadline::count_abandoned(pool);
                    if !watch.abandon() {
                        deadline::uncount_abandoned(pool);
                        continue;
                    }
                    slots.add_permits(1);
                    tracing::warn!(
                        pool,
                        what,
                        "an open passed the deadline; its worker is set aside and replaced"
                    );
                    return Err(ToolError::Gdal(deadline::overdue_error(&what)));
                }
            }
        }
    });
    waiter
        .await
        .map_err(|e| ToolError::Internal(format!("{pool} worker failed: {e}")))?
}

async fn run_bounded<T: Send + 'static>(
    slots: &Arc<Semaphore>,
    pool: &str,
    job: impl Job<T>,
) -> Result<T, ToolError> {
    let permit = slots
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| ToolError::Internal(format!("{pool} pool closed: {e}")))?;
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        job()
    })
    .await
    .map_err(|e| ToolError::Internal(format!("{pool} worker failed: {e}")))?
}

/// A call's arguments counted in [`App::hold_arguments`], given back when dropped.
pub struct ArgumentsHeld {
    held: Arc<std::sync::atomic::AtomicUsize>,
    bytes: usize,
}

impl Drop for ArgumentsHeld {
    fn drop(&mut self) {
        self.held
            .fetch_sub(self.bytes, std::sync::atomic::Ordering::AcqRel);
    }
}
