//! nginx from the distribution as the testbed's real server.
//!
//! Vantage writes a complete configuration into the run directory — listen
//! backlog, worker processes and connections, static files of given sizes,
//! and an access log that records `$request_time` — and starts
//! `nginx -g 'daemon off;'` inside the server namespace, so the master stays
//! a child of the run (with `PR_SET_PDEATHSIG`) and the namespace teardown
//! kills any worker left.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::netns::Netns;

/// A static file nginx serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticFile {
    /// URL path, e.g. `/file-10k` (letters, digits, `-`, `_`, `.`).
    pub path: String,
    pub bytes: u64,
}

/// The `[server.nginx]` section of a testbed spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NginxConfig {
    /// `listen … backlog=` (the kernel caps it at `net.core.somaxconn`).
    pub backlog: u32,
    /// `listen … sndbuf=`: `SO_SNDBUF` of the accepted connections (the
    /// kernel holds twice it; absent: autotuned).
    pub sndbuf: Option<u32>,
    /// `worker_processes`.
    pub workers: u32,
    /// `worker_connections`.
    pub worker_connections: u32,
    /// `keepalive_timeout`, seconds (0 turns keep-alive off).
    pub keepalive_timeout_s: u32,
    /// `keepalive_requests`.
    pub keepalive_requests: u32,
    /// Files to serve.
    pub files: Vec<StaticFile>,
    /// Reverse proxy in front of another server, with nginx's admission
    /// limits; absent = serve `files` (the default).
    pub front: Option<NginxFront>,
}

/// nginx as a reverse proxy with `limit_conn` / `limit_req` (over the
/// whole listener: one zone keyed by `$server_port`), answering 503 to what
/// the limits refuse.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NginxFront {
    /// The server behind it.
    pub upstream: SocketAddr,
    /// `limit_conn`: connections at once.
    pub limit_conn: Option<u32>,
    /// `limit_req rate=`: requests per second.
    pub limit_req_per_s: Option<u32>,
    /// `limit_req burst=` (queued, not delayed beyond the rate; 0 = none).
    #[serde(default)]
    pub limit_req_burst: u32,
    /// More servers behind it, balanced round robin with `upstream`.
    #[serde(default)]
    pub more_upstreams: Vec<SocketAddr>,
    /// `keepalive`: idle connections kept to the servers (0 = none: a
    /// connection per request).
    #[serde(default)]
    pub upstream_keepalive: u32,
}

impl Default for NginxConfig {
    fn default() -> Self {
        NginxConfig {
            backlog: 511,
            sndbuf: None,
            workers: 1,
            worker_connections: 8192,
            keepalive_timeout_s: 65,
            keepalive_requests: 1000,
            files: vec![StaticFile {
                path: "/file-10k".into(),
                bytes: 10 * 1024,
            }],
            front: None,
        }
    }
}

const MAX_FILE_BYTES: u64 = 1 << 30;

impl NginxConfig {
    /// Checks ranges; errors name the key (`server.nginx.<key>`).
    pub fn validate(&self) -> Result<(), String> {
        let range = |key: &str, value: u64, low: u64, high: u64| {
            if value < low || value > high {
                Err(format!(
                    "server.nginx.{key} = {value} is out of range (allowed {low}..={high})"
                ))
            } else {
                Ok(())
            }
        };
        range("backlog", self.backlog.into(), 1, 65535)?;
        range("workers", self.workers.into(), 1, 64)?;
        if let Some(bytes) = self.sndbuf {
            range("sndbuf", bytes.into(), 1024, 1 << 30)?;
        }
        range(
            "worker_connections",
            self.worker_connections.into(),
            16,
            1 << 20,
        )?;
        range(
            "keepalive_timeout_s",
            self.keepalive_timeout_s.into(),
            0,
            3600,
        )?;
        range(
            "keepalive_requests",
            self.keepalive_requests.into(),
            1,
            1 << 20,
        )?;
        if self.files.is_empty() {
            return Err("server.nginx.files is empty: serve at least one file".into());
        }
        for (i, file) in self.files.iter().enumerate() {
            let name = file.path.strip_prefix('/').unwrap_or("");
            let ok = !name.is_empty()
                && name.len() <= 100
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && !name.starts_with('.');
            if !ok {
                return Err(format!(
                    "server.nginx.files[{i}].path = {:?}: must be `/` then 1..=100 letters, digits, '-', '_' or '.' (no leading '.')",
                    file.path
                ));
            }
            range(&format!("files[{i}].bytes"), file.bytes, 0, MAX_FILE_BYTES)?;
        }
        Ok(())
    }

    /// The nginx.conf text for a server rooted at `dir`, listening on `listen`.
    pub fn render(&self, dir: &Path, listen: SocketAddr) -> String {
        let d = dir.display();
        format!(
            "# Written by vantage testbed for one run.\n\
user root;\n\
worker_processes {workers};\n\
worker_rlimit_nofile {nofile};\n\
pid {d}/nginx.pid;\n\
error_log {d}/logs/error.log warn;\n\
events {{ worker_connections {wc}; multi_accept on; }}\n\
http {{\n\
    access_log_format_placeholder\n\
    zones_placeholder\n\
    access_log {d}/logs/access.log timed buffer=256k flush=1s;\n\
    client_body_temp_path {d}/tmp/body;\n\
    proxy_temp_path {d}/tmp/proxy;\n\
    fastcgi_temp_path {d}/tmp/fastcgi;\n\
    uwsgi_temp_path {d}/tmp/uwsgi;\n\
    scgi_temp_path {d}/tmp/scgi;\n\
    default_type application/octet-stream;\n\
    sendfile on;\n\
    keepalive_timeout {ka};\n\
    keepalive_requests {kr};\n\
    server {{\n\
        listen {listen} backlog={backlog}{sndbuf};\n\
        root {d}/www;\n\
        location / {{ location_placeholder }}\n\
    }}\n\
}}\n",
            workers = self.workers,
            nofile = self.worker_connections as u64 * 2 + 64,
            wc = self.worker_connections,
            ka = self.keepalive_timeout_s,
            kr = self.keepalive_requests,
            backlog = self.backlog,
            sndbuf = self.sndbuf.map_or(String::new(), |b| format!(" sndbuf={b}")),
        )
        .replace(
            "access_log_format_placeholder",
            "log_format timed '$msec $remote_addr:$remote_port \"$request\" $status $body_bytes_sent $request_time $connection $connection_requests';",
        )
        .replace("location_placeholder", &self.front_directives())
        .replace("zones_placeholder", &self.front_zones())
    }

    /// The zones (before `server`) and the `location /` body of a front.
    fn front_directives(&self) -> String {
        let Some(front) = &self.front else {
            return String::new();
        };
        let target = if front.uses_upstream_block() {
            "origins".to_string()
        } else {
            front.upstream.to_string()
        };
        let mut text = format!(
            "proxy_pass http://{target}; proxy_http_version 1.1; proxy_set_header Connection \"\";"
        );
        if let Some(connections) = front.limit_conn {
            text.push_str(&format!(" limit_conn whole {connections};"));
        }
        if front.limit_req_per_s.is_some() {
            text.push_str(&format!(
                " limit_req zone=rate burst={} nodelay;",
                front.limit_req_burst
            ));
        }
        text.push_str(" limit_conn_status 503; limit_req_status 503;");
        text
    }

    /// `http`-level zone declarations a front needs.
    fn front_zones(&self) -> String {
        let Some(front) = &self.front else {
            return String::new();
        };
        let mut text = String::new();
        if front.uses_upstream_block() {
            text.push_str("upstream origins { ");
            for server in std::iter::once(&front.upstream).chain(&front.more_upstreams) {
                text.push_str(&format!("server {server}; "));
            }
            if front.upstream_keepalive > 0 {
                text.push_str(&format!("keepalive {}; ", front.upstream_keepalive));
            }
            text.push_str("} ");
        }
        if front.limit_conn.is_some() {
            text.push_str("limit_conn_zone $server_port zone=whole:1m; ");
        }
        if let Some(rate) = front.limit_req_per_s {
            text.push_str(&format!(
                "limit_req_zone $server_port zone=rate:1m rate={rate}r/s; "
            ));
        }
        text
    }
}

impl NginxFront {
    /// Several servers or pooled connections need an `upstream` block.
    fn uses_upstream_block(&self) -> bool {
        !self.more_upstreams.is_empty() || self.upstream_keepalive > 0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NginxError {
    #[error("nginx: {0}")]
    Config(String),
    #[error("nginx: cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("nginx: cannot start in {namespace}: {source} (is the nginx package installed?)")]
    Spawn {
        namespace: String,
        #[source]
        source: std::io::Error,
    },
    #[error("nginx did not accept connections on {listen} within 5 s; error log: {log}")]
    NotReady { listen: SocketAddr, log: String },
}

/// A running nginx.
pub struct Nginx {
    child: Child,
    dir: PathBuf,
}

impl Nginx {
    /// Writes the configuration and files under `dir`, starts nginx in `ns`
    /// and returns once it accepts connections on `listen`.
    pub fn start(
        ns: &Netns,
        config: &NginxConfig,
        listen: SocketAddr,
        dir: &Path,
    ) -> Result<Nginx, NginxError> {
        config.validate().map_err(NginxError::Config)?;
        let write = |path: PathBuf, bytes: &[u8]| {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| NginxError::Write {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            std::fs::write(&path, bytes).map_err(|source| NginxError::Write { path, source })
        };
        let dir = std::path::absolute(dir).map_err(|source| NginxError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        for sub in ["logs", "tmp", "www"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|source| NginxError::Write {
                path: dir.join(sub),
                source,
            })?;
        }
        for file in &config.files {
            let body: Vec<u8> = (0..file.bytes).map(|i| b'a' + (i % 26) as u8).collect();
            write(
                dir.join("www").join(file.path.trim_start_matches('/')),
                &body,
            )?;
        }
        let conf = dir.join("nginx.conf");
        write(conf.clone(), config.render(&dir, listen).as_bytes())?;

        let mut command = ns.command("nginx");
        command
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(&dir)
            .args(["-e", "stderr", "-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("logs/stderr.log")).map_err(|source| {
                    NginxError::Write {
                        path: dir.join("logs/stderr.log"),
                        source,
                    }
                })?,
            ));
        // SAFETY: prctl is async-signal-safe and touches only this child.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|source| NginxError::Spawn {
            namespace: ns.name().to_string(),
            source,
        })?;
        let mut nginx = Nginx { child, dir };
        if !wait_until_accepting(ns, listen, Duration::from_secs(5)) || nginx.exited() {
            let log = nginx.error_log();
            nginx.stop();
            return Err(NginxError::NotReady { listen, log });
        }
        Ok(nginx)
    }

    /// The master process id (its workers are its children).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// The error output so far (trimmed to its last 2,000 characters).
    pub fn error_log(&self) -> String {
        let mut text = String::new();
        for name in ["logs/stderr.log", "logs/error.log"] {
            text.push_str(&std::fs::read_to_string(self.dir.join(name)).unwrap_or_default());
        }
        let tail: String = text
            .chars()
            .rev()
            .take(2000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        tail.trim().to_string()
    }

    /// Path of the access log.
    pub fn access_log(&self) -> PathBuf {
        self.dir.join("logs/access.log")
    }

    /// Stops nginx gracefully (SIGQUIT lets workers finish and flush the
    /// access log), killing it after 5 s.
    pub fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGQUIT);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.exited() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if !self.exited() {
            self.stop();
        }
    }
}

/// Tries to connect to `listen` from inside `ns` until it works or `limit`
/// passes.
pub fn wait_until_accepting(ns: &Netns, listen: SocketAddr, limit: Duration) -> bool {
    ns.run(move || {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if std::net::TcpStream::connect_timeout(&listen, Duration::from_millis(200)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    })
    .unwrap_or(false)
}

/// One line of the access log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AccessLogEntry {
    /// `$msec`: time the log line was written (end of the request), ns since the UNIX epoch.
    pub end_ns: u64,
    pub client: String,
    pub request: String,
    pub status: u16,
    pub body_bytes: u64,
    /// `$request_time`: first request byte read to last response byte sent, ns.
    pub request_time_ns: u64,
    pub connection: u64,
    pub connection_requests: u64,
}

/// Parses an access log written with the `timed` format. Returns the entries
/// and the numbers of the lines that did not parse (never silently skipped).
pub fn parse_access_log(text: &str) -> (Vec<AccessLogEntry>, Vec<usize>) {
    let mut entries = Vec::new();
    let mut bad = Vec::new();
    for (number, line) in text.lines().enumerate() {
        match parse_line(line) {
            Some(entry) => entries.push(entry),
            None if line.trim().is_empty() => {}
            None => bad.push(number + 1),
        }
    }
    (entries, bad)
}

fn parse_line(line: &str) -> Option<AccessLogEntry> {
    let (head, rest) = line.split_once(" \"")?;
    let (request, tail) = rest.rsplit_once("\" ")?;
    let mut head = head.split_whitespace();
    let secs = decimal_seconds_to_ns;
    let end_ns = secs(head.next()?)?;
    let client = head.next()?.to_string();
    let mut tail = tail.split_whitespace();
    Some(AccessLogEntry {
        end_ns,
        client,
        request: request.to_string(),
        status: tail.next()?.parse().ok()?,
        body_bytes: tail.next()?.parse().ok()?,
        request_time_ns: secs(tail.next()?)?,
        connection: tail.next()?.parse().ok()?,
        connection_requests: tail.next()?.parse().ok()?,
    })
}

/// `"1700000000.123"` → 1_700_000_000_123_000_000, exactly (no float
/// rounding); at most 9 fraction digits.
fn decimal_seconds_to_ns(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 9 || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let fraction_ns: u64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse::<u64>().ok()? * 10u64.pow(9 - fraction.len() as u32)
    };
    whole.checked_mul(1_000_000_000)?.checked_add(fraction_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_front_proxies_with_its_limits_and_a_plain_server_has_none() {
        let dir = Path::new("/tmp/x");
        let listen: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let plain = NginxConfig::default().render(dir, listen);
        assert!(
            !plain.contains("limit_conn")
                && !plain.contains("limit_req")
                && !plain.contains("proxy_pass")
        );
        let front = NginxConfig {
            front: Some(NginxFront {
                upstream: "127.0.0.1:81".parse().unwrap(),
                limit_conn: Some(4),
                limit_req_per_s: Some(100),
                limit_req_burst: 10,
                more_upstreams: Vec::new(),
                upstream_keepalive: 0,
            }),
            ..NginxConfig::default()
        }
        .render(dir, listen);
        for directive in [
            "proxy_pass http://127.0.0.1:81;",
            "limit_conn whole 4;",
            "limit_conn_zone $server_port zone=whole:1m;",
            "limit_req_zone $server_port zone=rate:1m rate=100r/s;",
            "limit_req zone=rate burst=10 nodelay;",
        ] {
            assert!(front.contains(directive), "{directive} in\n{front}");
        }
        let balanced = NginxConfig {
            front: Some(NginxFront {
                upstream: "10.0.0.2:81".parse().unwrap(),
                limit_conn: None,
                limit_req_per_s: None,
                limit_req_burst: 0,
                more_upstreams: vec!["127.0.0.1:81".parse().unwrap()],
                upstream_keepalive: 32,
            }),
            ..NginxConfig::default()
        }
        .render(dir, listen);
        for directive in [
            "upstream origins { server 10.0.0.2:81; server 127.0.0.1:81; keepalive 32; }",
            "proxy_pass http://origins;",
        ] {
            assert!(balanced.contains(directive), "{directive} in\n{balanced}");
        }
    }

    #[test]
    fn access_log_lines_parse_and_bad_lines_are_reported() {
        let text =
            "1700000000.123 10.78.0.2:40000 \"GET /file-10k HTTP/1.0\" 200 10240 0.002 17 1\n\
garbage\n\
1700000001.500 10.78.1.2:40001 \"GET /x y\" HTTP/1.1\" 404 153 0.000 18 3\n";
        let (entries, bad) = parse_access_log(text);
        assert_eq!(bad, vec![2]);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].end_ns, 1_700_000_000_123_000_000);
        assert_eq!(entries[0].request_time_ns, 2_000_000);
        assert_eq!(entries[0].body_bytes, 10240);
        assert_eq!(entries[1].request, "GET /x y\" HTTP/1.1");
        assert_eq!(entries[1].status, 404);
        assert_eq!(entries[1].connection_requests, 3);
    }

    #[test]
    fn config_rejects_bad_values_naming_the_key() {
        let mut c = NginxConfig::default();
        assert!(c.validate().is_ok());
        c.backlog = 0;
        assert!(c.validate().unwrap_err().contains("server.nginx.backlog"));
        let mut c = NginxConfig::default();
        c.files[0].path = "/../etc/passwd".into();
        assert!(c.validate().unwrap_err().contains("files[0].path"));
    }

    #[test]
    fn rendered_config_has_the_backlog_and_the_timed_log() {
        let c = NginxConfig {
            backlog: 64,
            ..NginxConfig::default()
        };
        let text = c.render(Path::new("/r"), "10.77.0.2:80".parse().unwrap());
        assert!(text.contains("listen 10.77.0.2:80 backlog=64;"));
        let c = NginxConfig {
            sndbuf: Some(65536),
            ..NginxConfig::default()
        };
        let text = c.render(Path::new("/r"), "10.77.0.2:80".parse().unwrap());
        assert!(text.contains("listen 10.77.0.2:80 backlog=511 sndbuf=65536;"));
        assert!(text.contains("$request_time"));
        assert!(text.contains("root /r/www;"));
    }
}
