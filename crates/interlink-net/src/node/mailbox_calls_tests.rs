use interlink_core::wire::VERSION;
use serde_bytes::ByteBuf;

use super::*;

/// Takes `request` and sends what `admit` hands back, as the actor does (wire ids
/// counted up in `wire`).
fn take_for(
    calls: &mut MailboxCalls<u64>,
    wire: &mut u64,
    peer: PeerId,
    request: MailboxRequest,
) -> Result<CallId, CallRefused> {
    let (id, now) = calls.admit(peer, request)?;
    if now.is_some() {
        *wire += 1;
        calls.on_sent(*wire, peer, vec![id]);
    }
    Ok(id)
}

/// A hold of mailbox `key` (one byte) with a copy of `bytes`.
fn hold_of(key: u8, bytes: usize) -> MailboxRequest {
    MailboxRequest {
        v: VERSION,
        op: MailboxOp::Hold {
            key: ByteBuf::from(vec![key; 32]),
            record: ByteBuf::from(vec![0; bytes]),
        },
    }
}

fn fetch() -> MailboxRequest {
    MailboxRequest {
        v: VERSION,
        op: MailboxOp::Fetch {
            request: ByteBuf::from(vec![7; 100]),
        },
    }
}

#[test]
fn a_burst_to_one_peer_goes_out_a_few_at_a_time_in_order() {
    let (a, b) = (PeerId::random(), PeerId::random());
    let mut calls = MailboxCalls::<u64>::default();
    let mut wire = 0;
    let ids: Vec<CallId> = (0..50)
        .map(|_| take_for(&mut calls, &mut wire, a, fetch()).expect("taken"))
        .collect();
    // Another peer is not held up by the first one's burst.
    take_for(&mut calls, &mut wire, b, fetch()).expect("taken");
    assert_eq!(wire as usize, IN_FLIGHT_PER_PEER + 1);
    assert_eq!(calls.waiting(), 50 - IN_FLIGHT_PER_PEER);

    // Each answer lets the next waiting request out, oldest first, and every call
    // is answered under its own id exactly once.
    let mut answered = Vec::new();
    let mut on_wire: VecDeque<u64> = (1..=IN_FLIGHT_PER_PEER as u64).collect();
    while let Some(rid) = on_wire.pop_front() {
        let (ids, next) = calls.on_ended(rid).expect("ours");
        answered.extend(ids);
        if let Some((peer, next, _)) = next {
            assert_eq!(peer, a);
            wire += 1;
            calls.on_sent(wire, peer, next);
            on_wire.push_back(wire);
        }
    }
    assert_eq!(answered, ids);
    assert_eq!(calls.waiting(), 0);
    assert_eq!(calls.waiting_bytes, 0);
    assert!(calls.on_ended(9999).is_none(), "not a request made here");
}

#[test]
fn waiting_requests_are_bounded_per_peer_and_in_bytes() {
    let (a, b) = (PeerId::random(), PeerId::random());
    let mut calls = MailboxCalls::<u64>::default();
    let mut wire = 0;
    for _ in 0..IN_FLIGHT_PER_PEER + MAX_WAITING_PER_PEER {
        take_for(&mut calls, &mut wire, a, fetch()).expect("taken");
    }
    assert_eq!(
        take_for(&mut calls, &mut wire, a, fetch()),
        Err(CallRefused::QueueFull)
    );
    assert_eq!(calls.waiting(), MAX_WAITING_PER_PEER);
    // Big copies of distinct mailboxes for another peer: refused once the bytes
    // waiting would pass the cap.
    for key in 0..IN_FLIGHT_PER_PEER as u8 {
        take_for(&mut calls, &mut wire, b, hold_of(key, 4 << 20)).expect("sent at once");
    }
    let mut queued = 0;
    while take_for(&mut calls, &mut wire, b, hold_of(100 + queued, 4 << 20)).is_ok() {
        queued += 1;
    }
    assert_eq!(usize::from(queued), MAX_WAITING_BYTES / ((4 << 20) + 32));
    assert!(calls.waiting_bytes <= MAX_WAITING_BYTES);
}

fn hold(key: u8, copy: u8) -> MailboxRequest {
    MailboxRequest {
        v: VERSION,
        op: MailboxOp::Hold {
            key: ByteBuf::from(vec![key; 32]),
            record: ByteBuf::from(vec![copy; 64]),
        },
    }
}

#[test]
fn waiting_holds_of_one_mailbox_become_one_request_with_the_newest_copy() {
    let peer = PeerId::random();
    let mut calls = MailboxCalls::<u64>::default();
    let mut wire = 0u64;
    let mut ids = Vec::new();
    for copy in 0..50u8 {
        let (id, now) = calls.admit(peer, hold(1, copy)).expect("taken");
        if now.is_some() {
            wire += 1;
            calls.on_sent(wire, peer, vec![id]);
        }
        ids.push(id);
    }
    // Another mailbox's hold waits on its own.
    let (other, now) = calls.admit(peer, hold(2, 0)).expect("taken");
    assert!(now.is_none());
    assert_eq!(
        calls.waiting(),
        2,
        "48 holds of mailbox 1 coalesced into one"
    );

    let (first, next) = calls.on_ended(1).expect("ours");
    assert_eq!(first, vec![ids[0]]);
    let (_, coalesced, request) = next.expect("the waiting hold goes out");
    assert_eq!(
        coalesced,
        ids[2..].to_vec(),
        "it answers every call it replaced"
    );
    assert!(
        matches!(&request.op, MailboxOp::Hold { record, .. } if record[0] == 49),
        "with the newest copy"
    );
    wire += 1;
    calls.on_sent(wire, peer, coalesced);
    let (second, next) = calls.on_ended(2).expect("ours");
    assert_eq!(second, vec![ids[1]]);
    let (_, last, _) = next.expect("mailbox 2's hold goes out");
    assert_eq!(last, vec![other]);
}
