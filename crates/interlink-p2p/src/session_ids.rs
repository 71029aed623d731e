//! Naming the sessions a home has, for commands given a session id that names none:
//! a typo must not look like success, and the answer says which ids there are.

use interlink_core::SessionId;
use interlink_store::paths::{Home, session_of_dir_name};

/// Most session ids an error names (the most recently active first).
pub const MAX_NAMED: usize = 8;
/// Most entries of the home's `sessions/` directory looked at: a home that kept
/// thousands of ended sessions must not make an error slow.
const MAX_SCANNED: usize = 4096;

/// The sessions of `home` whose directory holds `file` (`inbox.jsonl`,
/// `network.json`, …; `None`: any session directory), most recently changed first,
/// with how many there are in all.
pub fn with_file(home: &Home, file: Option<&str>) -> (Vec<SessionId>, usize) {
    let mut found: Vec<(std::time::SystemTime, SessionId)> = std::fs::read_dir(home.sessions())
        .into_iter()
        .flatten()
        .flatten()
        .take(MAX_SCANNED)
        .filter_map(|e| {
            let path = match file {
                Some(f) => e.path().join(f),
                None => e.path(),
            };
            let changed = std::fs::metadata(&path).ok()?.modified().ok()?;
            let id = e.file_name().to_str().and_then(session_of_dir_name)?;
            // The command line's own pairing session is nobody's to name.
            (id.as_str() != crate::pairing_session::PAIR_SESSION).then_some((changed, id))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    found.truncate(MAX_NAMED);
    (found.into_iter().map(|(_, id)| id).collect(), total)
}

/// `what: a, b (and 3 more)`, or `no session of this home has <what>` when there is
/// none: the second half of a "session X has no …" error.
pub fn named(home: &Home, file: Option<&str>, what: &str) -> String {
    let (ids, total) = with_file(home, file);
    if ids.is_empty() {
        return format!("no session of this home has {what}");
    }
    let mut text = format!(
        "sessions with {what}, most recent first: {}",
        ids.iter()
            .map(SessionId::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    );
    if total > ids.len() {
        text.push_str(&format!(" (and {} more)", total - ids.len()));
    }
    text
}

#[cfg(test)]
#[path = "session_ids_tests.rs"]
mod tests;
