//! The iptables rule that sends forwarded packets to the emulator's queue:
//!
//! ```text
//! iptables -I FORWARD -j NFQUEUE --queue-num N --queue-bypass
//! ```
//!
//! `--queue-bypass` accepts packets while no program is bound to the queue
//! (before the emulator starts, after it stops), instead of dropping them.
//!
//! [`ForwardQueueRule`] removes the rule when dropped. Inside a testbed
//! namespace the rule would vanish with the namespace anyway, but `vantage
//! wan` run on its own in some namespace must not leave it behind. The
//! guard remembers the network namespace it was installed in and removes
//! the rule there, whichever thread drops it.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use vantage_sys::iptables::{self as runner, Family, IptablesError};

/// Errors installing or removing the rule.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("iptables is not installed (looked in PATH, /usr/sbin and /sbin): the WAN emulator needs it to send forwarded packets to its NFQUEUE queue (Debian/Ubuntu: apt-get install iptables)")]
    IptablesMissing,
    #[error("iptables rule: {0}")]
    Command(#[from] IptablesError),
    #[error("iptables rule: cannot {operation}: {source}")]
    Namespace {
        operation: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// The rule's arguments after `-I`/`-D`.
fn rule_spec(queue_num: u16) -> Vec<String> {
    [
        "FORWARD",
        "-j",
        "NFQUEUE",
        "--queue-num",
        &queue_num.to_string(),
        "--queue-bypass",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn iptables(program: &Path, action: &str, queue_num: u16) -> Result<(), IptablesError> {
    let mut args = vec!["-w".to_string(), "5".to_string(), action.to_string()];
    args.extend(rule_spec(queue_num));
    runner::run(program, &args).map(|_| ())
}

const CURRENT_NAMESPACE: &str = "/proc/thread-self/ns/net";

/// The FORWARD → NFQUEUE rule, removed on drop.
#[derive(Debug)]
pub struct ForwardQueueRule {
    queue_num: u16,
    program: PathBuf,
    /// The namespace the rule lives in, held open.
    namespace: File,
    installed: bool,
}

impl ForwardQueueRule {
    /// Inserts the rule at the top of FORWARD in the calling thread's
    /// network namespace.
    pub fn install(queue_num: u16) -> Result<ForwardQueueRule, RuleError> {
        let program = runner::find(Family::Ipv4).ok_or(RuleError::IptablesMissing)?;
        let namespace = File::open(CURRENT_NAMESPACE).map_err(|source| RuleError::Namespace {
            operation: "open /proc/thread-self/ns/net",
            source,
        })?;
        iptables(&program, "-I", queue_num)?;
        Ok(ForwardQueueRule {
            queue_num,
            program,
            namespace,
            installed: true,
        })
    }

    pub fn queue_num(&self) -> u16 {
        self.queue_num
    }

    /// The command that installed the rule, for messages.
    pub fn describe(&self) -> String {
        format!("iptables -I {}", rule_spec(self.queue_num).join(" "))
    }

    /// Removes the rule now, reporting errors (drop only prints them).
    pub fn remove(mut self) -> Result<(), RuleError> {
        self.remove_in_place()
    }

    fn remove_in_place(&mut self) -> Result<(), RuleError> {
        if !self.installed {
            return Ok(());
        }
        self.installed = false;
        let same_namespace = std::fs::metadata(CURRENT_NAMESPACE)
            .and_then(|here| Ok(here.ino() == self.namespace.metadata()?.ino()))
            .unwrap_or(false);
        if same_namespace {
            return Ok(iptables(&self.program, "-D", self.queue_num)?);
        }
        // Another namespace: run iptables from a thread that enters it.
        let namespace = self
            .namespace
            .try_clone()
            .map_err(|source| RuleError::Namespace {
                operation: "duplicate the namespace handle",
                source,
            })?;
        let program = self.program.clone();
        let queue_num = self.queue_num;
        std::thread::spawn(move || -> Result<(), RuleError> {
            use std::os::fd::AsFd;
            nix::sched::setns(namespace.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).map_err(
                |e| RuleError::Namespace {
                    operation: "enter the rule's network namespace",
                    source: e.into(),
                },
            )?;
            Ok(iptables(&program, "-D", queue_num)?)
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl Drop for ForwardQueueRule {
    fn drop(&mut self) {
        if let Err(e) = self.remove_in_place() {
            eprintln!("testbed: removing the WAN emulator's rule: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_spec_queues_forwarded_packets_with_bypass() {
        assert_eq!(
            rule_spec(7).join(" "),
            "FORWARD -j NFQUEUE --queue-num 7 --queue-bypass"
        );
    }

    #[test]
    fn rule_is_removed_from_its_namespace_even_when_dropped_elsewhere() {
        if !vantage_sys::privilege::is_root() || runner::find(Family::Ipv4).is_none() {
            eprintln!("skipped: needs root and iptables to change a private namespace's rules");
            return;
        }
        let listed = |namespace: &File| -> String {
            let namespace = namespace.try_clone().unwrap();
            std::thread::spawn(move || {
                use std::os::fd::AsFd;
                nix::sched::setns(namespace.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
                runner::run(Path::new("iptables"), &["-w", "5", "-S", "FORWARD"]).unwrap()
            })
            .join()
            .unwrap()
        };
        // A private namespace for one thread: gone when nothing holds it.
        let (rule, namespace) = std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let rule = ForwardQueueRule::install(11).unwrap();
            (rule, File::open(CURRENT_NAMESPACE).unwrap())
        })
        .join()
        .unwrap();
        assert!(listed(&namespace).contains("--queue-num 11 --queue-bypass"));
        // Dropped on this thread, which is in another namespace.
        drop(rule);
        assert!(!listed(&namespace).contains("NFQUEUE"));
    }
}
