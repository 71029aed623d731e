use serde_json::json;

use super::*;

#[test]
fn schemas_keep_what_a_call_needs() {
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"Status": {"description": "A status.", "oneOf": [
            {"const": "update", "description": "Progress.", "type": "string"},
            {"const": "result", "description": "Done.", "type": "string"}]}},
        "additionalProperties": false,
        "properties": {
            "text": {"description": "The text.", "type": "string"},
            "limit": {"default": null, "format": "uint32", "minimum": 0,
                      "type": ["integer", "null"], "description": "Most."},
            "status": {"anyOf": [{"$ref": "#/$defs/Status"}, {"type": "null"}],
                       "description": "Where it stands."}
        },
        "required": ["text"],
        "type": "object"
    });
    let defs = schema.as_object_mut().unwrap().remove("$defs").unwrap();
    compact(&mut schema, &defs);
    assert_eq!(
        schema,
        json!({
            "properties": {
                "text": {"description": "The text.", "type": "string"},
                "limit": {"type": "integer", "description": "Most."},
                "status": {"description": "Where it stands.", "type": "string",
                           "enum": ["update", "result"]}
            },
            "required": ["text"],
            "type": "object"
        })
    );
}

#[test]
fn descriptions_lose_their_hard_wraps_not_their_paragraphs() {
    assert_eq!(
        unwrap_lines("one\ntwo  three\n\nfour\nfive"),
        "one two three\n\nfour five"
    );
}
