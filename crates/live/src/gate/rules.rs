//! The gate's rules, installed on start and removed on every exit path:
//! a reject-mark rule that answers a marked SYN with a RST, then one rule
//! per listener that queues its SYNs, with bypass. Two backends.
//!
//! **nftables** (`nft`), one table of the gate's own, created and deleted
//! in one transaction each (`nft -f -`), hooked at input before the usual
//! filter chains (priority filter − 10):
//!
//! ```text
//! create table inet vantage_gate_q<queue> { comment "vantage gate pid <pid>"; }
//! add chain inet vantage_gate_q<queue> input { type filter hook input priority -10; policy accept; }
//! add rule inet vantage_gate_q<queue> input meta mark <reject_mark> meta l4proto tcp reject with tcp reset
//! add rule inet vantage_gate_q<queue> input [ip|ip6 daddr <address>] tcp dport <port> tcp flags & (fin|syn|rst|ack) == syn queue num <queue> bypass
//!        (with queues > 1: queue num <queue>-<last> [fanout,]bypass)
//! ```
//!
//! **iptables** (and `ip6tables` for IPv6 listeners; a listener without an
//! address is gated in both families when the host has IPv6):
//!
//! ```text
//! -N VANTAGE-GATE-q<queue>
//! -A VANTAGE-GATE-q<queue> -p tcp -m mark --mark <reject_mark> -m comment --comment "vantage gate pid <pid>" -j REJECT --reject-with tcp-reset
//! [-A VANTAGE-GATE-q<queue> -p tcp --syn [-d <address>] --dport <port> -m bpf --object-pinned <pin> -j DROP|REJECT …]
//! -A VANTAGE-GATE-q<queue> -p tcp --syn [-d <address>] --dport <port> -j NFQUEUE --queue-num <queue> --queue-bypass
//!        (with queues > 1: --queue-balance <queue>:<last> [--queue-cpu-fanout] instead of --queue-num)
//! -I INPUT 1 -j VANTAGE-GATE-q<queue>
//! ```
//!
//! The `bpf` rules are the kernel-side shortcut ([`super::shortcut`]),
//! unless `shortcut = false` or in a dry run (and with `"auto"`, the
//! default, only when this process can load BPF programs): one per
//! listener and verdict the filter kind can hold constant. nftables has no
//! such match: with the nft backend every SYN is queued.
//!
//! [`RulesBackend::Auto`] takes nftables when `nft` is installed and the
//! kernel accepts the gate's script (`nft -c`: a kernel without `nft_queue`
//! refuses it), iptables otherwise.
//!
//! A rejected SYN gets the verdict `NF_REPEAT` with the reject mark: the
//! kernel runs the same hook entry again (the nft chain, or iptables'
//! INPUT), and the mark rule — before the queue rules — answers it with a
//! RST. The iptables jump is inserted last, once the chain is complete.
//!
//! Bypass: while no gate is bound to the queue (not started yet, killed,
//! crashed), the kernel accepts the SYNs instead of dropping them.
//! Together with fail-open on the queue, a dead or overwhelmed gate lets
//! traffic through rather than cutting the server off.
//!
//! The rules name their owner (`vantage gate pid N`: the table's comment,
//! or a comment on the mark rule), so that [`clean`] leaves a live gate's
//! rules alone unless forced, and [`GateRules::verify`] tells whether they
//! are still all in place. [`GateRules::reload`] replaces them for a new
//! configuration without a gap. [`GateRules`] removes its rules when dropped, so
//! normal exits, errors and panics (unwinding) all clean up; only
//! `SIGKILL` leaves them, and `vantage gate clean` removes them.
//!
//! Commands run through [`vantage_sys::iptables`] (with `-w`, waiting for
//! the xtables lock) and [`vantage_sys::nft`].

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use vantage_core::admission::syn::Verdict;
use vantage_sys::iptables::{self as xtables, Family, IptablesError};
use vantage_sys::nft::{self, NftError};

pub use super::config::RulesBackend;
use super::config::{GateConfig, Listener, ShortcutMode};
use super::shortcut::{self, Shortcut};
use super::GateError;

/// Prefix of every iptables chain a gate creates.
pub const CHAIN_PREFIX: &str = "VANTAGE-GATE";
/// Prefix of every nftables table a gate creates (family `inet`).
pub const TABLE_PREFIX: &str = "vantage_gate";
/// The owner's mark in the rules: this, then the owner's pid.
pub const OWNER_PREFIX: &str = "vantage gate pid ";
/// The nft base chain's priority: before the usual filter chains (0).
pub const NFT_PRIORITY: i32 = -10;

/// The chain of the gate whose first queue is `queue`.
pub fn chain_name(queue: u16) -> String {
    format!("{CHAIN_PREFIX}-q{queue}")
}

/// The nft table (family `inet`) of the gate whose first queue is `queue`.
pub fn table_name(queue: u16) -> String {
    format!("{TABLE_PREFIX}_q{queue}")
}

/// The owner comment for process `pid`.
pub fn owner_comment(pid: u32) -> String {
    format!("{OWNER_PREFIX}{pid}")
}

/// The backend a gate's rules are installed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    Nft,
    Iptables,
}

/// The errors of the rule commands, with what the gate was doing.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("cannot run {program}: {}", spawn_failure(source))]
    CannotRun {
        program: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("{what} exists already: another gate runs on queue {queue}, or one was killed and left it (`vantage gate clean` removes it)")]
    Exists { what: String, queue: u16 },
    #[error("{what} belongs to the running gate with pid {pid}: stop it, or force the removal (`vantage gate clean --force`)")]
    OwnedByLiveGate { what: String, pid: u32 },
    #[error("backend nft: `nft` is not installed")]
    NftNotInstalled,
}

/// Why a rule command could not start, in an operator's words: a missing
/// program is named as such, and so is descriptor exhaustion (which
/// otherwise looks like a missing program).
fn spawn_failure(error: &std::io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::EMFILE) => format!("out of file descriptors (this process's limit): {error}"),
        Some(libc::ENFILE) => format!("out of file descriptors (the system's limit): {error}"),
        _ if error.kind() == std::io::ErrorKind::NotFound => {
            format!("{error} (is it installed?)")
        }
        _ => error.to_string(),
    }
}

impl From<RulesError> for GateError {
    fn from(error: RulesError) -> GateError {
        GateError::Rules(error.to_string())
    }
}

fn from_xtables(family: Family, args: &[String], error: IptablesError) -> RulesError {
    match error {
        IptablesError::Spawn { source, .. } => RulesError::CannotRun {
            program: family.program_name(),
            source,
        },
        IptablesError::Failed { stderr, .. } => RulesError::Failed {
            command: format!("{} -w {}", family.program_name(), args.join(" ")),
            stderr,
        },
    }
}

fn from_nft(command: &str, error: NftError) -> RulesError {
    match error {
        NftError::Spawn { source, .. } => RulesError::CannotRun {
            program: "nft",
            source,
        },
        NftError::Failed { stderr, .. } => RulesError::Failed {
            command: command.to_string(),
            stderr,
        },
    }
}

/// Runs `iptables -w ARGS` (or `ip6tables`); the error quotes the command
/// and its stderr.
pub fn xtables_run(family: Family, args: &[String]) -> Result<String, RulesError> {
    let mut all = Vec::with_capacity(args.len() + 1);
    all.push("-w");
    all.extend(args.iter().map(String::as_str));
    xtables::run(Path::new(family.program_name()), &all).map_err(|e| from_xtables(family, args, e))
}

/// Runs `iptables -w ARGS`; the error quotes the command and its stderr.
pub fn iptables(args: &[String]) -> Result<String, GateError> {
    Ok(xtables_run(Family::Ipv4, args)?)
}

fn nft_program() -> Option<PathBuf> {
    nft::find()
}

fn nft_command(program: &Path, args: &[&str]) -> Result<String, RulesError> {
    nft::run(program, args).map_err(|e| from_nft(&format!("nft {}", args.join(" ")), e))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Whether this network namespace has IPv6 (then a listener without an
/// address is gated in both families).
pub fn host_has_ipv6() -> bool {
    Path::new("/proc/net/if_inet6").exists()
}

/// The families whose tables the listeners need (iptables backend).
pub fn families(listeners: &[Listener], ipv6: bool) -> Vec<Family> {
    let v4 = listeners
        .iter()
        .any(|l| matches!(l.address, None | Some(IpAddr::V4(_))));
    let v6 = listeners.iter().any(|l| match l.address {
        None => ipv6,
        Some(IpAddr::V6(_)) => true,
        Some(IpAddr::V4(_)) => false,
    });
    let mut out = Vec::new();
    if v4 {
        out.push(Family::Ipv4);
    }
    if v6 {
        out.push(Family::Ipv6);
    }
    out
}

/// The `iptables`/`ip6tables` arguments that fill the chain of `family`,
/// in order: the mark rule (with the owner comment), then one queue rule
/// per listener of that family.
pub fn chain_rules(config: &GateConfig, family: Family, owner: &str) -> Vec<Vec<String>> {
    let chain = chain_name(config.queue);
    let mut rules = vec![strings(&[
        "-A",
        &chain,
        "-p",
        "tcp",
        "-m",
        "mark",
        "--mark",
        &format!("{:#x}", config.reject_mark),
        "-m",
        "comment",
        "--comment",
        owner,
        "-j",
        "REJECT",
        "--reject-with",
        "tcp-reset",
    ])];
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
        let address = match (listener.address, family) {
            (None, _) => None,
            (Some(address @ IpAddr::V4(_)), Family::Ipv4)
            | (Some(address @ IpAddr::V6(_)), Family::Ipv6) => Some(address),
            _ => continue,
        };
        let mut rule = strings(&["-A", &chain, "-p", "tcp", "--syn"]);
        if let Some(address) = address {
            rule.push("-d".into());
            rule.push(address.to_string());
        }
        rule.extend(["--dport".to_string(), listener.port.to_string()]);
        if shortcut_enabled(config) {
            let pid = owner.strip_prefix(OWNER_PREFIX).unwrap_or(owner);
            for &verdict in shortcut::verdicts_for(config.filter.kind) {
                let mut bypass = rule.clone();
                bypass.extend(strings(&["-m", "bpf", "--object-pinned"]));
                bypass.push(
                    shortcut::pin_path(config.queue, pid, verdict)
                        .display()
                        .to_string(),
                );
                bypass.extend(strings(match verdict {
                    Verdict::Reject => &["-j", "REJECT", "--reject-with", "tcp-reset"][..],
                    _ => &["-j", "DROP"][..],
                }));
                rules.push(bypass);
            }
        }
        rule.extend(["-j".to_string(), "NFQUEUE".to_string()]);
        rule.extend(queue_target.iter().cloned());
        rule.push("--queue-bypass".into());
        rules.push(rule);
    }
    rules
}

/// Whether the gate's iptables chain gets the shortcut's rules.
pub fn shortcut_enabled(config: &GateConfig) -> bool {
    config.shortcut != ShortcutMode::Off && !config.dry_run
}

/// The jump from INPUT to the gate's chain (as `-I INPUT 1 …`).
pub fn jump_rule(chain: &str) -> Vec<String> {
    strings(&["-I", "INPUT", "1", "-j", chain])
}

/// The nft rules of the gate's chain, without the `add rule TABLE CHAIN`
/// prefix: the mark rule, then one queue rule per listener.
pub fn nft_rules(config: &GateConfig) -> Vec<String> {
    let mut rules = vec![format!(
        "meta mark {:#x} meta l4proto tcp reject with tcp reset",
        config.reject_mark
    )];
    let queue = if config.queues > 1 {
        let flags = if config.cpu_fanout {
            "fanout,bypass"
        } else {
            "bypass"
        };
        format!(
            "queue num {}-{} {flags}",
            config.queue,
            config.queue + config.queues - 1
        )
    } else {
        format!("queue num {} bypass", config.queue)
    };
    for listener in &config.listeners {
        let address = match listener.address {
            None => String::new(),
            Some(IpAddr::V4(a)) => format!("ip daddr {a} "),
            Some(IpAddr::V6(a)) => format!("ip6 daddr {a} "),
        };
        rules.push(format!(
            "{address}tcp dport {} tcp flags & (fin|syn|rst|ack) == syn {queue}",
            listener.port
        ));
    }
    rules
}

/// The nft script that creates the gate's table, owned by `owner`: one
/// transaction (`create` fails when the table exists).
pub fn nft_script(config: &GateConfig, owner: &str) -> String {
    let table = table_name(config.queue);
    let mut script = String::new();
    let _ = writeln!(
        script,
        "create table inet {table} {{ comment \"{owner}\"; }}"
    );
    let _ = writeln!(
        script,
        "add chain inet {table} input {{ type filter hook input priority {NFT_PRIORITY}; policy accept; }}"
    );
    for rule in nft_rules(config) {
        let _ = writeln!(script, "add rule inet {table} input {rule}");
    }
    script
}

/// Which backend `choice` means here. `Auto` tries the gate's script with
/// `nft -c` (the kernel checks it and aborts the transaction) and says why
/// it fell back to iptables.
pub fn resolve(choice: RulesBackend, config: &GateConfig) -> (Backend, String) {
    match choice {
        RulesBackend::Nft => (Backend::Nft, "configured".into()),
        RulesBackend::Iptables => (Backend::Iptables, "configured".into()),
        RulesBackend::Auto => {
            let Some(program) = nft_program() else {
                return (Backend::Iptables, "auto: nft is not installed".into());
            };
            let script = nft_script(config, &owner_comment(std::process::id()));
            match nft::run_script(&program, &script, true) {
                Ok(_) => (Backend::Nft, "auto: nft accepts the rules".into()),
                Err(e) => (
                    Backend::Iptables,
                    format!(
                        "auto: nft refused the rules ({})",
                        e.to_string().lines().next().unwrap_or_default()
                    ),
                ),
            }
        }
    }
}

/// Quotes a word for a shell when it needs it.
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/,=+@%".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The exact rules a gate with `config` would install here with `choice`:
/// the nft script or the iptables commands, `PID` standing for the running
/// gate's process id. What `vantage gate check` prints.
pub fn describe(config: &GateConfig, choice: RulesBackend) -> String {
    let (backend, why) = resolve(choice, config);
    describe_for(config, backend, &why, host_has_ipv6())
}

/// [`describe`] for a given backend and IPv6 presence.
pub fn describe_for(config: &GateConfig, backend: Backend, why: &str, ipv6: bool) -> String {
    let owner = format!("{OWNER_PREFIX}PID");
    let mut out = String::new();
    match backend {
        Backend::Nft => {
            let _ = writeln!(
                out,
                "# backend nft ({why}): one transaction, `nft -f -`; PID is the gate's process id"
            );
            out.push_str(&nft_script(config, &owner));
            let _ = writeln!(
                out,
                "# removed with: delete table inet {}",
                table_name(config.queue)
            );
        }
        Backend::Iptables => {
            let _ = writeln!(
                out,
                "# backend iptables ({why}); PID is the gate's process id"
            );
            let chain = chain_name(config.queue);
            let all = families(&config.listeners, ipv6);
            let mut commands: Vec<(Family, Vec<String>)> = Vec::new();
            for &family in &all {
                commands.push((family, strings(&["-N", &chain])));
                for rule in chain_rules(config, family, &owner) {
                    commands.push((family, rule));
                }
            }
            for &family in &all {
                commands.push((family, jump_rule(&chain)));
            }
            for (family, args) in commands {
                let words: Vec<String> = args.iter().map(|w| shell_word(w)).collect();
                let _ = writeln!(out, "{} -w {}", family.program_name(), words.join(" "));
            }
            if shortcut_enabled(config) {
                let _ = writeln!(
                    out,
                    "# the bpf rules use the programs the gate loads and pins at {} (removed with the rules)",
                    shortcut::pin_path(config.queue, "PID", Verdict::Drop)
                        .with_file_name(format!(
                            "{}{}_pPID_{{drop,reject}}",
                            shortcut::PIN_PREFIX,
                            config.queue
                        ))
                        .display()
                );
            }
        }
    }
    out
}

/// Whether a gate's rules are all still in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RulesStatus {
    Intact,
    /// Something removed them (or some of them): what is missing.
    Vanished(String),
}

/// The installed rules of one gate; removed on [`GateRules::remove`] or
/// drop.
#[derive(Debug)]
pub struct GateRules {
    backend: Backend,
    /// The chain (iptables) or the table (nft).
    name: String,
    /// iptables: the families whose chain exists (and, once complete,
    /// whose jump is in).
    families: Vec<Family>,
    /// Rules per chain (iptables, by family) or in the table (nft).
    expected: Vec<(Family, usize)>,
    nft: Option<PathBuf>,
    installed: bool,
    /// iptables with the shortcut: its map and pinned programs (unpinned
    /// with the rules).
    shortcut: Option<Arc<Shortcut>>,
}

impl GateRules {
    /// Installs the rules with the backend [`RulesBackend::Auto`] picks.
    pub fn install(config: &GateConfig) -> Result<GateRules, GateError> {
        Self::install_with(config, RulesBackend::Auto)
    }

    /// Installs the rules with `choice`. If the chain or table exists
    /// already, another gate runs on the queue or a killed one left it:
    /// the error says so and nothing is touched.
    pub fn install_with(config: &GateConfig, choice: RulesBackend) -> Result<GateRules, GateError> {
        let (backend, _) = resolve(choice, config);
        let owner = owner_comment(std::process::id());
        match backend {
            Backend::Nft => Ok(Self::install_nft(config, &owner)?),
            Backend::Iptables => Self::install_iptables(config, &owner),
        }
    }

    fn install_nft(config: &GateConfig, owner: &str) -> Result<GateRules, RulesError> {
        let program = nft_program().ok_or(RulesError::NftNotInstalled)?;
        let table = table_name(config.queue);
        if let Err(e) = nft::run_script(&program, &nft_script(config, owner), false) {
            let exists = nft_command(&program, &["list", "table", "inet", &table]).is_ok();
            return Err(if exists {
                RulesError::Exists {
                    what: format!("table inet {table}"),
                    queue: config.queue,
                }
            } else {
                from_nft("nft -f - (create the gate's table)", e)
            });
        }
        Ok(GateRules {
            backend: Backend::Nft,
            name: table,
            families: Vec::new(),
            expected: vec![(Family::Ipv4, nft_rules(config).len())],
            nft: Some(program),
            installed: true,
            shortcut: None,
        })
    }

    fn install_iptables(config: &GateConfig, owner: &str) -> Result<GateRules, GateError> {
        let chain = chain_name(config.queue);
        let wanted = families(&config.listeners, host_has_ipv6());
        let mut rules = GateRules {
            backend: Backend::Iptables,
            name: chain.clone(),
            families: Vec::new(),
            expected: Vec::new(),
            nft: None,
            installed: true,
            shortcut: None,
        };
        let config = &rules.with_shortcut(config)?;
        for &family in &wanted {
            if let Err(e) = xtables_run(family, &strings(&["-N", &chain])) {
                let exists = xtables_run(family, &strings(&["-S", &chain])).is_ok();
                // On error, `rules` is dropped and removes what was made.
                return Err(if exists {
                    RulesError::Exists {
                        what: match family {
                            Family::Ipv4 => format!("chain {chain}"),
                            Family::Ipv6 => format!("chain {chain} (ip6tables)"),
                        },
                        queue: config.queue,
                    }
                } else {
                    e
                }
                .into());
            }
            rules.families.push(family);
            let fill = chain_rules(config, family, owner);
            rules.expected.push((family, fill.len()));
            for rule in fill {
                xtables_run(family, &rule)?;
            }
        }
        for &family in &wanted {
            xtables_run(family, &jump_rule(&chain))?;
        }
        Ok(rules)
    }

    /// Replaces the rules with those of `config` (same backend, same first
    /// queue) with no moment at which a SYN to a listener of both the old
    /// and the new configuration passes unqueued: nft deletes and recreates
    /// the table in one transaction; iptables fills a new chain, jumps to
    /// it ahead of the old one, then removes the old one and gives the new
    /// one its name. On error the old rules stay.
    pub fn reload(&mut self, config: &GateConfig) -> Result<(), GateError> {
        if !self.installed {
            return Err(RulesError::Failed {
                command: "reload".into(),
                stderr: format!("{} was removed", self.location()),
            }
            .into());
        }
        let owner = owner_comment(std::process::id());
        match self.backend {
            Backend::Nft => {
                let program = self.nft.clone().unwrap_or_else(|| PathBuf::from("nft"));
                let script = format!(
                    "delete table inet {}\n{}",
                    self.name,
                    nft_script(config, &owner)
                );
                nft::run_script(&program, &script, false)
                    .map_err(|e| from_nft("nft -f - (replace the gate's table)", e))?;
                self.expected = vec![(Family::Ipv4, nft_rules(config).len())];
            }
            Backend::Iptables => {
                let next = format!("{}-next", self.name);
                let wanted = families(&config.listeners, host_has_ipv6());
                let mut made: Vec<Family> = Vec::new();
                let mut expected = Vec::new();
                let config = &self.with_shortcut(config)?;
                let result = (|| -> Result<(), GateError> {
                    for &family in &wanted {
                        // A left-over from a failed reload goes first.
                        remove_chain(family, &next)?;
                        xtables_run(family, &strings(&["-N", &next]))?;
                        made.push(family);
                        let fill: Vec<Vec<String>> = chain_rules(config, family, &owner)
                            .into_iter()
                            .map(|mut rule| {
                                rule[1] = next.clone();
                                rule
                            })
                            .collect();
                        expected.push((family, fill.len()));
                        for rule in fill {
                            xtables_run(family, &rule)?;
                        }
                    }
                    for &family in &wanted {
                        xtables_run(family, &jump_rule(&next))?;
                    }
                    Ok(())
                })();
                if let Err(e) = result {
                    for &family in &made {
                        let _ = remove_chain(family, &next);
                    }
                    return Err(e);
                }
                // The new chain decides now; the old one goes.
                while let Some(family) = self.families.pop() {
                    remove_chain(family, &self.name)?;
                }
                for &family in &wanted {
                    xtables_run(family, &strings(&["-E", &next, &self.name]))?;
                    self.families.push(family);
                }
                self.expected = expected;
            }
        }
        Ok(())
    }

    /// The chains and tables of other gates in this network namespace
    /// (`chain NAME`, `table inet NAME`): a second gate for the same
    /// listeners on another queue stacks in front of or behind this one.
    pub fn other_gates(&self) -> Vec<String> {
        let mut others = Vec::new();
        if let Ok(listing) = xtables_run(Family::Ipv4, &strings(&["-S"])) {
            let (_, chains) = clean_plan(&listing);
            others.extend(
                chains
                    .into_iter()
                    .filter(|c| *c != self.name && *c != format!("{}-next", self.name))
                    .map(|c| format!("chain {c}")),
            );
        }
        if let Some(program) = nft_program() {
            if let Ok(listing) = nft_command(&program, &["list", "tables"]) {
                others.extend(
                    gate_tables(&listing)
                        .into_iter()
                        .filter(|t| *t != self.name)
                        .map(|t| format!("table inet {t}")),
                );
            }
        }
        others
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The chain (iptables) or table (nft, family `inet`) name.
    pub fn chain(&self) -> &str {
        &self.name
    }

    /// Where the rules are, for messages: `chain VANTAGE-GATE-q0 (iptables,
    /// ip6tables)` or `table inet vantage_gate_q0 (nft)`.
    pub fn location(&self) -> String {
        match self.backend {
            Backend::Nft => format!("table inet {} (nft)", self.name),
            Backend::Iptables => format!(
                "chain {} ({})",
                self.name,
                self.families
                    .iter()
                    .map(|f| f.program_name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// Whether the rules are all still in place: the table with all its
    /// rules, or each family's chain with all its rules and the jump from
    /// INPUT. `Err` when the listing itself cannot be read.
    pub fn verify(&self) -> Result<RulesStatus, GateError> {
        if !self.installed {
            return Ok(RulesStatus::Vanished(format!(
                "{} was removed by the gate",
                self.location()
            )));
        }
        match self.backend {
            Backend::Nft => {
                let program = self.nft.as_deref().unwrap_or(Path::new("nft"));
                let listing =
                    match nft::run(program, &["list", "table", "inet", self.name.as_str()]) {
                        Ok(listing) => listing,
                        Err(NftError::Failed { .. }) => {
                            return Ok(RulesStatus::Vanished(format!(
                                "table inet {} is gone",
                                self.name
                            )))
                        }
                        Err(e) => return Err(from_nft("nft list table", e).into()),
                    };
                let expected = self.expected.first().map_or(0, |(_, n)| *n);
                Ok(nft_listing_status(&listing, &self.name, expected))
            }
            Backend::Iptables => {
                for &(family, expected) in &self.expected {
                    let chain = match xtables_run(family, &strings(&["-S", &self.name])) {
                        Ok(listing) => listing,
                        Err(RulesError::Failed { .. }) => {
                            return Ok(RulesStatus::Vanished(format!(
                                "chain {} ({}) is gone",
                                self.name,
                                family.program_name()
                            )))
                        }
                        Err(e) => return Err(e.into()),
                    };
                    let input = xtables_run(family, &strings(&["-S", "INPUT"]))?;
                    let status = iptables_listing_status(&chain, &input, &self.name, expected);
                    if let RulesStatus::Vanished(what) = status {
                        return Ok(RulesStatus::Vanished(format!(
                            "{what} ({})",
                            family.program_name()
                        )));
                    }
                }
                Ok(RulesStatus::Intact)
            }
        }
    }

    /// Removes the rules: deletes the table (one transaction), or the
    /// jump(s) from INPUT, then flushes and deletes each chain. Idempotent,
    /// and rules someone else removed already are not an error.
    pub fn remove(&mut self) -> Result<(), GateError> {
        if !self.installed {
            return Ok(());
        }
        match self.backend {
            Backend::Nft => {
                let program = self.nft.clone().unwrap_or_else(|| PathBuf::from("nft"));
                let table = self.name.clone();
                if let Err(e) = nft_command(&program, &["delete", "table", "inet", &table]) {
                    if nft_command(&program, &["list", "table", "inet", &table]).is_ok() {
                        return Err(e.into());
                    }
                }
            }
            Backend::Iptables => {
                while let Some(&family) = self.families.last() {
                    remove_chain(family, &self.name)?;
                    self.families.pop();
                }
            }
        }
        if let Some(shortcut) = &self.shortcut {
            shortcut.unpin();
        }
        self.installed = false;
        Ok(())
    }

    /// `config` as the rules will be: without the shortcut when it is
    /// off, or `auto` and this process cannot load it (then a warning).
    fn with_shortcut(&mut self, config: &GateConfig) -> Result<GateConfig, GateError> {
        let mut effective = config.clone();
        if shortcut_enabled(config) && self.shortcut.is_none() {
            match Shortcut::create(config.queue) {
                Ok(shortcut) => self.shortcut = Some(Arc::new(shortcut)),
                Err(e) if config.shortcut == ShortcutMode::Auto => eprintln!(
                    "vantage gate: warning: no kernel-side shortcut ({e}): every SYN is queued; it needs CAP_BPF, and CAP_SYS_ADMIN when no bpffs is mounted at /sys/fs/bpf"
                ),
                Err(e) => return Err(e.into()),
            }
        }
        if self.shortcut.is_none() {
            effective.shortcut = ShortcutMode::Off;
        }
        Ok(effective)
    }

    /// The shortcut's map and programs, when the rules use them: hand it
    /// to the [`super::Gate`] ([`super::Gate::attach_shortcut`]).
    pub fn shortcut(&self) -> Option<Arc<Shortcut>> {
        self.shortcut.clone()
    }
}

/// Deletes the jumps to `chain` from INPUT, flushes and deletes it; a chain
/// that is gone already is not an error.
fn remove_chain(family: Family, chain: &str) -> Result<(), GateError> {
    // Bounded: the gate inserted one jump; a few more would be someone
    // else's copies of it.
    for _ in 0..16 {
        if xtables_run(family, &strings(&["-D", "INPUT", "-j", chain])).is_err() {
            break;
        }
    }
    if xtables_run(family, &strings(&["-S", chain])).is_err() {
        return Ok(());
    }
    xtables_run(family, &strings(&["-F", chain]))?;
    xtables_run(family, &strings(&["-X", chain]))?;
    Ok(())
}

impl Drop for GateRules {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!(
                "vantage gate: could not remove the rules of {}: {e}; run `vantage gate clean`",
                self.location()
            );
        }
    }
}

/// Whether `nft list table inet TABLE` shows the input hook and
/// `expected` rules (the mark rule and the queue rules).
pub fn nft_listing_status(listing: &str, table: &str, expected: usize) -> RulesStatus {
    if !listing.contains("hook input") {
        return RulesStatus::Vanished(format!("table inet {table} has no input chain"));
    }
    let rules = listing
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("reject with tcp reset") || l.contains(" queue "))
        .count();
    if rules < expected {
        RulesStatus::Vanished(format!(
            "table inet {table} has {rules} of its {expected} rules"
        ))
    } else {
        RulesStatus::Intact
    }
}

/// Whether `-S CHAIN` shows `expected` rules and `-S INPUT` a jump to it.
pub fn iptables_listing_status(
    chain_listing: &str,
    input_listing: &str,
    chain: &str,
    expected: usize,
) -> RulesStatus {
    let rules = chain_listing
        .lines()
        .filter(|l| {
            split_rule(l)
                .get(..2)
                .is_some_and(|w| w[0] == "-A" && w[1] == chain)
        })
        .count();
    if rules < expected {
        return RulesStatus::Vanished(format!("chain {chain} has {rules} of its {expected} rules"));
    }
    let jump = input_listing.lines().any(|l| {
        let words = split_rule(l);
        words.first().map(String::as_str) == Some("-A")
            && words.windows(2).any(|w| w[0] == "-j" && w[1] == chain)
    });
    if jump {
        RulesStatus::Intact
    } else {
        RulesStatus::Vanished(format!("the jump from INPUT to {chain} is gone"))
    }
}

/// The owner pid recorded in a rule or table listing, if any.
pub fn owner_in(listing: &str) -> Option<u32> {
    let at = listing.find(OWNER_PREFIX)? + OWNER_PREFIX.len();
    let digits: String = listing[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
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

/// The owner of each gate chain in an `iptables -S` listing (from the
/// comment on its rules).
pub fn chain_owners(listing: &str) -> Vec<(String, u32)> {
    let mut owners: Vec<(String, u32)> = Vec::new();
    for line in listing.lines() {
        let words = split_rule(line);
        if words.first().map(String::as_str) != Some("-A") {
            continue;
        }
        let Some(chain) = words.get(1).filter(|c| c.starts_with(CHAIN_PREFIX)) else {
            continue;
        };
        let owner = words
            .windows(2)
            .find(|w| w[0] == "--comment")
            .and_then(|w| owner_in(&w[1]));
        if let Some(pid) = owner {
            if !owners.iter().any(|(c, _)| c == chain) {
                owners.push((chain.clone(), pid));
            }
        }
    }
    owners
}

/// The gate tables in the output of `nft list tables`.
pub fn gate_tables(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["table", "inet", name] if name.starts_with(TABLE_PREFIX) => Some(name.to_string()),
                _ => None,
            }
        })
        .collect()
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
    /// Rules that jumped to a gate chain (both families).
    pub jumps: usize,
    /// Gate chains, `NAME` for iptables and `NAME (ip6tables)`.
    pub chains: Vec<String>,
    /// Gate tables (nft, family `inet`).
    pub tables: Vec<String>,
    /// Pinned shortcut programs of gates that no longer run (bpffs paths).
    pub pins: Vec<String>,
}

/// One family's gate chains found by [`clean`].
struct XtablesFound {
    family: Family,
    jumps: Vec<Vec<String>>,
    chains: Vec<String>,
    owners: Vec<(String, u32)>,
}

/// Removes every gate table and every `VANTAGE-GATE*` chain (both
/// families) with the rules that jump to one, in this network namespace;
/// refuses, removing nothing, while a live gate owns one of them.
pub fn clean() -> Result<CleanReport, GateError> {
    clean_with(false)
}

/// [`clean`]; with `force`, also the rules of gates that still run.
pub fn clean_with(force: bool) -> Result<CleanReport, GateError> {
    let me = std::process::id();
    let live = |pid: u32| pid != me && vantage_sys::process::is_alive(pid);
    let mut found: Vec<XtablesFound> = Vec::new();
    for family in [Family::Ipv4, Family::Ipv6] {
        let listing = match xtables_run(family, &strings(&["-S"])) {
            Ok(listing) => listing,
            // iptables is required; ip6tables may be absent.
            Err(e) if family == Family::Ipv4 => return Err(e.into()),
            Err(_) => continue,
        };
        let (jumps, chains) = clean_plan(&listing);
        found.push(XtablesFound {
            family,
            jumps,
            chains,
            owners: chain_owners(&listing),
        });
    }
    let nft = nft_program();
    let mut tables: Vec<(String, Option<u32>)> = Vec::new();
    if let Some(program) = &nft {
        if let Ok(listing) = nft_command(program, &["list", "tables"]) {
            for table in gate_tables(&listing) {
                let owner = nft_command(program, &["list", "table", "inet", &table])
                    .ok()
                    .and_then(|l| owner_in(&l));
                tables.push((table, owner));
            }
        }
    }
    if !force {
        for f in &found {
            if let Some((chain, pid)) = f.owners.iter().find(|(_, pid)| live(*pid)) {
                return Err(RulesError::OwnedByLiveGate {
                    what: format!("chain {chain} ({})", f.family.program_name()),
                    pid: *pid,
                }
                .into());
            }
        }
        if let Some((table, Some(pid))) = tables.iter().find(|(_, pid)| pid.is_some_and(live)) {
            return Err(RulesError::OwnedByLiveGate {
                what: format!("table inet {table}"),
                pid: *pid,
            }
            .into());
        }
    }
    let mut report = CleanReport::default();
    for f in &found {
        for jump in &f.jumps {
            xtables_run(f.family, jump)?;
            report.jumps += 1;
        }
        for chain in &f.chains {
            xtables_run(f.family, &strings(&["-F", chain]))?;
        }
        for chain in &f.chains {
            xtables_run(f.family, &strings(&["-X", chain]))?;
            report.chains.push(match f.family {
                Family::Ipv4 => chain.clone(),
                Family::Ipv6 => format!("{chain} (ip6tables)"),
            });
        }
    }
    if let Some(program) = &nft {
        for (table, _) in &tables {
            nft_command(program, &["delete", "table", "inet", table])?;
            report.tables.push(table.clone());
        }
    }
    // bpffs is shared by every network namespace: only the pins of gates
    // that are gone (or, forced, of every other gate) are removed.
    for (path, pid) in shortcut::pinned() {
        if pid != me && (force || !vantage_sys::process::is_alive(pid)) {
            if let Err(e) = std::fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(GateError::Rules(format!("remove {}: {e}", path.display())));
                }
            }
            report.pins.push(path.display().to_string());
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawn_failure_says_missing_only_when_the_program_is() {
        let missing = RulesError::CannotRun {
            program: "iptables",
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(
            missing.to_string().ends_with("(is it installed?)"),
            "{missing}"
        );
        for (errno, limit) in [
            (libc::EMFILE, "this process's"),
            (libc::ENFILE, "the system's"),
        ] {
            let exhausted = RulesError::CannotRun {
                program: "nft",
                source: std::io::Error::from_raw_os_error(errno),
            };
            let text = exhausted.to_string();
            assert!(
                text.starts_with(&format!(
                    "cannot run nft: out of file descriptors ({limit} limit)"
                )),
                "{text}"
            );
            assert!(!text.contains("installed"), "{text}");
        }
        let rules: GateError = missing.into();
        assert!(
            rules
                .to_string()
                .starts_with("rules: cannot run iptables: "),
            "{rules}"
        );
    }

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
        let chain_rules =
            |config: &GateConfig| chain_rules(config, Family::Ipv4, "vantage gate pid 42");
        let rules: Vec<String> = chain_rules(&config).iter().map(|r| r.join(" ")).collect();
        assert_eq!(
            rules,
            vec![
                "-A VANTAGE-GATE-q3 -p tcp -m mark --mark 0x5647 -m comment --comment vantage gate pid 42 -j REJECT --reject-with tcp-reset",
                "-A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q3_p42_reject -j REJECT --reject-with tcp-reset",
                "-A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -j NFQUEUE --queue-num 3 --queue-bypass",
                "-A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q3_p42_reject -j REJECT --reject-with tcp-reset",
                "-A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -j NFQUEUE --queue-num 3 --queue-bypass",
            ]
        );
        // Without the shortcut (or in a dry run): the mark rule and the
        // queue rules only.
        for off in ["shortcut = false", "dry_run = true"] {
            let config = GateConfig::from_toml(
                &CONFIG.replace("queue = 3", &format!("queue = 3\n{off}")),
                "t.toml",
            )
            .unwrap();
            let rules: Vec<String> = chain_rules(&config).iter().map(|r| r.join(" ")).collect();
            assert_eq!(rules.len(), 3, "{off}");
            assert!(rules.iter().all(|r| !r.contains("bpf")), "{off}");
        }
        // A dropping filter gets the DROP rule, Greedy both.
        let kind = |kind: &str| {
            let config = GateConfig::from_toml(
                &CONFIG.replace("kind = \"tbf-reject\"", &format!("kind = \"{kind}\"")),
                "t.toml",
            )
            .unwrap();
            chain_rules(&config)
                .iter()
                .filter(|r| r.iter().any(|w| w == "bpf"))
                .map(|r| r[r.iter().position(|w| w == "-j").unwrap() + 1].clone())
                .collect::<Vec<String>>()
        };
        assert_eq!(kind("tbf"), ["DROP", "DROP"]);
        assert_eq!(kind("abacus"), ["REJECT", "REJECT"]);
        assert_eq!(kind("greedy"), ["DROP", "REJECT", "DROP", "REJECT"]);
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
            rules[2].join(" "),
            "-A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -j NFQUEUE --queue-balance 3:6 --queue-bypass"
        );
        let fanout = GateConfig::from_toml(
            &CONFIG.replace("queue = 3", "queue = 3\nqueues = 2\ncpu_fanout = true"),
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            chain_rules(&fanout)[2].join(" "),
            "-A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -j NFQUEUE --queue-balance 3:4 --queue-cpu-fanout --queue-bypass"
        );
    }

    const DUAL: &str = r#"
[gate]
queue = 3
reject_mark = 0x5647
[[listeners]]
address = "10.77.0.2"
port = 80
[[listeners]]
address = "fd00::2"
port = 443
[[listeners]]
port = 8080
[filter]
kind = "tbf-reject"
bucket_size = 2
refill_rate = 1
"#;

    #[test]
    fn each_family_queues_its_own_listeners() {
        let config = GateConfig::from_toml(DUAL, "t.toml").unwrap();
        assert_eq!(
            families(&config.listeners, true),
            vec![Family::Ipv4, Family::Ipv6]
        );
        assert_eq!(
            families(&config.listeners, false),
            vec![Family::Ipv4, Family::Ipv6]
        );
        let v4_only = &config.listeners[..1];
        assert_eq!(families(v4_only, true), vec![Family::Ipv4]);
        let any = &config.listeners[2..];
        assert_eq!(families(any, true), vec![Family::Ipv4, Family::Ipv6]);
        assert_eq!(families(any, false), vec![Family::Ipv4]);
        let six: Vec<String> = chain_rules(&config, Family::Ipv6, "o")
            .iter()
            .map(|r| r.join(" "))
            .collect();
        assert_eq!(
            six[1..],
            [
                "-A VANTAGE-GATE-q3 -p tcp --syn -d fd00::2 --dport 443 -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q3_po_reject -j REJECT --reject-with tcp-reset",
                "-A VANTAGE-GATE-q3 -p tcp --syn -d fd00::2 --dport 443 -j NFQUEUE --queue-num 3 --queue-bypass",
                "-A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q3_po_reject -j REJECT --reject-with tcp-reset",
                "-A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -j NFQUEUE --queue-num 3 --queue-bypass",
            ]
        );
        assert_eq!(chain_rules(&config, Family::Ipv4, "o").len(), 5);
    }

    #[test]
    fn the_nft_table_is_one_transaction_in_the_same_order() {
        let config = GateConfig::from_toml(DUAL, "t.toml").unwrap();
        assert_eq!(
            nft_script(&config, "vantage gate pid 42"),
            "create table inet vantage_gate_q3 { comment \"vantage gate pid 42\"; }\n\
             add chain inet vantage_gate_q3 input { type filter hook input priority -10; policy accept; }\n\
             add rule inet vantage_gate_q3 input meta mark 0x5647 meta l4proto tcp reject with tcp reset\n\
             add rule inet vantage_gate_q3 input ip daddr 10.77.0.2 tcp dport 80 tcp flags & (fin|syn|rst|ack) == syn queue num 3 bypass\n\
             add rule inet vantage_gate_q3 input ip6 daddr fd00::2 tcp dport 443 tcp flags & (fin|syn|rst|ack) == syn queue num 3 bypass\n\
             add rule inet vantage_gate_q3 input tcp dport 8080 tcp flags & (fin|syn|rst|ack) == syn queue num 3 bypass\n"
        );
        let fanout = GateConfig::from_toml(
            &DUAL.replace("queue = 3", "queue = 3\nqueues = 2\ncpu_fanout = true"),
            "t.toml",
        )
        .unwrap();
        assert!(nft_rules(&fanout)[1].ends_with("queue num 3-4 fanout,bypass"));
        let balanced = GateConfig::from_toml(
            &DUAL.replace("queue = 3", "queue = 3\nqueues = 4"),
            "t.toml",
        )
        .unwrap();
        assert!(nft_rules(&balanced)[1].ends_with("queue num 3-6 bypass"));
    }

    #[test]
    fn describe_prints_the_exact_rules() {
        let config = GateConfig::from_toml(DUAL, "t.toml").unwrap();
        let nft = describe_for(&config, Backend::Nft, "configured", true);
        assert!(nft.starts_with("# backend nft (configured)"), "{nft}");
        assert!(nft.contains("comment \"vantage gate pid PID\""), "{nft}");
        assert!(
            nft.ends_with("# removed with: delete table inet vantage_gate_q3\n"),
            "{nft}"
        );
        let iptables = describe_for(&config, Backend::Iptables, "configured", true);
        let lines: Vec<&str> = iptables.lines().collect();
        assert_eq!(
            lines[1..],
            [
                "iptables -w -N VANTAGE-GATE-q3",
                "iptables -w -A VANTAGE-GATE-q3 -p tcp -m mark --mark 0x5647 -m comment --comment 'vantage gate pid PID' -j REJECT --reject-with tcp-reset",
                "iptables -w -A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q3_pPID_reject -j REJECT --reject-with tcp-reset",
                "iptables -w -A VANTAGE-GATE-q3 -p tcp --syn -d 10.77.0.2 --dport 80 -j NFQUEUE --queue-num 3 --queue-bypass",
                "iptables -w -A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q3_pPID_reject -j REJECT --reject-with tcp-reset",
                "iptables -w -A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -j NFQUEUE --queue-num 3 --queue-bypass",
                "ip6tables -w -N VANTAGE-GATE-q3",
                "ip6tables -w -A VANTAGE-GATE-q3 -p tcp -m mark --mark 0x5647 -m comment --comment 'vantage gate pid PID' -j REJECT --reject-with tcp-reset",
                "ip6tables -w -A VANTAGE-GATE-q3 -p tcp --syn -d fd00::2 --dport 443 -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q3_pPID_reject -j REJECT --reject-with tcp-reset",
                "ip6tables -w -A VANTAGE-GATE-q3 -p tcp --syn -d fd00::2 --dport 443 -j NFQUEUE --queue-num 3 --queue-bypass",
                "ip6tables -w -A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q3_pPID_reject -j REJECT --reject-with tcp-reset",
                "ip6tables -w -A VANTAGE-GATE-q3 -p tcp --syn --dport 8080 -j NFQUEUE --queue-num 3 --queue-bypass",
                "iptables -w -I INPUT 1 -j VANTAGE-GATE-q3",
                "ip6tables -w -I INPUT 1 -j VANTAGE-GATE-q3",
                "# the bpf rules use the programs the gate loads and pins at /sys/fs/bpf/vantage_gate_q3_pPID_{drop,reject} (removed with the rules)",
            ]
        );
    }

    #[test]
    fn listings_tell_whether_the_rules_are_all_there() {
        let chain = "-N VANTAGE-GATE-q0\n-A VANTAGE-GATE-q0 -p tcp -m mark --mark 0x5647 -m comment --comment \"vantage gate pid 7\" -j REJECT --reject-with tcp-reset\n-A VANTAGE-GATE-q0 -p tcp -m tcp --dport 80 --tcp-flags FIN,SYN,RST,ACK SYN -j NFQUEUE --queue-num 0 --queue-bypass\n";
        let input = "-P INPUT ACCEPT\n-A INPUT -j VANTAGE-GATE-q0\n";
        assert_eq!(
            iptables_listing_status(chain, input, "VANTAGE-GATE-q0", 2),
            RulesStatus::Intact
        );
        assert_eq!(
            iptables_listing_status(chain, "-P INPUT ACCEPT\n", "VANTAGE-GATE-q0", 2),
            RulesStatus::Vanished("the jump from INPUT to VANTAGE-GATE-q0 is gone".into())
        );
        assert_eq!(
            iptables_listing_status("-N VANTAGE-GATE-q0\n", input, "VANTAGE-GATE-q0", 2),
            RulesStatus::Vanished("chain VANTAGE-GATE-q0 has 0 of its 2 rules".into())
        );
        let table = "table inet vantage_gate_q0 {\n\tcomment \"vantage gate pid 7\"\n\tchain input {\n\t\ttype filter hook input priority filter - 10; policy accept;\n\t\tmeta mark 0x00005647 meta l4proto tcp reject with tcp reset\n\t\ttcp dport 80 tcp flags syn / fin,syn,rst,ack queue to 0 bypass\n\t}\n}\n";
        assert_eq!(
            nft_listing_status(table, "vantage_gate_q0", 2),
            RulesStatus::Intact
        );
        let flushed = "table inet vantage_gate_q0 {\n\tchain input {\n\t\ttype filter hook input priority filter - 10; policy accept;\n\t}\n}\n";
        assert_eq!(
            nft_listing_status(flushed, "vantage_gate_q0", 2),
            RulesStatus::Vanished("table inet vantage_gate_q0 has 0 of its 2 rules".into())
        );
        assert_eq!(owner_in(table), Some(7));
        assert_eq!(
            chain_owners(chain),
            vec![("VANTAGE-GATE-q0".to_string(), 7)]
        );
        assert_eq!(owner_in("comment \"other\""), None);
        assert_eq!(
            gate_tables("table ip filter\ntable inet vantage_gate_q0\ntable inet vantage_gate_q12\ntable inet other\n"),
            vec!["vantage_gate_q0", "vantage_gate_q12"]
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
