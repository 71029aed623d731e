use std::collections::BTreeSet;

use interlink_core::wire::HostKind;

use super::*;

/// Every snake_case word of `text`.
fn snake_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.contains('_') && !w.starts_with('_'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_instructions_name_only_real_tools_and_arguments() {
    let tools = Server::router().list_all();
    let mut known: BTreeSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
    for t in &tools {
        if let Some(props) = t.input_schema.get("properties").and_then(|p| p.as_object()) {
            known.extend(props.keys().cloned());
        }
    }
    let text = format!("{INSTRUCTIONS}{CHANNEL_INSTRUCTIONS}");
    let unknown: Vec<String> = snake_words(&text).difference(&known).cloned().collect();
    assert!(
        unknown.is_empty(),
        "the instructions name unknown tools or arguments: {unknown:?}"
    );
}

/// What a Claude Code session pays in context for this server on every turn: its
/// `tools/list` (as JSON) and its instructions. Issue "daily use" set the budget at
/// 8,000 characters (about 2k tokens); it was 17,690 before.
#[test]
fn a_claude_sessions_tool_surface_fits_in_8000_characters() {
    const BUDGET: usize = 8_000;
    let tools = crate::surface::tools_for(HostKind::Claude, Server::router().list_all());
    let list = serde_json::to_string(&ListToolsResult::with_all_items(tools.clone()))
        .expect("tools serialise");
    let total = list.len() + INSTRUCTIONS.len();
    eprintln!(
        "tool surface for Claude Code: {} tools, tools/list {} + instructions {} = {total} characters",
        tools.len(),
        list.len(),
        INSTRUCTIONS.len()
    );
    assert!(
        total <= BUDGET,
        "{total} characters, over the budget of {BUDGET}"
    );
    assert!(
        tools
            .iter()
            .all(|t| !crate::surface::CODEX_ONLY.contains(&t.name.as_ref())),
        "Codex-only tools are shown to Claude"
    );
    let codex = crate::surface::tools_for(HostKind::Codex, Server::router().list_all());
    assert_eq!(codex.len(), tools.len() + crate::surface::CODEX_ONLY.len());
}
