use super::*;

#[test]
fn an_installed_plugin_is_noticed_in_either_host() {
    assert!(has_plugin(
        r#"{"enabledPlugins": {"interlink-p2p@interlink-p2p": true}}"#
    ));
    assert!(has_plugin(
        "[plugins.\"interlink-p2p@interlink-p2p\"]\nenabled = true\n"
    ));
    assert!(!has_plugin(r#"{"enabledPlugins": {}}"#));
    assert!(!has_plugin(
        "[mcp_servers.interlink]\ncommand = \"interlink-p2p\"\n"
    ));
}

#[test]
fn claude_config_dir_moves_both_claude_files() {
    let env = |k: &str| match k {
        "HOME" => Some("/home/u".to_owned()),
        "CLAUDE_CONFIG_DIR" => Some("/cfg/claude".to_owned()),
        _ => None,
    };
    let l = Locations::from_env(env).unwrap();
    assert_eq!(l.claude_json(), Path::new("/cfg/claude/.claude.json"));
    assert_eq!(l.claude_settings(), Path::new("/cfg/claude/settings.json"));
    let l = Locations::from_env(|k| (k == "HOME").then(|| "/home/u".to_owned())).unwrap();
    assert_eq!(l.claude_json(), Path::new("/home/u/.claude.json"));
    assert_eq!(
        l.claude_settings(),
        Path::new("/home/u/.claude/settings.json")
    );
}
