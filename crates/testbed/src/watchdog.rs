//! Cleanup after a run that was killed.
//!
//! Normal exits, errors, Ctrl-C and panics are handled in-process: the
//! [`crate::topology::Topology`], captures and servers tear themselves down
//! when dropped. A run killed with SIGKILL runs no code at all, so before
//! building anything a run starts a watchdog: a second process, in its own
//! process group (a Ctrl-C to the terminal does not reach it), holding the
//! read end of a pipe whose only write end the run keeps. When the run ends
//! — however it ends — the kernel closes the write end, the watchdog reads
//! end-of-file and removes every namespace of the run's tag, killing the
//! processes inside (nginx, tcpdump). No polling, no timers.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

/// A running watchdog; dropping it lets the watchdog clean up and exit.
pub struct Watchdog {
    child: Child,
}

impl Watchdog {
    /// Starts `program args…` with a pipe on its standard input. The program
    /// must wait for end-of-file on stdin, then clean up (see
    /// [`wait_for_parent_exit`]).
    pub fn spawn(program: &Path, args: &[&str]) -> std::io::Result<Watchdog> {
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Watchdog { child })
    }

    /// Closes the pipe and waits (at most `limit`) for the watchdog to finish
    /// its cleanup, so that no process of the run outlives it.
    pub fn finish(mut self, limit: Duration) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Blocks until standard input reaches end-of-file — the run that started
/// this watchdog has ended — ignoring SIGINT, SIGTERM and SIGHUP meanwhile.
pub fn wait_for_parent_exit() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: installing SIG_IGN has no handler code to be unsafe.
        unsafe {
            let _ = signal(s, SigHandler::SigIgn);
        }
    }
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}
