//! Claims on files in the home (docs/CLAIMS.md):
//!
//! - `sessions/<id>/claims.json` — the session's own claims: its state, so they
//!   survive its restart (the network only carries them while the session lives);
//! - `sessions/<id>/board.json` — a running session's view of its project's claims,
//!   with where each stands, rewritten whenever it changes and every
//!   [`BOARD_REWRITE_MS`]: what the edit hooks, the git guard and
//!   `interlink-p2p claims` read, since they run without a node of their own.

use std::path::Path;

use interlink_core::claims::{Claim, MAX_CLAIMS_PER_SESSION};
use serde::{Deserialize, Serialize};

use crate::paths::{Home, SessionDir};

/// Largest `claims.json` read.
pub const MAX_CLAIMS_FILE_BYTES: u64 = 16 * 1024;
/// Largest `board.json` read (a full board, 512 claims of the largest kind, fits
/// several times over).
pub const MAX_BOARD_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// How often a running session rewrites its board view when nothing changed, so a
/// reader can tell a live view from one a stopped session left.
pub const BOARD_REWRITE_MS: u64 = 10_000;
/// A board view older than this is from a session that stopped: not read.
pub const BOARD_FRESH_MS: u64 = 3 * BOARD_REWRITE_MS;
/// Most session directories looked at for board views.
pub const MAX_BOARDS_SCANNED: usize = 1024;

const CLAIMS_FILE: &str = "claims.json";
const BOARD_FILE: &str = "board.json";
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct OwnFile {
    version: u32,
    claims: Vec<Claim>,
}

/// The session's own claims; none when the file is missing. A file that does not
/// parse is an error (the session's state is not dropped silently).
pub fn load_own(dir: &SessionDir) -> Result<Vec<Claim>, String> {
    let path = dir.path().join(CLAIMS_FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let file: OwnFile = crate::small_file::read(&path, MAX_CLAIMS_FILE_BYTES).ok_or_else(|| {
        format!(
            "{} does not parse; remove it to drop the claims",
            path.display()
        )
    })?;
    let mut claims = file.claims;
    claims.truncate(MAX_CLAIMS_PER_SESSION);
    Ok(claims)
}

/// Replaces the session's own claims (an empty list removes the file).
pub fn save_own(dir: &SessionDir, claims: &[Claim]) -> std::io::Result<()> {
    let path = dir.path().join(CLAIMS_FILE);
    if claims.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    crate::small_file::write(
        &path,
        &OwnFile {
            version: VERSION,
            claims: claims.to_vec(),
        },
    )
}

/// A running session's view of its project's claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoardView {
    /// The file's shape version.
    pub version: u32,
    /// The project, 32 hex digits.
    pub project: String,
    /// The repository's top level where the writer runs.
    pub root: String,
    /// The writer: identity key (hex) and session id.
    pub key: String,
    #[allow(missing_docs)]
    pub session: String,
    /// When it was written, ms since the Unix epoch.
    pub written_ms: u64,
    /// Every claim on the board, in precedence order.
    pub claims: Vec<ViewClaim>,
}

/// One claim on a board view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewClaim {
    /// The claimer: identity key (hex), session id, and its name here (the
    /// petname, or `you` for the writer's own identity), if known.
    pub key: String,
    #[allow(missing_docs)]
    pub session: String,
    #[allow(missing_docs)]
    pub name: Option<String>,
    #[allow(missing_docs)]
    pub pattern: String,
    #[allow(missing_docs)]
    pub exclusive: bool,
    #[allow(missing_docs)]
    pub reason: String,
    #[allow(missing_docs)]
    pub since: u64,
    #[allow(missing_docs)]
    pub until: u64,
    /// Held, or waiting behind the claim named (key, session, pattern).
    pub held: bool,
    #[allow(missing_docs)]
    pub waits_behind: Option<(String, String, String)>,
}

impl BoardView {
    /// A new view in this file's shape.
    pub fn new(
        project: String,
        root: String,
        key: String,
        session: String,
        written_ms: u64,
    ) -> Self {
        Self {
            version: VERSION,
            project,
            root,
            key,
            session,
            written_ms,
            claims: Vec::new(),
        }
    }
}

/// Writes the session's board view.
pub fn write_board(dir: &SessionDir, view: &BoardView) -> std::io::Result<()> {
    crate::small_file::write(&dir.path().join(BOARD_FILE), view)
}

/// Removes the session's board view (it stops).
pub fn remove_board(dir: &SessionDir) {
    let _ = std::fs::remove_file(dir.path().join(BOARD_FILE));
}

/// The fresh board views of `project` (hex) in the home, newest first: written within
/// [`BOARD_FRESH_MS`] of `now` by a running session.
pub fn read_boards(home: &Home, project: &str, now: u64) -> Vec<BoardView> {
    let mut views = read_all_boards(home, now);
    views.retain(|v| v.project == project);
    views
}

/// Every project's fresh views in `home` (see [`read_boards`]), each project's freshest
/// first.
pub fn read_all_boards(home: &Home, now: u64) -> Vec<BoardView> {
    let Ok(entries) = std::fs::read_dir(home.sessions()) else {
        return Vec::new();
    };
    let mut views: Vec<BoardView> = entries
        .take(MAX_BOARDS_SCANNED)
        .filter_map(Result::ok)
        .filter_map(|e| read_board(&e.path().join(BOARD_FILE)))
        .filter(|v| now.saturating_sub(v.written_ms) <= BOARD_FRESH_MS)
        .collect();
    views.sort_by(|a, b| {
        a.project
            .cmp(&b.project)
            .then(b.written_ms.cmp(&a.written_ms))
    });
    views
}

fn read_board(path: &Path) -> Option<BoardView> {
    crate::small_file::read::<BoardView>(path, MAX_BOARD_FILE_BYTES)
        .filter(|v| v.version == VERSION)
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
