//! The sandbox every risk-domain call runs in.
//!
//! Each call gets a fresh [`Store`] instantiated from a cached pre-instantiation, so no state
//! survives between calls and a trapped instance is never re-entered. The WASI context denies
//! everything: no preopened directories, environment, arguments, stdin or network; stdout is
//! discarded and stderr is captured only to explain a failure. Memory is capped by a
//! [`ResourceLimiter`], CPU by fuel, and wall time by epoch interruption (a ticker thread
//! advances the engine's epoch; every store gets a deadline). A guest may not wait: the WASI
//! `poll` and `pollable.block` imports trap at once, because a domain has nothing to wait for
//! and a guest blocked inside the host could not be interrupted. A trap, a panic, a wait or a
//! limit hit becomes a [`PluginError`] for that one call, naming the plugin, its version and the
//! function.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{Component, Linker, Resource, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// A module of bindings for one version of the contract, whose records serialise (serde) so
/// that `super::additive` can adapt the frozen versions' records to the current ones, which
/// are the same records less the fields added since.
macro_rules! serde_bindings {
    ($(#[$doc:meta])* $name:ident, $path:tt) => {
        $(#[$doc])*
        pub mod $name {
            wasmtime::component::bindgen!({
                world: "risk-domain",
                path: $path,
                additional_derives: [serde::Serialize, serde::Deserialize],
            });
        }
    };
}

serde_bindings!(
    /// Bindings for the current contract, `gdal-mcp:risk@0.7.0` (`wit/risk.wit`).
    current,
    "../wit/risk.wit"
);
serde_bindings!(
    /// Bindings for the frozen `gdal-mcp:risk@0.6.0`, so that components built against it
    /// keep loading.
    v0_6,
    "../wit/v0.6/risk.wit"
);
serde_bindings!(
    /// Bindings for the frozen `gdal-mcp:risk@0.5.0`, so that components built against it
    /// keep loading.
    v0_5,
    "../wit/v0.5/risk.wit"
);
serde_bindings!(
    /// Bindings for the frozen `gdal-mcp:risk@0.4.0`, so that components built against it
    /// keep loading.
    v0_4,
    "../wit/v0.4/risk.wit"
);
serde_bindings!(
    /// Bindings for the frozen `gdal-mcp:risk@0.3.0`, so that components built against it
    /// keep loading.
    v0_3,
    "../wit/v0.3/risk.wit"
);

/// Bindings for the frozen `gdal-mcp:risk@0.2.0` (`wit/v0.2/risk.wit`), so that components
/// built against it keep loading; `super::legacy` adapts their records.
pub mod v0_2 {
    wasmtime::component::bindgen!({
        world: "risk-domain",
        path: "../wit/v0.2/risk.wit",
    });
}

pub use self::current::gdal_mcp::risk::types as wit;
pub use self::v0_2::gdal_mcp::risk::types as wit_v0_2;
pub use self::v0_3::gdal_mcp::risk::types as wit_v0_3;
pub use self::v0_4::gdal_mcp::risk::types as wit_v0_4;
pub use self::v0_5::gdal_mcp::risk::types as wit_v0_5;
pub use self::v0_6::gdal_mcp::risk::types as wit_v0_6;

/// The contract version a component was built against, and its instance.
pub enum Bindings {
    Current(current::RiskDomain),
    V0_6(v0_6::RiskDomain),
    V0_5(v0_5::RiskDomain),
    V0_4(v0_4::RiskDomain),
    V0_3(v0_3::RiskDomain),
    V0_2(v0_2::RiskDomain),
}

/// A pre-instantiated component of either contract version.
enum Pre {
    Current(current::RiskDomainPre<PluginState>),
    V0_6(v0_6::RiskDomainPre<PluginState>),
    V0_5(v0_5::RiskDomainPre<PluginState>),
    V0_4(v0_4::RiskDomainPre<PluginState>),
    V0_3(v0_3::RiskDomainPre<PluginState>),
    V0_2(v0_2::RiskDomainPre<PluginState>),
}

/// Per-call budgets.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Linear memory a call may grow to, in bytes.
    pub memory_bytes: usize,
    /// Fuel (roughly, WebAssembly instructions) a call may burn.
    pub fuel: u64,
    /// Wall time a call may take (enforced by epoch interruption).
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            fuel: 400_000_000,
            deadline: Duration::from_secs(10),
        }
    }
}

/// How often the ticker advances the engine's epoch: the resolution of [`Limits::deadline`].
const EPOCH_TICK: Duration = Duration::from_millis(20);

/// The marker error behind a trap raised when a guest tries to wait.
#[derive(Debug)]
struct WaitDenied;

impl std::fmt::Display for WaitDenied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a risk domain may not wait (WASI poll or pollable.block)")
    }
}

impl std::error::Error for WaitDenied {}

/// Stderr kept from a failing plugin, at most.
const STDERR_CAPTURE: usize = 8 << 10;

/// A failed plugin call, with provenance.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    #[error("plugin \"{plugin}\" {version}: {call} ran out of fuel (CPU budget of {fuel} units); it probably loops")]
    OutOfFuel {
        plugin: String,
        version: String,
        call: &'static str,
        fuel: u64,
    },
    #[error("plugin \"{plugin}\" {version}: {call} exceeded its memory limit of {limit_mib} MiB{stderr}")]
    OutOfMemory {
        plugin: String,
        version: String,
        call: &'static str,
        limit_mib: usize,
        stderr: String,
    },
    #[error("plugin \"{plugin}\" {version}: {call} trapped: {message}{stderr}")]
    Trap {
        plugin: String,
        version: String,
        call: &'static str,
        message: String,
        stderr: String,
    },
    #[error("plugin \"{plugin}\" {version}: {call} did not finish within its deadline of {seconds} s; the call was refused")]
    Deadline {
        plugin: String,
        version: String,
        call: &'static str,
        seconds: f64,
    },
    #[error("plugin \"{plugin}\" {version}: {call} tried to wait (a WASI clock or stream poll); domains must answer without waiting")]
    Waited {
        plugin: String,
        version: String,
        call: &'static str,
    },
    #[error("plugin \"{plugin}\" {version}: {call} broke the contract: {message}")]
    Contract {
        plugin: String,
        version: String,
        call: &'static str,
        message: String,
    },
    #[error("plugin {origin}: {message}")]
    Load { origin: String, message: String },
}

/// Caps linear memory and tables, remembering whether it refused a growth.
struct PluginLimiter {
    memory_bytes: usize,
    memory_denied: bool,
}

impl ResourceLimiter for PluginLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.memory_bytes;
        if !allowed {
            self.memory_denied = true;
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// What a plugin's store holds.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: PluginLimiter,
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The engine and linker shared by every plugin.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<PluginState>,
    limits: Limits,
    ticker: Arc<EpochTicker>,
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own until dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: &Engine) -> Result<Self, std::io::Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("gdal-mcp-epoch".to_string())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Self { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Replace WASI's blocking waits with an immediate trap (see the module docs).
fn deny_waits(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut poll = linker.instance("wasi:io/poll@0.2.12")?;
    poll.func_wrap(
        "poll",
        |_store, (_pollables,): (Vec<Resource<DynPollable>>,)| -> wasmtime::Result<(Vec<u32>,)> {
            Err(wasmtime::Error::new(WaitDenied))
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |_store, (_pollable,): (Resource<DynPollable>,)| -> wasmtime::Result<()> {
            Err(wasmtime::Error::new(WaitDenied))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

impl Sandbox {
    /// An engine with fuel metering and epoch interruption, and a linker offering deny-all
    /// WASI p2 without blocking waits.
    pub fn new(limits: Limits) -> Result<Self, PluginError> {
        let load = |message: String| PluginError::Load {
            origin: "sandbox".to_string(),
            message,
        };
        let mut config = Config::new();
        config.consume_fuel(true);
        config.epoch_interruption(true);
        // Each instance reserves address space for the memory a call may grow to, not
        // wasmtime's default 4 GiB plus guard: with four plugin workers a gated call took
        // the process from 974 MB to 5.23 GB of address space, and two calls at once under
        // `RLIMIT_AS` 6 GB failed closed as "plugin ... mmap failed to reserve 0x104000000
        // bytes" (attack round 15, R15-C5). Memory beyond the reservation is bounds-checked
        // (the limit still traps a plugin at `memory_bytes`).
        let reservation = u64::try_from(limits.memory_bytes).unwrap_or(u64::MAX);
        config.memory_reservation(reservation);
        config.memory_guard_size(64 << 10);
        config.memory_reservation_for_growth(0);
        let engine = Engine::new(&config).map_err(|e| load(format!("engine: {e}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| load(format!("linking WASI: {e}")))?;
        deny_waits(&mut linker).map_err(|e| load(format!("replacing WASI waits: {e}")))?;
        let ticker = EpochTicker::start(&engine).map_err(|e| load(format!("epoch ticker: {e}")))?;
        Ok(Self {
            engine,
            linker,
            limits,
            ticker: Arc::new(ticker),
        })
    }

    /// The engine (for compiling and caching components).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Pre-instantiate a compiled component against the sandbox's imports.
    pub fn prepare(&self, origin: &str, component: &Component) -> Result<Prepared, PluginError> {
        let instance_pre =
            self.linker
                .instantiate_pre(component)
                .map_err(|e| PluginError::Load {
                    origin: origin.to_string(),
                    message: format!("it imports more than WASI: {e:#}"),
                })?;
        let pre = match current::RiskDomainPre::new(instance_pre.clone()) {
            Ok(pre) => Pre::Current(pre),
            Err(current_error) => match (
                v0_6::RiskDomainPre::new(instance_pre.clone()),
                v0_5::RiskDomainPre::new(instance_pre.clone()),
                v0_4::RiskDomainPre::new(instance_pre.clone()),
                v0_3::RiskDomainPre::new(instance_pre.clone()),
                v0_2::RiskDomainPre::new(instance_pre),
            ) {
                (Ok(pre), _, _, _, _) => Pre::V0_6(pre),
                (_, Ok(pre), _, _, _) => Pre::V0_5(pre),
                (_, _, Ok(pre), _, _) => Pre::V0_4(pre),
                (_, _, _, Ok(pre), _) => Pre::V0_3(pre),
                (_, _, _, _, Ok(pre)) => Pre::V0_2(pre),
                _ => {
                    return Err(PluginError::Load {
                        origin: origin.to_string(),
                        message: format!(
                            "it implements none of the gdal-mcp:risk@0.7.0, 0.6.0, 0.5.0, \
                             0.4.0, 0.3.0 and 0.2.0 risk-domain worlds: {current_error:#}"
                        ),
                    })
                }
            },
        };
        Ok(Prepared {
            pre,
            engine: self.engine.clone(),
            limits: self.limits,
            _ticker: self.ticker.clone(),
        })
    }
}

/// A component ready to instantiate, one fresh instance per call. It keeps the epoch ticker
/// alive: the sandbox that prepared it may be gone (regression: `Registry::load` dropped its
/// sandbox, which stopped the ticker, so no loaded domain had a wall-clock deadline).
pub struct Prepared {
    pre: Pre,
    engine: Engine,
    limits: Limits,
    _ticker: Arc<EpochTicker>,
}

/// Who a call is for, for error messages.
pub struct Provenance<'a> {
    pub plugin: &'a str,
    pub version: &'a str,
}

impl Prepared {
    /// The contract version the component was built against.
    pub fn contract(&self) -> &'static str {
        match self.pre {
            Pre::Current(_) => "0.7.0",
            Pre::V0_6(_) => "0.6.0",
            Pre::V0_5(_) => "0.5.0",
            Pre::V0_4(_) => "0.4.0",
            Pre::V0_3(_) => "0.3.0",
            Pre::V0_2(_) => "0.2.0",
        }
    }

    /// Run `f` against a fresh instance under the limits.
    pub fn call<R>(
        &self,
        who: &Provenance<'_>,
        call: &'static str,
        f: impl FnOnce(&Bindings, &mut Store<PluginState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPTURE);
        let wasi = WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let mut store = Store::new(
            &self.engine,
            PluginState {
                wasi,
                table: ResourceTable::new(),
                limiter: PluginLimiter {
                    memory_bytes: self.limits.memory_bytes,
                    memory_denied: false,
                },
            },
        );
        store.limiter(|state| &mut state.limiter);
        let ticks = (self.limits.deadline.as_millis() / EPOCH_TICK.as_millis()).max(1);
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
        store.epoch_deadline_trap();
        let fuel = self.limits.fuel;
        let outcome = store
            .set_fuel(fuel)
            .and_then(|()| match &self.pre {
                Pre::Current(pre) => pre.instantiate(&mut store).map(Bindings::Current),
                Pre::V0_6(pre) => pre.instantiate(&mut store).map(Bindings::V0_6),
                Pre::V0_5(pre) => pre.instantiate(&mut store).map(Bindings::V0_5),
                Pre::V0_4(pre) => pre.instantiate(&mut store).map(Bindings::V0_4),
                Pre::V0_3(pre) => pre.instantiate(&mut store).map(Bindings::V0_3),
                Pre::V0_2(pre) => pre.instantiate(&mut store).map(Bindings::V0_2),
            })
            .and_then(|instance| f(&instance, &mut store));
        outcome.map_err(|error| {
            let text = String::from_utf8_lossy(&stderr.contents())
                .trim()
                .to_string();
            let stderr = if text.is_empty() {
                String::new()
            } else {
                format!(" (stderr: {text})")
            };
            let plugin = who.plugin.to_string();
            let version = who.version.to_string();
            let trap = error.downcast_ref::<Trap>().copied();
            if error.downcast_ref::<WaitDenied>().is_some() {
                PluginError::Waited {
                    plugin,
                    version,
                    call,
                }
            } else if trap == Some(Trap::Interrupt) {
                PluginError::Deadline {
                    plugin,
                    version,
                    call,
                    seconds: self.limits.deadline.as_secs_f64(),
                }
            } else if trap == Some(Trap::OutOfFuel) {
                PluginError::OutOfFuel {
                    plugin,
                    version,
                    call,
                    fuel,
                }
            } else if store.data().limiter.memory_denied {
                PluginError::OutOfMemory {
                    plugin,
                    version,
                    call,
                    limit_mib: self.limits.memory_bytes >> 20,
                    stderr,
                }
            } else {
                PluginError::Trap {
                    plugin,
                    version,
                    call,
                    message: format!("{error:#}"),
                    stderr,
                }
            }
        })
    }
}
