//! `vantage`: see and control the response time clients of a TCP/HTTP
//! service really perceive.
//!
//! Subcommands:
//! * `vantage sim <scenario.toml>` — run one simulation scenario.
//! * `vantage reproduce [study]` — rerun a paper's experiments and compare
//!   with its published results.
//! * `vantage profiles` — list the client SYN retransmission profiles.
//! * `vantage testbed run <spec.toml>` / `vantage testbed clean` — the
//!   one-machine network testbed.
//! * `vantage wan` — the testbed's WAN emulator on its own.
//! * `vantage cpa` — critical-path analysis of packet traces.

mod certes;
mod cpa;
mod gate;
mod plot;
mod report;
mod reproduce_certes;
mod reproduce_sbac;
mod testbed;
mod wan;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Instant;
use vantage_core::tcp::{syn_schedule, ClientMix};
use vantage_sim::scenario::Scenario;
use vantage_sim::studies::{self, Check};
use vantage_sim::study::{execute, steps, Effort, ScenarioResult};

#[derive(Parser)]
#[command(name = "vantage", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one simulation scenario file (any study: abacus, certes, sbac) and print its results.
    Sim {
        /// Scenario file (TOML), e.g. scenarios/abacus/fig8-burstiness.toml or scenarios/certes/test-a-steady.toml.
        scenario: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Rerun every study (or one) and compare with the papers' results.
    Reproduce {
        /// Study to run (default: all). Known: abacus, certes, sbac.
        study: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// List the built-in client SYN retransmission profiles and mixtures.
    Profiles,
    /// One-machine network testbed: namespaces, WAN emulator, real servers
    /// and clients with client-side ground truth (needs root).
    Testbed {
        #[command(subcommand)]
        command: testbed::TestbedCommand,
    },
    /// Live SYN gate: the Abacus paper's SYN filters in front of a real
    /// listener, through NFQUEUE (run needs root).
    Gate {
        #[command(subcommand)]
        command: gate::GateCommand,
    },
    /// Emulate a WAN (delay, jitter, loss, rate) on the packets this
    /// namespace forwards (needs root).
    Wan(wan::WanArgs),
    /// Critical-path analysis of the TCP/HTTP transactions in packet traces:
    /// where each transaction's time went (server, client, propagation,
    /// network variation, losses).
    Cpa(cpa::CpaArgs),
    /// Certes: client-perceived response time — SYN retries and give-ups
    /// included — estimated from server counters or a server-side capture.
    Certes(certes::CertesArgs),
}

#[derive(clap::Args)]
struct OutputArgs {
    /// Fewer repetitions and a shorter horizon (each scenario says how many).
    #[arg(long)]
    quick: bool,
    /// Print all results as one JSON document instead of tables.
    #[arg(long)]
    json: bool,
    /// Directory for CSV files and SVG plots.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() {
    let cli = Cli::parse();
    if let Err(err) = run(cli) {
        eprintln!("vantage: error: {}", error_chain(&err));
        std::process::exit(1);
    }
}

/// The error and its causes, each cause added only when the message does not
/// already quote it (many library errors include their source's text).
fn error_chain(err: &anyhow::Error) -> String {
    let mut message = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Sim { scenario, output } => {
            threads(&output)?;
            let text = std::fs::read_to_string(&scenario)
                .with_context(|| format!("cannot read scenario {}", scenario.display()))?;
            let origin = scenario.display().to_string();
            match scenario_study(&text) {
                Some(name) if name == studies::certes::NAME => {
                    let s = studies::certes::CertesScenario::from_toml(&text, &origin)?;
                    let outcome = reproduce_certes::run_scenarios(
                        vec![s],
                        output.quick,
                        output.json,
                        &output.out,
                    )?;
                    if output.json {
                        reproduce_certes::print_json(&outcome)?;
                    }
                    Ok(())
                }
                Some(name) if name == studies::sbac::NAME => {
                    let s = studies::sbac::SbacScenario::from_toml(&text, &origin)?;
                    let outcome = reproduce_sbac::run_scenarios(
                        vec![s],
                        output.quick,
                        output.json,
                        &output.out,
                    )?;
                    if output.json {
                        reproduce_sbac::print_json(&outcome)?;
                    }
                    Ok(())
                }
                Some(name) if name != studies::abacus::study().name => bail!(
                    "{origin}: `scenario.study` must be \"{}\", \"{}\" or \"{}\", got \"{name}\"",
                    studies::abacus::study().name,
                    studies::certes::NAME,
                    studies::sbac::NAME
                ),
                _ => {
                    let s = Scenario::from_toml(&text, &origin)?;
                    let results = run_scenarios(vec![s], &output)?;
                    finish(&results, &[], &output, "sim")
                }
            }
        }
        Command::Reproduce { study, output } => {
            threads(&output)?;
            if study.as_deref() == Some(studies::sbac::NAME) {
                let sbac = reproduce_sbac::run(output.quick, output.json, &output.out)?;
                if output.json {
                    reproduce_sbac::print_json(&sbac)?;
                }
                return Ok(());
            }
            let all = studies::all();
            let certes_name = studies::certes::NAME;
            let with_certes = study.is_none() || study.as_deref() == Some(certes_name);
            let chosen: Vec<_> = match &study {
                None => all.iter().collect(),
                Some(name) if name == certes_name => Vec::new(),
                Some(name) => {
                    let found: Vec<_> = all.iter().filter(|s| s.name == name).collect();
                    if found.is_empty() {
                        let mut known: Vec<_> = all.iter().map(|s| s.name).collect();
                        known.push(certes_name);
                        known.push(studies::sbac::NAME);
                        bail!("unknown study `{name}` (known: {})", known.join(", "));
                    }
                    found
                }
            };
            let mut all_results = Vec::new();
            let mut all_checks = Vec::new();
            for study in chosen {
                if !output.json {
                    println!("\n# Study `{}` — {}\n", study.name, study.paper);
                }
                let results = run_scenarios(study.scenarios()?, &output)?;
                let checks = study.checks(&results);
                if !output.json {
                    report::print_checks(&checks);
                }
                write_outputs(&results, &checks, &output.out.join(study.name))?;
                all_checks.extend(checks);
                all_results.extend(results);
            }
            if !with_certes {
                return finish(&all_results, &all_checks, &output, "reproduce");
            }
            if !output.json {
                println!("\n# Study `{certes_name}` — {}\n", studies::certes::PAPER);
            }
            let certes = reproduce_certes::run(output.quick, output.json, &output.out)?;
            if output.json && study.is_some() {
                return reproduce_certes::print_json(&certes);
            }
            all_checks.extend(certes.checks.iter().cloned());
            if study.is_some() {
                return finish(&all_results, &all_checks, &output, "reproduce");
            }
            // Every study: SBAC too.
            if !output.json {
                println!(
                    "\n# Study `{}` — {}\n",
                    studies::sbac::NAME,
                    studies::sbac::PAPER
                );
            }
            let sbac = reproduce_sbac::run(output.quick, output.json, &output.out)?;
            all_checks.extend(sbac.checks.iter().cloned());
            if output.json {
                let rows: Vec<_> = all_results
                    .iter()
                    .flat_map(|(_, r)| r.rows.iter())
                    .collect();
                let doc = serde_json::json!({
                    "rows": rows,
                    "checks": all_checks,
                    "certes": { "rows": certes.rows() },
                    "sbac": reproduce_sbac::json_document(&sbac),
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
                return Ok(());
            }
            finish(&all_results, &all_checks, &output, "reproduce")
        }
        Command::Testbed { command } => testbed::run(command),
        Command::Gate { command } => gate::run(command),
        Command::Wan(args) => wan::run(args),
        Command::Cpa(args) => cpa::run(args),
        Command::Certes(args) => certes::run(args),
        Command::Profiles => {
            for name in syn_schedule::BUILTIN_PROFILES {
                println!("{}", vantage_core::tcp::SynProfile::builtin(name)?);
            }
            for name in syn_schedule::BUILTIN_MIXES {
                let mix = ClientMix::builtin(name)?;
                let parts: Vec<String> = mix
                    .entries()
                    .iter()
                    .map(|(p, w)| format!("{} {:.0} %", p.name, 100.0 * w))
                    .collect();
                println!("{name} (mixture: {})", parts.join(", "));
            }
            Ok(())
        }
    }
}

/// The `study` named in a scenario file's `[scenario]` table, if the file
/// is TOML and names one; the study's own parser reports every other
/// problem with the file.
fn scenario_study(text: &str) -> Option<String> {
    let value: toml::Value = toml::from_str(text).ok()?;
    Some(value.get("scenario")?.get("study")?.as_str()?.to_string())
}

fn threads(output: &OutputArgs) -> Result<()> {
    if let Some(n) = output.threads {
        if n == 0 {
            bail!("--threads must be at least 1");
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .context("cannot start worker threads")?;
    }
    Ok(())
}

/// Runs scenarios with a progress bar; prints each table unless `--json`.
fn run_scenarios(
    scenarios: Vec<Scenario>,
    output: &OutputArgs,
) -> Result<Vec<(Scenario, ScenarioResult)>> {
    let effort = Effort {
        quick: output.quick,
    };
    let total: u64 = scenarios.iter().map(|s| steps(s, effort)).sum();
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} runs {msg} (eta {eta})",
        )
        .expect("progress template is valid"),
    );
    let mut results = Vec::new();
    for s in scenarios {
        bar.set_message(format!("{} {}", s.study, s.figure));
        let started = Instant::now();
        let r = execute(&s, effort, &|| bar.inc(1))?;
        let wall = started.elapsed().as_secs_f64();
        if !output.json {
            bar.suspend(|| {
                report::print_scenario(&s, &r);
                println!(
                    "  {} SYN arrivals, {:.0} simulated hours in {:.1} s ({:.0}× real time)\n",
                    r.events,
                    r.simulated.as_secs_f64() / 3600.0,
                    wall,
                    r.simulated.as_secs_f64() / wall.max(1e-9)
                );
            });
        }
        results.push((s, r));
    }
    bar.finish_and_clear();
    Ok(results)
}

fn write_outputs(
    results: &[(Scenario, ScenarioResult)],
    checks: &[Check],
    dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output directory {}", dir.display()))?;
    for (s, r) in results {
        report::write_csv(&dir.join(format!("{}.csv", s.figure)), r)?;
        plot::figure(dir, s, r)?;
    }
    if !checks.is_empty() {
        report::write_checks_csv(&dir.join("paper-comparison.csv"), checks)?;
    }
    Ok(())
}

fn finish(
    results: &[(Scenario, ScenarioResult)],
    checks: &[Check],
    output: &OutputArgs,
    command: &str,
) -> Result<()> {
    if command == "sim" {
        write_outputs(results, checks, &output.out)?;
    }
    if output.json {
        report::print_json(results, checks)?;
    } else {
        let holds = checks.iter().filter(|c| c.holds).count();
        if !checks.is_empty() {
            println!(
                "{holds} of {} statements of the papers hold in our runs.",
                checks.len()
            );
        }
        println!("CSV and SVG files are in {}", output.out.display());
    }
    Ok(())
}
