//! Why a tool call failed, with an honest kind for each failure.
//!
//! Every failure of a tool call becomes a [`ToolError`]; `server::mod` renders it as an
//! `isError` result (never a protocol error). The kind says whose fault it is and what the
//! caller can do: fix an argument, fix a path, justify a decision, report a GDAL or plugin
//! problem. A refusal by the reflection gate is a variant too, so `?` carries it.

use crate::domains::sandbox::PluginError;
use crate::domains::FieldError;
use crate::gdal::GdalError;
use crate::hydrology::HydrologyError;
use crate::reflection::gate::{GateError, PersistError, Receipt, RefusalEntry};
use crate::reflection::store::StoreError;
use crate::workspace::PathError;

/// Why a tool call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments are wrong; the message names the argument (as a JSON path) and the fix.
    #[error("{0}")]
    Arguments(String),
    /// A path argument was refused by workspace confinement.
    #[error(transparent)]
    Path(#[from] PathError),
    /// GDAL failed, or found an argument it cannot work with.
    #[error(transparent)]
    Gdal(#[from] GdalError),
    /// One of the host's own algorithms (hydrology, aggregation) failed.
    #[error("{0}")]
    Algorithm(String),
    /// The client cancelled the request.
    #[error("cancelled by the client; nothing was written")]
    Cancelled,
    /// A risk domain failed; the call fails closed.
    #[error("the call was refused because a methodology domain failed: {0}")]
    Plugin(#[from] PluginError),
    /// The gate needs justifications before the call can run.
    #[error("refused: {} methodology decision(s) need a justification", entries.len())]
    Refused {
        entries: Vec<RefusalEntry>,
        receipts: Vec<Receipt>,
    },
    /// A justification given to `persist_justification` is invalid.
    #[error("the justification is invalid")]
    InvalidJustification(Vec<FieldError>),
    /// The capsule store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Not a failure: `gdal-mcp policy explain` stops a call after its facts were gathered
    /// and the policy consulted, and carries the explanation out (never sent to a client).
    #[error("explained, not run")]
    Explained(serde_json::Value),
    /// Not a failure: a 2026-07-28 client is asked for a person's sign-off (a form and a
    /// sealed request state); the handler answers the call with this result.
    #[error("input required: a person's sign-off")]
    InputRequired(Box<rmcp::model::InputRequiredResult>),
    /// The server holds as much for calls in progress as it may: retry later.
    #[error("{0}")]
    Busy(String),
    /// A bug or a dead worker: not the caller's fault.
    #[error("internal error: {0}")]
    Internal(String),
    /// A gated call that failed after the gate decided: the failure, with the gate's receipts
    /// (a capsule the call stored stays stored; attack round 16, R16-C6: the error said
    /// nothing of it, though later calls ran on it).
    #[error("{error}")]
    AfterGate {
        error: Box<ToolError>,
        receipts: Vec<Receipt>,
    },
}

impl ToolError {
    /// The machine-readable kind of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::Arguments(_) => "invalid_arguments",
            ToolError::Path(_) => "path",
            ToolError::Gdal(GdalError::Arguments(_)) => "invalid_arguments",
            ToolError::Gdal(GdalError::Worker(_)) => "internal",
            ToolError::Gdal(GdalError::Algorithm(_)) => "algorithm",
            ToolError::Gdal(GdalError::Conflict { .. }) => "data_conflict",
            ToolError::Gdal(GdalError::Memory(_)) => "memory_budget",
            ToolError::Gdal(_) => "gdal",
            ToolError::Algorithm(_) => "algorithm",
            ToolError::Cancelled => "cancelled",
            ToolError::Plugin(_) => "plugin_failure",
            ToolError::Refused { .. } => "refused",
            ToolError::InvalidJustification(_) => "invalid_justification",
            ToolError::Store(_) => "store",
            ToolError::InputRequired(_) => "input_required",
            ToolError::Busy(_) => "busy",
            ToolError::Internal(_) | ToolError::Explained(_) => "internal",
            ToolError::AfterGate { error, .. } => error.kind(),
        }
    }
}

impl ToolError {
    /// The error with `rewrite` applied to every message text it carries that can name a file
    /// (the job's staging paths are mapped back to the caller's: `gdal::output::agent_text`).
    pub fn map_text(self, rewrite: impl Fn(&str) -> String) -> Self {
        self.map_text_with(&rewrite)
    }

    fn map_text_with(self, rewrite: &dyn Fn(&str) -> String) -> Self {
        match self {
            ToolError::AfterGate { error, receipts } => ToolError::AfterGate {
                error: Box::new(error.map_text_with(rewrite)),
                receipts,
            },
            ToolError::Arguments(m) => ToolError::Arguments(rewrite(&m)),
            ToolError::Algorithm(m) => ToolError::Algorithm(rewrite(&m)),
            ToolError::Internal(m) => ToolError::Internal(rewrite(&m)),
            ToolError::Gdal(e) => ToolError::Gdal(match e {
                GdalError::Failed { operation, message } => GdalError::Failed {
                    operation: rewrite(&operation),
                    message: rewrite(&message),
                },
                GdalError::Arguments(m) => GdalError::Arguments(rewrite(&m)),
                GdalError::Algorithm(m) => GdalError::Algorithm(rewrite(&m)),
                GdalError::Worker(m) => GdalError::Worker(rewrite(&m)),
                GdalError::Conflict {
                    message,
                    parameter,
                    candidates,
                } => GdalError::Conflict {
                    message: rewrite(&message),
                    parameter,
                    candidates,
                },
                GdalError::Io { operation, source } => GdalError::Io {
                    operation: rewrite(&operation),
                    source,
                },
                other => other,
            }),
            other => other,
        }
    }
}

impl From<GateError> for ToolError {
    fn from(error: GateError) -> Self {
        match error {
            GateError::Plugin(e) => ToolError::Plugin(e),
            GateError::Store(e) => ToolError::Store(e),
        }
    }
}

impl From<PersistError> for ToolError {
    fn from(error: PersistError) -> Self {
        match error {
            PersistError::Invalid(errors) => ToolError::InvalidJustification(errors),
            PersistError::Plugin(e) => ToolError::Plugin(e),
            PersistError::Store(e) => ToolError::Store(e),
            other => ToolError::Arguments(other.to_string()),
        }
    }
}

impl From<crate::budget::BudgetError> for ToolError {
    fn from(error: crate::budget::BudgetError) -> Self {
        ToolError::Gdal(GdalError::Memory(error))
    }
}

impl From<HydrologyError> for ToolError {
    fn from(error: HydrologyError) -> Self {
        match error {
            HydrologyError::Cancelled => ToolError::Cancelled,
            other => ToolError::Algorithm(format!("hydrology: {other}")),
        }
    }
}
