//! Two engines wired by hand, as a shell would, shared by the engine's tests and its
//! benchmark.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use interlink_core::{
    Identity, SessionId,
    trust::PeerPolicy,
    wire::{Envelope, SessionAddr, Signed},
};
use interlink_delivery::{
    CallId, Config, Engine, InboundId, Input, OutboxEntry, Outcome, Output, PeerRef, Response,
};
use interlink_testkit::{ids::msg_id_le, signed};

pub(crate) const NOW: u64 = 1_790_000_000_000;

/// A learns from its roster that B's session is on node 2.
pub(crate) fn route_b(p: &mut Pair, now: u64) {
    p.a.handle(
        Input::Route {
            session: p.addr_b.clone(),
            peer: Some(PeerRef(2)),
        },
        now,
    );
}

/// A's caller `n` sends B message `n`, with `route` known (or not) to the caller.
pub(crate) fn send(p: &mut Pair, n: u64, route: Option<PeerRef>, now: u64) {
    let envelope = envelope(p, n, now);
    p.a.handle(
        Input::Send {
            caller: CallId(n),
            envelope,
            route,
        },
        now,
    );
}

/// `engine`'s outbox write of `entry` is done at once, as a shell's store thread
/// answers.
pub(crate) fn stored(engine: &mut Engine, entry: &OutboxEntry, now: u64) {
    engine.handle(
        Input::OutboxStored {
            key: entry.key(),
            result: Ok(()),
        },
        now,
    );
}

pub(crate) struct Pair {
    pub(crate) a: Engine,
    pub(crate) b: Engine,
    pub(crate) ida: Identity,
    pub(crate) addr_a: SessionAddr,
    pub(crate) addr_b: SessionAddr,
}

pub(crate) fn pair() -> Pair {
    let (ida, idb) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    let addr_a = SessionAddr {
        key: ida.public(),
        session: SessionId::new("a").unwrap(),
    };
    let addr_b = SessionAddr {
        key: idb.public(),
        session: SessionId::new("b").unwrap(),
    };
    let mut pa = PeerPolicy::new();
    pa.add("b", idb.public()).unwrap();
    let mut pb = PeerPolicy::new();
    pb.add("a", ida.public()).unwrap();
    let a = Engine::new(
        Config::default().with_policy(pa),
        Identity::from_seed(&[1; 32]),
        addr_a.clone(),
        NOW,
    );
    let b = Engine::new(Config::default().with_policy(pb), idb, addr_b.clone(), NOW);
    Pair {
        a,
        b,
        ida,
        addr_a,
        addr_b,
    }
}

pub(crate) fn envelope(p: &mut Pair, n: u64, now: u64) -> Signed<Envelope> {
    let ts = p.a.next_ts(now);
    signed::envelope(p.addr_a.key, &p.addr_a.session, &p.addr_b, msg_id_le(n), ts)
        .opaque_body()
        .sign(&p.ida)
}

/// B takes a live request from A, storing everything at once; returns its answer.
pub(crate) fn answer_at_b(
    p: &mut Pair,
    req: InboundId,
    envelopes: Vec<Signed<Envelope>>,
    now: u64,
) -> Option<Response> {
    p.b.handle(
        Input::DeliverRequest {
            from: PeerRef(1),
            req,
            envelopes,
        },
        now,
    );
    let mut response = None;
    while let Some(o) = p.b.poll_output() {
        match o {
            Output::AppendInbox { token, .. } => p.b.handle(
                Input::InboxStored {
                    token,
                    result: Ok(()),
                    refused: Vec::new(),
                },
                now,
            ),
            Output::Respond { response: r, .. } => response = Some(r),
            _ => {}
        }
    }
    response
}

/// Carries every output of both engines until quiet, storing everything at once;
/// returns the replies A's callers got.
pub(crate) fn settle(p: &mut Pair, now: u64) -> Vec<(CallId, Outcome)> {
    let mut replies = Vec::new();
    let mut inbound = 0;
    loop {
        let mut moved = false;
        while let Some(out) = p.a.poll_output() {
            moved = true;
            match out {
                Output::PersistOutbox { entry } => stored(&mut p.a, &entry, now),
                Output::SendRequest { req, envelopes, .. } => {
                    inbound += 1;
                    // B answers its own id; the pairing back to req is the shell's table.
                    if let Some(response) = answer_at_b(p, InboundId(inbound), envelopes, now) {
                        p.a.handle(
                            Input::DeliverResponse {
                                req,
                                result: Ok(response),
                            },
                            now,
                        );
                    }
                }
                Output::Reply { caller, outcome } => replies.push((caller, outcome.unwrap())),
                _ => {}
            }
        }
        while p.b.poll_output().is_some() {
            moved = true;
        }
        if !moved {
            return replies;
        }
    }
}
