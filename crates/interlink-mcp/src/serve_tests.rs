use super::*;

fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn resolution_order() {
    let mut rng = session::os_rng();
    let all = [(env::SESSION, "pinned"), (env::CLAUDE_SESSION, "claude-1")];
    assert_eq!(
        resolve_session(Some("flag"), vars(&all), &mut rng).unwrap(),
        (SessionId::new("flag").unwrap(), SessionSource::Flag)
    );
    assert_eq!(
        resolve_session(None, vars(&all), &mut rng).unwrap().1,
        SessionSource::InterlinkEnv
    );
    let claude = [(env::SESSION, " "), (env::CLAUDE_SESSION, "claude-1")];
    assert_eq!(
        resolve_session(None, vars(&claude), &mut rng).unwrap(),
        (
            SessionId::new("claude-1").unwrap(),
            SessionSource::ClaudeEnv
        )
    );
    let (id, src) = resolve_session(None, vars(&[]), &mut rng).unwrap();
    assert_eq!(src, SessionSource::Random);
    assert_eq!(id.as_str().len(), 36);
    assert!(!src.is_pinned());
}

/// An agent session never takes the id the user's page writes from: what comes from
/// it is shown to agents as their user's words.
#[test]
fn an_agent_session_cannot_take_the_pages_id() {
    let mut rng = session::os_rng();
    let err = resolve_session(Some("user-page"), vars(&[]), &mut rng).unwrap_err();
    assert!(err.to_string().contains("never a session id"), "{err}");
    let pinned = [(env::SESSION, "user-x")];
    let err = resolve_session(None, vars(&pinned), &mut rng).unwrap_err();
    assert!(err.to_string().contains(env::SESSION), "{err}");
    assert!(resolve_session(Some("users-x"), vars(&[]), &mut rng).is_ok());
}

#[test]
fn an_invalid_variable_is_an_error_naming_it() {
    let bad = [(env::SESSION, "no/slash")];
    let err = resolve_session(None, vars(&bad), &mut session::os_rng()).unwrap_err();
    assert!(err.to_string().contains(env::SESSION), "{err}");
}

#[test]
fn when_sessions_start() {
    use SessionSource::*;
    assert_eq!(start_at(Flag, Some(HostKind::Codex)), StartAt::Now);
    assert_eq!(start_at(InterlinkEnv, None), StartAt::Now);
    assert_eq!(start_at(Random, Some(HostKind::Codex)), StartAt::Bind);
    assert_eq!(start_at(ClaudeEnv, Some(HostKind::Codex)), StartAt::Bind);
    assert_eq!(start_at(ClaudeEnv, Some(HostKind::Claude)), StartAt::Now);
    assert_eq!(start_at(Random, None), StartAt::Initialize);
    assert_eq!(start_at(Random, Some(HostKind::Other)), StartAt::Now);
}
