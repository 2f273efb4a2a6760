//! The sandbox every risk-domain call runs in.
//!
//! Each call gets a fresh [`Store`] instantiated from a cached pre-instantiation, so no state
//! survives between calls and a trapped instance is never re-entered. The WASI context denies
//! everything: no preopened directories, environment, arguments, stdin or network; stdout is
//! discarded and stderr is captured only to explain a failure. Memory is capped by a
//! [`ResourceLimiter`] and CPU by fuel. A trap, a panic or a limit hit becomes a
//! [`PluginError`] for that one call.

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    world: "risk-domain",
    path: "../wit",
});

pub use self::gdal_mcp::risk::types as wit;

/// Per-call budgets.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Linear memory a call may grow to, in bytes.
    pub memory_bytes: usize,
    /// Fuel (roughly, WebAssembly instructions) a call may burn.
    pub fuel: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            fuel: 400_000_000,
        }
    }
}

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
}

impl Sandbox {
    /// An engine with fuel metering and a linker offering deny-all WASI p2.
    pub fn new(limits: Limits) -> Result<Self, PluginError> {
        let load = |message: String| PluginError::Load {
            origin: "sandbox".to_string(),
            message,
        };
        let mut config = Config::new();
        config.consume_fuel(true);
        let engine = Engine::new(&config).map_err(|e| load(format!("engine: {e}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| load(format!("linking WASI: {e}")))?;
        Ok(Self {
            engine,
            linker,
            limits,
        })
    }

    /// The engine (for compiling and caching components).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Pre-instantiate a compiled component against the sandbox's imports.
    pub fn prepare(&self, origin: &str, component: &Component) -> Result<Prepared, PluginError> {
        let pre = self
            .linker
            .instantiate_pre(component)
            .and_then(RiskDomainPre::new)
            .map_err(|e| PluginError::Load {
                origin: origin.to_string(),
                message: format!(
                    "it does not implement the gdal-mcp:risk@0.2.0 world or imports more than \
                     WASI: {e:#}"
                ),
            })?;
        Ok(Prepared {
            pre,
            engine: self.engine.clone(),
            limits: self.limits,
        })
    }
}

/// A component ready to instantiate, one fresh instance per call.
pub struct Prepared {
    pre: RiskDomainPre<PluginState>,
    engine: Engine,
    limits: Limits,
}

/// Who a call is for, for error messages.
pub struct Provenance<'a> {
    pub plugin: &'a str,
    pub version: &'a str,
}

impl Prepared {
    /// Run `f` against a fresh instance under the limits.
    pub fn call<R>(
        &self,
        who: &Provenance<'_>,
        call: &'static str,
        f: impl FnOnce(&RiskDomain, &mut Store<PluginState>) -> wasmtime::Result<R>,
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
        let fuel = self.limits.fuel;
        let outcome = store
            .set_fuel(fuel)
            .and_then(|()| self.pre.instantiate(&mut store))
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
            if error.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
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
