//! Squid from the distribution (Debian `squid`) as a reverse proxy — the
//! proxy thesis's own proxy (`proxy-resource-management.txt`, Section 5).
//!
//! Squid runs in accelerator mode in front of origin servers, balanced
//! round robin (`cache_peer … originserver round-robin`), with its cache
//! off (`cache deny all`): every response comes from an origin. Its limits
//! are the thesis's: the descriptor table sized for `max_connections`
//! connections (client and upstream ones together) beside Squid's own
//! reserve — at the limit Squid stops accepting —, persistent
//! connections closed after `persistent_timeout_s` idle, and
//! `tcp_recv_bufsize` as the fixed receive buffer of its sockets. Squid
//! has no directive for the send buffer: that one stays autotuned.
//!
//! The configuration is written into the run directory and `squid -N`
//! runs in the foreground inside a namespace, killed on drop (and by
//! `PR_SET_PDEATHSIG` if the run dies). Its log goes to standard error
//! (`-d 1`), which is a file in the run directory; `cache_log` is
//! `/dev/null` because Squid writes it after dropping to its own user.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::netns::Netns;
use crate::server::nginx::wait_until_accepting;

/// Descriptors Squid keeps for itself beyond its connections (its
/// `RESERVED_FD`: logs, listening sockets, the rest).
const RESERVED_DESCRIPTORS: u32 = 100;

/// Squid as a reverse proxy in front of `upstreams`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SquidConfig {
    /// Connections (client and upstream) it may hold at once:
    /// `max_filedescriptors` = this + Squid's reserve.
    pub max_connections: u32,
    /// `client_idle_pconn_timeout` and `pconn_timeout`, seconds.
    pub persistent_timeout_s: u32,
    /// `tcp_recv_bufsize`, bytes (absent: autotuned).
    pub receive_bytes: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum SquidError {
    #[error("squid: {0}")]
    Config(String),
    #[error("squid: cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("squid: cannot start in {namespace}: {source} (is the squid package installed?)")]
    Spawn {
        namespace: String,
        #[source]
        source: std::io::Error,
    },
    #[error("squid did not accept connections on {listen} within 10 s: {log}")]
    NotReady { listen: SocketAddr, log: String },
}

impl SquidConfig {
    pub fn validate(&self, upstreams: &[SocketAddr]) -> Result<(), String> {
        if !(1..=100_000).contains(&self.max_connections) {
            return Err(format!(
                "squid.max_connections must be in [1, 100000], got {}",
                self.max_connections
            ));
        }
        if !(1..=3600).contains(&self.persistent_timeout_s) {
            return Err(format!(
                "squid.persistent_timeout_s must be in [1, 3600], got {}",
                self.persistent_timeout_s
            ));
        }
        if let Some(bytes) = self.receive_bytes {
            if !(1024..=1 << 30).contains(&bytes) {
                return Err(format!(
                    "squid.receive_bytes must be in [1024, 2^30], got {bytes}"
                ));
            }
        }
        if upstreams.is_empty() || upstreams.len() > 64 {
            return Err(format!(
                "squid needs 1 to 64 upstreams, got {}",
                upstreams.len()
            ));
        }
        Ok(())
    }

    /// The configuration file for `listen` in front of `upstreams`.
    pub fn render(&self, listen: SocketAddr, upstreams: &[SocketAddr]) -> String {
        let mut text = format!(
            "# Written by vantage testbed for one run.\n\
http_port {listen} accel defaultsite=origin no-vhost\n"
        );
        for (i, upstream) in upstreams.iter().enumerate() {
            text.push_str(&format!(
                "cache_peer {} parent {} 0 no-query no-digest originserver round-robin name=origin{i}\n\
cache_peer_access origin{i} allow all\n",
                upstream.ip(),
                upstream.port()
            ));
        }
        text.push_str(&format!(
            "http_access allow all\n\
never_direct allow all\n\
cache deny all\n\
cache_mem 0 MB\n\
pid_filename none\n\
cache_log /dev/null\n\
access_log none\n\
cache_store_log none\n\
netdb_filename none\n\
visible_hostname vantage-testbed\n\
shutdown_lifetime 0 seconds\n\
max_filedescriptors {fds}\n\
client_persistent_connections on\n\
server_persistent_connections on\n\
client_idle_pconn_timeout {timeout} seconds\n\
pconn_timeout {timeout} seconds\n",
            fds = self.max_connections + RESERVED_DESCRIPTORS,
            timeout = self.persistent_timeout_s,
        ));
        if let Some(bytes) = self.receive_bytes {
            text.push_str(&format!("tcp_recv_bufsize {bytes} bytes\n"));
        }
        text
    }
}

/// A running Squid; killed on drop.
pub struct Squid {
    child: Child,
    dir: PathBuf,
}

impl Squid {
    /// Writes `squid.conf` under `dir`, starts Squid in `ns` and returns
    /// once it accepts connections on `listen`.
    pub fn start(
        ns: &Netns,
        config: &SquidConfig,
        listen: SocketAddr,
        upstreams: &[SocketAddr],
        dir: &Path,
    ) -> Result<Squid, SquidError> {
        config.validate(upstreams).map_err(SquidError::Config)?;
        let write = |path: &Path, source| SquidError::Write {
            path: path.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|e| write(dir, e))?;
        let file = dir.join("squid.conf");
        std::fs::write(&file, config.render(listen, upstreams)).map_err(|e| write(&file, e))?;
        let log = dir.join("squid.log");
        let stderr = std::fs::File::create(&log).map_err(|e| write(&log, e))?;
        let mut command = ns.command("squid");
        command
            .args(["-N", "-d", "1", "-f"])
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
        let child = command.spawn().map_err(|source| SquidError::Spawn {
            namespace: ns.name().to_string(),
            source,
        })?;
        let mut squid = Squid {
            child,
            dir: dir.to_path_buf(),
        };
        if !wait_until_accepting(ns, listen, Duration::from_secs(10))
            || matches!(squid.child.try_wait(), Ok(Some(_)))
        {
            let log = squid.log();
            squid.stop();
            return Err(SquidError::NotReady { listen, log });
        }
        Ok(squid)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Squid's own output so far (last 2,000 characters).
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("squid.log")).unwrap_or_default();
        let start = text.len().saturating_sub(2000);
        text.get(start..).unwrap_or("").trim().to_string()
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Squid {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_round_robin_origins_limits_and_the_receive_buffer() {
        let config = SquidConfig {
            max_connections: 400,
            persistent_timeout_s: 15,
            receive_bytes: Some(16384),
        };
        let upstreams: Vec<SocketAddr> = vec![
            "10.0.0.2:8081".parse().unwrap(),
            "127.0.0.1:8081".parse().unwrap(),
        ];
        let text = config.render("10.0.0.1:8080".parse().unwrap(), &upstreams);
        assert!(text.contains("http_port 10.0.0.1:8080 accel"));
        assert!(text.contains("cache_peer 10.0.0.2 parent 8081 0 no-query no-digest originserver round-robin name=origin0"));
        assert!(text.contains("name=origin1"));
        assert!(text.contains("max_filedescriptors 500"));
        assert!(text.contains("client_idle_pconn_timeout 15 seconds"));
        assert!(text.contains("tcp_recv_bufsize 16384 bytes"));
        assert!(text.contains("cache deny all"));
        assert!(config.validate(&upstreams).is_ok());
        assert!(config.validate(&[]).is_err());
        let autotuned = SquidConfig {
            receive_bytes: None,
            ..config
        };
        assert!(!autotuned
            .render("10.0.0.1:8080".parse().unwrap(), &upstreams)
            .contains("tcp_recv_bufsize"));
    }
}
