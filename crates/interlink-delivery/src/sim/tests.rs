#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use super::*;

#[test]
fn smoke() {
    let t = Instant::now();
    let mut events = 0;
    let p = Params {
        copy_ids: false,
        ..Params::default()
    };
    for seed in 0..200 {
        match run_case(seed, &p, &sim_config()) {
            Ok(r) => events += r.events,
            Err(e) => panic!("{}", &e[..e.len().min(3000)]),
        }
    }
    eprintln!("200 cases, {events} events, {:?}", t.elapsed());
}
