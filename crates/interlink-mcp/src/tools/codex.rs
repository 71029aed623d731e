//! The Codex tools: `bind_codex_session` and `failed_deliveries`.

use rmcp::{handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::{codex, context::ToolError, server::Server};

/// Arguments of `bind_codex_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BindArgs {
    /// The Codex thread (session) id, a full UUID. The interlink hooks pass it.
    pub thread_id: String,
    /// The thread's working directory (absolute). The plugin's hooks pass it: Codex
    /// starts a plugin's server in the plugin's own directory.
    #[serde(default)]
    pub cwd: Option<String>,
}

/// What `failed_deliveries` does.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FailedAction {
    /// List the saved failures.
    List,
    /// Show one failure in full (needs `id`).
    Read,
    /// Queue one failure again now (or all of them without `id`).
    Retry,
    /// Drop one failure (needs `id`).
    Discard,
}

/// Arguments of `failed_deliveries`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FailedArgs {
    /// list, read, retry or discard.
    pub action: FailedAction,
    /// The failure's id (the message's msg_id), from list.
    #[serde(default)]
    pub id: Option<String>,
}

/// Whether `text` is a full UUID in its text form (8-4-4-4-12 hex digits).
pub(crate) fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// `cwd` if it is an absolute path of a directory.
fn checked_cwd(cwd: &str) -> Result<std::path::PathBuf, ToolError> {
    let path = std::path::Path::new(cwd);
    if path.is_absolute() && path.is_dir() {
        Ok(path.to_owned())
    } else {
        Err(ToolError(format!(
            "cwd {cwd:?} is not an absolute path of a directory"
        )))
    }
}

#[tool_router(router = codex_router, vis = "pub(crate)")]
impl Server {
    /// Binds this MCP server to its Codex thread (called by the interlink hooks with
    /// the thread id). Binding once starts the session under that id; binding the same
    /// id again is harmless; another id is refused.
    #[tool]
    async fn bind_codex_session(&self, Parameters(args): Parameters<BindArgs>) -> CallToolResult {
        let ctx = &self.ctx;
        let result = (|| {
            let id = args.thread_id.trim().to_ascii_lowercase();
            if !is_uuid(&id) {
                return Err(ToolError(format!(
                    "thread_id {:?} is not a full thread UUID (8-4-4-4-12 hex digits)",
                    args.thread_id
                )));
            }
            if ctx.host() != interlink_core::wire::HostKind::Codex {
                return Err(ToolError(
                    "this server does not run for Codex (start it with `--host codex`); \
                     its session id is already set"
                        .into(),
                ));
            }
            let cwd = args.cwd.as_deref().map(checked_cwd).transpose()?;
            let mut shared = ctx.shared();
            let slot = &mut shared.codex_thread;
            let already = match slot.as_deref() {
                Some(t) if t == id => true,
                Some(t) => {
                    return Err(ToolError(format!(
                        "this server is bound to thread {t} already; a Codex MCP server binds \
                         once, so {id} is refused"
                    )));
                }
                None => {
                    *slot = Some(id.clone());
                    false
                }
            };
            // The session announces the thread's directory, not the one Codex
            // started this server in (a plugin's server starts in the plugin's).
            let state = &mut *shared;
            if let Some(cwd) = cwd
                && let Some(starter) = state.starter.as_mut()
            {
                state.git_label = crate::session_node::git_label(&cwd);
                state.cwd = cwd.to_string_lossy().into_owned();
                starter.cwd = cwd;
            }
            drop(shared);
            Ok::<_, ToolError>((id, already))
        })();
        let (id, already) = match result {
            Ok(v) => v,
            Err(e) => return ctx.error(e),
        };
        if let Err(e) = crate::startup::start(ctx, Some(&id)) {
            return ctx.error(e);
        }
        let session = ctx.own().map(|o| o.session.to_string()).unwrap_or_default();
        ctx.ok(
            if already {
                format!("already bound to thread {id}")
            } else {
                format!("bound to thread {id}; session {session} is on the overlay")
            },
            json!({"thread_id": id, "session_id": session, "already": already}),
        )
    }

    /// Notices that could not be queued into the Codex thread (saved, retried with
    /// backoff): list them, read one, retry one (or all) now, or discard one.
    #[tool]
    async fn failed_deliveries(&self, Parameters(args): Parameters<FailedArgs>) -> CallToolResult {
        let ctx = &self.ctx;
        let result = async {
            let dir = ctx.session_dir()?;
            let failures = codex::load_failures(&dir);
            let find = |id: Option<&str>| {
                let id = id.ok_or_else(|| ToolError("this action needs `id` (see list)".into()))?;
                failures
                    .iter()
                    .find(|f| f.id == id)
                    .cloned()
                    .ok_or_else(|| ToolError(format!("no saved failure has id {id:?}")))
            };
            match args.action {
                FailedAction::List => {
                    let text = if failures.is_empty() {
                        "no failed deliveries".to_owned()
                    } else {
                        failures
                            .iter()
                            .map(|f| {
                                format!(
                                    "{} from {}: {} run(s), last error: {}",
                                    f.id, f.sender, f.attempts, f.last_error
                                )
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    };
                    Ok((text, json!({ "failures": failures })))
                }
                FailedAction::Read => {
                    let f = find(args.id.as_deref())?;
                    Ok((format!("{}\n{}", f.id, f.notice), json!({ "failure": f })))
                }
                FailedAction::Discard => {
                    let f = find(args.id.as_deref())?;
                    let _guard = ctx.codex_lock.lock().await;
                    let rest: Vec<_> = codex::load_failures(&dir)
                        .into_iter()
                        .filter(|x| x.id != f.id)
                        .collect();
                    codex::save_failures(&dir, &rest)?;
                    Ok((format!("discarded {}", f.id), json!({ "discarded": f.id })))
                }
                FailedAction::Retry => {
                    let ids: Vec<String> = match args.id.as_deref() {
                        Some(_) => vec![find(args.id.as_deref())?.id],
                        None => failures.iter().map(|f| f.id.clone()).collect(),
                    };
                    let failures_log = ctx.codex_failures(dir.clone());
                    let mut done = Vec::new();
                    let mut still = Vec::new();
                    for id in ids {
                        match failures_log.retry(&ctx.codex, &id).await {
                            Some(Ok(())) => done.push(id),
                            Some(Err(e)) => still.push(json!({"id": id, "error": e})),
                            None => {}
                        }
                    }
                    Ok((
                        format!("{} queued now, {} still failing", done.len(), still.len()),
                        json!({ "queued": done, "failed": still }),
                    ))
                }
            }
        }
        .await;
        match result {
            Ok((text, value)) => ctx.ok(text, value),
            Err(e) => ctx.error(e),
        }
    }
}

#[cfg(test)]
#[path = "codex_tests.rs"]
mod tests;
