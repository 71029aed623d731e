//! The Codex adapter: in `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`)
//! `[mcp_servers.interlink]` running `interlink-p2p mcp --host codex`, with the
//! environment variables the server reads listed in `env_vars` (Codex starts MCP
//! servers with only a few variables such as `HOME` and `PATH`), and `mcp_tool` hooks
//! calling `bind_codex_session` with the thread id and directory (`${session_id}`,
//! `${cwd}`) on SessionStart,
//! UserPromptSubmit and PreToolUse (matcher `^mcp__interlink__`) — SessionStart may
//! run before the server is ready; the others are idempotent fallbacks. And the
//! claims hook: a PreToolUse `command` hook on `apply_patch` running
//! `interlink-p2p claims hook`, which warns the agent (or refuses the patch) when it
//! edits a file another live session claims. Codex runs user hooks only once the user
//! has trusted them (its startup review or `/hooks`), so `install codex` says so when
//! it adds them.

use anyhow::Context as _;
use interlink_store::env;
use toml_edit::{ArrayOfTables, DocumentMut, InlineTable, Item, Table, value};

use super::{Action, SERVER_NAME};

/// The Codex hook events that bind the session, with their matcher.
pub const CODEX_HOOK_EVENTS: &[(&str, Option<&str>)] = &[
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    ("PreToolUse", Some("^mcp__interlink__")),
];
/// Events an older `install codex` also hooked; `install` and `uninstall` remove our
/// hook from them.
///
/// Stop: Codex reads a Stop hook's result as Stop hook JSON (`decision`, `reason`,
/// ...), so the plain-text answer of `bind_codex_session` made it report
/// `hook: Stop Failed` after every turn (codex-cli 0.171). By the end of a turn
/// UserPromptSubmit has bound the thread anyway.
pub const CODEX_RETIRED_HOOK_EVENTS: &[&str] = &["Stop"];
/// The tool the claims hook looks at: Codex's one edit tool (codex-cli 0.171 passes the
/// patch as `tool_input.command`).
pub(super) const CODEX_EDIT_MATCHER: &str = "^apply_patch$";
/// Seconds a Codex `mcp_tool` hook may take.
const CODEX_HOOK_TIMEOUT: i64 = 10;
/// The variables Codex must pass on to `interlink-p2p mcp` (its `env_vars`).
///
/// Codex starts a stdio MCP server with a short allow-list of the user's environment
/// (`HOME`, `PATH`, `SHELL`, `LANG`, `TERM`, ...; seen with codex-cli 0.171), so without
/// this a user's `INTERLINK_HOME` or network settings would silently not reach the
/// server, and `codex queue` run by the server would miss `CODEX_HOME`. A variable that
/// is not set is skipped by Codex. `INTERLINK_SESSION` is left out on purpose: pinned
/// in a shell it would give every Codex thread the same session.
pub const CODEX_ENV_VARS: &[&str] = &[
    env::HOME,
    "XDG_CONFIG_HOME",
    env::NETWORK,
    env::LISTEN,
    env::BOOTSTRAP,
    crate::config::ENV_RELAY,
    env::MDNS,
    env::NAME,
    env::PORT,
    env::TAILNET,
    env::TAILSCALE,
    crate::mcp::ENV_CODEX_BIN,
    "CODEX_HOME",
    "RUST_LOG",
    // Windows: where the home and the stable binary are (its default list has
    // USERPROFILE but not these).
    "APPDATA",
    "LOCALAPPDATA",
];
/// Printed when `install codex` adds hooks: Codex ignores hooks the user has not trusted.
pub const CODEX_TRUST_NOTE: &str = "note: Codex runs these hooks only after you trust \
them: start `codex` and approve them when it says hooks need review (or with /hooks). \
Until then a Codex thread is not bound and its interlink session does not start.";

fn codex_handler() -> Table {
    let mut handler = Table::new();
    handler["type"] = value("mcp_tool");
    handler["server"] = value(SERVER_NAME);
    handler["tool"] = value("bind_codex_session");
    handler["timeout"] = value(CODEX_HOOK_TIMEOUT);
    let mut input = InlineTable::new();
    input.insert("thread_id", "${session_id}".into());
    input.insert("cwd", "${cwd}".into());
    handler["input"] = value(input);
    handler
}

/// The claims hook's command line: a shell command on Unix, a `cmd /C` one on Windows.
fn claims_command(binary: &str) -> String {
    if cfg!(windows) {
        format!("\"{binary}\" claims hook")
    } else {
        format!("{} claims hook", super::claude::shell_quoted(binary))
    }
}

fn claims_handler(binary: &str) -> Table {
    let mut handler = Table::new();
    handler["type"] = value("command");
    handler["command"] = value(claims_command(binary));
    handler["timeout"] = value(CODEX_HOOK_TIMEOUT);
    handler
}

/// A field of a hook handler, a table or an inline table.
type Field<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Whether a hook handler is our bind call.
fn is_bind_handler(get: Field<'_>) -> bool {
    get("type").as_deref() == Some("mcp_tool")
        && get("server").as_deref() == Some(SERVER_NAME)
        && get("tool").as_deref() == Some("bind_codex_session")
}

/// Whether a hook handler runs this program's `claims hook`, wherever the binary is.
fn is_claims_handler(get: Field<'_>) -> bool {
    let Some(command) = get("command") else {
        return false;
    };
    let Some(program) = command.strip_suffix(" claims hook") else {
        return false;
    };
    let program = program.trim_matches(['\'', '"']);
    let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
    get("type").as_deref() == Some("command")
        && (name == "interlink-p2p" || name.eq_ignore_ascii_case("interlink-p2p.exe"))
}

/// The commands of the handlers of `group` that `ours` recognises.
fn our_handlers(group: &Table, ours: fn(Field<'_>) -> bool) -> Vec<Option<String>> {
    let mut found = Vec::new();
    match group.get("hooks") {
        Some(Item::ArrayOfTables(a)) => {
            for t in a.iter() {
                let get = |k: &str| t.get(k)?.as_str().map(str::to_owned);
                if ours(&get) {
                    found.push(get("command"));
                }
            }
        }
        Some(Item::Value(v)) => {
            for t in v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h.as_inline_table())
            {
                let get = |k: &str| t.get(k)?.as_str().map(str::to_owned);
                if ours(&get) {
                    found.push(get("command"));
                }
            }
        }
        _ => {}
    }
    found
}

/// Removes the groups of `hooks.<event>` that hold a handler `ours` recognises (and
/// the event when no group is left); whether it removed any.
fn remove_groups(hooks: &mut Table, event: &str, ours: fn(Field<'_>) -> bool) -> bool {
    let Some(groups) = hooks.get_mut(event).and_then(Item::as_array_of_tables_mut) else {
        return false;
    };
    let before = groups.len();
    groups.retain(|g| our_handlers(g, ours).is_empty());
    let removed = groups.len() != before;
    if groups.is_empty() {
        hooks.remove(event);
    }
    removed
}

/// Removes our bind hooks from `hooks.<event>`, noting it.
fn remove_our_hooks(hooks: &mut Table, event: &str, notes: &mut Vec<String>) {
    if remove_groups(hooks, event, is_bind_handler) {
        notes.push(format!(
            "removed the {event} hook calling bind_codex_session"
        ));
    }
}

/// Installs (or points at `binary` again) or removes the claims hook on `apply_patch`.
fn claims_hook(hooks: &mut Table, binary: &str, action: Action, notes: &mut Vec<String>) {
    let wanted = claims_command(binary);
    let current: Vec<Option<String>> = hooks
        .get("PreToolUse")
        .and_then(Item::as_array_of_tables)
        .into_iter()
        .flat_map(|groups| groups.iter())
        .flat_map(|g| our_handlers(g, is_claims_handler))
        .collect();
    let up_to_date = current.len() == 1 && current[0].as_deref() == Some(wanted.as_str());
    if action == Action::Install && up_to_date {
        return;
    }
    let removed = remove_groups(hooks, "PreToolUse", is_claims_handler);
    if action == Action::Uninstall {
        if removed {
            notes.push("removed the PreToolUse claims hook on apply_patch".to_owned());
        }
        return;
    }
    let mut group = Table::new();
    group["matcher"] = value(CODEX_EDIT_MATCHER);
    let mut handlers = ArrayOfTables::new();
    handlers.push(claims_handler(binary));
    group.insert("hooks", Item::ArrayOfTables(handlers));
    match hooks
        .entry("PreToolUse")
        .or_insert(Item::ArrayOfTables(ArrayOfTables::new()))
        .as_array_of_tables_mut()
    {
        Some(groups) => groups.push(group),
        None => {
            notes.push("`hooks.PreToolUse` is not an array of tables: no claims hook".to_owned());
            return;
        }
    }
    notes.push(if removed {
        "updated the PreToolUse claims hook on apply_patch".to_owned()
    } else {
        "added the PreToolUse hook on apply_patch: `claims hook` (claims on files)".to_owned()
    });
}

pub(super) fn edit(
    doc: &mut DocumentMut,
    command: &str,
    action: Action,
) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    let args = ["mcp", "--host", "codex"];
    match action {
        Action::Install => {
            let servers = doc
                .entry("mcp_servers")
                .or_insert(toml_edit::table())
                .as_table_mut()
                .context("`mcp_servers` is not a table; not changed")?;
            servers.set_implicit(true);
            let existed = servers.contains_key(SERVER_NAME);
            let server = servers
                .entry(SERVER_NAME)
                .or_insert(toml_edit::table())
                .as_table_like_mut()
                .with_context(|| {
                    format!("`mcp_servers.{SERVER_NAME}` is not a table; not changed")
                })?;
            // Only the keys this program owns are set; others the user added to the
            // entry (timeouts, extra env_vars) are kept.
            let mut changed = false;
            if server.get("command").and_then(Item::as_str) != Some(command) {
                server.insert("command", value(command));
                changed = true;
            }
            let args_same = server
                .get("args")
                .and_then(Item::as_array)
                .is_some_and(|a| {
                    a.iter()
                        .map(|v| v.as_str())
                        .eq(args.iter().map(|a| Some(*a)))
                });
            if !args_same {
                server.insert("args", value(toml_edit::Array::from_iter(args)));
                changed = true;
            }
            match server.get_mut("env_vars") {
                Some(item) => {
                    let list = item.as_array_mut().with_context(|| {
                        format!("`mcp_servers.{SERVER_NAME}.env_vars` is not an array; not changed")
                    })?;
                    for var in CODEX_ENV_VARS {
                        if !list.iter().any(|v| v.as_str() == Some(var)) {
                            list.push(*var);
                            changed = true;
                        }
                    }
                }
                None => {
                    server.insert(
                        "env_vars",
                        value(toml_edit::Array::from_iter(CODEX_ENV_VARS.iter().copied())),
                    );
                    changed = true;
                }
            }
            if changed {
                notes.push(format!(
                    "{} [mcp_servers.{SERVER_NAME}] ({command} mcp --host codex)",
                    if existed { "updated" } else { "added" }
                ));
            }
            let hooks = doc
                .entry("hooks")
                .or_insert(toml_edit::table())
                .as_table_mut()
                .context("`hooks` is not a table; not changed")?;
            hooks.set_implicit(true);
            for (event, matcher) in CODEX_HOOK_EVENTS {
                let groups = hooks
                    .entry(event)
                    .or_insert(Item::ArrayOfTables(ArrayOfTables::new()))
                    .as_array_of_tables_mut()
                    .with_context(|| format!("`hooks.{event}` is not an array of tables"))?;
                if groups
                    .iter()
                    .any(|g| !our_handlers(g, is_bind_handler).is_empty())
                {
                    continue;
                }
                let mut group = Table::new();
                if let Some(m) = matcher {
                    group["matcher"] = value(*m);
                }
                let mut handlers = ArrayOfTables::new();
                handlers.push(codex_handler());
                group.insert("hooks", Item::ArrayOfTables(handlers));
                groups.push(group);
                notes.push(format!("added the {event} hook calling bind_codex_session"));
            }
            for event in CODEX_RETIRED_HOOK_EVENTS {
                remove_our_hooks(hooks, event, &mut notes);
            }
            claims_hook(hooks, command, action, &mut notes);
        }
        Action::Uninstall => {
            if let Some(servers) = doc.get_mut("mcp_servers").and_then(Item::as_table_mut)
                && servers.remove(SERVER_NAME).is_some()
            {
                notes.push(format!("removed [mcp_servers.{SERVER_NAME}]"));
            }
            if let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_mut) {
                let events = CODEX_HOOK_EVENTS.iter().map(|(e, _)| *e);
                for event in events.chain(CODEX_RETIRED_HOOK_EVENTS.iter().copied()) {
                    remove_our_hooks(hooks, event, &mut notes);
                }
                claims_hook(hooks, command, action, &mut notes);
            }
            // The tables `install` may have made, if our removal left them empty.
            if !notes.is_empty() {
                for table in ["mcp_servers", "hooks"] {
                    if doc
                        .get(table)
                        .and_then(Item::as_table)
                        .is_some_and(Table::is_empty)
                    {
                        doc.remove(table);
                    }
                }
            }
        }
    }
    Ok(notes)
}

#[cfg(test)]
#[path = "codex_tests.rs"]
mod tests;
