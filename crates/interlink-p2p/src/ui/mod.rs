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
    overlay: Option<Overlay>,
}

/// The page's view of the overlay: an observer node (it never announces, as `peers`
/// does) reading the sessions' details as this user.
#[derive(Clone)]
struct Overlay {
    handle: interlink_net::Handle,
    reader: Arc<std::sync::Mutex<interlink_core::wire::DetailsReader>>,
    network: String,
}

impl Overlay {
    /// The overlay as `interlink-p2p peers --json` shows it.
    async fn report(&self, home: &Home, now: u64) -> Option<crate::peers::report::Report> {
        let mut roster = self.handle.roster().await.ok()?;
        self.reader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .fill(&mut roster);
        let diagnostics = self.handle.diagnostics().await.ok()?;
        let petnames = interlink_store::policy::load(home).unwrap_or_default();
        let own = interlink_mcp::cli::peers::own_key(home);
        Some(crate::peers::report::build(
            &self.network,
            now,
            &roster,
            &diagnostics,
            &petnames,
            own.as_ref(),
        ))
    }

    /// A stamp of who is on the overlay and their presence.
    async fn stamp(&self) -> u64 {
        use std::hash::{DefaultHasher, Hash as _, Hasher as _};
        let mut h = DefaultHasher::new();
        for i in self.handle.roster().await.unwrap_or_default() {
            i.key.to_hex().hash(&mut h);
            for s in &i.sessions {
                s.addr.session.as_str().hash(&mut h);
                format!("{:?}", s.presence).hash(&mut h);
            }
        }
        h.finish()
    }
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
        let observer = start_observer(&home, &config);
        let overlay = observer.as_ref().map(|(node, reader)| Overlay {
            handle: node.handle(),
            reader: reader.clone(),
            network: config.network.as_str().to_owned(),
        });
        let (tx, changes) = tokio::sync::watch::channel(api::home_stamp(&home));
        tokio::spawn(watch_home(home.clone(), overlay.clone(), tx));
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
            overlay,
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
        if let Some((node, _)) = observer {
            node.shutdown().await;
        }
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

/// The observer node, if it can start (without one the page shows the home's own view
/// only, and says why in the log).
fn start_observer(
    home: &Home,
    config: &interlink_net::Config,
) -> Option<(
    interlink_net::Node,
    Arc<std::sync::Mutex<interlink_core::wire::DetailsReader>>,
)> {
    let identity = interlink_store::keyfile::load(&home.identity()).ok()?;
    let reader = Arc::new(std::sync::Mutex::new(
        interlink_core::wire::DetailsReader::new(&identity),
    ));
    let key = libp2p::identity::Keypair::generate_ed25519();
    let started = interlink_net::build_swarm(key, config).and_then(|swarm| {
        interlink_net::Node::spawn(swarm, config.clone(), interlink_net::Role::Observer)
    });
    match started {
        Ok(node) => Some((node, reader)),
        Err(e) => {
            tracing::warn!("the page sees no overlay (its observer did not start): {e:#}");
            None
        }
    }
}

/// Tells the pages when the home or the overlay changed.
async fn watch_home(home: Home, overlay: Option<Overlay>, tx: tokio::sync::watch::Sender<u64>) {
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let h = home.clone();
        let Ok(files) = tokio::task::spawn_blocking(move || api::home_stamp(&h)).await else {
            return;
        };
        let seen = match &overlay {
            Some(o) => o.stamp().await,
            None => 0,
        };
        let stamp = files ^ seen.rotate_left(17);
        tx.send_if_modified(|old| std::mem::replace(old, stamp) != stamp);
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
