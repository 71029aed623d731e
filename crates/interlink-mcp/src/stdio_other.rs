//! The MCP server's stdin and stdout where they are not Unix file descriptors
//! (Windows): tokio's own stdio, which reads and writes on its blocking pool. The Unix
//! version (`stdio.rs`) polls pipes and sockets on the reactor instead.

/// stdin and stdout for the MCP transport.
pub(crate) fn stdio() -> (tokio::io::Stdin, tokio::io::Stdout) {
    (tokio::io::stdin(), tokio::io::stdout())
}
