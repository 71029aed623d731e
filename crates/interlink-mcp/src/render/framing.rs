//! How text a peer wrote is framed wherever an agent reads it: `receive_messages`,
//! `conversation_history`, the Stop hook's `wait` output, channel notifications, the
//! Codex notice, the roster and the pair requests. Every such surface goes through
//! this module, so one set of rules decides what a peer can make the agent see.
//!
//! The rules (docs/MCP.md, "How peer text is framed"):
//! - A message body is a **block**: an opening fence `<<<msg-<nonce>`, every line of the
//!   text prefixed with `| ` (an empty line is a bare `|`), and a closing fence
//!   `msg-<nonce>>>>`. The nonce is 64 bits from the operating system's generator,
//!   fresh for every block, so a sender cannot know it when it writes the text.
//! - Because every body line starts with `|`, no line of peer text is ever at column 0:
//!   a header (`message … (verified sender):`) or a fence is always ours, whatever
//!   the text holds — markers, copied headers, a guessed nonce, look-alike characters.
//!   The nonce additionally makes the end of a block unguessable for a reader that
//!   ignores the prefix.
//! - Characters that would hide, reorder or reformat what is shown are **escaped
//!   visibly** as `\u{…}`, never dropped, so the agent sees that something was there:
//!   control characters (C0, DEL, C1 — also `\r`, ESC of ANSI/OSC sequences) except
//!   `\n` and `\t` in a body, bidi embeddings, overrides, isolates and marks,
//!   zero-width and other invisible format characters, line and paragraph separators,
//!   and tag characters. Backslashes right before `u{` or an escape are doubled, so an
//!   escape the renderer made is never confused with one the peer typed: the body is
//!   the exact text, recoverable, only made visible.
//! - A single-line field (task id, summary, cwd, git label, a suggested name, a
//!   refusal reason) is shown [`quoted`] or [`inline`]-escaped, so it cannot end the
//!   field early or break the line.
//!
//! The structured JSON of a tool result keeps every field raw: it is already
//! unambiguous, and an agent that needs the exact bytes reads them there.

use std::fmt::Write as _;

use rand_core::Rng as _;

/// What every line of a block's body begins with.
pub(crate) const BODY_PREFIX: &str = "| ";

/// A block's fence: `msg-` and a random nonce of 16 hex digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fence(String);

impl Fence {
    /// A fresh fence from the operating system's generator.
    pub(crate) fn random() -> Self {
        let mut b = [0u8; 8];
        crate::session_node::os_rng().fill_bytes(&mut b);
        Self::from_nonce(b)
    }

    /// The fence of `nonce` (tests choose it; production uses [`Fence::random`]).
    pub(crate) fn from_nonce(nonce: [u8; 8]) -> Self {
        Self(format!(
            "msg-{}",
            interlink_core::identity::hex_encode(&nonce)
        ))
    }

    /// The line that opens the block: `<<<msg-<nonce>`.
    pub(crate) fn open(&self) -> String {
        format!("<<<{}", self.0)
    }

    /// The line that closes the block: `msg-<nonce>>>>`.
    pub(crate) fn close(&self) -> String {
        format!("{}>>>", self.0)
    }
}

/// One block: `header`, then the body of `text` between a fresh fence.
pub(crate) fn block(header: &str, text: &str) -> String {
    block_with(&Fence::random(), header, text)
}

/// One block under the given fence (deterministic, for tests).
pub(crate) fn block_with(fence: &Fence, header: &str, text: &str) -> String {
    let mut out = String::with_capacity(header.len() + text.len() + 64);
    out.push_str(header);
    out.push('\n');
    out.push_str(&body_with(fence, text));
    out
}

/// The body of `text` alone, fenced: what a channel notification carries as content.
pub(crate) fn body(text: &str) -> String {
    body_with(&Fence::random(), text)
}

/// [`body`] under the given fence.
pub(crate) fn body_with(fence: &Fence, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16 + 48);
    out.push_str(&fence.open());
    out.push('\n');
    for line in text.split('\n') {
        let line = escape(line, true);
        if line.is_empty() {
            out.push_str(BODY_PREFIX.trim_end());
        } else {
            out.push_str(BODY_PREFIX);
            out.push_str(&line);
        }
        out.push('\n');
    }
    out.push_str(&fence.close());
    out
}

/// `s` with every character [`is_hidden`] (and `\n`, `\t`) escaped: a single-line
/// field shown as it is, without quotes (cwd, git label, a refusal reason).
pub(crate) fn inline(s: &str) -> String {
    escape(s, false)
}

/// `s` between double quotes, with `"` and `\` escaped as well as everything
/// [`inline`] escapes: a field that must not be able to end early (task id, summary,
/// a suggested name).
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => push_char(&mut out, c, false),
        }
    }
    out.push('"');
    out
}

/// Whether `c` is shown as a `\u{…}` escape: it would be invisible, or change how the
/// text around it is laid out or read.
pub(crate) fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'                      // soft hyphen
            | '\u{034F}'                    // combining grapheme joiner
            | '\u{061C}'                    // Arabic letter mark (bidi)
            | '\u{115F}' | '\u{1160}'       // Hangul fillers
            | '\u{17B4}' | '\u{17B5}'       // Khmer inherent vowels
            | '\u{180B}'..='\u{180F}'       // Mongolian selectors and vowel separator
            | '\u{200B}'..='\u{200F}'       // zero-width space/(non-)joiner, LRM, RLM
            | '\u{2028}' | '\u{2029}'       // line and paragraph separators
            | '\u{202A}'..='\u{202E}'       // bidi embeddings and overrides
            | '\u{2060}'..='\u{206F}'       // word joiner, invisible operators, isolates
            | '\u{3164}'                    // Hangul filler
            | '\u{FEFF}'                    // zero-width no-break space (BOM)
            | '\u{FFA0}'                    // halfwidth Hangul filler
            | '\u{FFF9}'..='\u{FFFB}'       // interlinear annotations
            | '\u{1D173}'..='\u{1D17A}'     // musical format characters
            | '\u{E0000}'..='\u{E007F}' // tag characters ("ASCII smuggling")
        )
}

/// `s` escaped; a body line keeps its tabs (`\n` never reaches here from a body).
///
/// A run of backslashes right before `u{` or before an escaped character is doubled,
/// so a reader can always tell the renderer's escapes from text that merely looks like
/// one: before `u{`, an odd run ends in an escape, an even run is literal.
fn escape(s: &str, body: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        // Printable ASCII other than `\` is shown as it is: the run is copied at once
        // (a message body is mostly that, and a character at a time cost 8 ns each).
        let plain = rest
            .bytes()
            .position(|b| !(b' '..=b'~').contains(&b) || b == b'\\')
            .unwrap_or(rest.len());
        out.push_str(&rest[..plain]);
        rest = &rest[plain..];
        let Some(c) = rest.chars().next() else {
            break;
        };
        if c == '\\' {
            let run = rest.len() - rest.trim_start_matches('\\').len();
            let after = &rest[run..];
            let abuts = after.starts_with("u{")
                || after.chars().next().is_some_and(|n| shown_escaped(n, body));
            let n = if abuts { 2 * run } else { run };
            out.extend(std::iter::repeat_n('\\', n));
            rest = after;
            continue;
        }
        push_char(&mut out, c, body);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether `c` is written as an escape (a body keeps its tabs).
fn shown_escaped(c: char, body: bool) -> bool {
    is_hidden(c) && !(body && c == '\t')
}

fn push_char(out: &mut String, c: char, body: bool) {
    if !shown_escaped(c, body) {
        out.push(c);
    } else {
        let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
    }
}

#[cfg(test)]
#[path = "framing_tests.rs"]
mod tests;
