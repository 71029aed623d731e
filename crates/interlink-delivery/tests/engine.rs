//! Two engines wired by hand, as a shell would: the live path end to end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pair;

use interlink_core::Identity;
use interlink_delivery::{CallId, Config, Engine, InboundId, Input, Outcome, Output, PeerRef};
use interlink_testkit::signed;
use pair::{NOW, answer_at_b, envelope, pair, route_b, send, settle, stored};

#[test]
fn live_delivery_is_receipted_in_order() {
    let mut p = pair();
    let to = p.addr_b.clone();
    route_b(&mut p, NOW);
    for n in 0..5 {
        let envelope = envelope(&mut p, n, NOW);
        p.a.handle(
            Input::Send {
                caller: CallId(n),
                envelope,
                route: Some(PeerRef(2)),
            },
            NOW,
        );
    }
    let replies = settle(&mut p, NOW);
    assert_eq!(replies.len(), 5);
    for (i, (caller, outcome)) in replies.iter().enumerate() {
        assert_eq!(caller.0, i as u64);
        assert_eq!(outcome, &Outcome::Delivered { to: to.clone() });
    }
    assert_eq!(p.a.sizes().outbox, 0);
    assert_eq!(p.b.sizes().inbox_index, 5);
}

#[test]
fn timestamps_increase_across_a_restore_with_the_clock_behind() {
    let mut p = pair();
    let e = envelope(&mut p, 1, NOW + 60_000);
    let entry = interlink_delivery::OutboxEntry { envelope: e };
    let mut again = Engine::restore(
        Config::default(),
        Identity::from_seed(&[1; 32]),
        p.addr_a.clone(),
        vec![entry],
        std::iter::empty(),
        NOW,
    );
    assert!(again.next_ts(NOW) > NOW + 60_000);
}

#[test]
fn refusals_keep_their_meaning_across_the_wire() {
    use interlink_delivery::Refusal as R;
    for r in [
        R::NotPaired,
        R::WrongRecipient,
        R::UnsolicitedAccept,
        R::Replayed,
        R::Malformed,
        R::Stale,
        R::FutureDated,
        R::StoreFailed,
        R::Busy,
        R::Behind,
    ] {
        let back = R::from_code(r.to_wire().code);
        assert_eq!(back.is_final(), r.is_final(), "{r:?} came back as {back:?}");
    }
}

/// Drains `e`'s outputs.
fn outputs(e: &mut Engine) -> Vec<Output> {
    std::iter::from_fn(|| e.poll_output()).collect()
}

/// A message that can go live at once is not written to the outbox: on the happy path
/// the outbox costs nothing, and a crash before the answer promised nothing.
#[test]
fn a_message_delivered_live_is_never_written_to_the_outbox() {
    let mut p = pair();
    send(&mut p, 1, Some(PeerRef(2)), NOW);
    let out = outputs(&mut p.a);
    assert!(
        out.iter().any(|o| matches!(o, Output::SendRequest { .. })),
        "{out:?}"
    );
    assert!(
        !out.iter()
            .any(|o| matches!(o, Output::PersistOutbox { .. })),
        "{out:?}"
    );
}

/// A message that could not go live is written; if the recipient shows life while
/// the write is on its way, the live attempt starts beside it, and a write that fails
/// meanwhile is reported only when the attempt ends, and only if it did not deliver.
#[test]
fn a_failed_outbox_write_during_the_live_attempt_is_told_only_if_not_delivered() {
    use interlink_delivery::{Response, SendError, SendFailure, StoreError};
    for delivered in [false, true] {
        let mut p = pair();
        let to = p.addr_b.clone();
        let envelope = envelope(&mut p, 1, NOW);
        let key = envelope.body().msg_id;
        p.a.handle(
            Input::Send {
                caller: CallId(1),
                envelope,
                route: None,
            },
            NOW,
        );
        let out = outputs(&mut p.a);
        assert!(
            out.iter()
                .any(|o| matches!(o, Output::PersistOutbox { .. })),
            "no route: written before it is called queued: {out:?}"
        );
        route_b(&mut p, NOW);
        let req = outputs(&mut p.a)
            .iter()
            .find_map(|o| match o {
                Output::SendRequest { req, .. } => Some(*req),
                _ => None,
            })
            .expect("the live attempt does not wait for the write");
        p.a.handle(
            Input::OutboxStored {
                key,
                result: Err(StoreError::DiskFull),
            },
            NOW,
        );
        assert!(
            !outputs(&mut p.a)
                .iter()
                .any(|o| matches!(o, Output::Reply { .. })),
            "answered before the attempt ended"
        );
        let result = if delivered {
            // Signed by the recipient (seed 2), whose key `to` names.
            let receipt = signed::receipt(
                &Identity::from_seed(&[2; 32]),
                &to.session,
                p.addr_a.key,
                vec![key],
                interlink_core::wire::ReceiptState::Delivered,
                NOW,
            );
            assert_eq!(receipt.body().recipient, to.key);
            Ok(Response {
                receipt: Some(receipt),
                results: vec![None],
            })
        } else {
            Err(SendFailure::Timeout)
        };
        p.a.handle(Input::DeliverResponse { req, result }, NOW + 10);
        let reply = outputs(&mut p.a).into_iter().find_map(|o| match o {
            Output::Reply { outcome, .. } => Some(outcome),
            _ => None,
        });
        match (delivered, reply) {
            (true, Some(Ok(Outcome::Delivered { to: t }))) => assert_eq!(t, to),
            (false, Some(Err(SendError::Store(StoreError::DiskFull)))) => {}
            other => panic!("unexpected: {other:?}"),
        }
        assert_eq!(p.a.sizes().outbox, 0, "nothing kept either way");
    }
}

/// An envelope the store refuses for its content (a body that does not open) is
/// refused to its sender for good, never indexed, and the next one still goes in.
#[test]
fn a_body_the_store_cannot_open_is_refused_for_good() {
    use interlink_delivery::Refusal;
    let mut p = pair();
    let bad = envelope(&mut p, 1, NOW);
    let good = envelope(&mut p, 2, NOW);
    let bad_key = (bad.body().sender, bad.body().msg_id);
    p.b.handle(
        Input::DeliverRequest {
            from: PeerRef(1),
            req: InboundId(7),
            envelopes: vec![bad, good],
        },
        NOW,
    );
    let token = outputs(&mut p.b)
        .into_iter()
        .find_map(|o| match o {
            Output::AppendInbox { token, entries } => {
                assert_eq!(entries.len(), 2);
                Some(token)
            }
            _ => None,
        })
        .unwrap();
    p.b.handle(
        Input::InboxStored {
            token,
            result: Ok(()),
            refused: vec![(bad_key, Refusal::Unopenable)],
        },
        NOW,
    );
    let response = outputs(&mut p.b)
        .into_iter()
        .find_map(|o| match o {
            Output::Respond { req, response } => {
                assert_eq!(req, InboundId(7));
                Some(response)
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(response.results, vec![Some(Refusal::Unopenable), None]);
    let receipt = response.receipt.unwrap();
    assert_eq!(receipt.body().msg_ids.len(), 1);
    assert_eq!(p.b.sizes().inbox_index, 1);
    assert!(Refusal::Unopenable.is_final());
}

/// One slow answer does not leave the recipient's node marked unreachable: the first
/// attempt runs out (its message goes on by the mailbox, `queued`), its answer comes
/// late, and the live path is tried again at once instead of after the next sign of
/// life — with a window that grew with what the answer took.
#[test]
fn a_late_answer_keeps_the_live_path_open_and_widens_the_window() {
    let mut p = pair();
    route_b(&mut p, NOW);
    let first = envelope(&mut p, 1, NOW);
    p.a.handle(
        Input::Send {
            caller: CallId(1),
            envelope: first,
            route: Some(PeerRef(2)),
        },
        NOW,
    );
    let mut req = None;
    let mut timer = None;
    for out in outputs(&mut p.a) {
        match out {
            Output::SendRequest { req: r, .. } => req = Some(r),
            Output::SetTimer { at } => timer = Some(at),
            Output::PersistOutbox { entry } => stored(&mut p.a, &entry, NOW),
            _ => {}
        }
    }
    let req = req.expect("a live attempt");
    assert_eq!(
        timer,
        Some(NOW + 1_000),
        "nothing measured yet: the configured 1 s"
    );
    // The attempt runs out: queued.
    let late = NOW + 1_000;
    p.a.handle(Input::Timer, late);
    let mut replies = Vec::new();
    loop {
        let outs = outputs(&mut p.a);
        if outs.is_empty() {
            break;
        }
        for out in outs {
            match out {
                Output::PersistOutbox { entry } => stored(&mut p.a, &entry, late),
                Output::Reply { outcome, .. } => replies.push(outcome),
                _ => {}
            }
        }
    }
    assert!(
        matches!(replies.as_slice(), [Ok(Outcome::Queued { .. })]),
        "{replies:?}"
    );
    // Its answer arrives 2.5 s after it was sent.
    let answered = NOW + 2_500;
    p.a.handle(
        Input::DeliverResponse {
            req,
            result: Ok(interlink_delivery::Response {
                receipt: None,
                results: vec![None],
            }),
        },
        answered,
    );
    // The node is alive: the queued message goes live again at once (rather than
    // after the next sign of life).
    let outs = outputs(&mut p.a);
    let (retry, envelopes) = outs
        .into_iter()
        .find_map(|o| match o {
            Output::SendRequest { req, envelopes, .. } => Some((req, envelopes)),
            _ => None,
        })
        .expect("not marked unreachable by one slow answer");
    // B answers it, this time after 2 s: past the configured 1 s window, within the
    // one widened by the 2.5 s answer. The answer still counts: delivered, and the
    // message leaves the outbox.
    let response = answer_at_b(&mut p, InboundId(1), envelopes, answered);
    let later = answered + 2_000;
    p.a.handle(Input::Timer, later);
    let _ = outputs(&mut p.a);
    p.a.handle(
        Input::DeliverResponse {
            req: retry,
            result: Ok(response.expect("B answers")),
        },
        later,
    );
    let outs = outputs(&mut p.a);
    assert!(
        outs.iter()
            .any(|o| matches!(o, Output::RemoveOutbox { .. })),
        "the window follows the measured answer: {outs:?}"
    );
}

/// A backlog that piled up behind an attempt that ran out goes one envelope at a
/// time, then two, four… as answers come (TCP's restart after a timeout), not as one
/// request of everything: on a 1 Mbit/s link fifty 4 KiB messages in one request ran
/// out on every attempt and stayed queued for minutes (the network lab's lossy WAN).
#[test]
fn a_backlog_behind_an_attempt_that_ran_out_restarts_small() {
    let mut p = pair();
    route_b(&mut p, NOW);
    let mut requests: Vec<(interlink_delivery::ReqId, Vec<_>)> = Vec::new();
    let send = |p: &mut pair::Pair, n: u64, requests: &mut Vec<_>| {
        let envelope = envelope(p, n, NOW);
        p.a.handle(
            Input::Send {
                caller: CallId(n),
                envelope,
                route: Some(PeerRef(2)),
            },
            NOW,
        );
        for out in outputs(&mut p.a) {
            match out {
                Output::PersistOutbox { entry } => stored(&mut p.a, &entry, NOW),
                Output::SendRequest { req, envelopes, .. } => requests.push((req, envelopes)),
                _ => {}
            }
        }
    };
    for n in 0..20 {
        send(&mut p, n, &mut requests);
    }
    assert_eq!(
        requests.len(),
        1,
        "one request in flight, the rest behind it"
    );
    assert_eq!(requests[0].1.len(), 1);
    // It runs out (its message goes on by the mailbox), and its answer comes late: a
    // sign of life, so the backlog goes live again — starting with one envelope.
    let late = NOW + 1_000;
    p.a.handle(Input::Timer, late);
    let (first, envelopes) = requests.remove(0);
    let response = answer_at_b(&mut p, InboundId(100), envelopes, late).unwrap();
    let late = late + 500;
    p.a.handle(
        Input::DeliverResponse {
            req: first,
            result: Ok(response),
        },
        late,
    );
    let mut sizes = Vec::new();
    let next = |p: &mut pair::Pair, now: u64| {
        let mut found = None;
        for out in outputs(&mut p.a) {
            match out {
                Output::PersistOutbox { entry } => stored(&mut p.a, &entry, now),
                Output::SendRequest { req, envelopes, .. } => found = Some((req, envelopes)),
                _ => {}
            }
        }
        found
    };
    let mut inbound = 0;
    let mut now = late;
    // B answers each at once; the batches grow 1, 2, 4, 8, then take the rest.
    while let Some((req, envelopes)) = next(&mut p, now) {
        sizes.push(envelopes.len());
        inbound += 1;
        now += 10;
        let response = answer_at_b(&mut p, InboundId(inbound), envelopes, now).unwrap();
        p.a.handle(
            Input::DeliverResponse {
                req,
                result: Ok(response),
            },
            now,
        );
    }
    // The late answer was a measurement too: the first batch after it has two (the
    // late-answered message goes again, since its receipt came after it was queued).
    assert_eq!(sizes, [2, 4, 8, 6], "{sizes:?}");
    assert_eq!(p.b.sizes().inbox_index, 20, "every message, once");
}

/// A live attempt lost with its connection while the peer stays connected (the peer
/// closed its TCP connection for QUIC under the request) goes again at once on what
/// is left, and the caller hears `delivered` — not `queued` for a peer that is right
/// there. The resends are bounded: a peer that keeps losing them is left to the
/// mailbox path.
#[test]
fn a_request_lost_with_its_connection_goes_again_while_the_peer_stays_connected() {
    use interlink_delivery::SendFailure;
    let send_one = |p: &mut pair::Pair| {
        route_b(p, NOW);
        send(p, 1, Some(PeerRef(2)), NOW);
    };
    let request = |out: &[Output]| {
        out.iter().find_map(|o| match o {
            Output::SendRequest { req, envelopes, .. } => Some((*req, envelopes.clone())),
            _ => None,
        })
    };

    // The connection under request `req` closed; A's outputs.
    let lose = |p: &mut pair::Pair, req| {
        p.a.handle(
            Input::DeliverResponse {
                req,
                result: Err(SendFailure::ConnectionLost),
            },
            NOW + 1,
        );
        outputs(&mut p.a)
    };

    // Lost twice, answered the third time.
    let mut p = pair();
    send_one(&mut p);
    let (mut req, mut envelopes) = request(&outputs(&mut p.a)).expect("sent live");
    for lost in 0..2 {
        let out = lose(&mut p, req);
        assert!(
            !out.iter().any(|o| matches!(
                o,
                Output::Reply { .. } | Output::PersistOutbox { .. } | Output::DhtPut { .. }
            )),
            "lost {lost}: neither answered nor held: {out:?}"
        );
        (req, envelopes) = request(&out).unwrap_or_else(|| panic!("lost {lost}: sent again"));
    }
    let response = answer_at_b(&mut p, InboundId(1), envelopes, NOW + 2).expect("answered");
    p.a.handle(
        Input::DeliverResponse {
            req,
            result: Ok(response),
        },
        NOW + 2,
    );
    let reply = outputs(&mut p.a).into_iter().find_map(|o| match o {
        Output::Reply { outcome, .. } => Some(outcome),
        _ => None,
    });
    assert_eq!(
        reply,
        Some(Ok(Outcome::Delivered {
            to: p.addr_b.clone()
        }))
    );

    // Lost every time: after the bound it is written and held, not sent again.
    let mut p = pair();
    send_one(&mut p);
    let (mut req, _) = request(&outputs(&mut p.a)).expect("sent live");
    for _ in 0..2 {
        (req, _) = request(&lose(&mut p, req)).expect("sent again");
    }
    let out = lose(&mut p, req);
    assert!(request(&out).is_none(), "bounded: {out:?}");
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::PersistOutbox { .. })),
        "kept for the mailbox path: {out:?}"
    );
}

/// Hands `envelopes` to B as one live request; the token of the append it asks for.
fn deliver_to_b(
    p: &mut pair::Pair,
    envelopes: Vec<interlink_core::wire::Signed<interlink_core::wire::Envelope>>,
    now: u64,
) -> interlink_delivery::StoreToken {
    p.b.handle(
        Input::DeliverRequest {
            from: PeerRef(1),
            req: InboundId(7),
            envelopes,
        },
        now,
    );
    outputs(&mut p.b)
        .into_iter()
        .find_map(|o| match o {
            Output::AppendInbox { token, .. } => Some(token),
            _ => None,
        })
        .unwrap()
}

/// B's answer to the request of [`deliver_to_b`], if it gave one.
fn response_of_b(p: &mut pair::Pair) -> Option<interlink_delivery::Response> {
    outputs(&mut p.b).into_iter().find_map(|o| match o {
        Output::Respond { req, response } => {
            assert_eq!(req, InboundId(7));
            Some(response)
        }
        _ => None,
    })
}

/// The receipt is signed while the disk writes (`Input::Spare`), and leaves only once
/// the append is durable: what the disk's answer waits for is the wire, not a signature.
#[test]
fn a_receipt_signed_while_the_disk_writes_leaves_once_the_append_is_durable() {
    let mut p = pair();
    let envelopes = vec![envelope(&mut p, 1, NOW), envelope(&mut p, 2, NOW)];
    let ids: Vec<_> = envelopes.iter().map(|e| e.body().msg_id).collect();
    let token = deliver_to_b(&mut p, envelopes, NOW);
    p.b.handle(Input::Spare, NOW + 1);
    assert!(
        response_of_b(&mut p).is_none(),
        "answered before the disk did"
    );
    p.b.handle(
        Input::InboxStored {
            token,
            result: Ok(()),
            refused: Vec::new(),
        },
        NOW + 5,
    );
    let response = response_of_b(&mut p).unwrap();
    assert_eq!(response.results, vec![None, None]);
    let receipt = response.receipt.unwrap();
    assert_eq!(receipt.body().msg_ids, ids);
    assert_eq!(receipt.body().ts, NOW + 1, "signed while the disk wrote");
    let bytes = receipt.to_bytes();
    let back = interlink_core::wire::Signed::<interlink_core::wire::Receipt>::decode(&bytes);
    assert!(back.is_ok(), "{back:?}");
}

/// A receipt signed ahead for an append that fails never leaves: the request is
/// refused as not stored, and its sender tries again.
#[test]
fn a_receipt_signed_ahead_of_a_failed_append_is_dropped() {
    let mut p = pair();
    let envelopes = vec![envelope(&mut p, 1, NOW), envelope(&mut p, 2, NOW)];
    let token = deliver_to_b(&mut p, envelopes, NOW);
    p.b.handle(Input::Spare, NOW + 1);
    p.b.handle(
        Input::InboxStored {
            token,
            result: Err(interlink_delivery::StoreError::Other("disk full".into())),
            refused: Vec::new(),
        },
        NOW + 5,
    );
    let response = response_of_b(&mut p).unwrap();
    assert!(response.receipt.is_none());
    assert_eq!(
        response.results,
        vec![
            Some(interlink_delivery::Refusal::StoreFailed),
            Some(interlink_delivery::Refusal::StoreFailed)
        ]
    );
    assert_eq!(p.b.sizes().inbox_index, 0);
}

/// A receipt signed ahead that would list a message the store then refused is signed
/// again with what was kept.
#[test]
fn a_receipt_signed_ahead_is_signed_again_when_the_store_refuses_a_message() {
    use interlink_delivery::Refusal;
    let mut p = pair();
    let bad = envelope(&mut p, 1, NOW);
    let good = envelope(&mut p, 2, NOW);
    let (bad_key, good_id) = ((bad.body().sender, bad.body().msg_id), good.body().msg_id);
    let token = deliver_to_b(&mut p, vec![bad, good], NOW);
    p.b.handle(Input::Spare, NOW + 1);
    p.b.handle(
        Input::InboxStored {
            token,
            result: Ok(()),
            refused: vec![(bad_key, Refusal::Unopenable)],
        },
        NOW + 5,
    );
    let response = response_of_b(&mut p).unwrap();
    assert_eq!(response.results, vec![Some(Refusal::Unopenable), None]);
    let receipt = response.receipt.unwrap();
    assert_eq!(receipt.body().msg_ids, vec![good_id]);
    assert_eq!(receipt.body().ts, NOW + 5);
}
