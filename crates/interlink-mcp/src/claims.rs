//! This session's claims on files (docs/CLAIMS.md): what the agent asks for turned
//! into patterns of its project, the board of that project as this session's roster
//! shows it, the view of it the hooks and the git guard read, and the lines its agent
//! is told when a conflict appears.

use std::collections::{HashSet, VecDeque};

use interlink_core::{
    claims::{Board, Conflict, Pattern, Placed, ProjectId, Standing, project::relative_to},
    presence::IdentityView,
    wire::SessionAddr,
};
use interlink_store::claims::{BoardView, ViewClaim};

use crate::{dates::utc, project::Project, render::Names};

/// Most lines waiting for the agent's next tool result.
const MAX_NEWS: usize = 8;
/// Most conflicts remembered as told (forgotten all at once beyond it: at worst one is
/// told again).
const MAX_TOLD: usize = 4096;

/// What the session knows of claims, under the context's lock.
#[derive(Debug, Default)]
pub(crate) struct ClaimsState {
    /// The project of the working directory, found once per directory.
    project: Option<(String, Option<Project>)>,
    /// Conflicts the agent was told of: (first, second) as (session, pattern) each.
    told: HashSet<ConflictKey>,
    /// Lines for the agent's next tool result.
    news: VecDeque<String>,
}

type ConflictKey = (SessionAddr, String, SessionAddr, String);

impl ClaimsState {
    /// The project of `cwd` (asks git the first time for each directory).
    pub(crate) fn project(&mut self, cwd: &str) -> Option<Project> {
        match &self.project {
            Some((dir, p)) if dir == cwd => p.clone(),
            _ => {
                let p = crate::project::detect(std::path::Path::new(cwd));
                self.project = Some((cwd.to_owned(), p.clone()));
                p
            }
        }
    }

    /// Takes the lines waiting for the agent.
    pub(crate) fn take_news(&mut self) -> Vec<String> {
        self.news.drain(..).collect()
    }

    /// Notes the conflicts on `board` that involve `own`, and queues a line for each the
    /// agent was not told of yet (unless `tell` is false: the claim tool's own result
    /// says them). Conflicts that ended are forgotten, so one that comes back is told
    /// again.
    pub(crate) fn note_conflicts(
        &mut self,
        board: &Board,
        own: &SessionAddr,
        names: &Names<'_>,
        tell: bool,
    ) {
        let now: Vec<Conflict> = board
            .conflicts()
            .into_iter()
            .filter(|c| &c.first.by == own || &c.second.by == own)
            .collect();
        let keys: HashSet<ConflictKey> = now.iter().map(key_of).collect();
        self.told.retain(|k| keys.contains(k));
        if self.told.len() > MAX_TOLD {
            self.told.clear();
        }
        for c in &now {
            if !self.told.insert(key_of(c)) || !tell {
                continue;
            }
            let line = if &c.first.by == own {
                format!(
                    "[interlink: {} also claims {} ({}), overlapping your claim on {}: yours came first and holds; theirs waits]",
                    who(&c.second, names),
                    c.second.pattern(),
                    reason_of(&c.second),
                    c.first.pattern()
                )
            } else {
                format!(
                    "[interlink: your claim on {} waits behind {}: {} ({}, since {}); do not edit those files until it ends]",
                    c.second.pattern(),
                    who(&c.first, names),
                    c.first.pattern(),
                    reason_of(&c.first),
                    utc(c.first.claim.since)
                )
            };
            if self.news.len() == MAX_NEWS {
                self.news.pop_front();
            }
            self.news.push_back(line);
        }
    }
}

fn key_of(c: &Conflict) -> ConflictKey {
    (
        c.first.by.clone(),
        c.first.pattern().to_string(),
        c.second.by.clone(),
        c.second.pattern().to_string(),
    )
}

fn reason_of(p: &Placed) -> String {
    let kind = if p.claim.exclusive {
        "exclusive"
    } else {
        "shared"
    };
    if p.claim.reason.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {:?}", p.claim.reason)
    }
}

/// A claimer as the agent reads it: `your session abc` or `bob's session def`.
pub(crate) fn who(p: &Placed, names: &Names<'_>) -> String {
    session_of(
        names.of(&p.by.key),
        &p.by.key.fingerprint().to_string(),
        p.by.session.as_str(),
    )
}

/// `your session s` for this user's own identity (`self`), else `<name>'s session s`.
fn session_of(name: Option<String>, fallback: &str, session: &str) -> String {
    match name.as_deref() {
        Some("self") => format!("your session {session}"),
        Some(name) => format!("{name}'s session {session}"),
        None => format!("{fallback}'s session {session}"),
    }
}

/// Where a claim stands, in words.
pub(crate) fn standing_text(p: &Placed, standing: &Standing, names: &Names<'_>) -> String {
    match standing {
        Standing::Held => format!("{} ({}): held", p.pattern(), reason_of(p)),
        Standing::Waits(first) => format!(
            "{} ({}): waits behind {} on {} ({}, since {})",
            p.pattern(),
            reason_of(p),
            who(first, names),
            first.pattern(),
            reason_of(first),
            utc(first.claim.since)
        ),
    }
}

/// What the agent wrote turned into a pattern of the project rooted at `root`: a path
/// or glob relative to `cwd` or absolute, inside the repository. A directory that
/// exists names everything below it.
pub(crate) fn resolve(root: &std::path::Path, cwd: &str, input: &str) -> Result<String, String> {
    let input = input.trim();
    let root_text = root.to_string_lossy();
    let absolute = std::path::Path::new(input).is_absolute() || input.starts_with('/');
    let joined = if absolute {
        input.to_owned()
    } else {
        format!("{cwd}/{input}")
    };
    let rel = relative_to(&root_text, &joined).ok_or_else(|| {
        format!("{input:?} is outside the repository at {root_text}; claims are on its files")
    })?;
    let rel = if rel.is_empty() {
        "**".to_owned()
    } else if !rel.contains(['*', '?']) && root.join(&rel).is_dir() {
        format!("{rel}/**")
    } else {
        rel
    };
    Pattern::parse(&rel)
        .map(|p| p.as_str().to_owned())
        .map_err(|e| e.to_string())
}

/// The board of `project` from `roster`, with `own`'s claims as they are now (the
/// roster may not have taken in this session's newest announcement yet).
pub(crate) fn board_of(
    roster: &[IdentityView],
    project: &ProjectId,
    own: &SessionAddr,
    own_claims: Vec<interlink_core::claims::Claim>,
    now: u64,
) -> Board {
    let (board, _) = Board::from_sets(sets_of(roster, project, own, own_claims, now), now);
    board
}

/// The claim sets [`board_of`] ranks: the roster's, with `own`'s as they are now, each
/// without the claims lapsed by `now` (a session's announcement keeps a lapsed claim
/// until it announces again), and no empty set.
pub(crate) fn sets_of(
    roster: &[IdentityView],
    project: &ProjectId,
    own: &SessionAddr,
    own_claims: Vec<interlink_core::claims::Claim>,
    now: u64,
) -> std::collections::BTreeMap<SessionAddr, Vec<interlink_core::claims::Claim>> {
    let mut sets: std::collections::BTreeMap<_, _> =
        interlink_core::claims::sets_in_views(roster, project).collect();
    sets.insert(own.clone(), own_claims);
    for set in sets.values_mut() {
        set.retain(|c| c.until > now);
    }
    sets.retain(|_, set| !set.is_empty());
    sets
}

/// The view of `board` written for the hooks, the guard and `interlink-p2p claims`.
pub(crate) fn view_of(
    board: &Board,
    project: &Project,
    own: &SessionAddr,
    names: &Names<'_>,
    now: u64,
) -> BoardView {
    let mut view = BoardView::new(
        project.id.to_hex(),
        project.root.to_string_lossy().into_owned(),
        own.key.to_hex(),
        own.session.to_string(),
        now,
    );
    view.claims = view_claims(board, |key| names.of(key));
    view
}

/// What lies on a project's board as the running sessions of this home see it, for the
/// commands that run without a node: `interlink-p2p claims`, the edit hooks and the git
/// guard.
#[derive(Debug)]
pub struct Seen {
    /// The project of the directory asked about.
    pub project: Project,
    /// The freshest board view of it a running session wrote, if any.
    pub view: Option<BoardView>,
}

/// The project of `dir` and its board as the home's running sessions see it together
/// at `now`; `None` outside a repository.
pub fn seen_from(
    home: &interlink_store::paths::Home,
    dir: &std::path::Path,
    now: u64,
) -> Option<Seen> {
    let project = crate::project::detect(dir)?;
    let views = interlink_store::claims::read_boards(home, &project.id.to_hex(), now);
    Some(Seen {
        view: merge(views, now),
        project,
    })
}

/// Each project's board as the home's running sessions see it together at `now` (the
/// page of `interlink-p2p ui`).
pub fn boards(home: &interlink_store::paths::Home, now: u64) -> Vec<BoardView> {
    let mut views = interlink_store::claims::read_all_boards(home, now);
    let mut out = Vec::new();
    while let Some(first) = views.first() {
        let project = first.project.clone();
        let split = views
            .iter()
            .position(|v| v.project != project)
            .unwrap_or(views.len());
        let rest = views.split_off(split);
        out.extend(merge(std::mem::replace(&mut views, rest), now));
    }
    out
}

/// One board from the views of several sessions, freshest first: each session's
/// claims as the freshest view that lists it has them, ranked anew. One session may
/// not see what another does (it is not connected to the holder yet), so the freshest
/// view alone could miss a claim every other view shows.
pub(crate) fn merge(views: Vec<BoardView>, now: u64) -> Option<BoardView> {
    use std::collections::BTreeMap;

    use interlink_core::claims::Claim;
    let newest = views.first()?;
    let mut sets: BTreeMap<SessionAddr, Vec<Claim>> = BTreeMap::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for view in &views {
        let mut here: BTreeMap<SessionAddr, Vec<Claim>> = BTreeMap::new();
        for c in &view.claims {
            let (Ok(key), Ok(session)) = (
                c.key.parse::<interlink_core::IdentityKey>(),
                interlink_core::SessionId::new(c.session.clone()),
            ) else {
                continue;
            };
            if let Some(name) = &c.name {
                names.entry(c.key.clone()).or_insert_with(|| name.clone());
            }
            here.entry(SessionAddr { key, session })
                .or_default()
                .push(Claim {
                    pattern: c.pattern.clone(),
                    exclusive: c.exclusive,
                    reason: c.reason.clone(),
                    since: c.since,
                    until: c.until,
                });
        }
        for (addr, set) in here {
            sets.entry(addr).or_insert(set);
        }
    }
    let (board, _) = Board::from_sets(sets, now);
    let mut merged = BoardView::new(
        newest.project.clone(),
        newest.root.clone(),
        newest.key.clone(),
        newest.session.clone(),
        newest.written_ms,
    );
    merged.claims = view_claims(&board, |key| names.get(&key.to_hex()).cloned());
    Some(merged)
}

/// The claims of `board` as a view lists them, each claimer named by `name_of`.
fn view_claims(
    board: &Board,
    name_of: impl Fn(&interlink_core::IdentityKey) -> Option<String>,
) -> Vec<ViewClaim> {
    board
        .claims()
        .map(|(p, standing)| ViewClaim {
            key: p.by.key.to_hex(),
            session: p.by.session.to_string(),
            name: name_of(&p.by.key),
            pattern: p.pattern().to_string(),
            exclusive: p.claim.exclusive,
            reason: p.claim.reason.clone(),
            since: p.claim.since,
            until: p.claim.until,
            held: standing == Standing::Held,
            waits_behind: match standing {
                Standing::Held => None,
                Standing::Waits(first) => Some((
                    first.by.key.to_hex(),
                    first.by.session.to_string(),
                    first.pattern().to_string(),
                )),
            },
        })
        .collect()
}

/// The claims of `view` an edit of `path` (relative to the root) by the session `me`
/// (identity key hex, session id) collides with: held, exclusive, another session's,
/// covering the path. With `me` unknown, every such claim counts.
pub fn held_against<'a>(
    view: &'a BoardView,
    path: &str,
    me: Option<(&str, &str)>,
) -> Vec<&'a ViewClaim> {
    view.claims
        .iter()
        .filter(|c| c.held && c.exclusive)
        .filter(|c| me != Some((c.key.as_str(), c.session.as_str())))
        .filter(|c| Pattern::parse(&c.pattern).is_ok_and(|p| p.covers(path)))
        .collect()
}

/// One claim for a person or an agent: `bob's session s2 holds src/api/** (exclusive:
/// "fixing login", since …, until …)`.
pub fn claim_line(c: &ViewClaim) -> String {
    let who = session_of(
        c.name.clone(),
        &format!("{}…", &c.key[..c.key.len().min(16)]),
        &c.session,
    );
    let kind = if c.exclusive { "exclusive" } else { "shared" };
    let reason = if c.reason.is_empty() {
        String::new()
    } else {
        format!(": {:?}", c.reason)
    };
    let stand = match &c.waits_behind {
        None => "holds".to_owned(),
        Some((_, session, pattern)) => format!("waits behind session {session} ({pattern}) for"),
    };
    format!(
        "{who} {stand} {} ({kind}{reason}, since {}, until {})",
        c.pattern,
        utc(c.since),
        utc(c.until)
    )
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
