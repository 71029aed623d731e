use super::*;

#[test]
fn the_gate_needs_a_human_unless_opted_out() {
    assert_eq!(Gate::new(false, true), Gate::AskHuman);
    assert_eq!(Gate::new(false, false), Gate::OperatorOnly);
    assert_eq!(Gate::new(true, false), Gate::Agent);
    assert_eq!(Gate::new(true, true), Gate::Agent);
}

#[test]
fn shell_words() {
    assert_eq!(shell_word("bob"), "bob");
    assert_eq!(shell_word("bob smith"), "'bob smith'");
    assert_eq!(shell_word("o'brien; rm -rf ~"), r"'o'\''brien; rm -rf ~'");
    assert_eq!(shell_word(""), "''");
}
