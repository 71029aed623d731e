//! `interlink-p2p ui`: a page on 127.0.0.1 where the human sees the home — sessions and
//! what they are connected to, conversations with each message's delivery state,
//! search, pair requests, peers and claims — live, and acts on it. The page's files
//! are built into the binary (no Node.js, no build step); who may use it is
//! [`access`]; what it reads and does is [`api`].

mod access;
mod api;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use axum::{
    Router,
    extract::{DefaultBodyLimit, State},
    http::header,
    response::{Html, IntoResponse},
    routing::{get, post},
};
use interlink_store::paths::Home;

pub use access::{Access, COOKIE, CSRF_HEADER};

/// Most pages with a live event stream at once.
pub const MAX_EVENT_STREAMS: usize = 16;
/// Most invites made on the page waiting for their guest at once.
pub const MAX_WAITING_INVITES: usize = 4;
/// Largest request body (an action's JSON).
const MAX_BODY: usize = 64 * 1024;
/// How often the home's files are looked at for changes (a stat of each).
const WATCH_EVERY: Duration = Duration::from_millis(200);

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/style.css");

/// Open the human's page: who talks to whom, every thread and its delivery states,
/// search, pair requests and peers, claims (a local web page).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  interlink-p2p ui\n  interlink-p2p ui --no-open --port 8765")]
pub struct Args {
    /// The port on 127.0.0.1 [default: a free one]
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Print the address (it carries this start's secret) instead of opening a browser.
    #[arg(long)]
    no_open: bool,
    #[command(flatten)]
    net: crate::config::NetArgs,
}

/// What every handler shares.
#[derive(Clone)]
#[allow(missing_debug_implementations)] // the network config and channels have none
pub struct App {
    home: Home,
    access: Access,
    config: interlink_net::Config,
    clock: interlink_net::Clock,
    name: String,
    changes: tokio::sync::watch::Receiver<u64>,
    streams: Arc<tokio::sync::Semaphore>,
    sending: Arc<tokio::sync::Mutex<()>>,
    invites: Arc<tokio::sync::Semaphore>,
    recent: Arc<api::Recent>,
}

impl axum::extract::FromRef<App> for Access {
    fn from_ref(app: &App) -> Access {
        app.access.clone()
    }
}

/// `interlink-p2p ui`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let config = args.net.config(&ctx.settings)?;
    let clock = crate::config::clock(ctx.env())?;
    let home = ctx.home()?;
    let name = ctx.own_name();
    crate::ctx::runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], args.port)))
            .await
            .with_context(|| format!("listening on 127.0.0.1:{}", args.port))?;
        let port = listener.local_addr()?.port();
        let access = Access::new(port)?;
        let url = access.url();
        let (tx, changes) = tokio::sync::watch::channel(api::home_stamp(&home));
        tokio::spawn(watch_home(home.clone(), tx));
        let app = App {
            home,
            access,
            config,
            clock,
            name,
            changes,
            streams: Arc::new(tokio::sync::Semaphore::new(MAX_EVENT_STREAMS)),
            sending: Arc::new(tokio::sync::Mutex::new(())),
            invites: Arc::new(tokio::sync::Semaphore::new(MAX_WAITING_INVITES)),
            recent: Arc::default(),
        };
        println!("interlink ui: {url}");
        if !args.no_open && !open_browser(&url) {
            eprintln!("interlink ui: no browser could be opened here; open the address above");
        }
        axum::serve(listener, router(app))
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .context("serving the page")?;
        Ok(std::process::ExitCode::SUCCESS)
    })
}

/// The routes, behind [`access::check`].
pub fn router(app: App) -> Router {
    Router::new()
        .route("/", get(index))
        .route(
            "/app.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript")], SCRIPT) }),
        )
        .route(
            "/style.css",
            get(|| async { ([(header::CONTENT_TYPE, "text/css")], STYLE) }),
        )
        .route("/api/overview", get(api::overview))
        .route("/api/thread", get(api::thread))
        .route("/api/search", get(api::search))
        .route("/api/events", get(api::events))
        .route("/api/pair/accept", post(api::pair_accept))
        .route("/api/pair/reject", post(api::pair_reject))
        .route("/api/peer", post(api::peer))
        .route("/api/send", post(api::send))
        .route("/api/invite", post(api::invite))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            app.access.clone(),
            access::check,
        ))
        .with_state(app)
}

/// The page, with this start's CSRF token in it.
async fn index(State(app): State<App>) -> impl IntoResponse {
    Html(INDEX.replace("{{csrf}}", app.access.csrf()))
}

/// Tells the pages when the home changed.
async fn watch_home(home: Home, tx: tokio::sync::watch::Sender<u64>) {
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let h = home.clone();
        let Ok(stamp) = tokio::task::spawn_blocking(move || api::home_stamp(&h)).await else {
            return;
        };
        tx.send_if_modified(|old| std::mem::replace(old, stamp) != stamp);
        if tx.is_closed() && tx.receiver_count() == 0 {
            return;
        }
    }
}

/// Opens `url` in the user's browser; whether a browser could be started.
fn open_browser(url: &str) -> bool {
    let mut cmd = if cfg!(target_os = "macos") {
        std::process::Command::new("open")
    } else if cfg!(windows) {
        let mut c = std::process::Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
            return false;
        }
        std::process::Command::new("xdg-open")
    };
    cmd.arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}
