use super::*;
use crate::server::testing::harness;

/// The saver needs only the state and the session's directory: no node, no server.
#[tokio::test]
async fn a_changed_log_is_saved_at_shutdown() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(home.path(), "s1");
    let state = h.server.ctx.shared_state();
    // An empty log marked changed is still written.
    state.lock().sent.mark_dirty();
    let cancel = CancellationToken::new();
    cancel.cancel();
    flush(state.clone(), h.session_dir.clone(), cancel).await;
    assert!(h.session_dir.sent_log().is_file());
    assert!(!state.lock().sent.is_dirty());
}
