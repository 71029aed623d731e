use super::*;

#[test]
fn table_lists_measurements_and_skips() {
    let reports = vec![ScenarioReport {
        scenario: "demo",
        about: "a demo",
        wall_s: 1.0,
        rows: vec![
            Row::ok(
                "10 nodes",
                vec![Measurement::new("converge", 1234.6, "ms").at_most(1000.0)],
            ),
            Row::skipped("process", "no binary"),
        ],
    }];
    let t = table(&reports);
    assert!(t.contains("converge"), "{t}");
    assert!(t.contains("1235"), "{t}");
    assert!(t.contains("<= 1000 MISSED"), "{t}");
    assert!(t.contains("skipped: no binary"), "{t}");
}

#[test]
fn json_has_status_and_reason() {
    let row = Row::failed("x", "timeout", vec![Measurement::count("sessions", 3)]);
    let v = serde_json::to_value(&row).unwrap();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["reason"], "timeout");
    assert_eq!(v["measurements"][0]["value"], 3.0);
}
