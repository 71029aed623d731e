//! The session tools: `whoami` (this session), `discover` (every session on the
//! overlay) and `set_summary` (what this session tells its peers it is doing).

use rmcp::{handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{context::ToolError, policy, render, server::Server, session_node::check_summary};

/// Arguments of `set_summary`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetSummaryArgs {
    /// One line, at most 512 bytes.
    pub summary: String,
}

/// Where delivery through the agent host's inbox socket stands: the `host_inbox`
/// field of `whoami` (`null` when the host exported no socket) and its text line.
fn host_inbox_view(ctx: &crate::context::Context) -> (serde_json::Value, Option<String>) {
    let Some(inbox) = &ctx.host_inbox else {
        return (serde_json::Value::Null, None);
    };
    let s = ctx.shared().host_inbox.clone();
    let mut line = format!(
        "host inbox {} ({} handed over, {} held for the user's approval, {} not delivered)",
        inbox.socket().display(),
        s.handed,
        s.held,
        s.fell_back
    );
    if let Some(why) = &s.stopped {
        line.push_str(&format!(
            "; not used any more: {why} (the Stop hook wakes the agent)"
        ));
    }
    line.push('\n');
    let json = json!({
        "socket": inbox.socket(),
        "active": s.active,
        "stopped": s.stopped,
        "handed": s.handed,
        "held": s.held,
        "fell_back": s.fell_back,
    });
    (json, Some(line))
}

#[tool_router(router = sessions_router, vis = "pub(crate)")]
impl Server {
    /// This session: key, fingerprint, session id, cwd, summary, addresses, and how
    /// messages reach it.
    #[tool(annotations(read_only_hint = true))]
    async fn whoami(&self) -> CallToolResult {
        let ctx = &self.ctx;
        let (listen, node, network) = match ctx.ready().await {
            Ok(r) => {
                // What this session's node sees of its network: its peers, direct or
                // relayed, and how it is reached.
                let diag = r.handle.diagnostics().await.ok();
                let network = match (&diag, r.handle.roster().await) {
                    (Some(diag), Ok(roster)) => {
                        let names = crate::policy::load(&ctx.home).unwrap_or_default();
                        crate::network_view::view(diag, &roster, &names)
                    }
                    _ => Value::Null,
                };
                // The addresses now: the host's well-known port comes and goes as this
                // session takes it over or not, after the ones it started with.
                let listen = match &diag {
                    Some(d) => d
                        .listen_addrs
                        .iter()
                        .map(|a| interlink_net::dialable(a, r.handle.peer_id()).to_string())
                        .collect::<Vec<_>>(),
                    None => r.listen.iter().map(ToString::to_string).collect(),
                };
                (listen, "ready".to_owned(), network)
            }
            Err(e) => (Vec::new(), e.0, Value::Null),
        };
        let (summary, cwd, git_label) = {
            let shared = ctx.shared();
            (
                shared.summary.clone(),
                shared.cwd.clone(),
                shared.git_label.clone(),
            )
        };
        let key = ctx.key();
        let delivery = serde_json::to_value(ctx.delivery()).unwrap_or_default();
        let host = serde_json::to_value(ctx.host()).unwrap_or_default();
        let session = ctx
            .own()
            .map(|o| o.session.to_string())
            .unwrap_or_else(|_| "(not bound yet)".to_owned());
        let mut text = format!(
            "identity {}\nfingerprint {}\nsession {}\ncwd {}\n",
            key.to_hex(),
            key.fingerprint(),
            session,
            cwd
        );
        if let Some(g) = &git_label {
            text.push_str(&format!("git {g}\n"));
        }
        let pairing =
            crate::consent::Gate::new(ctx.agent_pairing, ctx.shared().can_ask_human).describe();
        let (host_inbox, host_inbox_line) = host_inbox_view(ctx);
        text.push_str(&format!(
            "summary {summary:?}\ndelivery {}\n",
            delivery.as_str().unwrap_or("")
        ));
        if let Some(line) = host_inbox_line {
            text.push_str(&line);
        }
        text.push_str(&format!("pairing {pairing}\nnode {node}\n"));
        for a in &listen {
            text.push_str(&format!("listen {a}\n"));
        }
        if !network.is_null() {
            for line in crate::network_view::lines(&network) {
                text.push_str(&format!("net {line}\n"));
            }
        }
        let claims = crate::tools::claims::project_claims(ctx, "claim ").await;
        if let Some((lines, _)) = &claims {
            text.push_str(lines);
        }
        ctx.ok(
            text.trim_end().to_owned(),
            json!({
                "identity_key": key.to_hex(),
                "fingerprint": key.fingerprint().to_string(),
                "session_id": ctx.own().ok().map(|o| o.session.to_string()),
                "cwd": cwd,
                "git_label": git_label,
                "summary": summary,
                "host": host,
                "delivery": delivery,
                "host_inbox": host_inbox,
                "node": node,
                "listen_addrs": listen,
                "network": network,
                "claims": claims.map(|(_, v)| v),
                "pairing": pairing,
            }),
        )
    }

    /// Every identity on the network and its sessions (id, cwd, git label, summary, live or
    /// away), and this user's groups.
    #[tool(annotations(read_only_hint = true))]
    async fn discover(&self) -> CallToolResult {
        let ctx = &self.ctx;
        let result = async {
            let roster = ctx.roster().await?;
            let policy = policy::load(&ctx.home)?;
            let own = ctx.own()?;
            let (mut text, mut value) = render::discover(&roster, &policy, &own);
            // A groups file that does not parse is said, not fatal: the roster still shows.
            let (lines, list) = match crate::groups::load(&ctx.home) {
                Ok(all) => (
                    all.iter()
                        .map(|g| format!("\n  {}", crate::groups::group_line(&policy, g)))
                        .collect::<String>(),
                    all.iter()
                        .map(|g| crate::groups::group_json(&policy, g))
                        .collect::<Vec<_>>(),
                ),
                Err(e) => (format!("\n  (groups not readable: {e})"), Vec::new()),
            };
            if !lines.is_empty() {
                text.push_str(&format!(
                    "\ngroups (send with to = \"group:<name>\"):{lines}"
                ));
            }
            value["groups"] = serde_json::Value::Array(list);
            // The claims on files of this session's repository (the claim tool's check).
            if let Some((lines, claims)) = crate::tools::claims::project_claims(ctx, "\n  ").await {
                if !lines.is_empty() {
                    text.push_str(&format!(
                        "\nclaims on files of this repository:{}",
                        lines.trim_end()
                    ));
                }
                value["claims"] = claims;
            }
            Ok::<_, ToolError>((text, value))
        }
        .await;
        match result {
            Ok((text, value)) => ctx.ok(text, value),
            Err(e) => ctx.error(e),
        }
    }

    /// Set the one line peers see for this session in discover.
    #[tool]
    async fn set_summary(&self, Parameters(args): Parameters<SetSummaryArgs>) -> CallToolResult {
        let ctx = &self.ctx;
        let result = async {
            let summary = args.summary.trim().to_owned();
            check_summary(&summary)?;
            ctx.ready()
                .await?
                .handle
                .set_summary(summary.clone())
                .await?;
            ctx.shared().summary.clone_from(&summary);
            Ok::<_, ToolError>((
                format!("summary set and announced: {summary:?}"),
                json!({ "summary": summary }),
            ))
        }
        .await;
        match result {
            Ok((text, value)) => ctx.ok(text, value),
            Err(e) => ctx.error(e),
        }
    }
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
