//! `vantage gate`: the live NFQUEUE SYN gate (Abacus paper, Sections 3.2,
//! 4.3 and 5) in front of a real listener — `run`, `check`, `clean`.
//!
//! The daemon is `vantage_live::gate`; this file only parses arguments,
//! installs the signal handlers and prints. See `docs/gate.md`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use vantage_live::daemon::Signals;
use vantage_live::gate::{self, GateConfig, GateError, RunOptions, EXIT_RULES_VANISHED};

#[derive(clap::Subcommand)]
pub enum GateCommand {
    /// Run the gate until Ctrl-C or SIGTERM (needs CAP_NET_ADMIN): bind the
    /// NFQUEUE queue(s), install the nft table or iptables chain, decide
    /// every SYN to the listeners with the configured filter. SIGHUP
    /// reloads the configuration file, SIGUSR1 reopens the log. Exits with
    /// status 3 when its rules vanish while it runs.
    Run {
        /// Gate configuration (TOML; docs/gate.md).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Create this file, holding the gate's pid, once the queues are
        /// bound and the rules installed (removed on exit).
        #[arg(long, value_name = "PATH")]
        ready_file: Option<PathBuf>,
        /// Start even when other gates' rules are in this network
        /// namespace (their SYNs then pass both gates, one behind the
        /// other).
        #[arg(long)]
        allow_stacking: bool,
    },
    /// Validate a configuration; print it with every default and derived
    /// value (the Abacus window S from the costs, S_G) and the exact rules
    /// the gate would install here.
    Check {
        /// Gate configuration (TOML).
        #[arg(value_name = "FILE", required_unless_present = "config")]
        file: Option<PathBuf>,
        /// The configuration, as an option (same as FILE).
        #[arg(long, value_name = "FILE", conflicts_with = "file")]
        config: Option<PathBuf>,
    },
    /// Remove every gate table (nft) and VANTAGE-GATE* chain (iptables,
    /// ip6tables) with the rules that jump to them in this network
    /// namespace, after a gate was killed. Refuses while a live gate owns
    /// one of them.
    Clean {
        /// Remove the rules of gates that still run too.
        #[arg(long)]
        force: bool,
    },
}

pub fn run(command: GateCommand) -> Result<()> {
    match command {
        GateCommand::Check { file, config } => {
            let path = file
                .or(config)
                .context("vantage gate check: a configuration FILE is needed")?;
            let config = GateConfig::load(&path)?;
            for warning in &config.warnings {
                eprintln!("vantage: warning: {warning}");
            }
            print!("{}", config.describe());
            println!();
            print!("{}", gate::describe(&config, config.backend));
            Ok(())
        }
        GateCommand::Clean { force } => {
            let report = gate::clean_with(force)?;
            if report.chains.is_empty()
                && report.jumps == 0
                && report.tables.is_empty()
                && report.pins.is_empty()
            {
                println!("no VANTAGE-GATE chain or vantage_gate table found");
            } else {
                if report.jumps > 0 || !report.chains.is_empty() {
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
                if !report.tables.is_empty() {
                    println!(
                        "removed nft table(s) inet {}",
                        report.tables.join(", inet ")
                    );
                }
                if !report.pins.is_empty() {
                    println!("removed pinned program(s) {}", report.pins.join(", "));
                }
            }
            Ok(())
        }
        GateCommand::Run {
            config,
            ready_file,
            allow_stacking,
        } => {
            let config_path = config;
            let config = GateConfig::load(&config_path)?;
            let signals = Signals::new();
            signals.register().context("vantage gate")?;
            let options = RunOptions {
                ready_file,
                signals,
                config_path: Some(config_path),
                allow_stacking,
            };
            let summary = match gate::run(&config, &options) {
                Ok(summary) => summary,
                Err(e @ GateError::RulesVanished { .. }) => {
                    eprintln!("vantage: error: {e}");
                    std::process::exit(EXIT_RULES_VANISHED);
                }
                Err(e) => return Err(e.into()),
            };
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
