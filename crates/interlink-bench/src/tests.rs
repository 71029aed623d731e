use super::*;

#[test]
fn scenario_names_are_unique() {
    for (i, a) in scenarios::ALL.iter().enumerate() {
        assert!(scenarios::ALL[i + 1..].iter().all(|b| b.name != a.name));
    }
}
