//! Prompts and resources: one prompt per loaded domain (rendered by the domain, on the plugin
//! pool and under the sandbox's deadline), each domain's methodology, the justification schema,
//! and the stored capsules. A prompt renders only the arguments that were given.

use super::app::App;
use crate::reflection::key::key_hex;
use crate::reflection::{justification, provenance};
use rmcp::model::{
    GetPromptRequestParams, GetPromptResult, ListResourcesResult, Prompt, PromptArgument,
    PromptMessage, ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role,
};
use rmcp::ErrorData as McpError;
use serde_json::Value;

/// URI of the justification JSON Schema.
pub const SCHEMA_URI: &str = "schema://justification";

/// The longest value a caller may give a prompt argument: a tool name, a method or a short
/// description, far below the 64 KiB a domain's rendered prompt may take.
pub const MAX_PROMPT_ARGUMENT_BYTES: usize = 4 << 10;

/// One prompt per domain.
pub fn prompts(app: &App) -> Vec<Prompt> {
    app.gate
        .registry()
        .all()
        .iter()
        .map(|d| {
            let arguments = d
                .info
                .prompt_arguments
                .iter()
                .map(|a| {
                    PromptArgument::new(a.name.clone())
                        .with_description(a.description.clone())
                        .with_required(a.required)
                })
                .collect();
            Prompt::new(
                d.info.prompt_name.clone(),
                Some(d.info.summary.clone()),
                Some(arguments),
            )
            .with_title(d.info.title.clone())
        })
        .collect()
}

/// Render a domain's prompt.
pub async fn get_prompt(
    app: &App,
    request: GetPromptRequestParams,
) -> Result<GetPromptResult, McpError> {
    let registry = app.gate.registry().clone();
    let Some(domain) = registry.by_prompt(&request.name).cloned() else {
        let names: Vec<String> = registry
            .all()
            .iter()
            .map(|d| d.info.prompt_name.clone())
            .collect();
        return Err(McpError::invalid_params(
            format!(
                "prompt not found: \"{}\"; available: {}",
                super::echo(&request.name),
                names.join(", ")
            ),
            None,
        ));
    };
    let given = request.arguments.unwrap_or_default();
    let mut arguments = Vec::new();
    for declared in &domain.info.prompt_arguments {
        let value = match given.get(&declared.name) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
            None => None,
        };
        match value {
            // The caller's argument, not the domain, would make the prompt too long (attack
            // round 9's 70 KB `tool` was reported as the plugin breaking its contract).
            Some(value) if value.len() > MAX_PROMPT_ARGUMENT_BYTES => {
                return Err(McpError::invalid_params(
                    format!(
                        "prompt {}: argument \"{}\" is {} bytes; give at most \
                         {MAX_PROMPT_ARGUMENT_BYTES} ({})",
                        request.name,
                        declared.name,
                        value.len(),
                        declared.description
                    ),
                    None,
                ))
            }
            Some(value) => arguments.push((declared.name.clone(), value)),
            None if declared.required => {
                return Err(McpError::invalid_params(
                    format!(
                        "prompt {}: missing required argument \"{}\" ({})",
                        request.name, declared.name, declared.description
                    ),
                    None,
                ))
            }
            None => {}
        }
    }
    let title = domain.info.title.clone();
    let text = app
        .plugins(move || Ok(domain.render_prompt(&arguments)?))
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(title),
    )
}

/// Resource templates for capsules and methodologies.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("justification://{domain}/{hex}", "justification capsule")
            .with_title("A stored justification (capsule JSON)"),
        ResourceTemplate::new("methodology://{domain}", "domain methodology")
            .with_title("A risk domain's methodology (Markdown)"),
        ResourceTemplate::new("lineage://{sha256}", "output lineage")
            .with_title("How an output was made: its lineage record (JSON) and methods (Markdown)"),
    ]
}

/// Methodologies, the schema, and every valid capsule.
pub async fn resources(app: &App) -> Result<ListResourcesResult, McpError> {
    let registry = app.gate.registry().clone();
    let mut resources: Vec<Resource> = registry
        .all()
        .iter()
        .map(|d| {
            Resource::new(
                format!("methodology://{}", d.info.id),
                format!("{} methodology", d.info.id),
            )
            .with_title(format!("{} methodology", d.info.title))
            .with_description(d.info.summary.clone())
            .with_mime_type("text/markdown")
        })
        .collect();
    resources.push(
        Resource::new(SCHEMA_URI, "justification schema")
            .with_title("Justification JSON Schema")
            .with_mime_type("application/schema+json"),
    );
    let store = app.gate.store().clone();
    let ids: Vec<String> = registry.all().iter().map(|d| d.info.id.clone()).collect();
    let capsules = tokio::task::spawn_blocking(move || {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        store.list(&ids)
    })
    .await
    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    for capsule in capsules {
        resources.push(
            Resource::new(capsule.uri(), format!("{} justification", capsule.domain))
                .with_description(format!(
                    "{} for {}: {}",
                    capsule.domain, capsule.tool, capsule.key_fields
                ))
                .with_mime_type("application/json"),
        );
    }
    Ok(ListResourcesResult::with_all_items(resources))
}

fn not_found(uri: &str, why: &str) -> McpError {
    McpError::resource_not_found(
        format!(
            "resource not found: {} ({})",
            super::echo(uri),
            super::echo(why)
        ),
        None,
    )
}

/// Read one resource.
pub async fn read(app: &App, uri: &str) -> Result<ReadResourceResult, McpError> {
    let registry = app.gate.registry().clone();
    if uri == SCHEMA_URI {
        let text = serde_json::to_string_pretty(&justification::schema())
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        return Ok(ReadResourceResult::new(vec![with_mime(
            ResourceContents::text(text, uri),
            "application/schema+json",
        )]));
    }
    if let Some(id) = uri.strip_prefix("methodology://") {
        let domain = registry
            .get(id)
            .ok_or_else(|| not_found(uri, "no such domain"))?;
        return Ok(ReadResourceResult::new(vec![with_mime(
            ResourceContents::text(domain.info.methodology.clone(), uri),
            "text/markdown",
        )]));
    }
    if let Some(rest) = uri.strip_prefix("justification://") {
        let (domain, hex) = rest
            .split_once('/')
            .ok_or_else(|| not_found(uri, "expected justification://<domain>/<hex>"))?;
        if registry.get(domain).is_none() {
            return Err(not_found(uri, "no such domain"));
        }
        let key = format!("sha256:{hex}");
        if key_hex(&key).is_none() {
            return Err(not_found(uri, "malformed key"));
        }
        let store = app.gate.store().clone();
        let domain = domain.to_string();
        let capsule = tokio::task::spawn_blocking(move || store.get(&domain, &key))
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?
            .ok_or_else(|| not_found(uri, "no valid capsule"))?;
        let text = serde_json::to_string_pretty(&capsule)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        return Ok(ReadResourceResult::new(vec![with_mime(
            ResourceContents::text(text, uri),
            "application/json",
        )]));
    }
    if let Some(digest) = uri.strip_prefix("lineage://") {
        // A file above the hashing budget is named by its labelled partial digest.
        let Some(sha256) = crate::reflection::lineage::parse_digest(digest) else {
            return Err(not_found(
                uri,
                "expected lineage://<64 hex digits of SHA-256> (or partial-sha256:<64 hex \
                 digits> for a file above the hashing budget)",
            ));
        };
        let lineage = app.lineage.clone();
        let capsules = app.gate.store().clone();
        let (record, methods) = tokio::task::spawn_blocking(move || {
            let record = lineage.record(&sha256)?;
            let methods = provenance::report_for_digest(
                &lineage,
                &capsules,
                &sha256,
                None,
                false,
                provenance::Format::Markdown,
            );
            Some((record, methods.report))
        })
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?
        .ok_or_else(|| not_found(uri, "no lineage record for this content"))?;
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        return Ok(ReadResourceResult::new(vec![
            with_mime(ResourceContents::text(text, uri), "application/json"),
            with_mime(ResourceContents::text(methods, uri), "text/markdown"),
        ]));
    }
    Err(not_found(uri, "unknown scheme"))
}

fn with_mime(contents: ResourceContents, mime: &str) -> ResourceContents {
    match contents {
        ResourceContents::TextResourceContents {
            uri, text, meta, ..
        } => ResourceContents::TextResourceContents {
            uri,
            mime_type: Some(mime.to_string()),
            text,
            meta,
        },
        other => other,
    }
}
