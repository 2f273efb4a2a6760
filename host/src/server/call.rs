//! One tool call as a handler sees it: the shared [`App`], the tool's name, its raw arguments,
//! and the request's progress and cancellation channels ([`Work`]).

use super::app::App;
use super::error::ToolError;
use crate::gdal::facts::georef::GeorefSource;
use crate::hydrology::Progress;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One tool call.
pub struct Call {
    pub app: Arc<App>,
    /// The tool's name, from the tool table.
    pub tool: &'static str,
    /// What the tool does, as a methods section says it (from the tool table).
    pub verb: &'static str,
    /// The arguments as the client sent them (an object), without `georef_source`.
    pub arguments: Value,
    /// `georef_source`, for tools that open rasters: which georeferencing to trust when a
    /// raster's sources disagree (the gated step puts it in force for the whole call).
    georef_source: Result<Option<GeorefSource>, String>,
    context: Option<RequestContext<RoleServer>>,
    /// Every path this call confined: what it reads, and what it declared it writes.
    paths: Mutex<Paths>,
    /// Stop after the gather step and explain what the policy decides (`gdal-mcp policy
    /// explain`): nothing is decided, stored or written.
    pub explain_only: bool,
    /// A 2026-07-28 retry's request state and answers (a person's sign-off).
    resume: Option<super::sign_off::Resume>,
    /// The last progress value sent for this request: progress only grows, whether the work
    /// or a wait for a person sends it.
    progress_sent: Arc<Mutex<f64>>,
}

/// The paths a call confined.
#[derive(Debug, Clone, Default)]
pub struct Paths {
    pub inputs: Vec<PathBuf>,
    pub outputs: Vec<PathBuf>,
}

impl Call {
    /// A call; `opens_rasters` tools take `georef_source`, which is taken out of the arguments
    /// here so that every tool's own argument type stays the same.
    pub fn new(
        app: Arc<App>,
        tool: &'static str,
        verb: &'static str,
        mut arguments: Value,
        opens_rasters: bool,
        context: Option<RequestContext<RoleServer>>,
    ) -> Self {
        let raw = if opens_rasters {
            arguments
                .as_object_mut()
                .and_then(|a| a.remove("georef_source"))
        } else {
            None
        };
        let georef_source = match raw {
            None | Some(Value::Null) => Ok(None),
            Some(value) => serde_json::from_value::<GeorefSource>(value.clone())
                .map(Some)
                .map_err(|_| {
                    format!(
                    "georef_source: {value} is not one of \"internal\", \"aux_xml\", \"world_file\""
                )
                }),
        };
        Self {
            app,
            tool,
            verb,
            arguments,
            georef_source,
            context,
            paths: Mutex::new(Paths::default()),
            explain_only: false,
            resume: None,
            progress_sent: Arc::new(Mutex::new(-1.0)),
        }
    }

    /// The same call, retried with a request state and answers (2026-07-28).
    pub fn resuming(mut self, resume: super::sign_off::Resume) -> Self {
        self.resume = Some(resume);
        self
    }

    /// The retry's request state and answers, if any.
    pub fn resume(&self) -> Option<&super::sign_off::Resume> {
        self.resume.as_ref()
    }

    /// The request's context (its client, era and capabilities), if it came over MCP.
    pub fn context(&self) -> Option<&RequestContext<RoleServer>> {
        self.context.as_ref()
    }

    /// The georeferencing source the caller chose, if any.
    pub fn georef_source(&self) -> Result<Option<GeorefSource>, ToolError> {
        self.georef_source.clone().map_err(ToolError::Arguments)
    }

    /// Confine an input path, and remember it: outputs may never replace it or its sidecars.
    pub fn input_path(&self, argument: &str, raw: &str) -> Result<PathBuf, ToolError> {
        let path = self.app.input_path(argument, raw)?;
        if let Ok(mut paths) = self.paths.lock() {
            paths.inputs.push(path.clone());
        }
        Ok(path)
    }

    /// Confine an output path, refusing one that is an input of the call or, without
    /// `overwrite`, any existing file, and remember it.
    pub fn output_path(
        &self,
        argument: &str,
        raw: &str,
        overwrite: bool,
        inputs: &[&Path],
    ) -> Result<PathBuf, ToolError> {
        let output = self.app.workspaces.output(argument, raw)?;
        if let Some(root) = self
            .app
            .protected_roots
            .iter()
            .find(|r| output.starts_with(r))
        {
            return Err(ToolError::Arguments(format!(
                "{argument}: {} lies in {}, which belongs to the server (capsule store or \
                 component cache); write elsewhere",
                output.display(),
                root.display()
            )));
        }
        let sidecar_of = inputs.iter().find(|input| {
            let (Some(name), Some(out)) = (input.file_name(), output.file_name()) else {
                return false;
            };
            input.parent() == output.parent()
                && out
                    .to_string_lossy()
                    .starts_with(&format!("{}.", name.to_string_lossy()))
        });
        if let Some(input) = sidecar_of {
            return Err(ToolError::Arguments(format!(
                "{argument}: {} is a sidecar name of the input {} (GDAL would read it as part of \
                 that input, e.g. as its overviews or metadata); choose another name",
                output.display(),
                input.display()
            )));
        }
        if inputs.iter().any(|input| *input == output) {
            return Err(ToolError::Arguments(format!(
                "{argument}: it is an input of this call; write to a new path"
            )));
        }
        if output.exists() && !overwrite {
            return Err(ToolError::Arguments(format!(
                "{argument}: {} already exists; pass \"overwrite\": true to replace it",
                output.display()
            )));
        }
        self.declare_output(&output);
        Ok(output)
    }

    /// Confine the `input` and `output` of a tool that reads one dataset and writes one.
    pub fn input_and_output(
        &self,
        input: &str,
        output: &str,
        overwrite: bool,
    ) -> Result<(PathBuf, PathBuf), ToolError> {
        let input = self.input_path("input", input)?;
        let output = self.output_path("output", output, overwrite, &[&input])?;
        Ok((input, output))
    }

    /// Declare a file this call writes on purpose (an external `.ovr`, say).
    pub fn declare_output(&self, path: &Path) {
        if let Ok(mut paths) = self.paths.lock() {
            paths.outputs.push(path.to_path_buf());
        }
    }

    /// The paths confined so far.
    pub fn paths(&self) -> Paths {
        self.paths.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// The `overwrite` argument (one name across tools).
    pub fn overwrite(&self) -> bool {
        self.arguments.get("overwrite").and_then(Value::as_bool) == Some(true)
    }

    /// The arguments as the risk domains see them: everything but `justification`.
    pub fn gate_arguments(&self) -> Value {
        let mut copy = self.arguments.clone();
        if let Some(object) = copy.as_object_mut() {
            object.remove("justification");
            // The georeferencing chosen decides where every output cell lands: it is part of
            // the call a person's sign-off binds and lineage records (attack round 15, R15-C6:
            // a call approved with `internal` ran with `world_file`, 5.6 km east).
            if let Ok(Some(source)) = &self.georef_source {
                if let Ok(value) = serde_json::to_value(source) {
                    object.insert("georef_source".to_string(), value);
                }
            }
        }
        copy
    }

    /// A progress notification while the call waits for something other than its work (a
    /// person's sign-off), when the client asked for progress: a value a little above the last
    /// one sent, below 1 of 100, with `message`. Hosts that keep a long request alive on
    /// progress (the TypeScript SDK's `resetTimeoutOnProgress`) timed out on every sign-off a
    /// person took longer than their timeout to answer (attack round 22, R22-C5).
    pub async fn progress_while_waiting(&self, message: &str) {
        let Some(context) = &self.context else {
            return;
        };
        let Some(token) = context.meta.get_progress_token() else {
            return;
        };
        let value = {
            let Ok(mut last) = self.progress_sent.lock() else {
                return;
            };
            let next = (last.max(0.0) + 0.001).min(0.999);
            if next <= *last {
                return;
            }
            *last = next;
            next
        };
        let param = ProgressNotificationParam::new(token, value)
            .with_total(100.0)
            .with_message(message.to_string());
        let _ = context.peer.notify_progress(param).await;
    }

    /// Progress and cancellation for the work of this call: progress goes to the client as
    /// MCP progress notifications when it asked for them (a progress token), and the work sees
    /// the request's cancellation.
    pub fn work(&self) -> Work {
        let cancelled = Arc::new(AtomicBool::new(false));
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<f64>();
        let Some(context) = &self.context else {
            return Work { cancelled, sender };
        };
        let token = context.ct.clone();
        let flag = cancelled.clone();
        tokio::spawn(async move {
            token.cancelled().await;
            flag.store(true, Ordering::Relaxed);
        });
        let progress_token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let message = self.tool;
        let sent = self.progress_sent.clone();
        tokio::spawn(async move {
            while let Some(fraction) = receiver.recv().await {
                let Some(token) = progress_token.clone() else {
                    continue;
                };
                let percent = (fraction.clamp(0.0, 1.0) * 100.0).floor();
                {
                    let Ok(mut last) = sent.lock() else {
                        continue;
                    };
                    if percent <= *last {
                        continue;
                    }
                    *last = percent;
                }
                let param = ProgressNotificationParam::new(token, percent)
                    .with_total(100.0)
                    .with_message(message);
                let _ = peer.notify_progress(param).await;
            }
        });
        Work { cancelled, sender }
    }
}

/// Progress reporting and cancellation for work on a blocking worker.
#[derive(Clone)]
pub struct Work {
    cancelled: Arc<AtomicBool>,
    sender: tokio::sync::mpsc::UnboundedSender<f64>,
}

impl Work {
    /// Whether the client cancelled the request.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }
}

impl Progress for Work {
    fn report(&self, fraction: f64) -> bool {
        if self.is_cancelled() {
            return false;
        }
        let _ = self.sender.send(fraction);
        true
    }
}
