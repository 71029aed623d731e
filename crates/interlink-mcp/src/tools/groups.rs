//! The group tool, `group`: lists, creates, edits and deletes this user's groups — the
//! same edits of `groups.json` as `interlink-p2p group` ([`crate::groups`]). One tool
//! rather than four, since every session pays for each tool's schema on every turn.
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

/// Arguments of `group`: none lists; `name` with `members` creates, with `add` or
/// `remove` changes, with `delete` deletes.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GroupArgs {
    /// 1-32 of A-Z a-z 0-9 . _ -
    pub name: Option<String>,
    /// Create with these: peer or peer/session.
    #[serde(default)]
    pub members: Vec<String>,
    #[serde(default)]
    pub add: Vec<String>,
    #[serde(default)]
    pub remove: Vec<String>,
    #[serde(default)]
    pub delete: bool,
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
    /// This user's groups of peers (send with to="group:<name>"). No arguments lists;
    /// name+members creates; name+add/remove edits; name+delete deletes.
    #[tool]
    async fn group(&self, Parameters(args): Parameters<GroupArgs>) -> CallToolResult {
        let home = &self.ctx.home;
        let Some(name) = args.name.as_deref().map(str::trim) else {
            return self.list_groups();
        };
        let edits = !args.add.is_empty() || !args.remove.is_empty();
        let result = match (!args.members.is_empty(), edits, args.delete) {
            (true, false, false) => {
                groups::create(home, name, &args.members).map(|g| self.group_result("created", &g))
            }
            (false, true, false) => groups::update(home, name, &args.add, &args.remove)
                .map(|g| self.group_result("updated", &g)),
            (false, false, true) => groups::delete(home, name).map(|g| {
                self.ctx.ok(
                    format!("deleted group {}", g.name),
                    json!({ "name": g.name, "deleted": true }),
                )
            }),
            _ => {
                return self.ctx.error(ToolError(
                    "give name with one of: members (create), add/remove (edit), delete: true"
                        .into(),
                ));
            }
        };
        result.unwrap_or_else(|e| self.ctx.error(e.into()))
    }
}

impl Server {
    fn list_groups(&self) -> CallToolResult {
        let ctx = &self.ctx;
        let result = (|| {
            let all = groups::load(&ctx.home)?;
            let policy = policy::load(&ctx.home)?;
            let text = if all.is_empty() {
                "no groups yet (group with name and members makes one)".to_owned()
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
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
