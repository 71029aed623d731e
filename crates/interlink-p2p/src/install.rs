//! `interlink-p2p install claude|codex [--dry-run]` and `uninstall`: registers the
//! MCP server (and what wakes the agent) in the user's agent-host configuration,
//! idempotently, keeping every other entry, and prints what it changed.
//!
//! - Claude Code: the user-scope MCP server `interlink` in `~/.claude.json`
//!   (`mcpServers.interlink`: `interlink-p2p mcp`), and in `~/.claude/settings.json` the
//!   asynchronous Stop hook running `interlink-p2p wait` with `asyncRewake`, which wakes
//!   an idle agent when a message arrives. With `CLAUDE_CONFIG_DIR` set, Claude Code
//!   reads both from that directory instead (`.claude.json`, `settings.json`).
//! - Codex: in `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`)
//!   `[mcp_servers.interlink]` running `interlink-p2p mcp --host codex`, with the
//!   environment variables the server reads listed in `env_vars` (Codex starts MCP
//!   servers with only a few variables such as `HOME` and `PATH`), and `mcp_tool`
//!   hooks calling `bind_codex_session` with the thread id (`${session_id}`) on
//!   SessionStart, UserPromptSubmit and PreToolUse (matcher `^mcp__interlink__`) —
//!   SessionStart may run before the server is ready; the others are idempotent
//!   fallbacks. Codex runs user hooks only once the user has trusted them (its startup
//!   review or `/hooks`), so `install codex` says so when it adds them.
//!
//! A file that does not parse is refused, never overwritten. Files are replaced
//! atomically (temporary file, rename).

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};
use toml_edit::{ArrayOfTables, DocumentMut, InlineTable, Item, Table, value};

/// The MCP server's name in the hosts' configuration.
pub const SERVER_NAME: &str = "interlink";
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
    "INTERLINK_HOME",
    "XDG_CONFIG_HOME",
    "INTERLINK_NETWORK",
    "INTERLINK_LISTEN",
    "INTERLINK_BOOTSTRAP",
    "INTERLINK_RELAY",
    "INTERLINK_MDNS",
    "INTERLINK_NAME",
    "INTERLINK_CODEX_BIN",
    "CODEX_HOME",
    "RUST_LOG",
];
/// Printed when `install codex` adds hooks: Codex ignores hooks the user has not trusted.
pub const CODEX_TRUST_NOTE: &str = "note: Codex runs these hooks only after you trust \
them: start `codex` and approve them when it says hooks need review (or with /hooks). \
Until then a Codex thread is not bound and its interlink session does not start.";

/// Which agent host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    /// Claude Code.
    Claude,
    /// Codex CLI.
    Codex,
}

/// Where the hosts keep their configuration.
#[derive(Clone, Debug)]
pub struct Locations {
    /// The user's home directory (`HOME`).
    pub home: PathBuf,
    /// `CLAUDE_CONFIG_DIR`, if set: Claude Code then keeps `.claude.json` and
    /// `settings.json` there instead of `~/.claude.json` and `~/.claude/settings.json`.
    pub claude_config_dir: Option<PathBuf>,
    /// `CODEX_HOME`, if set (else `~/.codex`).
    pub codex_home: Option<PathBuf>,
}

impl Locations {
    /// From `HOME`, `CLAUDE_CONFIG_DIR` and `CODEX_HOME`.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let home = env("HOME")
            .filter(|h| !h.trim().is_empty())
            .context("HOME is not set")?;
        let dir = |name: &str| {
            env(name)
                .filter(|h| !h.trim().is_empty())
                .map(PathBuf::from)
        };
        Ok(Self {
            home: PathBuf::from(home),
            claude_config_dir: dir("CLAUDE_CONFIG_DIR"),
            codex_home: dir("CODEX_HOME"),
        })
    }

    fn claude_json(&self) -> PathBuf {
        match &self.claude_config_dir {
            Some(dir) => dir.join(".claude.json"),
            None => self.home.join(".claude.json"),
        }
    }

    fn claude_settings(&self) -> PathBuf {
        match &self.claude_config_dir {
            Some(dir) => dir.join("settings.json"),
            None => self.home.join(".claude").join("settings.json"),
        }
    }

    fn codex_config(&self) -> PathBuf {
        self.codex_home
            .clone()
            .unwrap_or_else(|| self.home.join(".codex"))
            .join("config.toml")
    }
}

/// Install or uninstall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Add or update the entries.
    Install,
    /// Remove the entries.
    Uninstall,
}

/// Runs `install`/`uninstall` for `host`; `command` is the `interlink-p2p` executable
/// the entries run. Prints one line per change (or `unchanged`) to `out`.
pub fn run(
    locations: &Locations,
    host: Host,
    action: Action,
    command: &str,
    dry_run: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut changes: Vec<(PathBuf, Vec<String>, Option<String>)> = Vec::new();
    match host {
        Host::Claude => {
            let path = locations.claude_json();
            let (new, notes) = edit_json(&path, |doc| claude_server(doc, command, action))?;
            changes.push((path, notes, new));
            let path = locations.claude_settings();
            let (new, notes) = edit_json(&path, |doc| claude_hook(doc, command, action))?;
            changes.push((path, notes, new));
        }
        Host::Codex => {
            let path = locations.codex_config();
            let text = read_optional(&path)?;
            let mut doc: DocumentMut =
                text.as_deref().unwrap_or("").parse().with_context(|| {
                    format!("{} is not valid TOML; not changed", path.display())
                })?;
            let notes = codex_edit(&mut doc, command, action)?;
            let new = (!notes.is_empty()).then(|| doc.to_string());
            changes.push((path, notes, new));
        }
    }
    let verb = if dry_run { "would change" } else { "changed" };
    for (path, notes, new) in changes {
        match new {
            None => writeln!(out, "{}: unchanged", path.display())?,
            Some(text) => {
                for n in &notes {
                    writeln!(out, "{}: {verb}: {n}", path.display())?;
                }
                if !dry_run {
                    write_file(&path, text.as_bytes())?;
                }
            }
        }
    }
    if host == Host::Codex && action == Action::Install {
        writeln!(out, "{CODEX_TRUST_NOTE}")?;
    }
    Ok(())
}

fn read_optional(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Replaces `path` atomically (creating its directory).
fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().context("a config file has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.interlink-{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        // Keep the original file's permissions (~/.claude.json may hold secrets).
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// Applies `change` to the JSON object in `path` (missing: `{}`); returns the new text
/// if anything changed, and the notes.
fn edit_json(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<Vec<String>>,
) -> anyhow::Result<(Option<String>, Vec<String>)> {
    let text = read_optional(path)?;
    let mut doc: Value = match text.as_deref() {
        None => json!({}),
        Some(t) if t.trim().is_empty() => json!({}),
        Some(t) => serde_json::from_str(t)
            .with_context(|| format!("{} is not valid JSON; not changed", path.display()))?,
    };
    let Value::Object(map) = &mut doc else {
        bail!("{} is not a JSON object; not changed", path.display());
    };
    let notes = change(map)?;
    if notes.is_empty() {
        return Ok((None, notes));
    }
    let mut out = serde_json::to_string_pretty(&doc)?;
    out.push('\n');
    Ok((Some(out), notes))
}

fn object<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> anyhow::Result<&'a mut Map<String, Value>> {
    map.entry(key.to_owned())
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .with_context(|| format!("`{key}` is not a JSON object; not changed"))
}

fn claude_server(
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
            Ok(if removed {
                vec![format!("removed mcpServers.{SERVER_NAME}")]
            } else {
                vec![]
            })
        }
    }
}

/// Whether a hook command is this program's `wait` (any path to `interlink-p2p`).
fn is_our_wait(command: &str) -> bool {
    let mut words = command.split_whitespace();
    let program = words.next().unwrap_or("");
    Path::new(program).file_name().and_then(|n| n.to_str()) == Some("interlink-p2p")
        && words.next() == Some("wait")
}

fn claude_hook(
    doc: &mut Map<String, Value>,
    command: &str,
    action: Action,
) -> anyhow::Result<Vec<String>> {
    let wait = format!("{command} wait");
    let wanted = json!({"type": "command", "command": wait, "async": true, "asyncRewake": true});
    let Some(stop) = doc
        .get_mut("hooks")
        .and_then(Value::as_object_mut)
        .and_then(|h| h.get_mut("Stop"))
        .and_then(Value::as_array_mut)
    else {
        if action == Action::Uninstall {
            return Ok(vec![]);
        }
        let hooks = object(doc, "hooks")?;
        hooks.insert("Stop".into(), json!([{"hooks": [wanted]}]));
        return Ok(vec![format!(
            "added the Stop hook `{wait}` (async, asyncRewake)"
        )]);
    };
    let ours = |h: &Value| h["command"].as_str().is_some_and(is_our_wait);
    match action {
        Action::Install => {
            let mut found = false;
            let mut changed = false;
            for group in stop.iter_mut() {
                if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                    for h in list.iter_mut().filter(|h| ours(h)) {
                        found = true;
                        if *h != wanted {
                            *h = wanted.clone();
                            changed = true;
                        }
                    }
                }
            }
            if !found {
                stop.push(json!({"hooks": [wanted]}));
                return Ok(vec![format!(
                    "added the Stop hook `{wait}` (async, asyncRewake)"
                )]);
            }
            Ok(if changed {
                vec![format!("updated the Stop hook to `{wait}`")]
            } else {
                vec![]
            })
        }
        Action::Uninstall => {
            let before = stop.len();
            let mut removed = false;
            for group in stop.iter_mut() {
                if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                    let n = list.len();
                    list.retain(|h| !ours(h));
                    removed |= list.len() != n;
                }
            }
            // Drop the groups left empty by the removal (only those).
            stop.retain(|g| g["hooks"].as_array().is_none_or(|l| !l.is_empty()));
            let emptied = stop.is_empty() && before > 0;
            if emptied && let Some(hooks) = doc.get_mut("hooks").and_then(Value::as_object_mut) {
                hooks.remove("Stop");
            }
            Ok(if removed {
                vec!["removed the Stop hook `interlink-p2p wait`".to_owned()]
            } else {
                vec![]
            })
        }
    }
}

fn codex_handler() -> Table {
    let mut handler = Table::new();
    handler["type"] = value("mcp_tool");
    handler["server"] = value(SERVER_NAME);
    handler["tool"] = value("bind_codex_session");
    handler["timeout"] = value(CODEX_HOOK_TIMEOUT);
    let mut input = InlineTable::new();
    input.insert("thread_id", "${session_id}".into());
    handler["input"] = value(input);
    handler
}

/// Whether a hook handler (a table or an inline table) is our bind call.
fn is_our_handler(get: impl Fn(&str) -> Option<String>) -> bool {
    get("type").as_deref() == Some("mcp_tool")
        && get("server").as_deref() == Some(SERVER_NAME)
        && get("tool").as_deref() == Some("bind_codex_session")
}

fn group_has_ours(group: &Table) -> bool {
    match group.get("hooks") {
        Some(Item::ArrayOfTables(a)) => a
            .iter()
            .any(|t| is_our_handler(|k| t.get(k)?.as_str().map(str::to_owned))),
        Some(Item::Value(v)) => v.as_array().is_some_and(|a| {
            a.iter().any(|h| {
                h.as_inline_table()
                    .is_some_and(|t| is_our_handler(|k| t.get(k)?.as_str().map(str::to_owned)))
            })
        }),
        _ => false,
    }
}

/// Removes the groups of `hooks.<event>` that call our `bind_codex_session` (and the
/// event when no group is left), noting it.
fn remove_our_hooks(hooks: &mut Table, event: &str, notes: &mut Vec<String>) {
    let Some(groups) = hooks.get_mut(event).and_then(Item::as_array_of_tables_mut) else {
        return;
    };
    let before = groups.len();
    groups.retain(|g| !group_has_ours(g));
    if groups.len() != before {
        notes.push(format!(
            "removed the {event} hook calling bind_codex_session"
        ));
    }
    if groups.is_empty() {
        hooks.remove(event);
    }
}

fn codex_edit(doc: &mut DocumentMut, command: &str, action: Action) -> anyhow::Result<Vec<String>> {
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
                if groups.iter().any(group_has_ours) {
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
            }
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_wait_command_is_recognised_by_program_name() {
        assert!(is_our_wait("interlink-p2p wait"));
        assert!(is_our_wait(
            "/home/u/.cargo/bin/interlink-p2p wait --timeout 5"
        ));
        assert!(!is_our_wait("other wait"));
        assert!(!is_our_wait("interlink-p2p mcp"));
    }

    #[test]
    fn codex_edits_are_idempotent_and_reversible() {
        let original = "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
        let mut doc: DocumentMut = original.parse().unwrap();
        let notes = codex_edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
        assert_eq!(notes.len(), 1 + CODEX_HOOK_EVENTS.len(), "{notes:?}");
        let installed = doc.to_string();
        assert!(installed.contains("# my settings"), "{installed}");
        assert!(installed.contains("[mcp_servers.other]"), "{installed}");
        assert!(
            installed.contains("thread_id = \"${session_id}\""),
            "{installed}"
        );
        assert!(
            installed.contains("matcher = \"^mcp__interlink__\""),
            "{installed}"
        );
        let vars = doc["mcp_servers"]["interlink"]["env_vars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect::<Vec<_>>();
        assert_eq!(vars, CODEX_ENV_VARS);
        let mut again: DocumentMut = installed.parse().unwrap();
        assert!(
            codex_edit(&mut again, "/bin/interlink-p2p", Action::Install)
                .unwrap()
                .is_empty()
        );
        let notes = codex_edit(&mut again, "/bin/interlink-p2p", Action::Uninstall).unwrap();
        assert_eq!(notes.len(), 1 + CODEX_HOOK_EVENTS.len(), "{notes:?}");
        let removed = again.to_string();
        assert!(!removed.contains("interlink"), "{removed}");
        assert!(removed.contains("[mcp_servers.other]") && removed.contains("# my settings"));
    }

    #[test]
    fn codex_install_drops_the_stop_hook_of_an_older_install() {
        let mut doc: DocumentMut = "".parse().unwrap();
        codex_edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
        // What an older install added, next to a Stop hook of the user's own.
        let older = format!(
            "{doc}\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\n\
             command = \"notify-send done\"\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\n\
             type = \"mcp_tool\"\nserver = \"interlink\"\ntool = \"bind_codex_session\"\n"
        );
        let mut doc: DocumentMut = older.parse().unwrap();
        let notes = codex_edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
        assert_eq!(
            notes,
            ["removed the Stop hook calling bind_codex_session"],
            "{doc}"
        );
        let stop = doc["hooks"]["Stop"].as_array_of_tables().unwrap();
        assert_eq!(stop.len(), 1, "{doc}");
        assert!(doc.to_string().contains("notify-send done"), "{doc}");
        // And uninstall removes it too.
        let mut doc: DocumentMut = older.parse().unwrap();
        let notes = codex_edit(&mut doc, "/bin/interlink-p2p", Action::Uninstall).unwrap();
        assert!(
            notes.contains(&"removed the Stop hook calling bind_codex_session".to_owned()),
            "{notes:?}"
        );
        assert!(!doc.to_string().contains("bind_codex_session"), "{doc}");
    }

    #[test]
    fn codex_update_keeps_the_users_own_keys_in_our_entry() {
        // An entry from an older install (no env_vars) that the user tuned.
        let original = "[mcp_servers.interlink]\ncommand = \"/old/interlink-p2p\"\n\
            args = [\"mcp\", \"--host\", \"codex\"]\nstartup_timeout_sec = 30\n\
            env_vars = [\"MY_VAR\", \"INTERLINK_HOME\"]\n";
        let mut doc: DocumentMut = original.parse().unwrap();
        let notes = codex_edit(&mut doc, "/new/interlink-p2p", Action::Install).unwrap();
        assert!(
            notes[0].starts_with("updated [mcp_servers.interlink]"),
            "{notes:?}"
        );
        let server = &doc["mcp_servers"]["interlink"];
        assert_eq!(server["command"].as_str(), Some("/new/interlink-p2p"));
        assert_eq!(server["startup_timeout_sec"].as_integer(), Some(30));
        let vars = server["env_vars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect::<Vec<_>>();
        assert_eq!(&vars[..2], ["MY_VAR", "INTERLINK_HOME"]);
        assert!(CODEX_ENV_VARS.iter().all(|v| vars.contains(v)), "{vars:?}");
        assert_eq!(
            vars.len(),
            CODEX_ENV_VARS.len() + 1,
            "no duplicates: {vars:?}"
        );

        // An inline-table entry is updated in place too.
        let mut doc: DocumentMut = "mcp_servers.interlink = { command = \"x\", args = [] }\n"
            .parse()
            .unwrap();
        codex_edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
        let again = doc.to_string();
        let mut reparsed: DocumentMut = again.parse().unwrap();
        assert!(
            codex_edit(&mut reparsed, "/bin/interlink-p2p", Action::Install)
                .unwrap()
                .is_empty(),
            "{again}"
        );
    }

    #[test]
    fn claude_config_dir_moves_both_claude_files() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "CLAUDE_CONFIG_DIR" => Some("/cfg/claude".to_owned()),
            _ => None,
        };
        let l = Locations::from_env(env).unwrap();
        assert_eq!(l.claude_json(), Path::new("/cfg/claude/.claude.json"));
        assert_eq!(l.claude_settings(), Path::new("/cfg/claude/settings.json"));
        let l = Locations::from_env(|k| (k == "HOME").then(|| "/home/u".to_owned())).unwrap();
        assert_eq!(l.claude_json(), Path::new("/home/u/.claude.json"));
        assert_eq!(
            l.claude_settings(),
            Path::new("/home/u/.claude/settings.json")
        );
    }
}
