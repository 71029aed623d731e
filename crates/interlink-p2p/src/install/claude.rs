//! The Claude Code adapter: the user-scope MCP server `interlink` in `~/.claude.json`
//! (`mcpServers.interlink`: `interlink-p2p mcp`), and in `~/.claude/settings.json` the
//! asynchronous Stop hook running `interlink-p2p wait` with `asyncRewake`, which wakes
//! an idle agent when a message arrives. With `CLAUDE_CONFIG_DIR` set, Claude Code
//! reads both from that directory instead (`.claude.json`, `settings.json`).

use std::path::Path;

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

pub(super) fn hook(
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
}
