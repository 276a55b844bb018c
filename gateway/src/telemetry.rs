//! Logging: human-readable lines on standard error, level from `BURSAR_LOG` (default `warn`,
//! e.g. `BURSAR_LOG=info` or `BURSAR_LOG=bursar_ledger=debug`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = EnvFilter::try_from_env("BURSAR_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_target(false)
        .without_time()
        .try_init();
}
