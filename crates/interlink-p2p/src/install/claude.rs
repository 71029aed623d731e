//! The Claude Code adapter: the user-scope MCP server `interlink` in `~/.claude.json`
//! (`mcpServers.interlink`: `interlink-p2p mcp`), and in `~/.claude/settings.json` the
//! asynchronous Stop hook running `interlink-p2p wait` with `asyncRewake`, which wakes
//! an idle agent when a message arrives, the SessionStart hook that keeps the
//! server's session on the current conversation (`/clear`, resume), and the PreToolUse
//! hook on the edit tools that consults claims on files (`interlink-p2p claims hook`). With
//! `CLAUDE_CONFIG_DIR` set, Claude Code
//! reads both from that directory instead (`.claude.json`, `settings.json`).

use anyhow::Context as _;
use serde_json::{Map, Value, json};

use super::{Action, SERVER_NAME};

fn object<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> anyhow::Result<&'a mut Map<String, Value>> {
    map.entry(key.to_owned())
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .with_context(|| format!("`{key}` is not a JSON object; not changed"))
}

/// Removes `key` if uninstalling left it an empty object (`install` may have made it).
fn drop_if_empty(doc: &mut Map<String, Value>, key: &str) {
    if doc
        .get(key)
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        doc.remove(key);
    }
}

pub(super) fn server(
    doc: &mut Map<String, Value>,
    command: &str,
    action: Action,
) -> anyhow::Result<Vec<String>> {
    let wanted = json!({"type": "stdio", "command": command, "args": ["mcp"], "env": {}});
    match action {
        Action::Install => {
            let servers = object(doc, "mcpServers")?;
            match servers.get(SERVER_NAME) {
                Some(v) if *v == wanted => Ok(vec![]),
                Some(_) => {
                    servers.insert(SERVER_NAME.into(), wanted);
                    Ok(vec![format!("updated mcpServers.{SERVER_NAME}")])
                }
                None => {
                    servers.insert(SERVER_NAME.into(), wanted);
                    Ok(vec![format!(
                        "added mcpServers.{SERVER_NAME} ({command} mcp)"
                    )])
                }
            }
        }
        Action::Uninstall => {
            let removed = doc
                .get_mut("mcpServers")
                .and_then(Value::as_object_mut)
                .and_then(|s| s.remove(SERVER_NAME))
                .is_some();
            if removed {
                drop_if_empty(doc, "mcpServers");
            }
            Ok(if removed {
                vec![format!("removed mcpServers.{SERVER_NAME}")]
            } else {
                vec![]
            })
        }
    }
}

/// Whether a hook is this program's `wait` (any path to `interlink-p2p`), in the
/// shell form (`<path> wait`, the path maybe single-quoted) or the exec form
/// (`command` plus `args`).
fn is_our_wait(hook: &Value) -> bool {
    let is_ours = |program: &str| {
        let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
        name == "interlink-p2p" || name.eq_ignore_ascii_case("interlink-p2p.exe")
    };
    let Some(command) = hook["command"].as_str() else {
        return false;
    };
    if let Some(args) = hook["args"].as_array() {
        return is_ours(command) && args.first().and_then(Value::as_str) == Some("wait");
    }
    let (program, rest) = match command.strip_prefix('\'') {
        Some(quoted) => match quoted.split_once('\'') {
            Some((program, rest)) => (program, rest),
            None => return false,
        },
        None => command.split_once(' ').unwrap_or((command, "")),
    };
    is_ours(program) && rest.split_whitespace().next() == Some("wait")
}

/// The Stop hook entry running `command wait`. On Windows in the exec form (`args`,
/// no shell): Claude Code runs a hook's command string there through Git Bash or
/// PowerShell, which read a `C:\…` path each their own way. Elsewhere in the shell
/// form every Claude Code version runs, the path single-quoted when it needs it.
fn wait_hook(command: &str) -> Value {
    if cfg!(windows) {
        json!({"type": "command", "command": command, "args": ["wait"], "async": true, "asyncRewake": true})
    } else {
        json!({"type": "command", "command": format!("{} wait", shell_quoted(command)), "async": true, "asyncRewake": true})
    }
}

/// `s` as one POSIX shell word: as it is when it has nothing a shell reads, else in
/// single quotes.
pub(super) fn shell_quoted(s: &str) -> std::borrow::Cow<'_, str> {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:,@%=".contains(&b));
    if plain {
        s.into()
    } else {
        format!("'{}'", s.replace('\'', "'\\''")).into()
    }
}

/// What [`set_hook`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HookChange {
    Added,
    Updated,
    Removed,
}

/// Installs `wanted` as the hook of `event` — replacing every hook `ours` recognises,
/// or adding a group holding it when there is none — or removes those hooks, dropping
/// the groups (and the event, and `hooks`) the removal left empty. The user's other
/// hooks are kept as they are.
fn set_hook(
    doc: &mut Map<String, Value>,
    event: &str,
    wanted: &Value,
    ours: impl Fn(&Value) -> bool,
    action: Action,
) -> anyhow::Result<Option<HookChange>> {
    set_hook_in(doc, event, None, wanted, ours, action)
}

/// [`set_hook`], a group it adds matching the tools `matcher` names (PreToolUse).
fn set_hook_in(
    doc: &mut Map<String, Value>,
    event: &str,
    matcher: Option<&str>,
    wanted: &Value,
    ours: impl Fn(&Value) -> bool,
    action: Action,
) -> anyhow::Result<Option<HookChange>> {
    let group = match matcher {
        Some(m) => json!({"matcher": m, "hooks": [wanted]}),
        None => json!({"hooks": [wanted]}),
    };
    let groups = doc
        .get_mut("hooks")
        .and_then(Value::as_object_mut)
        .and_then(|h| h.get_mut(event))
        .and_then(Value::as_array_mut);
    let Some(groups) = groups else {
        if action == Action::Uninstall {
            return Ok(None);
        }
        object(doc, "hooks")?.insert(event.into(), json!([group]));
        return Ok(Some(HookChange::Added));
    };
    match action {
        Action::Install => {
            let (mut found, mut changed) = (false, false);
            for list in groups
                .iter_mut()
                .filter_map(|g| g.get_mut("hooks").and_then(Value::as_array_mut))
            {
                for h in list.iter_mut().filter(|h| ours(h)) {
                    found = true;
                    if h != wanted {
                        *h = wanted.clone();
                        changed = true;
                    }
                }
            }
            if !found {
                groups.push(group);
                return Ok(Some(HookChange::Added));
            }
            Ok(changed.then_some(HookChange::Updated))
        }
        Action::Uninstall => {
            let before = groups.len();
            let mut removed = false;
            for list in groups
                .iter_mut()
                .filter_map(|g| g.get_mut("hooks").and_then(Value::as_array_mut))
            {
                let n = list.len();
                list.retain(|h| !ours(h));
                removed |= list.len() != n;
            }
            // Drop the groups left empty by the removal (only those).
            groups.retain(|g| g["hooks"].as_array().is_none_or(|l| !l.is_empty()));
            let emptied = groups.is_empty() && before > 0;
            if emptied && let Some(hooks) = doc.get_mut("hooks").and_then(Value::as_object_mut) {
                hooks.remove(event);
                drop_if_empty(doc, "hooks");
            }
            Ok(removed.then_some(HookChange::Removed))
        }
    }
}

/// The asynchronous Stop hook `interlink-p2p wait`.
pub(super) fn hook(
    doc: &mut Map<String, Value>,
    command: &str,
    action: Action,
) -> anyhow::Result<Vec<String>> {
    let wait = format!("{command} wait");
    let wanted = wait_hook(command);
    let ours = is_our_wait;
    Ok(match set_hook(doc, "Stop", &wanted, ours, action)? {
        Some(HookChange::Added) => {
            vec![format!("added the Stop hook `{wait}` (async, asyncRewake)")]
        }
        Some(HookChange::Updated) => vec![format!("updated the Stop hook to `{wait}`")],
        Some(HookChange::Removed) => vec!["removed the Stop hook `interlink-p2p wait`".to_owned()],
        None => vec![],
    })
}

/// The edit tools whose writes the claims hook looks at.
pub(crate) const EDIT_TOOLS: &str = "Edit|Write|MultiEdit|NotebookEdit";

/// Whether a hook is this program's `claims hook` (shell or exec form).
fn is_our_claims_hook(hook: &Value) -> bool {
    let Some(command) = hook["command"].as_str() else {
        return false;
    };
    let ours = |program: &str| {
        let name = program.rsplit(['/', '\\']).next().unwrap_or(program);
        name == "interlink-p2p" || name.eq_ignore_ascii_case("interlink-p2p.exe")
    };
    if let Some(args) = hook["args"].as_array() {
        return ours(command) && args.first().and_then(Value::as_str) == Some("claims");
    }
    command.ends_with(" claims hook")
        && ours(command.trim_end_matches(" claims hook").trim_matches('\''))
}

/// The PreToolUse hook on the edit tools: `interlink-p2p claims hook` warns the agent
/// (or, with `claims_hook = "block"`, refuses the edit) when another live session holds
/// the file exclusively (docs/CLAIMS.md).
pub(super) fn claims_hook(
    doc: &mut Map<String, Value>,
    command: &str,
    action: Action,
) -> anyhow::Result<Vec<String>> {
    let wanted = if cfg!(windows) {
        json!({"type": "command", "command": command, "args": ["claims", "hook"], "timeout": 10})
    } else {
        json!({"type": "command", "command": format!("{} claims hook", shell_quoted(command)), "timeout": 10})
    };
    let change = set_hook_in(
        doc,
        "PreToolUse",
        Some(EDIT_TOOLS),
        &wanted,
        is_our_claims_hook,
        action,
    )?;
    Ok(match change {
        Some(HookChange::Added) => vec![format!(
            "added the PreToolUse hook on {EDIT_TOOLS}: `claims hook` (claims on files)"
        )],
        Some(HookChange::Updated) => vec!["updated the PreToolUse claims hook".to_owned()],
        Some(HookChange::Removed) => vec!["removed the PreToolUse claims hook".to_owned()],
        None => vec![],
    })
}

/// The hook that keeps the server on the host's current conversation: SessionStart
/// binds it (a `/clear` moves it to a fresh mailbox, a resume back to the old one), an
/// `mcp_tool` hook calling the server's hook-only tool. There is no SessionEnd hook:
/// Claude Code runs no `mcp_tool` hook at SessionEnd ("no MCP client context") and
/// prints that as an error on every `claude mcp list`; the next SessionStart moves the
/// session anyway, and when the host exits the server stops with it (goodbye first).
const CONVERSATION_HOOK: (&str, &str, &str) = (
    "SessionStart",
    "bind_session",
    r#"{"session_id": "${session_id}", "source": "${source}"}"#,
);

/// The SessionEnd hook earlier versions installed, removed on install and uninstall.
const RETIRED_HOOK: (&str, &str) = ("SessionEnd", "end_session");

/// Installs or removes [`CONVERSATION_HOOK`] (ours recognised by server and tool), and
/// removes [`RETIRED_HOOK`] either way.
pub(super) fn conversation_hooks(
    doc: &mut Map<String, Value>,
    action: Action,
) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    let (event, tool, input) = CONVERSATION_HOOK;
    let input: Value = serde_json::from_str(input)?;
    let wanted = json!({"type": "mcp_tool", "server": SERVER_NAME, "tool": tool, "input": input});
    let ours = |tool: &'static str| {
        move |h: &Value| h["type"] == "mcp_tool" && h["server"] == SERVER_NAME && h["tool"] == tool
    };
    let done = match set_hook(doc, event, &wanted, ours(tool), action)? {
        Some(HookChange::Added) => Some("added"),
        Some(HookChange::Updated) => Some("updated"),
        Some(HookChange::Removed) => Some("removed"),
        None => None,
    };
    if let Some(done) = done {
        notes.push(format!("{done} the {event} hook calling {tool}"));
    }
    let (event, tool) = RETIRED_HOOK;
    if let Some(HookChange::Removed) =
        set_hook(doc, event, &Value::Null, ours(tool), Action::Uninstall)?
    {
        notes.push(format!(
            "removed the {event} hook calling {tool} (Claude Code does not run it)"
        ));
    }
    Ok(notes)
}

/// The first Claude Code with an inbox socket for its sessions.
pub(super) const INBOX_SOCKET_SINCE: (u32, u32, u32) = (2, 1, 224);

/// The version `bin --version` prints (`2.1.332 (Claude Code)`), if it runs within a
/// few seconds.
pub(super) fn installed_version(bin: &std::path::Path) -> Option<String> {
    let mut child = std::process::Command::new(bin)
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut text).ok()?;
    let v = text.split_whitespace().next()?.to_owned();
    parse_version(&v).map(|_| v)
}

fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// Which path this user's Claude Code sessions will take into the agent, for the
/// installed `version` (if known) and the user's `settings.json`.
pub(super) fn delivery_note(version: Option<&str>, settings: &Value) -> String {
    let hook = "the Stop hook `interlink-p2p wait`";
    let (a, b, c) = INBOX_SOCKET_SINCE;
    let inbound = settings["crossSessionInbound"].as_str();
    match version.and_then(|v| parse_version(v).map(|p| (v, p))) {
        None => format!(
            "delivery: Claude Code not found on PATH; a session of {a}.{b}.{c} or later gets \
             messages through its own inbox socket (mid-turn, or a new turn when idle), an \
             older one through {hook}"
        ),
        Some((v, p)) if p < INBOX_SOCKET_SINCE => format!(
            "delivery: Claude Code {v} has no inbox socket (it needs {a}.{b}.{c}); sessions \
             are woken by {hook} when they stop"
        ),
        Some((v, _)) if matches!(inbound, Some("hold" | "refuse")) => format!(
            "delivery: Claude Code {v} has an inbox socket, but crossSessionInbound is \
             {:?} in settings.json: sessions are woken by {hook} (a held message falls back \
             to it)",
            inbound.unwrap_or_default()
        ),
        Some((v, _)) => format!(
            "delivery: Claude Code {v} sessions get messages through their own inbox socket \
             (read between tool calls, or a new turn when idle); {hook} wakes them for \
             what the socket does not deliver (a message held or refused, a session \
             started with --bare, or INTERLINK_HOST_INBOX=0)"
        ),
    }
}

#[cfg(test)]
#[path = "claude_tests.rs"]
mod tests;
