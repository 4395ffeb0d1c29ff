//! `vantage gate`: the live NFQUEUE SYN gate (Abacus paper, Sections 3.2,
//! 4.3 and 5) in front of a real listener — `run`, `check`, `clean`.
//!
//! The daemon is `vantage_live::gate`; this file only parses arguments,
//! installs the signal handlers and prints. See `docs/gate.md`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use vantage_live::daemon::Signals;
use vantage_live::gate::{self, GateConfig, RunOptions};

#[derive(clap::Subcommand)]
pub enum GateCommand {
    /// Run the gate until Ctrl-C or SIGTERM (needs CAP_NET_ADMIN): bind the
    /// NFQUEUE queue(s), install the iptables chain, decide every SYN to
    /// the listeners with the configured filter. SIGHUP reloads the
    /// configuration file, SIGUSR1 reopens the log.
    Run {
        /// Gate configuration (TOML; docs/gate.md).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Create this file, holding the gate's pid, once the queues are
        /// bound and the rules installed (removed on exit).
        #[arg(long, value_name = "PATH")]
        ready_file: Option<PathBuf>,
    },
    /// Validate a configuration and print it with every default and
    /// derived value (the Abacus window S from the costs, S_G).
    Check {
        /// Gate configuration (TOML).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Remove every VANTAGE-GATE* iptables chain and the rules that jump
    /// to them in this network namespace (after a gate was killed).
    Clean,
}

pub fn run(command: GateCommand) -> Result<()> {
    match command {
        GateCommand::Check { config } => {
            let config = GateConfig::load(&config)?;
            print!("{}", config.describe());
            Ok(())
        }
        GateCommand::Clean => {
            let report = gate::clean()?;
            if report.chains.is_empty() && report.jumps == 0 {
                println!("no VANTAGE-GATE chain found");
            } else {
                println!(
                    "removed {} jump rule(s) and chain(s) {}",
                    report.jumps,
                    if report.chains.is_empty() {
                        "(none)".to_string()
                    } else {
                        report.chains.join(", ")
                    }
                );
            }
            Ok(())
        }
        GateCommand::Run { config, ready_file } => {
            let config_path = config;
            let config = GateConfig::load(&config_path)?;
            let signals = Signals::new();
            signals.register().context("vantage gate")?;
            let options = RunOptions {
                ready_file,
                signals,
                config_path: Some(config_path),
            };
            let summary = gate::run(&config, &options)?;
            let t = summary.totals;
            eprintln!(
                "vantage gate: stopped after {:.1} s: {} SYN(s) accepted, {} dropped, {} rejected{}; {} other packet(s) passed, {} overrun(s), {} error(s); rules removed",
                summary.duration_s,
                t.accepted,
                t.dropped,
                t.rejected,
                if config.dry_run { " (dry run: all accepted)" } else { "" },
                t.passed,
                t.overruns,
                t.errors
            );
            Ok(())
        }
    }
}
