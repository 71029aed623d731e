use clap::CommandFactory as _;

use super::*;

/// Every command and subcommand a person can run shows an example in its --help.
#[test]
fn every_command_help_has_an_example() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for sub in cmd.get_subcommands() {
            let path = format!("{path} {}", sub.get_name());
            let help = sub
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            if !help.contains("Example") {
                missing.push(path.clone());
            }
            walk(sub, &path, missing);
        }
    }
    let mut missing = Vec::new();
    walk(&Cli::command(), "interlink-p2p", &mut missing);
    assert!(missing.is_empty(), "no example in --help: {missing:?}");
}
