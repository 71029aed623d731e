//! `interlink-relay`: parses flags, installs logging and signal handling, runs the
//! library. See docs/RELAY.md.
//!
//! Stdout carries only the relay's dialable multiaddrs, one per line, once it is up
//! (scripts read them); everything else is logged to stderr.

use std::{io::IsTerminal, process::ExitCode};

use clap::Parser;
use interlink_relay::{MAX_BLOCKING_THREADS, cli::Args, start};
use tokio_util::sync::CancellationToken;
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    interlink_net::memory::return_large_buffers();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Store calls run on blocking threads; they queue behind one write lock anyway,
        // so a named cap keeps a burst of puts from spawning hundreds of threads.
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build();
    match runtime {
        Ok(rt) => rt.block_on(relay_main()),
        Err(e) => {
            eprintln!("interlink-relay: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn relay_main() -> ExitCode {
    tracing_subscriber::fmt()
        // Without kad's "Failed to trigger bootstrap: No known peers", which it logs on
        // every start of a relay that has no peers yet (as the sessions' filter does).
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,libp2p_kad::behaviour=error".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, not for journald or a log file.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let mut config = match Args::parse().into_config() {
        Ok(c) => c,
        Err(e) => {
            error!("{e}");
            return ExitCode::from(2);
        }
    };
    // Test knob, as for the sessions: move this process's clock.
    if let Some(ms) = std::env::var(interlink_store::env::TEST_CLOCK_OFFSET_MS)
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
    {
        config.clock = interlink_net::Clock::offset_by(ms);
    }
    let shutdown = CancellationToken::new();
    stop_on_signal(shutdown.clone());
    let relay = match start(config, shutdown).await {
        Ok(relay) => relay,
        Err(e) => {
            error!("relay did not start: {e}");
            return ExitCode::FAILURE;
        }
    };
    for addr in relay.addrs() {
        println!("{addr}");
    }
    match relay.wait().await {
        Ok(()) => {
            info!("relay stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("relay failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Cancels `shutdown` on SIGTERM or Ctrl-C (SIGINT). The SIGTERM handler is installed
/// before this returns (not when the task first runs), so a SIGTERM sent as soon as the
/// relay is up is never lost to the default action.
fn stop_on_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::spawn(async move {
                    tokio::select! {
                        _ = term.recv() => info!("SIGTERM: stopping"),
                        _ = tokio::signal::ctrl_c() => info!("interrupt: stopping"),
                    }
                    shutdown.cancel();
                });
            }
            Err(e) => {
                error!("cannot watch SIGTERM ({e}); Ctrl-C still stops the relay");
                tokio::spawn(async move {
                    let _ = tokio::signal::ctrl_c().await;
                    shutdown.cancel();
                });
            }
        }
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        shutdown.cancel();
    });
}
