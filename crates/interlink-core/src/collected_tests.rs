use super::*;
use crate::{Identity, SessionId, limits::MAX_FUTURE_SKEW_MS, wire::Signed};

const NOW: u64 = 1_790_000_000_000;

fn addr(id: &Identity, session: &str) -> SessionAddr {
    SessionAddr {
        key: id.public(),
        session: SessionId::new(session).unwrap(),
    }
}

fn env(from: &SessionAddr, to: &SessionAddr, id: u8, kind: EnvelopeKind) -> Envelope {
    Envelope {
        v: VERSION,
        sender: from.key,
        sender_session: from.session.clone(),
        recipient: to.key,
        recipient_session: to.session.clone(),
        msg_id: MsgId::from_bytes([id; 16]),
        ts: NOW,
        kind,
        in_reply_to: kind.is_receipt().then(|| MsgId::from_bytes([0; 16])),
        also_about: Vec::new(),
        name: None,
        sealed: None,
        pass: None,
        reply_pass: None,
    }
}

#[test]
fn one_receipt_per_sending_session_and_batch_messages_only() {
    let (a, b, c) = (
        Identity::from_seed(&[1; 32]),
        Identity::from_seed(&[2; 32]),
        Identity::from_seed(&[3; 32]),
    );
    let me = addr(&b, "b-1");
    let (a1, a2, c1) = (addr(&a, "a-1"), addr(&a, "a-2"), addr(&c, "c-1"));
    let mut stored = vec![
        env(&c1, &me, 1, EnvelopeKind::Message),
        env(&a1, &me, 2, EnvelopeKind::Message),
        env(&a2, &me, 3, EnvelopeKind::Message),
        env(&a1, &me, 4, EnvelopeKind::Message),
        // Not receipted: other kinds, a repeat, someone else's mail, our own.
        env(&a1, &me, 5, EnvelopeKind::Read),
        env(&a1, &me, 6, EnvelopeKind::Goodbye),
        env(&a1, &me, 2, EnvelopeKind::Message),
        env(&a1, &addr(&b, "b-2"), 7, EnvelopeKind::Message),
        env(&addr(&b, "b-2"), &addr(&b, "b-1"), 8, EnvelopeKind::Message),
    ];
    // Our own session as sender (refused by the gate anyway) is never receipted.
    stored.push(env(&me, &me, 9, EnvelopeKind::Message));
    let planned = plan(&me, &stored, NOW);
    let got: Vec<(SessionAddr, Vec<u8>)> = planned
        .iter()
        .map(|p| {
            (
                p.to.clone(),
                p.receipt.msg_ids.iter().map(|m| m.as_bytes()[0]).collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (c1, vec![1]),
            (a1.clone(), vec![2, 4]),
            (a2, vec![3]),
            (addr(&b, "b-2"), vec![8]),
        ]
    );
    for p in &planned {
        let r = &p.receipt;
        assert_eq!((r.recipient, &r.recipient_session), (me.key, &me.session));
        assert_eq!(r.sender, p.to.key);
        assert_eq!((r.state, r.ts), (ReceiptState::Delivered, NOW));
        // Every planned receipt is signable as it stands.
        assert!(Signed::sign(r.clone(), &b).is_ok());
    }

    // More than a receipt holds: split, in order.
    let many: Vec<Envelope> = (0..=MAX_IDS_PER_RECEIPT as u8)
        .map(|i| env(&a1, &me, i, EnvelopeKind::Message))
        .collect();
    let planned = plan(&me, &many, NOW);
    assert_eq!(planned.len(), 2);
    assert_eq!(planned[0].receipt.msg_ids.len(), MAX_IDS_PER_RECEIPT);
    assert_eq!(
        planned[1].receipt.msg_ids,
        vec![MsgId::from_bytes([MAX_IDS_PER_RECEIPT as u8; 16])]
    );
    assert!(plan(&me, &[], NOW).is_empty());
}

#[test]
fn a_sender_takes_only_fresh_delivered_receipts_for_itself() {
    let (a, b) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    let me = addr(&b, "b-1");
    let stored = [env(&addr(&a, "a-1"), &me, 1, EnvelopeKind::Message)];
    let receipt = plan(&me, &stored, NOW).remove(0).receipt;
    assert_eq!(check(&receipt, &a.public(), NOW), Ok(me.clone()));
    assert_eq!(check(&receipt, &b.public(), NOW), Err(CheckError::NotForUs));
    let read = Receipt {
        state: ReceiptState::Read,
        ..receipt.clone()
    };
    assert_eq!(
        check(&read, &a.public(), NOW),
        Err(CheckError::NotDelivered)
    );
    let future = NOW - MAX_FUTURE_SKEW_MS - 1;
    assert!(matches!(
        check(&receipt, &a.public(), future),
        Err(CheckError::Time(TimeError::FutureDated { .. }))
    ));
    let late = NOW + RECEIPT_FRESHNESS_MS + 1;
    assert!(matches!(
        check(&receipt, &a.public(), late),
        Err(CheckError::Time(TimeError::Stale { .. }))
    ));
}
