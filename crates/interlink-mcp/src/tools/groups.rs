//! The group tools: `create_group`, `list_groups`, `update_group`, `delete_group` —
//! the same edits of `groups.json` as `interlink-p2p group` ([`crate::groups`]).
//! Sending to a group is `send_message(to: "group:<name>")`.
//!
//! A group changes whom a message is addressed to, never who may write to this user:
//! only peers can be members, so these tools need no operator's confirmation.

use rmcp::{handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::{
    context::ToolError,
    groups::{self, Group},
    policy,
    server::Server,
};

/// Arguments of `create_group`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateGroupArgs {
    /// 1-32 of A-Z a-z 0-9 . _ -
    pub name: String,
    /// Peers (petname or fingerprint), or peer/session.
    pub members: Vec<String>,
}

/// Arguments of `update_group`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateGroupArgs {
    /// The group.
    pub name: String,
    /// Members to add: peer or peer/session.
    #[serde(default)]
    pub add: Vec<String>,
    /// Members to remove: peer or peer/session.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// Arguments of `delete_group`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteGroupArgs {
    /// The group.
    pub name: String,
}

impl Server {
    /// A group as a tool result.
    fn group_result(&self, verb: &str, g: &Group) -> CallToolResult {
        let policy = policy::load(&self.ctx.home).unwrap_or_default();
        self.ctx.ok(
            format!("{verb} group {}", groups::group_line(&policy, g)),
            groups::group_json(&policy, g),
        )
    }
}

#[tool_router(router = groups_router, vis = "pub(crate)")]
impl Server {
    /// Create a group of peers, shared by this user's sessions; send to it with
    /// to="group:<name>".
    #[tool]
    async fn create_group(&self, Parameters(args): Parameters<CreateGroupArgs>) -> CallToolResult {
        match groups::create(&self.ctx.home, args.name.trim(), &args.members) {
            Ok(g) => self.group_result("created", &g),
            Err(e) => self.ctx.error(e.into()),
        }
    }

    /// This user's groups and their members.
    #[tool(annotations(read_only_hint = true))]
    async fn list_groups(&self) -> CallToolResult {
        let ctx = &self.ctx;
        let result = (|| {
            let all = groups::load(&ctx.home)?;
            let policy = policy::load(&ctx.home)?;
            let text = if all.is_empty() {
                "no groups yet (create_group makes one)".to_owned()
            } else {
                all.iter()
                    .map(|g| format!("group {}", groups::group_line(&policy, g)))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let list: Vec<_> = all.iter().map(|g| groups::group_json(&policy, g)).collect();
            Ok::<_, ToolError>((text, json!({ "groups": list })))
        })();
        match result {
            Ok((text, value)) => ctx.ok(text, value),
            Err(e) => ctx.error(e),
        }
    }

    /// Add or remove members of a group.
    #[tool]
    async fn update_group(&self, Parameters(args): Parameters<UpdateGroupArgs>) -> CallToolResult {
        if args.add.is_empty() && args.remove.is_empty() {
            return self.ctx.error(ToolError(
                "nothing to change: give add and/or remove".into(),
            ));
        }
        match groups::update(&self.ctx.home, args.name.trim(), &args.add, &args.remove) {
            Ok(g) => self.group_result("updated", &g),
            Err(e) => self.ctx.error(e.into()),
        }
    }

    /// Delete a group.
    #[tool]
    async fn delete_group(&self, Parameters(args): Parameters<DeleteGroupArgs>) -> CallToolResult {
        match groups::delete(&self.ctx.home, args.name.trim()) {
            Ok(g) => self.ctx.ok(
                format!("deleted group {}", g.name),
                json!({ "name": g.name, "deleted": true }),
            ),
            Err(e) => self.ctx.error(e.into()),
        }
    }
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
