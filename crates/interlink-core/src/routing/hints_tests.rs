use super::*;

#[test]
fn hints_are_bounded() {
    let mut routes = Routes::default();
    let s = |t: &str| SessionId::new(t).unwrap();
    let key = |n: u16| {
        let mut b = [0u8; 32];
        b[..2].copy_from_slice(&n.to_be_bytes());
        IdentityKey::from_bytes(b)
    };
    routes.inbound(key(0), s("a"));
    routes.outbound(key(0), s("b"));
    assert_eq!(
        routes.get(&key(0)),
        Hints {
            sticky: Some(s("a")),
            remembered: Some(s("b"))
        }
    );
    for n in 1..=MAX_ROUTE_HINTS as u16 {
        routes.inbound(key(n), s("x"));
    }
    assert_eq!(routes.get(&key(0)), Hints::default());
    assert_eq!(routes.hints.len(), MAX_ROUTE_HINTS);
    let recent = routes.sticky(2);
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0].0, key(MAX_ROUTE_HINTS as u16));
    routes.closed(&recent[0].0, &s("x"));
    assert_eq!(routes.get(&recent[0].0).sticky, None);
}
