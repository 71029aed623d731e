use super::*;

#[test]
fn every_outcome_has_its_own_exit_code() {
    let peer = libp2p::PeerId::random();
    let cases = [
        (
            Error::Unreachable("refused".into()),
            EXIT_UNREACHABLE,
            "unreachable: refused",
        ),
        (
            Error::Timeout(Duration::from_secs(3)),
            EXIT_UNREACHABLE,
            "within 3.0 s",
        ),
        (
            Error::NotInterlink("http".into()),
            EXIT_NOT_INTERLINK,
            "not an interlink-p2p node: http",
        ),
        (
            Error::OtherNetwork {
                theirs: "interlink-p2p/1/x".into(),
                ours: "interlink-p2p/1/default".into(),
            },
            EXIT_OTHER_NETWORK,
            "interlink-p2p/1/x",
        ),
        (
            Error::NoSession {
                peer_id: peer,
                agent: "interlink-p2p/0.1.0".into(),
            },
            EXIT_NO_SESSION,
            "version 0.1.0 without a session",
        ),
        (Error::Setup("x".into()), EXIT_FAILED, "probe failed"),
    ];
    for (error, code, needle) in cases {
        let (line, got) = describe(&error);
        assert_eq!(got, code, "{line}");
        assert!(line.contains(needle), "{line:?} lacks {needle:?}");
    }
}
