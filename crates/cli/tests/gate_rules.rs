//! The gate's rules as root, each test in a network namespace of its own
//! (`vgr-<pid>-<n>`), removed with everything in it on every exit path:
//!
//! * an IPv6 listener on `::1` is gated: its SYNs meet the filter (the
//!   second connection is refused by the bucket), the rules are in
//!   ip6tables only, and they go when the gate stops;
//! * `GateRules::verify` sees a flushed chain, a deleted jump and a removed
//!   chain; `remove` after that is no error;
//! * `vantage gate clean` refuses while the gate that owns the rules runs,
//!   and removes the rules of a dead owner;
//! * `GateRules::reload` swaps the chain for one with other listeners,
//!   one jump and one chain name throughout;
//! * with the nftables backend (where the kernel has `nft_queue`), the
//!   table is created and removed in one piece and verified the same way.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use vantage_live::gate::rules::{
    self, chain_name, clean_with, owner_comment, table_name, xtables_run, Backend, RulesBackend,
    RulesStatus,
};
use vantage_live::gate::{GateConfig, GateRules};
use vantage_sys::iptables::Family;
use vantage_testbed::netns::Netns;

/// Whether a root test can run here; says why not otherwise.
fn can_run_as_root(test: &str) -> bool {
    if !vantage_sys::privilege::is_root() {
        eprintln!("skipped {test}: needs root (network namespaces, NFQUEUE, iptables)");
        return false;
    }
    for tool in ["ip", "iptables", "ip6tables"] {
        if Command::new(tool).arg("-V").output().is_err() {
            eprintln!("skipped {test}: `{tool}` is not installed");
            return false;
        }
    }
    true
}

static NAMESPACES: AtomicUsize = AtomicUsize::new(0);

/// A namespace, and a gate started in it; both gone when dropped.
struct Lab {
    ns: Netns,
    dir: PathBuf,
    gate: Option<Child>,
}

impl Lab {
    fn new(name: &str) -> Lab {
        let n = NAMESPACES.fetch_add(1, Ordering::SeqCst);
        let ns = Netns::create(&format!("vgr-{}-{n}", std::process::id()))
            .expect("create the test namespace");
        let dir =
            std::env::temp_dir().join(format!("vantage-gate-rules-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Lab {
            ns,
            dir,
            gate: None,
        }
    }

    /// Runs `program args…` in the namespace.
    fn exec(&self, program: &str, args: &[&str]) -> Output {
        self.ns
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    fn listing(&self, program: &str) -> String {
        String::from_utf8_lossy(&self.exec(program, &["-w", "-S"]).stdout).into_owned()
    }

    /// Starts `vantage gate run` with `config` and waits (≤ 10 s) for its
    /// ready file; returns its pid.
    fn start_gate(&mut self, config: &str) -> u32 {
        let config_path = self.dir.join("gate.toml");
        std::fs::write(&config_path, config).unwrap();
        let ready = self.dir.join("ready");
        let _ = std::fs::remove_file(&ready);
        let child = self
            .ns
            .command(env!("CARGO_BIN_EXE_vantage"))
            .args(["gate", "run", "--config"])
            .arg(&config_path)
            .arg("--ready-file")
            .arg(&ready)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("gate.stderr")).unwrap())
            .spawn()
            .expect("start the gate");
        let pid = child.id();
        self.gate = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready.exists() {
            if let Some(status) = self.gate.as_mut().unwrap().try_wait().unwrap() {
                panic!("the gate exited ({status}): {}", self.gate_stderr());
            }
            assert!(
                Instant::now() < deadline,
                "gate not ready within 10 s: {}",
                self.gate_stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        pid
    }

    fn gate_stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("gate.stderr")).unwrap_or_default()
    }

    /// SIGTERM to the gate; waits (≤ 10 s) for it to exit.
    fn stop_gate(&mut self) -> std::process::ExitStatus {
        let mut child = self.gate.take().expect("a gate was started");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the gate did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs `work` on a thread inside the namespace.
    fn inside<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> T {
        self.ns.run(work).expect("enter the test namespace")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut gate) = self.gate.take() {
            let _ = gate.kill();
            let _ = gate.wait();
        }
        let _ = self.ns.destroy(Duration::from_secs(2));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config(listener: &str, queue: u16, filter: &str) -> GateConfig {
    GateConfig::from_toml(&config_text(listener, queue, filter), "gate.toml")
        .expect("a valid configuration")
}

fn config_text(listener: &str, queue: u16, filter: &str) -> String {
    format!("[gate]\nqueue = {queue}\ninterval_ms = 250\n[[listeners]]\n{listener}\n[filter]\n{filter}\n")
}

const ONE_TOKEN: &str = "kind = \"tbf-reject\"\nbucket_size = 1\nrefill_rate = 0";

/// Connects to `address` (≤ 2 s): `Ok` when the handshake completed,
/// the error kind otherwise (`ConnectionRefused` for a RST).
fn connect(address: SocketAddr) -> Result<(), ErrorKind> {
    TcpStream::connect_timeout(&address, Duration::from_secs(2))
        .map(|_| ())
        .map_err(|e| e.kind())
}

#[test]
fn an_ipv6_listener_is_gated() {
    if !can_run_as_root("an_ipv6_listener_is_gated") {
        return;
    }
    let mut lab = Lab::new("ipv6");
    let address: SocketAddr = "[::1]:8080".parse().unwrap();
    let server = lab.inside(move || TcpListener::bind(address).expect("bind [::1]:8080"));
    lab.start_gate(&config_text("address = \"::1\"\nport = 8080", 4, ONE_TOKEN));
    let chain = chain_name(4);
    let six = lab.listing("ip6tables");
    assert!(six.contains(&format!("-A INPUT -j {chain}")), "{six}");
    assert!(six.contains("-d ::1/128"), "{six}");
    let four = lab.listing("iptables");
    assert!(!four.contains(&chain), "an IPv6 listener only: {four}");
    // The bucket holds one token and never refills: the first SYN is
    // accepted, the second rejected with a RST by ip6tables.
    let results = lab.inside(move || (connect(address), connect(address)));
    assert_eq!(results, (Ok(()), Err(ErrorKind::ConnectionRefused)));
    drop(server);
    let status = lab.stop_gate();
    assert!(status.success(), "{status}: {}", lab.gate_stderr());
    let six = lab.listing("ip6tables");
    assert!(!six.contains("VANTAGE-GATE"), "{six}");
}

#[test]
fn verify_sees_rules_vanish_and_remove_still_succeeds() {
    if !can_run_as_root("verify_sees_rules_vanish_and_remove_still_succeeds") {
        return;
    }
    let lab = Lab::new("verify");
    let config = config("port = 8080", 6, ONE_TOKEN);
    lab.inside(move || {
        let chain = chain_name(6);
        let mut rules = GateRules::install_with(&config, RulesBackend::Iptables).unwrap();
        assert_eq!(rules.backend(), Backend::Iptables);
        assert_eq!(rules.verify().unwrap(), RulesStatus::Intact);
        // Someone deletes the jump from INPUT.
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        xtables_run(Family::Ipv4, &args(&["-D", "INPUT", "-j", &chain])).unwrap();
        assert_eq!(
            rules.verify().unwrap(),
            RulesStatus::Vanished(format!("the jump from INPUT to {chain} is gone (iptables)"))
        );
        xtables_run(Family::Ipv4, &args(&["-I", "INPUT", "1", "-j", &chain])).unwrap();
        assert_eq!(rules.verify().unwrap(), RulesStatus::Intact);
        // Someone flushes the chain (the mark rule, the shortcut's REJECT
        // rule, the queue rule).
        xtables_run(Family::Ipv4, &args(&["-F", &chain])).unwrap();
        assert!(
            matches!(rules.verify().unwrap(), RulesStatus::Vanished(ref what) if what.contains("has 0 of its 3 rules")),
            "{:?}",
            rules.verify()
        );
        // `gate clean` removes everything: this process owns the rules, so
        // no refusal here.
        let report = clean_with(false).unwrap();
        assert!(report.chains.contains(&chain), "{report:?}");
        assert!(
            matches!(rules.verify().unwrap(), RulesStatus::Vanished(ref what) if what.contains("is gone")),
            "{:?}",
            rules.verify()
        );
        rules.remove().expect("removing vanished rules is no error");
    });
    assert!(!lab.listing("iptables").contains("VANTAGE-GATE"));
    assert!(!lab.listing("ip6tables").contains("VANTAGE-GATE"));
}

#[test]
fn clean_refuses_while_the_owner_runs_and_removes_a_dead_owners_rules() {
    if !can_run_as_root("clean_refuses_while_the_owner_runs_and_removes_a_dead_owners_rules") {
        return;
    }
    let mut lab = Lab::new("clean");
    let pid = lab.start_gate(&config_text(
        "address = \"127.0.0.1\"\nport = 8080",
        7,
        ONE_TOKEN,
    ));
    let out = lab.exec(env!("CARGO_BIN_EXE_vantage"), &["gate", "clean"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "clean must refuse: {stderr}");
    assert!(
        stderr.contains(&format!("belongs to the running gate with pid {pid}")),
        "{stderr}"
    );
    let rules = lab.listing("iptables");
    assert!(
        rules.contains(&format!("-A INPUT -j {}", chain_name(7))),
        "{rules}"
    );
    assert!(rules.contains(&owner_comment(pid)), "{rules}");
    // Forced: removed although the gate runs.
    let report = lab.inside(|| clean_with(true).unwrap());
    assert_eq!(report.chains, vec![chain_name(7)]);
    assert!(!lab.listing("iptables").contains("VANTAGE-GATE"));
    assert!(lab.stop_gate().success(), "{}", lab.gate_stderr());

    // A chain whose owner is dead (a reaped child's pid) is stale: clean
    // removes it without being forced.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let chain = chain_name(8);
    let comment = owner_comment(dead);
    for args in [
        vec!["-N", chain.as_str()],
        vec![
            "-A",
            &chain,
            "-p",
            "tcp",
            "-m",
            "comment",
            "--comment",
            &comment,
            "-j",
            "RETURN",
        ],
        vec!["-I", "INPUT", "1", "-j", &chain],
    ] {
        let out = lab.exec("iptables", &[&["-w"], args.as_slice()].concat());
        assert!(out.status.success(), "{args:?}");
    }
    let out = lab.exec(env!("CARGO_BIN_EXE_vantage"), &["gate", "clean"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!lab.listing("iptables").contains("VANTAGE-GATE"));
}

#[test]
fn the_nft_table_is_installed_verified_and_removed_in_one_piece() {
    if !can_run_as_root("the_nft_table_is_installed_verified_and_removed_in_one_piece") {
        return;
    }
    let lab = Lab::new("nft");
    let config = config("port = 8080", 9, ONE_TOKEN);
    let probe = config.clone();
    let (backend, why) = lab.inside(move || rules::resolve(RulesBackend::Auto, &probe));
    if backend != Backend::Nft {
        eprintln!("skipped the nft backend: {why}");
        return;
    }
    lab.inside(move || {
        let table = table_name(9);
        let mut rules = GateRules::install_with(&config, RulesBackend::Nft).unwrap();
        assert_eq!(rules.verify().unwrap(), RulesStatus::Intact);
        // A second gate on the same queue is refused, nothing touched.
        let error = GateRules::install_with(&config, RulesBackend::Nft).unwrap_err();
        assert!(error.to_string().contains("exists already"), "{error}");
        assert_eq!(rules.verify().unwrap(), RulesStatus::Intact);
        let nft = |args: &[&str]| {
            let out = Command::new("nft").args(args).output().unwrap();
            assert!(out.status.success(), "nft {args:?}");
        };
        nft(&["flush", "chain", "inet", &table, "input"]);
        assert!(matches!(rules.verify().unwrap(), RulesStatus::Vanished(_)));
        nft(&["delete", "table", "inet", &table]);
        assert_eq!(
            rules.verify().unwrap(),
            RulesStatus::Vanished(format!("table inet {table} is gone"))
        );
        rules
            .remove()
            .expect("removing a vanished table is no error");
    });
}

#[test]
fn clean_leaves_a_live_gates_nft_table_and_removes_a_dead_ones() {
    if !can_run_as_root("clean_leaves_a_live_gates_nft_table_and_removes_a_dead_ones") {
        return;
    }
    if Command::new("nft").arg("-v").output().is_err() {
        eprintln!("skipped: `nft` is not installed");
        return;
    }
    let lab = Lab::new("nft-clean");
    // A table as a gate makes it, without the queue rule (which needs
    // `nft_queue` in the kernel): the owner is a live process.
    let mut owner = Command::new("sleep").arg("30").spawn().unwrap();
    let table = table_name(11);
    let script = format!(
        "create table inet {table} {{ comment \"{}\"; }}\nadd chain inet {table} input {{ type filter hook input priority -10; policy accept; }}\n",
        owner_comment(owner.id())
    );
    let create = lab
        .inside(move || vantage_sys::nft::run_script(std::path::Path::new("nft"), &script, false));
    create.expect("create the table");
    let out = lab.exec(env!("CARGO_BIN_EXE_vantage"), &["gate", "clean"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "clean must refuse: {stderr}");
    assert!(
        stderr.contains(&format!(
            "table inet {table} belongs to the running gate with pid {}",
            owner.id()
        )),
        "{stderr}"
    );
    owner.kill().unwrap();
    owner.wait().unwrap();
    let report = lab.inside(|| clean_with(false).unwrap());
    assert_eq!(report.tables, vec![table]);
    let tables = String::from_utf8_lossy(&lab.exec("nft", &["list", "tables"]).stdout).into_owned();
    assert!(!tables.contains("vantage_gate"), "{tables}");
}

#[test]
fn reload_replaces_the_rules_in_place() {
    if !can_run_as_root("reload_replaces_the_rules_in_place") {
        return;
    }
    let lab = Lab::new("reload");
    let first = config("address = \"127.0.0.1\"\nport = 8080", 12, ONE_TOKEN);
    let second = GateConfig::from_toml(
        &config_text(
            "address = \"127.0.0.1\"\nport = 8080\n[[listeners]]\naddress = \"::1\"\nport = 9090",
            12,
            ONE_TOKEN,
        ),
        "gate.toml",
    )
    .unwrap();
    let (four, six) = lab.inside(move || {
        let mut rules = GateRules::install_with(&first, RulesBackend::Iptables).unwrap();
        rules.reload(&second).unwrap();
        assert_eq!(rules.verify().unwrap(), RulesStatus::Intact);
        assert_eq!(rules.other_gates(), Vec::<String>::new());
        let other = GateConfig::from_toml(
            &config_text("address = \"127.0.0.1\"\nport = 8080", 13, ONE_TOKEN),
            "gate.toml",
        )
        .unwrap();
        let second_gate = GateRules::install_with(&other, RulesBackend::Iptables).unwrap();
        assert_eq!(
            rules.other_gates(),
            vec![format!("chain {}", chain_name(13))]
        );
        drop(second_gate);
        let listing = |family| xtables_run(family, &["-S".to_string()]).unwrap();
        let listings = (listing(Family::Ipv4), listing(Family::Ipv6));
        rules.remove().unwrap();
        listings
    });
    let chain = chain_name(12);
    for listing in [&four, &six] {
        assert_eq!(
            listing.matches(&format!("-A INPUT -j {chain}")).count(),
            1,
            "{listing}"
        );
        assert!(!listing.contains("-next"), "{listing}");
    }
    assert!(four.contains("--dport 8080"), "{four}");
    assert!(
        six.contains("-d ::1/128 -p tcp -m tcp --dport 9090"),
        "{six}"
    );
    assert!(!lab.listing("iptables").contains("VANTAGE-GATE"));
    assert!(!lab.listing("ip6tables").contains("VANTAGE-GATE"));
}
