//! HAProxy from the distribution as an admission peer: `maxconn` on the
//! server line bounds the requests the backend sees at once, the rest wait
//! in HAProxy's queue for at most `queue_timeout_ms` and are then answered
//! 503 — request-based admission with a queue, the baseline the SBAC paper
//! argues against (Section 1).
//!
//! The configuration is written into the run directory and `haproxy -db`
//! runs in the foreground inside a namespace, killed on drop.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::netns::Netns;
use crate::server::nginx::wait_until_accepting;

/// HAProxy in front of one server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaproxyConfig {
    /// `maxconn` of the server line: requests in flight at the backend.
    pub server_maxconn: u32,
    /// `timeout queue`, milliseconds: how long a request may wait.
    pub queue_timeout_ms: u64,
    /// `timeout server`, milliseconds.
    #[serde(default = "default_server_timeout")]
    pub server_timeout_ms: u64,
}

fn default_server_timeout() -> u64 {
    30_000
}

#[derive(Debug, thiserror::Error)]
pub enum HaproxyError {
    #[error("haproxy: {0}")]
    Config(String),
    #[error("haproxy: cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("haproxy: cannot start in {namespace}: {source} (is the haproxy package installed?)")]
    Spawn {
        namespace: String,
        #[source]
        source: std::io::Error,
    },
    #[error("haproxy did not accept connections on {listen} within 5 s: {log}")]
    NotReady { listen: SocketAddr, log: String },
}

impl HaproxyConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=1_000_000).contains(&self.server_maxconn) {
            return Err(format!(
                "haproxy.server_maxconn must be in [1, 1e6], got {}",
                self.server_maxconn
            ));
        }
        for (key, value) in [
            ("queue_timeout_ms", self.queue_timeout_ms),
            ("server_timeout_ms", self.server_timeout_ms),
        ] {
            if !(1..=3_600_000).contains(&value) {
                return Err(format!(
                    "haproxy.{key} must be in [1, 3600000], got {value}"
                ));
            }
        }
        Ok(())
    }

    /// The configuration file for `listen` in front of `upstream`.
    pub fn render(&self, listen: SocketAddr, upstream: SocketAddr) -> String {
        format!(
            "# Written by vantage testbed for one run.\n\
global\n    maxconn 4096\n\
defaults\n    mode http\n    option http-keep-alive\n    timeout connect 5s\n    \
timeout client 30s\n    timeout http-keep-alive 30s\n    timeout server {server}ms\n    \
timeout queue {queue}ms\n\
frontend front\n    bind {listen}\n    default_backend back\n\
backend back\n    server only {upstream} maxconn {maxconn}\n",
            server = self.server_timeout_ms,
            queue = self.queue_timeout_ms,
            maxconn = self.server_maxconn,
        )
    }
}

/// A running HAProxy; killed on drop.
pub struct Haproxy {
    child: Child,
    dir: PathBuf,
}

impl Haproxy {
    /// Writes `haproxy.cfg` under `dir`, starts HAProxy in `ns` and returns
    /// once it accepts connections on `listen`.
    pub fn start(
        ns: &Netns,
        config: &HaproxyConfig,
        listen: SocketAddr,
        upstream: SocketAddr,
        dir: &Path,
    ) -> Result<Haproxy, HaproxyError> {
        config.validate().map_err(HaproxyError::Config)?;
        std::fs::create_dir_all(dir).map_err(|source| HaproxyError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let file = dir.join("haproxy.cfg");
        std::fs::write(&file, config.render(listen, upstream)).map_err(|source| {
            HaproxyError::Write {
                path: file.clone(),
                source,
            }
        })?;
        let log = dir.join("haproxy.log");
        let stderr = std::fs::File::create(&log).map_err(|source| HaproxyError::Write {
            path: log.clone(),
            source,
        })?;
        let mut command = ns.command("haproxy");
        command
            .arg("-db")
            .arg("-f")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr));
        // SAFETY: prctl is async-signal-safe and touches only this child.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|source| HaproxyError::Spawn {
            namespace: ns.name().to_string(),
            source,
        })?;
        let mut haproxy = Haproxy {
            child,
            dir: dir.to_path_buf(),
        };
        if !wait_until_accepting(ns, listen, Duration::from_secs(5))
            || matches!(haproxy.child.try_wait(), Ok(Some(_)))
        {
            let log = haproxy.log();
            haproxy.stop();
            return Err(HaproxyError::NotReady { listen, log });
        }
        Ok(haproxy)
    }

    /// HAProxy's own output so far (last 2,000 characters).
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("haproxy.log")).unwrap_or_default();
        let start = text.len().saturating_sub(2000);
        text.get(start..).unwrap_or("").trim().to_string()
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_maxconn_and_queue_timeout() {
        let config = HaproxyConfig {
            server_maxconn: 4,
            queue_timeout_ms: 800,
            server_timeout_ms: 30_000,
        };
        let text = config.render(
            "10.0.0.1:80".parse().unwrap(),
            "127.0.0.1:81".parse().unwrap(),
        );
        assert!(text.contains("server only 127.0.0.1:81 maxconn 4"));
        assert!(text.contains("timeout queue 800ms"));
        assert!(config.validate().is_ok());
        let bad = HaproxyConfig {
            server_maxconn: 0,
            ..config
        };
        assert!(bad.validate().is_err());
    }
}
