//! What `tools/list` shows a host: only the tools for that host, with their input
//! schemas reduced to what a model needs to call them.
//!
//! Every host session pays for the tool list in its context window on every turn, so it
//! is kept small: schemars' output carries a `$schema` URL, `null` defaults, nullable
//! type unions, integer formats and a `$defs` indirection per enum — about half of the
//! bytes, none of it useful to a model. The router keeps the full schemas (arguments are
//! still checked against the Rust types), and a tool hidden here stays callable: the
//! Codex hooks call `bind_codex_session` by name whatever the list shows.

use interlink_core::wire::HostKind;
use rmcp::model::Tool;
use serde_json::{Map, Value};

/// Tools only Codex sessions use (thread binding, failed `codex queue` notices).
pub(crate) const CODEX_ONLY: &[&str] = &["bind_codex_session", "failed_deliveries"];
/// Tools only hooks call (by name): in no host's list.
pub(crate) const HOOK_ONLY: &[&str] = &["bind_session"];

/// The tools `host` is shown, compacted.
pub(crate) fn tools_for(host: HostKind, tools: Vec<Tool>) -> Vec<Tool> {
    tools
        .into_iter()
        .filter(|t| host == HostKind::Codex || !CODEX_ONLY.contains(&t.name.as_ref()))
        .filter(|t| !HOOK_ONLY.contains(&t.name.as_ref()))
        .map(compact_tool)
        .collect()
}

fn compact_tool(mut tool: Tool) -> Tool {
    if let Some(d) = &tool.description {
        tool.description = Some(unwrap_lines(d).into());
    }
    let mut schema = Value::Object((*tool.input_schema).clone());
    let defs = match &mut schema {
        Value::Object(map) => map.remove("$defs").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    compact(&mut schema, &defs);
    if let Value::Object(map) = schema {
        tool.input_schema = std::sync::Arc::new(map);
    }
    tool
}

/// Doc comments become descriptions with their hard line breaks; a model reads one
/// paragraph as well without them.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn compact(value: &mut Value, defs: &Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|v| compact(v, defs)),
        Value::Object(map) => {
            compact_object(map, defs);
            map.values_mut().for_each(|v| compact(v, defs));
        }
        _ => {}
    }
}

fn compact_object(map: &mut Map<String, Value>, defs: &Value) {
    for key in ["$schema", "title", "format", "additionalProperties"] {
        map.remove(key);
    }
    if let Some(Value::String(d)) = map.get_mut("description") {
        *d = unwrap_lines(d);
    }
    // An absent optional says the same as null, false or an empty list.
    if matches!(map.get("default"), Some(Value::Null | Value::Bool(false)))
        || map
            .get("default")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
    {
        map.remove("default");
    }
    if map.get("minimum") == Some(&Value::from(0)) {
        map.remove("minimum");
    }
    // ["string", "null"] -> "string": optional is said by `required`.
    if let Some(Value::Array(types)) = map.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if kept.len() == 1 {
            map.insert("type".into(), kept[0].clone());
        }
    }
    // anyOf [X, null] -> X (merged, keeping this object's own description).
    if let Some(Value::Array(options)) = map.get("anyOf") {
        let kept: Vec<Value> = options
            .iter()
            .filter(|o| o.get("type") != Some(&Value::from("null")))
            .cloned()
            .collect();
        if let [only] = kept.as_slice() {
            let only = only.clone();
            map.remove("anyOf");
            if let Value::Object(inner) = only {
                for (k, v) in inner {
                    map.entry(k).or_insert(v);
                }
            }
        }
    }
    // A $ref into $defs is inlined (each enum is used once or twice).
    if let Some(Value::String(r)) = map.get("$ref")
        && let Some(name) = r.strip_prefix("#/$defs/")
        && let Some(Value::Object(def)) = defs.get(name)
    {
        let def = def.clone();
        map.remove("$ref");
        for (k, v) in def {
            // The property's own description says more than the enum type's.
            map.entry(k).or_insert(v);
        }
    }
    // oneOf of documented constants -> a plain enum.
    if let Some(Value::Array(options)) = map.get("oneOf")
        && let Some(values) = options
            .iter()
            .map(|o| o.get("const").cloned())
            .collect::<Option<Vec<Value>>>()
    {
        map.remove("oneOf");
        map.insert("type".into(), Value::from("string"));
        map.insert("enum".into(), Value::Array(values));
    }
}

#[cfg(test)]
#[path = "surface_tests.rs"]
mod tests;
