//! A person's sign-off through the host, for the policy's `human` outcome: which route a
//! client gets, and the form's round trip on each.
//!
//! * **2025-11-25 clients that declared form elicitation**: `elicitation/create` within the
//!   call; an approval is recorded (the sealed answer of `reflection::approval` and a ledger
//!   line) and the call goes on in the same request.
//! * **2026-07-28 clients that declared elicitation**: the call returns an
//!   `InputRequiredResult` with the form and a sealed request state
//!   (`Approvals::seal_state`); the retry carries the state and the answer, and every binding
//!   is checked again (the state's seal, its expiry, the call's arguments, input files,
//!   decision, policy and domains, and its nonce, spent once).
//! * **Any other client**: the gate's refusal stands, naming `gdal-mcp approve ID`.
//!
//! Whatever the route, an answer approves only the call it was asked for: the gated step asks
//! the gate again after the answer, with the input files hashed again, so a file changed
//! between the form and the run is refused naming the binding. A decline, a cancel, an
//! expiry or a failed binding refuses the call; nothing is written but the ledger line that
//! says so. The request state is never logged.

use super::call::Call;
use super::error::ToolError;
use crate::reflection::approval::{self, FormAnswer, State, StateSignOff};
use crate::reflection::gate::{Receipt, RefusalEntry, SignOff};
use rmcp::model::{
    ElicitRequestParams, ElicitationSchema, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ProtocolVersion,
};
use serde_json::{json, Value};

/// How a client can show a sign-off form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `elicitation/create` within the call (2025-11-25, form elicitation declared).
    Elicit,
    /// `InputRequiredResult` and a retry (2026-07-28, elicitation declared).
    InputRequired,
    /// No forms: the terminal route, `gdal-mcp approve ID`.
    Terminal,
}

/// The retry of a 2026-07-28 call: the request state and the answers it carries.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    pub state: Option<String>,
    pub responses: Option<InputResponses>,
}

impl Resume {
    fn is_empty(&self) -> bool {
        self.state.is_none() && self.responses.is_none()
    }
}

/// The route of a call's client: its protocol era and whether it declared form elicitation.
pub fn route_of(call: &Call) -> Route {
    let Some(context) = call.context() else {
        return Route::Terminal;
    };
    let forms = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !forms {
        return Route::Terminal;
    }
    match context.protocol_version() {
        Some(version) if version >= ProtocolVersion::V_2026_07_28 => Route::InputRequired,
        _ => Route::Elicit,
    }
}

/// Who answered a form: the host's client name and version (from `clientInfo`, as the host
/// reports them), and through which route.
fn answered_by(call: &Call, route: Route) -> String {
    let client = call
        .context()
        .and_then(|c| c.client_info())
        .map(|info| format!("{} {}", info.name, info.version))
        .unwrap_or_else(|| "an unnamed client".to_string());
    let how = match route {
        Route::Elicit => "an elicitation form",
        Route::InputRequired => "an input-required form",
        Route::Terminal => "a terminal",
    };
    format!("{client}, through {how}")
}

/// The key of a sign-off's form among a result's input requests.
fn request_key(sign_off: &SignOff) -> String {
    format!("sign_off_{}", sign_off.id)
}

fn schema() -> Result<ElicitationSchema, ToolError> {
    let Value::Object(object) = approval::form_schema() else {
        return Err(ToolError::Internal(
            "the sign-off form is not an object".into(),
        ));
    };
    ElicitationSchema::from_json_schema(object)
        .map_err(|e| ToolError::Internal(format!("the sign-off form's schema: {e}")))
}

fn form_params(sign_off: &SignOff) -> Result<ElicitRequestParams, ToolError> {
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: approval::form_message(&sign_off.form),
        requested_schema: schema()?,
    })
}

/// Let a person answer the call's sign-offs through the host. `Ok(())` when every one was
/// approved and recorded (the caller asks the gate again, with the inputs hashed again);
/// otherwise the error the call ends with: the refusal (the gate's, unchanged, for a client
/// without forms; saying what the person or the state did otherwise), or, for a 2026-07-28
/// client's first call, the `InputRequiredResult`.
pub async fn settle(
    call: &Call,
    entries: Vec<RefusalEntry>,
    receipts: Vec<Receipt>,
    sign_offs: Vec<SignOff>,
    holder: u64,
) -> Result<(), ToolError> {
    let refused = |entries, receipts| ToolError::Refused { entries, receipts };
    // Only when a person's answer is all that stops the call can a form let it through.
    let only_sign_offs = !sign_offs.is_empty()
        && entries
            .iter()
            .all(|e| sign_offs.iter().any(|s| s.domain == e.domain));
    let route = route_of(call);
    let Some(approvals) = call.app.gate.approvals().cloned() else {
        return Err(refused(entries, receipts));
    };
    if !only_sign_offs && route != Route::Terminal {
        // The host shows forms, but other domains refuse too: the form comes once they are
        // answered, so the person is not sent to a terminal (attack round 16, R16-C9).
        let mut entries = entries;
        for entry in &mut entries {
            if sign_offs.iter().any(|s| s.domain == entry.domain) {
                entry.how_to_supply = format!(
                    "A person signs this decision off through this host's form, which is shown \
                     once the other domains' justifications are given: retry this exact call \
                     with them. {}",
                    entry
                        .how_to_supply
                        .replace("This host cannot show forms: a", "Otherwise, a")
                );
            }
        }
        return Err(refused(entries, receipts));
    }
    if route == Route::Terminal {
        return Err(refused(entries, receipts));
    }
    let by = answered_by(call, route);
    let answers: Vec<(SignOff, FormAnswer)> = match route {
        Route::Elicit => {
            let mut answers = Vec::new();
            for sign_off in &sign_offs {
                match elicit(call, sign_off).await {
                    Ok(answer) => answers.push((sign_off.clone(), answer)),
                    Err((expired, why)) => {
                        let kind = if expired { "expiry" } else { "denial" };
                        record(call, kind, sign_off, &by, &json!({"why": why}));
                        return Err(refusal(entries, receipts, &sign_offs, &why));
                    }
                }
            }
            answers
        }
        Route::InputRequired => {
            let resume = call.resume().cloned().unwrap_or_default();
            if resume.is_empty() {
                return Err(input_required(&approvals, &sign_offs)?);
            }
            match check_resume(call, &approvals, &resume, &sign_offs) {
                Ok(answers) => answers,
                Err(why) => return Err(refusal(entries, receipts, &sign_offs, &why)),
            }
        }
        Route::Terminal => return Err(refused(entries, receipts)),
    };
    // Every answer must approve; the first that does not decides the refusal.
    for (sign_off, answer) in &answers {
        let (action, note) = match answer {
            FormAnswer::Approve { .. } => continue,
            FormAnswer::Decline { note } => ("decline", note.as_str()),
            FormAnswer::Cancel => ("cancel", ""),
        };
        record(
            call,
            "denial",
            sign_off,
            &by,
            &json!({"approved": false, "action": action, "note": note}),
        );
        let why = match answer {
            FormAnswer::Cancel => format!(
                "The person at the host cancelled the sign-off form for {} (no answer): the \
                 call is refused and nothing was written. ",
                sign_off.domain
            ),
            _ => format!(
                "The person at the host declined this call (host {by}{}): the call is refused \
                 and nothing was written. ",
                if note.is_empty() {
                    String::new()
                } else {
                    format!(": \"{note}\"")
                }
            ),
        };
        return Err(refusal(entries, receipts, &sign_offs, &why));
    }
    for (sign_off, answer) in &answers {
        let FormAnswer::Approve { note } = answer else {
            continue;
        };
        if let Err(e) = approvals.answer(&sign_off.id, true, note, &by) {
            let why = format!("The approval could not be recorded: {e}. ");
            return Err(refusal(entries, receipts, &sign_offs, &why));
        }
        // Kept for this request until it asks the gate again (attack round 17, R17-C2: an
        // identical request reaching the gate first ran on it, and this one was told its
        // answer was used).
        approvals.hold(&sign_off.id, holder);
        record(
            call,
            "approval",
            sign_off,
            &by,
            &json!({"approved": true, "note": note}),
        );
    }
    Ok(())
}

/// How often a progress notification is sent while a sign-off form is open.
const FORM_PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The heartbeat loops until the form is answered; `select!` drops it then.
fn unreachable_heartbeat() -> Result<rmcp::model::ElicitResult, rmcp::service::ServiceError> {
    Err(rmcp::service::ServiceError::UnexpectedResponse)
}

/// Ask the person through `elicitation/create`; `Err` when no answer came in time (`true`:
/// expired) or the client could not show the form or answered nonsense, with why in words.
async fn elicit(call: &Call, sign_off: &SignOff) -> Result<FormAnswer, (bool, String)> {
    let Some(context) = call.context() else {
        return Err((false, "No client can show the form. ".into()));
    };
    let params = form_params(sign_off).map_err(|e| (false, format!("{e}. ")))?;
    let ttl = std::time::Duration::from_millis(approval::ttl_ms().max(1) as u64);
    let started = approval::now_ms();
    let request =
        rmcp::model::ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(params));
    let asked = context
        .peer
        .send_request_with_option(
            request,
            rmcp::service::PeerRequestOptions::with_timeout(ttl),
        )
        .await;
    let handle = match asked {
        Ok(handle) => handle,
        Err(e) => {
            return Err((
                false,
                format!("The host could not show the sign-off form ({e}): the call is refused. "),
            ))
        }
    };
    let form = handle.id.clone();
    // Progress while the form is open, so that a host which keeps a request alive on progress
    // does not time it out while the person reads (R22-C5).
    let waiting = format!("waiting for a person's sign-off of {}", sign_off.domain);
    let heartbeat = async {
        loop {
            call.progress_while_waiting(&waiting).await;
            tokio::time::sleep(FORM_PROGRESS_INTERVAL).await;
        }
    };
    let result = tokio::select! {
        () = heartbeat => unreachable_heartbeat(),
        result = handle.await_response() => result.and_then(|answer| match answer {
            rmcp::model::ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(rmcp::service::ServiceError::UnexpectedResponse),
        }),
        () = context.ct.cancelled() => {
            // The form belongs to the cancelled call: the host is told to close it, as it is
            // when the form expires (attack round 18, R18-C5: it stayed open for its TTL,
            // and an answer to it approved nothing).
            let closed = context
                .peer
                .notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                    Some(form),
                    Some("the tool call that asked for this sign-off was cancelled".to_string()),
                ))
                .await;
            if let Err(e) = closed {
                tracing::warn!("the cancelled call's sign-off form could not be closed: {e}");
            }
            return Err((false, "The client cancelled the call while the form was open. ".into()))
        }
    };
    let expired = || {
        format!(
            "The sign-off form for {} got no answer within {} (expired): the call is refused \
             and nothing was written. ",
            sign_off.domain,
            approval::ttl_words()
        )
    };
    let result = match result {
        Ok(result) => result,
        Err(rmcp::service::ServiceError::Timeout { .. }) => return Err((true, expired())),
        Err(e) => {
            return Err((
                false,
                format!("The host could not show the sign-off form ({e}): the call is refused. "),
            ))
        }
    };
    if approval::now_ms() > started + approval::ttl_ms() {
        return Err((true, expired()));
    }
    let value = serde_json::to_value(&result).unwrap_or(Value::Null);
    approval::read_answer(&value)
        .map_err(|e| (false, format!("The host's answer is unusable: {e}. ")))
}

/// The first round of a 2026-07-28 call: the forms and the sealed state.
fn input_required(
    approvals: &approval::Approvals,
    sign_offs: &[SignOff],
) -> Result<ToolError, ToolError> {
    let mut requests = InputRequests::new();
    for sign_off in sign_offs {
        let params = serde_json::to_value(form_params(sign_off)?)
            .map_err(|e| ToolError::Internal(format!("the sign-off form: {e}")))?;
        let request: InputRequest = serde_json::from_value(json!({
            "method": "elicitation/create",
            "params": params,
        }))
        .map_err(|e| ToolError::Internal(format!("the sign-off form's request: {e}")))?;
        requests.insert(request_key(sign_off), request);
    }
    let Some((sealed, _)) = approvals.seal_state(
        sign_offs
            .iter()
            .map(|s| StateSignOff {
                id: s.id.clone(),
                binding: s.binding.clone(),
                covers_decision: s.covers_decision,
            })
            .collect(),
    ) else {
        return Err(ToolError::Internal(
            "this server cannot seal a request state".into(),
        ));
    };
    Ok(ToolError::InputRequired(Box::new(
        InputRequiredResult::new(Some(requests), Some(sealed)),
    )))
}

/// Check a 2026-07-28 retry: the state's seal, its expiry, every binding against the call as
/// it is now, the answers, and the nonce (spent here). `Err` says which failed.
fn check_resume(
    call: &Call,
    approvals: &approval::Approvals,
    resume: &Resume,
    sign_offs: &[SignOff],
) -> Result<Vec<(SignOff, FormAnswer)>, String> {
    let Some(sealed) = &resume.state else {
        return Err(
            "The retry carries answers but no request state: only the state this \
             server sealed with the form approves a call. "
                .into(),
        );
    };
    let state: State = approvals
        .open_state(sealed)
        .map_err(|why| format!("{why}. "))?;
    if approval::now_ms() > state.expires_ms {
        for sign_off in sign_offs {
            record(
                call,
                "expiry",
                sign_off,
                "",
                &json!({"why": "the request state expired"}),
            );
        }
        return Err(format!(
            "The request state expired ({} after the form was issued): retry the call without \
             it to be asked again. ",
            approval::ttl_words()
        ));
    }
    for bound in &state.sign_offs {
        let Some(now) = sign_offs.iter().find(|s| s.domain == bound.binding.domain) else {
            return Err(format!(
                "The request state signs off a {} decision this call no longer asks for (the \
                 call or the policy changed). ",
                bound.binding.domain
            ));
        };
        if let Some(failed) = bound.binding.mismatch(&now.binding) {
            return Err(format!("The request state no longer holds: {failed}. "));
        }
        if bound.id != now.id {
            return Err(
                "The request state no longer holds: the sign-off asked for now is \
                 another one (the call changed). "
                    .into(),
            );
        }
    }
    if let Some(missing) = sign_offs
        .iter()
        .find(|s| !state.sign_offs.iter().any(|b| b.id == s.id))
    {
        return Err(format!(
            "The request state does not cover the {} decision this call asks a person about. ",
            missing.domain
        ));
    }
    let responses = resume.responses.clone().unwrap_or_default();
    let mut answers = Vec::new();
    for sign_off in sign_offs {
        let Some(response) = responses.get(&request_key(sign_off)) else {
            return Err(format!(
                "The retry carries no answer to the form for {} ({}). ",
                sign_off.domain,
                request_key(sign_off)
            ));
        };
        let answer = approval::read_answer(response)
            .map_err(|e| format!("The host's answer is unusable: {e}. "))?;
        answers.push((sign_off.clone(), answer));
    }
    match approvals.spend(&state.nonce, state.expires_ms) {
        Ok(true) => Ok(answers),
        Ok(false) => Err(
            "The request state was already used by an earlier retry (single-use: \
             replayed): retry the call without it to be asked again. "
                .into(),
        ),
        Err(e) => Err(format!("The request state cannot be checked: {e}. ")),
    }
}

/// A ledger line for a sign-off (`approval`, `denial`, `expiry`); one that cannot be written
/// is logged (the call is refused or goes on with its own `gate` line either way).
fn record(call: &Call, kind: &str, sign_off: &SignOff, by: &str, extra: &Value) {
    let mut entry = json!({
        "id": sign_off.id,
        "by": by,
        "tool": sign_off.binding.tool,
        "domain": sign_off.binding.domain,
        "key": sign_off.binding.decision_key,
        "arguments": sign_off.binding.arguments,
        "policy": sign_off.binding.policy,
    });
    if let (Some(entry), Value::Object(extra)) = (entry.as_object_mut(), extra) {
        for (k, v) in extra {
            entry.insert(k.clone(), v.clone());
        }
    }
    if let Err(e) = call.app.gate.record_sign_off(kind, &entry) {
        tracing::warn!(
            "{}: sign-off {kind} not recorded in the ledger: {e}",
            call.tool
        );
    }
}

/// The refusal of a call whose sign-off through the host failed: the gate's entries, the
/// sign-off ones saying `why` instead of the terminal route.
fn refusal(
    mut entries: Vec<RefusalEntry>,
    receipts: Vec<Receipt>,
    sign_offs: &[SignOff],
    why: &str,
) -> ToolError {
    for entry in &mut entries {
        if let Some(sign_off) = sign_offs.iter().find(|s| s.domain == entry.domain) {
            entry.how_to_supply = format!(
                "{}{why}The operator's policy needs a person to sign this exact call off ({}); \
                 retry the call to be shown the form again. No justification or argument \
                 replaces the sign-off.",
                sign_off.standing, sign_off.explanation
            );
        }
    }
    ToolError::Refused { entries, receipts }
}

/// The refusal when the gate, asked again after the person approved, still refuses (an input
/// file or another binding changed between the form and the run).
pub fn after_answer(
    entries: Vec<RefusalEntry>,
    receipts: Vec<Receipt>,
    sign_offs: &[SignOff],
) -> ToolError {
    refusal(
        entries,
        receipts,
        sign_offs,
        "The approval given in the form does not hold for the call as it is now. ",
    )
}
