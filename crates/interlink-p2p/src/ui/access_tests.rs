use axum::http::HeaderMap;

use super::*;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

#[test]
fn only_loopback_names_at_the_servers_own_port_are_hosts() {
    let a = Access::new(8765).unwrap();
    for ok in ["127.0.0.1:8765", "localhost:8765", "[::1]:8765"] {
        assert!(a.host_ok(&headers(&[("host", ok)])), "{ok}");
    }
    for bad in [
        "127.0.0.1:8766",
        "127.0.0.1",
        "rebind.example:8765",
        "127.0.0.1.rebind.example:8765",
        "localhost:87650",
    ] {
        assert!(!a.host_ok(&headers(&[("host", bad)])), "{bad}");
    }
    assert!(!a.host_ok(&headers(&[])));
}

#[test]
fn the_secret_is_taken_from_the_cookie_the_bearer_or_the_first_address_only() {
    let a = Access::new(1).unwrap();
    let s = a.secret().to_owned();
    assert_eq!(s.len(), 64);
    assert_ne!(s, Access::new(1).unwrap().secret(), "fresh per start");
    assert!(a.authenticated(&headers(&[(
        "cookie",
        &format!("theme=dark; {COOKIE}={s}")
    )])));
    assert!(a.authenticated(&headers(&[("authorization", &format!("Bearer {s}"))])));
    assert!(!a.authenticated(&headers(&[("cookie", &format!("{COOKIE}={}", &s[1..]))])));
    assert!(!a.authenticated(&headers(&[("cookie", &format!("x{COOKIE}={s}"))])));
    assert!(a.token_in(Some(&format!("a=1&token={s}"))));
    assert!(!a.token_in(Some("token=")));
    assert!(!a.token_in(None));
}

#[test]
fn a_change_needs_the_pages_origin_json_and_token() {
    let a = Access::new(9).unwrap();
    let csrf = a.csrf().to_owned();
    let ok = [
        ("origin", "http://127.0.0.1:9"),
        ("content-type", "application/json"),
        (CSRF_HEADER, csrf.as_str()),
    ];
    assert_eq!(a.change_refused(&headers(&ok)), None);
    let mut same_site = ok.to_vec();
    same_site.push(("sec-fetch-site", "same-origin"));
    assert_eq!(a.change_refused(&headers(&same_site)), None);
    for (what, broken) in [
        ("origin", vec![ok[1], ok[2]]),
        (
            "other origin",
            vec![("origin", "http://127.0.0.1:10"), ok[1], ok[2]],
        ),
        ("form", vec![ok[0], ("content-type", "text/plain"), ok[2]]),
        ("token", vec![ok[0], ok[1]]),
        ("wrong token", vec![ok[0], ok[1], (CSRF_HEADER, "00")]),
        (
            "fetch site",
            vec![ok[0], ok[1], ok[2], ("sec-fetch-site", "same-site")],
        ),
    ] {
        assert!(a.change_refused(&headers(&broken)).is_some(), "{what}");
    }
}

#[test]
fn comparison_is_exact() {
    assert!(same("abc", "abc"));
    assert!(!same("abc", "abd"));
    assert!(!same("abc", "ab"));
    assert!(same("", ""));
}
