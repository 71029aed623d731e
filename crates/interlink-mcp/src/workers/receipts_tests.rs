use interlink_core::{Identity, SessionId};

use super::*;

fn to(n: u8) -> SessionAddr {
    SessionAddr {
        key: Identity::from_seed(&[n; 32]).public(),
        session: SessionId::new("s").unwrap(),
    }
}

fn receipt(n: u8, id: u64, kind: EnvelopeKind) -> ReadReceipt {
    let mut b = [0; 16];
    b[..8].copy_from_slice(&id.to_le_bytes());
    ReadReceipt {
        to: to(n),
        msg_id: MsgId::from_bytes(b),
        kind,
    }
}

#[test]
fn a_burst_becomes_one_envelope_per_session_and_kind_of_at_most_64_ids() {
    use EnvelopeKind::{HostQueued, Read};
    let mut all = Vec::new();
    for id in 0..100 {
        all.push(receipt(1, id, HostQueued));
    }
    all.push(receipt(2, 0, HostQueued));
    all.push(receipt(1, 0, Read));
    all.push(receipt(1, 5, HostQueued)); // twice: named once
    let out = envelopes(all.into_iter());
    let shape: Vec<(u8, EnvelopeKind, usize)> = out
        .iter()
        .map(|m| {
            let n = if m.to == to(1) { 1 } else { 2 };
            (n, m.kind, 1 + m.also_about.len())
        })
        .collect();
    assert_eq!(
        shape,
        [
            (1, HostQueued, 64),
            (1, HostQueued, 36),
            (2, HostQueued, 1),
            (1, Read, 1)
        ]
    );
    // Each id once, in order.
    let ids: Vec<MsgId> = out
        .iter()
        .filter(|m| m.to == to(1) && m.kind == HostQueued)
        .flat_map(|m| {
            m.in_reply_to
                .into_iter()
                .chain(m.also_about.iter().copied())
        })
        .collect();
    assert_eq!(
        ids,
        (0..100)
            .map(|i| receipt(1, i, HostQueued).msg_id)
            .collect::<Vec<_>>()
    );
}
