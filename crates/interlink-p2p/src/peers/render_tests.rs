use super::*;

#[test]
fn ages_and_round_trips() {
    assert_eq!(age(4_400), "4s");
    assert_eq!(age(185_000), "3m");
    assert_eq!(age(2 * 3_600_000), "2h");
    assert_eq!(age(3 * 86_400_000), "3d");
    assert_eq!(rtt(420), "0.42 ms");
    assert_eq!(rtt(12_345), "12 ms");
}

#[test]
fn long_cells_are_shortened() {
    let long = "x".repeat(100);
    assert_eq!(shorten_tail(&long).chars().count(), MAX_CELL_CHARS);
    assert!(shorten_tail(&long).starts_with('…'));
    assert!(shorten_head(&long).ends_with('…'));
    assert_eq!(shorten_head("short"), "short");
}
