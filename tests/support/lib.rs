//! Helpers for the end-to-end tests: finding the built binaries, running them as
//! guarded child processes ([`process`]), users with their own home directories
//! driving the CLI ([`user`]), MCP sessions driven by an MCP client ([`mcp_session`]), and
//! a strict reader of framed peer text ([`framing`]).
//!
//! The end-to-end tests run on Linux (network namespaces, nftables, Unix sockets);
//! elsewhere this crate is empty.
#![cfg(unix)]

pub mod agent_cli;
pub mod browser;
pub mod framing;
pub mod lab;
pub mod lan;
pub mod mcp_session;
pub mod npm;
pub mod process;
pub mod relays;
pub mod sites;
pub mod user;

use std::path::PathBuf;

/// Path of a workspace binary (`interlink-p2p`, later `interlink-relay`) in the same
/// target directory as the running test executable.
///
/// Cargo builds every binary of the workspace before it runs the tests when invoked
/// with `--workspace`; a missing binary is reported with the command that builds it.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // target/<profile>/deps/<test-exe> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .ok_or_else(|| anyhow::anyhow!("unexpected test executable path {}", exe.display()))?;
    let path = dir.join(name);
    anyhow::ensure!(
        path.exists(),
        "{} not built; run `cargo build --workspace --bins` (or test with --workspace)",
        path.display()
    );
    Ok(path)
}
