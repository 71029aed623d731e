//! A real headless browser for the page of `interlink-p2p ui`: Debian's Chromium driven
//! through its ChromeDriver by fantoccini (a maintained WebDriver client). `.ci/run`
//! installs both (`chromium`, `chromium-driver`); without them a test prints SKIPPED,
//! and under CI it fails.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use fantoccini::{Client, ClientBuilder, Locator};

/// Where Debian puts them.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The browser's executable and its driver, or `None` (skipped) outside CI.
pub fn available() -> Option<(PathBuf, PathBuf)> {
    let chromium = std::env::var_os("INTERLINK_TEST_CHROMIUM")
        .map_or_else(|| PathBuf::from(CHROMIUM), PathBuf::from);
    let driver = std::env::var_os("INTERLINK_TEST_CHROMEDRIVER")
        .map_or_else(|| PathBuf::from(CHROMEDRIVER), PathBuf::from);
    if chromium.exists() && driver.exists() {
        return Some((chromium, driver));
    }
    let why = format!(
        "{} or {} is missing (apt-get install chromium chromium-driver; .ci/run does)",
        chromium.display(),
        driver.display()
    );
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") {
        panic!("CI must run this test in a real browser: {why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// A running ChromeDriver and one headless Chromium session through it; both end on
/// drop.
#[allow(missing_debug_implementations)] // fantoccini's client has none
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts the driver on a free loopback port and a fresh browser profile.
    pub async fn start(chromium: &Path, driver: &Path) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        // In a process group of its own, so the browser it starts goes with it even
        // when a failing test never closes the session.
        let driver = std::os::unix::process::CommandExt::process_group(
            Command::new(driver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
            0,
        )
        .spawn()
        .context("starting chromedriver")?;
        let profile = tempfile::tempdir()?;
        // No sandbox as root, and nothing that leaves the machine: without the
        // resolver rule Chromium still looks up its update, autofill, account and
        // start-page hosts (seen with tcpdump on the real interface), whatever the
        // other flags say; with it every name but the page's loopback fails unasked.
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--no-default-browser-check".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-default-apps".to_owned(),
            "--disable-domain-reliability".to_owned(),
            "--disable-extensions".to_owned(),
            "--disable-sync".to_owned(),
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"
                .to_owned(),
            "--window-size=1280,1400".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({"binary": chromium, "args": args}),
        );
        let url = format!("http://127.0.0.1:{port}");
        let until = Instant::now() + Duration::from_secs(20);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) if Instant::now() > until => {
                    anyhow::bail!("no browser session through chromedriver: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Ok(Self {
            client,
            driver,
            _profile: profile,
        })
    }

    /// Waits until an element matching `css` exists (and, if given, its text holds
    /// `text`); returns its text.
    pub async fn wait_for(
        &self,
        css: &str,
        text: Option<&str>,
        deadline: Instant,
    ) -> anyhow::Result<String> {
        loop {
            if let Ok(found) = self.client.find_all(Locator::Css(css)).await {
                for e in found {
                    let t = e.text().await.unwrap_or_default();
                    if text.is_none_or(|want| t.contains(want)) {
                        return Ok(t);
                    }
                }
            }
            if Instant::now() > deadline {
                let body = self
                    .client
                    .find(Locator::Css("body"))
                    .await?
                    .text()
                    .await
                    .unwrap_or_default();
                anyhow::bail!("no {css:?} with {text:?} on the page:\n{body}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Browser {
    /// Ends the browser session (the browser with it), then the driver.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
