//! `vantage proxy`: the HTTP reverse proxy with session-based admission
//! control (`session-admission-control.txt`) — `run` and `check`.
//!
//! The proxy is `vantage_live::proxy`; this file only parses arguments and
//! prints. See `docs/proxy.md`.

use std::path::PathBuf;

use anyhow::Result;
use vantage_live::proxy::{self, ProxyConfig};

#[derive(clap::Subcommand)]
pub enum ProxyCommand {
    /// Run the proxy until Ctrl-C or SIGTERM. SIGHUP reloads the
    /// configuration (an invalid one is refused and the running one kept),
    /// SIGUSR1 reopens the access log.
    Run {
        /// Proxy configuration (TOML; docs/proxy.md).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Create this file, holding the proxy's pid, once it serves
        /// (removed on exit).
        #[arg(long, value_name = "PATH")]
        ready_file: Option<PathBuf>,
    },
    /// Validate a configuration and print it with every default filled in
    /// (the session keys are not printed).
    Check {
        /// Proxy configuration (TOML).
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

pub fn run(command: ProxyCommand) -> Result<()> {
    match command {
        ProxyCommand::Check { file } => {
            let config = ProxyConfig::load(&file)?;
            print!("{}", config.effective());
            Ok(())
        }
        ProxyCommand::Run { file, ready_file } => {
            proxy::run(&file, ready_file.as_deref())?;
            Ok(())
        }
    }
}
