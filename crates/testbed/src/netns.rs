//! Linux network namespaces: create, enter, run commands in, delete.
//!
//! Namespaces are the named kind that `ip netns` manages (a bind mount under
//! `/run/netns/<name>`), so that `ip netns exec` and `ip netns pids` work on
//! them and a crashed run can be found and removed by name. A thread enters
//! one with `setns(2)`; sockets it then creates stay in that namespace for
//! their whole life, whatever thread later polls them.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Command, Output};

use nix::sched::{setns, CloneFlags};
use vantage_sys::command::{run_command, CommandError};

/// Errors from namespace and `ip`/`sysctl` operations, naming the command.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("cannot enter network namespace {name}: {source}")]
    Enter {
        name: String,
        #[source]
        source: io::Error,
    },
}

/// Runs `ip <args>` in the caller's namespace.
pub fn ip(args: &[&str]) -> Result<Output, NetnsError> {
    Ok(run_command("ip", args)?)
}

/// A named network namespace. Dropping the value does not delete the
/// namespace: the [`crate::topology::Topology`] that made it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates the namespace `name` and brings its loopback up.
    pub fn create(name: &str) -> Result<Self, NetnsError> {
        ip(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// A handle to an existing namespace, without checking it exists.
    pub fn existing(name: &str) -> Self {
        Netns {
            name: name.to_string(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/run/netns/<name>`, the file that pins the namespace.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// Runs `ip <args>` inside the namespace (`ip -n <name> …`).
    pub fn ip(&self, args: &[&str]) -> Result<Output, NetnsError> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Runs `program args…` inside the namespace (`ip netns exec`).
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<Output, NetnsError> {
        let mut all = vec!["netns", "exec", self.name.as_str(), program];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// A [`Command`] that will run `program` inside the namespace; the caller
    /// adds arguments, redirections and spawns it.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", self.name.as_str(), program]);
        command
    }

    /// Sets `key` (dotted sysctl name, e.g. `net.ipv4.ip_forward`) to
    /// `value` inside the namespace, by writing `/proc/sys` from a thread
    /// that entered it (per-namespace sysctls only).
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), NetnsError> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let value = value.to_string();
        self.run(move || std::fs::write(&path, value))
            .and_then(|written| {
                written.map_err(|source| {
                    NetnsError::Command(CommandError::Failed {
                        command: format!("sysctl -w {key}"),
                        status: -1,
                        stderr: source.to_string(),
                    })
                })
            })
    }

    /// Reads a sysctl inside the namespace.
    pub fn read_sysctl(&self, key: &str) -> Result<String, NetnsError> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        self.run(move || std::fs::read_to_string(&path))
            .and_then(|read| {
                read.map(|s| s.trim().to_string()).map_err(|source| {
                    NetnsError::Command(CommandError::Failed {
                        command: format!("sysctl {key}"),
                        status: -1,
                        stderr: source.to_string(),
                    })
                })
            })
    }

    /// Moves the calling thread into the namespace. Every socket the thread
    /// creates afterwards belongs to it.
    pub fn enter_current_thread(&self) -> Result<(), NetnsError> {
        let enter_error = |source: io::Error| NetnsError::Enter {
            name: self.name.clone(),
            source,
        };
        let file = File::open(self.path()).map_err(enter_error)?;
        setns(file.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| enter_error(e.into()))
    }

    /// Runs `work` on a new thread inside the namespace and waits for it.
    pub fn run<T, F>(&self, work: F) -> Result<T, NetnsError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let ns = self.clone();
        std::thread::spawn(move || -> Result<T, NetnsError> {
            ns.enter_current_thread()?;
            Ok(work())
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// Spawns a named thread inside the namespace that runs `work`.
    pub fn spawn<T, F>(
        &self,
        thread_name: &str,
        work: F,
    ) -> io::Result<std::thread::JoinHandle<Result<T, NetnsError>>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let ns = self.clone();
        std::thread::Builder::new()
            .name(thread_name.to_string())
            .spawn(move || {
                ns.enter_current_thread()?;
                Ok(work())
            })
    }

    /// PIDs of the processes whose network namespace is this one.
    pub fn pids(&self) -> Vec<i32> {
        match ip(&["netns", "pids", &self.name]) {
            Ok(out) => String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Kills every process in the namespace (SIGTERM, then SIGKILL after
    /// `grace`), then deletes the namespace. Links inside it, and the
    /// iptables rules of its own netfilter tables, go with it.
    pub fn destroy(&self, grace: std::time::Duration) -> Result<(), NetnsError> {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        let me = std::process::id() as i32;
        let signal_all = |signal: Signal| {
            let pids: Vec<i32> = self.pids().into_iter().filter(|&p| p != me).collect();
            for &pid in &pids {
                let _ = kill(Pid::from_raw(pid), signal);
            }
            pids.len()
        };
        if signal_all(Signal::SIGTERM) > 0 {
            let deadline = std::time::Instant::now() + grace;
            while std::time::Instant::now() < deadline && !self.pids().iter().all(|&p| p == me) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            signal_all(Signal::SIGKILL);
        }
        ip(&["netns", "delete", &self.name]).map(|_| ())
    }
}

/// Names of every namespace `ip netns list` shows.
pub fn list() -> Vec<String> {
    match ip(&["netns", "list"]) {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .map(str::to_string)
            .collect(),
        Err(_) => Vec::new(),
    }
}
