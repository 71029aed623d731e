use super::*;

#[test]
fn renders_every_family_and_counts() {
    let m = Metrics::new("12D3KooWtest", "default");
    m.set_connected_peers(3);
    m.set_store(Stats {
        mailboxes: 2,
        envelopes: 5,
        bytes: 900,
    });
    m.record_put(&PutOutcome {
        new_acks: 2,
        ..PutOutcome::default()
    });
    m.record_reject(RejectReason::InvalidEntry);
    m.record_reject(RejectReason::InvalidEntry);
    m.record_sweep();
    let text = m.clone().render();
    for line in [
        "interlink_relay_connected_peers 3",
        "interlink_relay_reservations 0",
        "interlink_relay_mailboxes 2",
        "interlink_relay_messages_held 5",
        "interlink_relay_store_bytes 900",
        "interlink_relay_puts_total 1",
        "interlink_relay_acks_total 2",
        "interlink_relay_rejects_total{reason=\"invalid_entry\"} 2",
        "interlink_relay_rejects_total{reason=\"store_full_bytes\"} 0",
        "interlink_relay_sweeps_total 1",
        "# TYPE interlink_relay_rejects counter",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(text.contains(&format!(
        "interlink_relay_build_info{{version=\"{VERSION}\"}} 1"
    )));
    assert!(text.ends_with("# EOF\n"));
    assert_eq!(m.rejects(RejectReason::InvalidEntry), 2);
}

#[test]
fn the_documented_metrics_are_what_a_fresh_relay_serves() {
    // docs/RELAY.md shows the whole /metrics page of a fresh relay (after its first
    // sweep); a family or reason added without the doc fails here.
    let doc = include_str!("../../docs/RELAY.md");
    let start = doc
        .find("the circuit relay server):\n\n```text\n")
        .expect("the metrics block in docs/RELAY.md");
    let block = &doc[start..];
    let block = &block[block.find("```text\n").unwrap_or(0) + 8..];
    let block = &block[..block.find("```").unwrap_or(block.len())];
    let m = Metrics::new("12D3KooWtest", "default");
    m.record_sweep();
    let served = m.render_own().replace(VERSION, "0.1.0");
    // The reasons of one family come in no fixed order; lines compare as sets.
    let lines = |t: &str| {
        let mut l: Vec<String> = t.lines().map(str::to_owned).collect();
        l.sort();
        l
    };
    assert_eq!(
        lines(block),
        lines(&served),
        "docs/RELAY.md's metrics block should read:\n{served}"
    );
}

#[test]
fn probe_lists_bounded_addrs() {
    let m = Metrics::new("12D3KooWtest", "lab");
    m.set_addrs((0..100).map(|i| format!("/ip4/10.0.0.{i}/tcp/4001")));
    let p = m.probe();
    assert_eq!(p.addrs.len(), MAX_PROBE_ADDRS);
    assert_eq!(
        (p.server.as_str(), p.network.as_str()),
        (SERVER_NAME, "lab")
    );
}
