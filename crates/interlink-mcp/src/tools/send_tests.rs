use super::*;

/// No session to route to: the error names the step that still works (a session id
/// of theirs seen before queues the message), and `self` says that none of this
/// user's other sessions is running.
#[test]
fn a_peer_without_sessions_is_answered_with_the_next_step() {
    let own = interlink_core::Identity::from_seed(&[1; 32]).public();
    let bob = interlink_core::Identity::from_seed(&[2; 32]).public();
    let ToolError(peer) = route_error(RouteError::NoSession, bob, "bob", own);
    assert!(
        peer.contains("bob has no session") && peer.contains("pass `session`"),
        "{peer}"
    );
    let ToolError(own_text) = route_error(RouteError::NoSession, own, "self", own);
    assert!(own_text.contains("no other session"), "{own_text}");
    // With ids known here, they are named, most recent first, as given.
    let seen = [
        interlink_core::SessionId::new("bob-2").unwrap(),
        interlink_core::SessionId::new("bob-1").unwrap(),
    ];
    let ToolError(named) = no_session_error("bob", &seen);
    assert!(
        named.contains("pass `session`") && named.contains("seen last: bob-2, bob-1"),
        "{named}"
    );
    assert!(
        peer.contains("no session id of theirs is known here"),
        "{peer}"
    );
}
