//! The engine's cost per message on the live path, sender and recipient together:
//! `cargo bench -p interlink-delivery --bench engine`.

use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use interlink_delivery::{CallId, Input, PeerRef};

#[path = "../tests/pair/mod.rs"]
mod pair;

use pair::{NOW, envelope, pair, settle};

fn handle_per_message(c: &mut Criterion) {
    let mut p = pair();
    p.a.handle(
        Input::Route {
            session: p.addr_b.clone(),
            peer: Some(PeerRef(2)),
        },
        NOW,
    );
    let mut n = 0u64;
    c.bench_function(
        "one message sender+recipient, one per request (receipt and ack signed)",
        |b| {
            b.iter_custom(|iters| {
                // Signed beforehand: the engine's cost, not the sender's signature.
                let envelopes: Vec<_> = (0..iters)
                    .map(|_| {
                        n += 1;
                        (n, envelope(&mut p, n, NOW))
                    })
                    .collect();
                let started = Instant::now();
                for (n, envelope) in envelopes {
                    p.a.handle(
                        Input::Send {
                            caller: CallId(n),
                            envelope,
                            route: Some(PeerRef(2)),
                        },
                        NOW,
                    );
                    settle(&mut p, NOW);
                }
                started.elapsed()
            });
        },
    );
}

criterion_group!(benches, handle_per_message);
criterion_main!(benches);
