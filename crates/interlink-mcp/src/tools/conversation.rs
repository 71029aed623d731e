//! The hook tool of a Claude Code session: `bind_session`.
//!
//! Claude Code runs one MCP server per process, while the conversation in it changes:
//! `/clear` starts a new one, `/resume` returns to an old one. Its SessionStart hook
//! (an `mcp_tool` hook, installed by `interlink-p2p install claude` and the plugin)
//! calls this tool with the conversation's id, and the server moves its session with it
//! ([`crate::startup::rebind`]): each conversation has its own mailbox, and mail for
//! one is never delivered into another. The tool is not in the model's tool list; the
//! hook calls it by name. (Claude Code runs no `mcp_tool` hook at SessionEnd: a
//! conversation's session ends when the next one starts, or with the server.)

use rmcp::{handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::{context::ToolError, server::Server};

/// Arguments of `bind_session`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct BindSessionArgs {
    /// The conversation's id (the hook's `session_id`).
    pub session_id: String,
    /// Why it started (the hook's `source`: startup, resume, clear, compact).
    #[serde(default)]
    pub source: Option<String>,
}

#[tool_router(router = conversation_router, vis = "pub(crate)")]
impl Server {
    /// Binds this server to the host's current conversation (SessionStart hook).
    #[tool]
    async fn bind_session(&self, Parameters(args): Parameters<BindSessionArgs>) -> CallToolResult {
        let ctx = &self.ctx;
        let result = async {
            let session = interlink_core::SessionId::new(args.session_id.trim())
                .and_then(crate::serve::agent_session)
                .map_err(|e| ToolError(format!("session_id: {e}")))?;
            if ctx.shared().pinned {
                return Ok((
                    format!(
                        "this server's session is pinned ({}); not moved",
                        ctx.own()?.session
                    ),
                    false,
                ));
            }
            let moved = crate::startup::rebind(ctx, Some(session.clone())).await?;
            Ok::<_, ToolError>((
                if moved {
                    format!(
                        "session {session} ({}) is on the overlay",
                        args.source.as_deref().unwrap_or("start")
                    )
                } else {
                    format!("already session {session}")
                },
                moved,
            ))
        }
        .await;
        match result {
            Ok((text, moved)) => {
                let session = ctx.own().map(|o| o.session.to_string()).unwrap_or_default();
                ctx.ok(text, json!({"session_id": session, "moved": moved}))
            }
            Err(e) => ctx.error(e),
        }
    }
}
