//! Keeps this session's claims on the network and its project's board on disk
//! (docs/CLAIMS.md). At start, the claims the session saved go back into its
//! announcement (a restart keeps them). Then, on every roster change and every
//! [`BOARD_TICK`], the board is rebuilt from the roster: new conflicts become lines in
//! the agent's next tool result, and the view is written to `board.json` — when it
//! changed, and every `BOARD_REWRITE_MS` so its readers can tell it is live — for the
//! edit hooks, the git guard and `interlink-p2p claims`.

use std::time::Duration;

use interlink_core::{claims::check_set, wire::SessionAddr};
use interlink_net::{Clock, Event};
use interlink_store::claims::{BOARD_REWRITE_MS, BoardView, load_own, remove_board, write_board};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::{
    context::{Bound, Context, NodeStatus, Ready, SharedState, running},
    paths::{Home, SessionDir},
    project::Project,
    render::Names,
};

/// How often the board is looked at when the roster says nothing: claims lapse and
/// sessions fall silent without a roster event.
const BOARD_TICK: Duration = Duration::from_secs(2);
/// How long roster events are gathered before the board is rebuilt once for them.
const DEBOUNCE: Duration = Duration::from_millis(500);

/// What the worker takes of the session.
pub(crate) struct ClaimsWorker {
    node: watch::Receiver<NodeStatus>,
    state: SharedState,
    home: Home,
    own: SessionAddr,
    dir: SessionDir,
    clock: Clock,
}

impl ClaimsWorker {
    pub(crate) fn of(ctx: &Context, bound: &Bound) -> Self {
        Self {
            node: ctx.node.clone(),
            state: ctx.shared_state(),
            home: ctx.home.clone(),
            own: bound.own.clone(),
            dir: bound.session_dir.clone(),
            clock: ctx.clock,
        }
    }
}

/// Runs until `cancel` fires or the node stops; a session outside any repository has
/// no board and the worker ends at once.
pub(crate) async fn keep(w: ClaimsWorker, cancel: CancellationToken) {
    let Some(ready) = running(&w.node).await else {
        return;
    };
    let cwd = w.state.lock().cwd.clone();
    let Some(project) = w.state.lock().claims.project(&cwd) else {
        return;
    };
    let now = w.clock.now_ms();
    match load_own(&w.dir) {
        Ok(saved) => {
            let live: Vec<_> = saved.into_iter().filter(|c| c.until > now).collect();
            match check_set(&live, now) {
                Ok(_) if !live.is_empty() => {
                    let _ = ready.handle.set_claims(live).await;
                }
                Ok(_) => {}
                Err(e) => warn!("the saved claims are not announced: {e}"),
            }
        }
        Err(e) => warn!("the saved claims are not announced: {e}"),
    }
    let mut events = ready.handle.events();
    let mut last: Option<BoardView> = None;
    let mut cache: Cache = None;
    loop {
        refresh(&w, &ready, &project, &mut last, &mut cache).await;
        tokio::select! {
            () = cancel.cancelled() => break,
            alive = roster_changed(&mut events) => {
                if !alive {
                    break;
                }
                // Roster events can come fast (a paired peer may re-announce at will):
                // the board is rebuilt at most every DEBOUNCE.
                tokio::time::sleep(DEBOUNCE).await;
            }
            () = tokio::time::sleep(BOARD_TICK) => {}
        }
    }
    remove_board(&w.dir);
}

/// Waits for a roster change; false when the node is gone.
async fn roster_changed(events: &mut broadcast::Receiver<Event>) -> bool {
    loop {
        match events.recv().await {
            Ok(Event::RosterChanged) | Err(broadcast::error::RecvError::Lagged(_)) => {
                return true;
            }
            Ok(_) => {}
            Err(broadcast::error::RecvError::Closed) => return false,
        }
    }
}

/// The last board and the sets it was ranked from.
type Cache = Option<(
    std::collections::BTreeMap<SessionAddr, Vec<interlink_core::claims::Claim>>,
    interlink_core::claims::Board,
)>;

async fn refresh(
    w: &ClaimsWorker,
    ready: &Ready,
    project: &Project,
    last: &mut Option<BoardView>,
    cache: &mut Cache,
) {
    let Ok(roster) = ready.handle.roster().await else {
        return;
    };
    let now = w.clock.now_ms();
    let mine: Vec<_> = load_own(&w.dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.until > now)
        .collect();
    // Ranking is quadratic in the claims (BENCHMARKS.md): only when the live sets
    // changed (a claim lapsing changes them).
    let sets = crate::claims::sets_of(&roster, &project.id, &w.own, mine, now);
    let board = match cache.take() {
        Some((old_sets, board)) if old_sets == sets => board,
        _ => interlink_core::claims::Board::from_sets(sets.clone(), now).0,
    };
    let policy = crate::policy::load(&w.home).unwrap_or_default();
    let names = Names::new(&policy, &w.own.key);
    w.state
        .lock()
        .claims
        .note_conflicts(&board, &w.own, &names, true);
    let view = crate::claims::view_of(&board, project, &w.own, &names, now);
    let due = last.as_ref().is_none_or(|l| {
        l.claims != view.claims || now.saturating_sub(l.written_ms) >= BOARD_REWRITE_MS
    });
    // Nothing to write for a project nobody claims in, until someone does.
    let nothing = view.claims.is_empty() && last.as_ref().is_none_or(|l| l.claims.is_empty());
    if due && !(nothing && last.is_some()) {
        let dir = w.dir.clone();
        let to_write = view.clone();
        let written = tokio::task::spawn_blocking(move || write_board(&dir, &to_write)).await;
        if let Ok(Err(e)) = written {
            warn!("writing the claims board: {e}");
        }
        *last = Some(view);
    }
    *cache = Some((sets, board));
}
