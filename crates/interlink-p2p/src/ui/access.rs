//! Who gets in: the user who started `ui`, from this machine's browser, and no web
//! page the browser happens to show.
//!
//! - **The secret**: 32 random bytes per start, in the address `ui` prints and opens
//!   (`/?token=…`, the way Jupyter does it). The first request with it gets an
//!   `HttpOnly`, `SameSite=Strict` cookie and is sent on to `/`, so the secret leaves
//!   the address bar; every other request needs the cookie (or `Authorization: Bearer`,
//!   for scripts). Another local user, or a page that guesses the port, has neither.
//! - **The Host header** must name the loopback address and port the server listens
//!   on: a DNS-rebinding page (`evil.example` resolved to 127.0.0.1) sends its own name
//!   and is refused before anything else is looked at.
//! - **State-changing requests** (every POST) must come from the page itself: an
//!   `Origin` of this server, a JSON body (no form can send one without CORS, which
//!   the server never grants), the per-start CSRF token the page carries, and, where
//!   the browser sends it, `Sec-Fetch-Site: same-origin`.
//!
//! Every answer forbids framing, sniffing, caching and referrers.

use axum::{
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};

/// The cookie that carries the secret.
pub const COOKIE: &str = "interlink_ui";
/// The header the page sends its CSRF token in.
pub const CSRF_HEADER: &str = "x-interlink-csrf";

/// One start's secrets and where it listens.
#[derive(Clone, Debug)]
pub struct Access {
    secret: String,
    csrf: String,
    port: u16,
}

impl Access {
    /// Fresh secrets from the operating system's generator, for a server on `port`.
    pub fn new(port: u16) -> anyhow::Result<Self> {
        Ok(Self {
            secret: random_hex()?,
            csrf: random_hex()?,
            port,
        })
    }

    /// The address to open: it carries the secret.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/?token={}", self.port, self.secret)
    }

    /// The CSRF token the page sends back with every change.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// The secret itself (tests, and `Authorization: Bearer`).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    fn host_ok(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let port = self.port.to_string();
        ["127.0.0.1", "localhost", "[::1]"]
            .iter()
            .any(|name| host.strip_prefix(name).and_then(|r| r.strip_prefix(':')) == Some(&port))
    }

    fn origin_ok(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let port = self.port;
        [
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ]
        .iter()
        .any(|o| o == origin)
    }

    fn authenticated(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .flat_map(|h| h.split(';'))
            .filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
            .any(|v| same(v, &self.secret));
        cookie || bearer.is_some_and(|b| same(b, &self.secret))
    }

    fn token_in(&self, query: Option<&str>) -> bool {
        query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter_map(|kv| kv.strip_prefix("token="))
            .any(|t| same(t, &self.secret))
    }

    /// Why a state-changing request is refused, if it is.
    fn change_refused(&self, headers: &HeaderMap) -> Option<&'static str> {
        if !self.origin_ok(headers) {
            return Some("a change must come from this page (Origin)");
        }
        let site = headers.get("sec-fetch-site").and_then(|h| h.to_str().ok());
        if site.is_some_and(|s| s != "same-origin") {
            return Some("a change must come from this page (Sec-Fetch-Site)");
        }
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|t| t.starts_with("application/json"));
        if !json {
            return Some("a change is sent as JSON");
        }
        let csrf = headers.get(CSRF_HEADER).and_then(|h| h.to_str().ok());
        if !csrf.is_some_and(|t| same(t, &self.csrf)) {
            return Some("a change carries this page's CSRF token");
        }
        None
    }
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn random_hex() -> anyhow::Result<String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| anyhow::anyhow!("the system's random generator: {e}"))?;
    Ok(interlink_core::identity::hex_encode(&b))
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, format!("interlink ui: {why}\n")).into_response()
}

/// The middleware every request passes: Host, then the secret, then (for changes) the
/// page's own origin; and the headers every answer carries.
pub(super) async fn check(State(access): State<Access>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let mut response = if !access.host_ok(headers) {
        refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this server answers only to 127.0.0.1 or localhost at its own port",
        )
    } else if request.method() == Method::GET
        && request.uri().path() == "/"
        && access.token_in(request.uri().query())
    {
        // The secret moves from the address to a cookie; the address bar keeps none.
        let mut r = Redirect::to("/").into_response();
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            access.secret
        );
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        r
    } else if !access.authenticated(headers) {
        refuse(
            StatusCode::UNAUTHORIZED,
            "open the address `interlink-p2p ui` printed (it carries this start's secret)",
        )
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        match access.change_refused(headers) {
            Some(why) => refuse(StatusCode::FORBIDDEN, why),
            None => next.run(request).await,
        }
    } else {
        next.run(request).await
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; \
             base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
