//! The gate's iptables rules (filter table), installed on start and
//! removed on every exit path.
//!
//! ```text
//! -N VANTAGE-GATE-q<queue>
//! -A VANTAGE-GATE-q<queue> -p tcp -m mark --mark <reject_mark> -j REJECT --reject-with tcp-reset
//! -A VANTAGE-GATE-q<queue> -p tcp --syn [-d <address>] --dport <port> -j NFQUEUE --queue-num <queue> --queue-bypass
//!        (with queues > 1: --queue-balance <queue>:<queue+queues-1> instead of --queue-num)
//! -I INPUT 1 -j VANTAGE-GATE-q<queue>
//! ```
//!
//! A rejected SYN gets the verdict `NF_REPEAT` with the reject mark: the
//! packet re-enters the INPUT hook from its first rule, jumps to the chain
//! again, and the mark rule — placed before the NFQUEUE rule — answers it
//! with a RST. The jump is inserted last, once the chain is complete.
//!
//! `--queue-bypass`: while no gate is bound to the queue (not started yet,
//! killed, crashed), the kernel accepts the SYNs instead of dropping them.
//! Together with fail-open on the queue, a dead or overwhelmed gate lets
//! traffic through rather than cutting the server off.
//!
//! [`GateRules`] removes its rules when dropped, so normal exits, errors
//! and panics (unwinding) all clean up; only `SIGKILL` leaves them, and
//! `vantage gate clean` ([`clean`]) removes every `VANTAGE-GATE*` chain and
//! every rule that jumps to one.
//!
//! Commands run through [`vantage_sys::iptables`], with `-w` (wait for the
//! xtables lock).

use std::path::Path;

use vantage_sys::iptables::{self as runner, IptablesError};

use super::config::GateConfig;
use super::GateError;

/// Prefix of every chain a gate creates.
pub const CHAIN_PREFIX: &str = "VANTAGE-GATE";

/// The chain of the gate whose first queue is `queue`.
pub fn chain_name(queue: u16) -> String {
    format!("{CHAIN_PREFIX}-q{queue}")
}

/// The `iptables` arguments that fill the chain, in order.
pub fn chain_rules(config: &GateConfig) -> Vec<Vec<String>> {
    let chain = chain_name(config.queue);
    let mut rules = vec![[
        "-A",
        &chain,
        "-p",
        "tcp",
        "-m",
        "mark",
        "--mark",
        &format!("{:#x}", config.reject_mark),
        "-j",
        "REJECT",
        "--reject-with",
        "tcp-reset",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<String>>()];
    let queue_target: Vec<String> = if config.queues > 1 {
        let mut target = vec![
            "--queue-balance".into(),
            format!("{}:{}", config.queue, config.queue + config.queues - 1),
        ];
        if config.cpu_fanout {
            target.push("--queue-cpu-fanout".into());
        }
        target
    } else {
        vec!["--queue-num".into(), config.queue.to_string()]
    };
    for listener in &config.listeners {
        let mut rule: Vec<String> = vec![
            "-A".into(),
            chain.clone(),
            "-p".into(),
            "tcp".into(),
            "--syn".into(),
        ];
        if let Some(address) = listener.address {
            rule.push("-d".into());
            rule.push(address.to_string());
        }
        rule.extend(["--dport".to_string(), listener.port.to_string()]);
        rule.extend(["-j".to_string(), "NFQUEUE".to_string()]);
        rule.extend(queue_target.iter().cloned());
        rule.push("--queue-bypass".into());
        rules.push(rule);
    }
    rules
}

/// The jump from INPUT to the gate's chain (as `-I INPUT 1 …`).
pub fn jump_rule(chain: &str) -> Vec<String> {
    ["-I", "INPUT", "1", "-j", chain]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Runs `iptables -w ARGS`; the error quotes the command and its stderr.
pub fn iptables(args: &[String]) -> Result<String, GateError> {
    let mut all = Vec::with_capacity(args.len() + 1);
    all.push("-w");
    all.extend(args.iter().map(String::as_str));
    runner::run(Path::new("iptables"), &all).map_err(|e| {
        GateError::Rules(match e {
            IptablesError::Spawn { source, .. } => {
                format!("cannot run iptables: {source} (is it installed?)")
            }
            IptablesError::Failed { stderr, .. } => {
                format!("`iptables -w {}` failed: {stderr}", args.join(" "))
            }
        })
    })
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The installed rules of one gate; removed on [`GateRules::remove`] or
/// drop.
#[derive(Debug)]
pub struct GateRules {
    chain: String,
    installed: bool,
}

impl GateRules {
    /// Creates the chain, fills it and inserts the jump from INPUT. If the
    /// chain exists already, another gate runs on the queue or a killed one
    /// left it: the error says so and nothing is touched.
    pub fn install(config: &GateConfig) -> Result<GateRules, GateError> {
        let chain = chain_name(config.queue);
        if let Err(e) = iptables(&strings(&["-N", &chain])) {
            let exists = iptables(&strings(&["-S", &chain])).is_ok();
            return Err(if exists {
                GateError::Rules(format!(
                    "chain {chain} exists already: another gate runs on queue {}, or one was killed and left it (`vantage gate clean` removes it)",
                    config.queue
                ))
            } else {
                e
            });
        }
        let mut rules = GateRules {
            chain,
            installed: true,
        };
        for rule in chain_rules(config) {
            // On error, `rules` is dropped and removes what was made.
            iptables(&rule)?;
        }
        iptables(&jump_rule(&rules.chain))?;
        rules.installed = true;
        Ok(rules)
    }

    pub fn chain(&self) -> &str {
        &self.chain
    }

    /// Deletes the jump(s) from INPUT, flushes and deletes the chain.
    /// Idempotent.
    pub fn remove(&mut self) -> Result<(), GateError> {
        if !self.installed {
            return Ok(());
        }
        // Bounded: the gate inserted one jump; a few more would be someone
        // else's copies of it.
        for _ in 0..16 {
            if iptables(&strings(&["-D", "INPUT", "-j", &self.chain])).is_err() {
                break;
            }
        }
        iptables(&strings(&["-F", &self.chain]))?;
        iptables(&strings(&["-X", &self.chain]))?;
        self.installed = false;
        Ok(())
    }
}

impl Drop for GateRules {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!(
                "vantage gate: could not remove the rules of {}: {e}; run `vantage gate clean`",
                self.chain
            );
        }
    }
}

/// What `vantage gate clean` must do, from the output of `iptables -S`:
/// the rules that jump to a gate chain (as `-D` argument lists) and the
/// gate chains.
pub fn clean_plan(listing: &str) -> (Vec<Vec<String>>, Vec<String>) {
    let mut jumps = Vec::new();
    let mut chains = Vec::new();
    for line in listing.lines() {
        let words = split_rule(line);
        match words.first().map(String::as_str) {
            Some("-N") => {
                if let Some(chain) = words.get(1) {
                    if chain.starts_with(CHAIN_PREFIX) {
                        chains.push(chain.clone());
                    }
                }
            }
            Some("-A") => {
                let from = words.get(1).map(String::as_str).unwrap_or("");
                let target = words
                    .windows(2)
                    .find(|w| w[0] == "-j" || w[0] == "-g")
                    .map(|w| w[1].as_str());
                if let Some(target) = target {
                    if target.starts_with(CHAIN_PREFIX) && !from.starts_with(CHAIN_PREFIX) {
                        let mut delete = words.clone();
                        delete[0] = "-D".into();
                        jumps.push(delete);
                    }
                }
            }
            _ => {}
        }
    }
    (jumps, chains)
}

/// Splits one line of `iptables -S` into words, keeping double-quoted
/// words (comments) whole.
fn split_rule(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut any = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if quoted => {
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut current));
                    any = false;
                }
            }
            c => {
                current.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(current);
    }
    words
}

/// What [`clean`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanReport {
    pub jumps: usize,
    pub chains: Vec<String>,
}

/// Removes every `VANTAGE-GATE*` chain of the filter table and every rule
/// that jumps to one (in this network namespace).
pub fn clean() -> Result<CleanReport, GateError> {
    let listing = iptables(&strings(&["-S"]))?;
    let (jumps, chains) = clean_plan(&listing);
    let mut report = CleanReport::default();
    for jump in &jumps {
        iptables(jump)?;
        report.jumps += 1;
    }
    for chain in &chains {
        iptables(&strings(&["-F", chain]))?;
    }
    for chain in &chains {
        iptables(&strings(&["-X", chain]))?;
        report.chains.push(chain.clone());
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[gate]
queue = 3
reject_mark = 0x5647
[[listeners]]
address = "10.77.0.2"
port = 80
[[listeners]]
port = 8080
[filter]
kind = "tbf-reject"
bucket_size = 2
refill_rate = 1
"#;

    #[test]
    fn the_chain_rejects_marked_packets_before_it_queues_syns() {
        let config = GateConfig::from_toml(CONFIG, "t.toml").unwrap();
        let rules: Vec<String> = chain_rules(&config).iter().map(|r| r.join(" ")).collect();
        assert_eq!(
            rules,
            vec![
                "-A VANTAGE-GATE-q3 -p tcp -m mark --mark 0x5647 -j REJECT --reject-with tcp-reset",
                "-A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -j NFQUEUE --queue-num 3 --queue-bypass",
                "-A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -j NFQUEUE --queue-num 3 --queue-bypass",
            ]
        );
        assert_eq!(
            jump_rule("VANTAGE-GATE-q3").join(" "),
            "-I INPUT 1 -j VANTAGE-GATE-q3"
        );
        let balanced = GateConfig::from_toml(
            &CONFIG.replace("queue = 3", "queue = 3\nqueues = 4"),
            "t.toml",
        )
        .unwrap();
        let rules = chain_rules(&balanced);
        assert_eq!(
            rules[1].join(" "),
            "-A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -j NFQUEUE --queue-balance 3:6 --queue-bypass"
        );
        let fanout = GateConfig::from_toml(
            &CONFIG.replace("queue = 3", "queue = 3\nqueues = 2\ncpu_fanout = true"),
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            chain_rules(&fanout)[1].join(" "),
            "-A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -j NFQUEUE --queue-balance 3:4 --queue-cpu-fanout --queue-bypass"
        );
    }

    #[test]
    fn clean_finds_gate_chains_and_the_jumps_to_them() {
        let listing = "-P INPUT ACCEPT\n-P FORWARD ACCEPT\n-P OUTPUT ACCEPT\n-N VANTAGE-GATE-q0\n-N VANTAGE-GATE-q7\n-N OTHER\n-A INPUT -j VANTAGE-GATE-q0\n-A INPUT -p tcp -m comment --comment \"keep me\" -j ACCEPT\n-A INPUT -s 10.0.0.0/8 -j VANTAGE-GATE-q7\n-A OTHER -g VANTAGE-GATE-q7\n-A VANTAGE-GATE-q0 -p tcp -m mark --mark 0x5647 -j REJECT --reject-with tcp-reset\n-A VANTAGE-GATE-q0 -p tcp --syn --dport 80 -j NFQUEUE --queue-num 0 --queue-bypass\n";
        let (jumps, chains) = clean_plan(listing);
        let jumps: Vec<String> = jumps.iter().map(|j| j.join(" ")).collect();
        assert_eq!(
            jumps,
            vec![
                "-D INPUT -j VANTAGE-GATE-q0",
                "-D INPUT -s 10.0.0.0/8 -j VANTAGE-GATE-q7",
                "-D OTHER -g VANTAGE-GATE-q7",
            ]
        );
        assert_eq!(chains, vec!["VANTAGE-GATE-q0", "VANTAGE-GATE-q7"]);
        assert_eq!(clean_plan(""), (vec![], vec![]));
    }

    #[test]
    fn quoted_words_stay_whole() {
        assert_eq!(
            split_rule("-A INPUT -m comment --comment \"a \\\"b\\\" c\" -j X"),
            vec![
                "-A",
                "INPUT",
                "-m",
                "comment",
                "--comment",
                "a \"b\" c",
                "-j",
                "X"
            ]
        );
        assert_eq!(split_rule("  "), Vec::<String>::new());
        assert_eq!(
            split_rule("-A X --comment \"\""),
            vec!["-A", "X", "--comment", ""]
        );
    }
}
