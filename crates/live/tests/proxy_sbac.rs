//! SBAC through the proxy: admission, cookies, rejection under a forced
//! high utilization (a backend reporting ORCA `cpu_utilization=1.0`),
//! refused cookies, key rotation by reload, the access log and the
//! configuration's errors and reloads.

mod proxy_common;

use std::time::Duration;

use proxy_common::*;
use vantage_core::admission::session::TokenSigner;
use vantage_core::Nanos;
use vantage_live::metrics::Format;
use vantage_live::proxy::sbac::wall_clock;
use vantage_live::proxy::{Proxy, ProxyConfig, ProxyError};

const NEW_KEY: &str = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

fn key_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn metric(proxy: &Proxy, sample: &str) -> f64 {
    proxy
        .metrics_text(Format::Text)
        .lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

fn sbac_text(keys: &[&str], reject: &str) -> String {
    let keys: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
    format!(
        "[utilization]\nsource = \"orca\"\n[sbac]\nstrategy = \"responsive\"\ninterval_s = 0.05\n\
         target_utilization = 0.5\nsession_timeout_s = 60\nmax_session_age_s = 600\n\
         retry_after_s = 12\nkeys = [{}]\n{reject}",
        keys.join(", ")
    )
}

/// The `name=value` of a reply's Set-Cookie.
fn cookie_of(reply: &Reply) -> String {
    let set = reply.header("set-cookie").expect("a Set-Cookie");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.contains("Path=/"));
    set.split(';').next().unwrap().to_string()
}

fn overloaded(proxy: &Proxy) -> bool {
    eventually(|| metric(proxy, "vantage_proxy_controller_admitting") == 0.0)
}

#[test]
fn admitted_sessions_continue_while_new_ones_are_rejected() {
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(&[backend.address], &sbac_text(&[KEY], ""))).unwrap();
    // Idle: a new session is admitted; the backend then reports 100 % CPU.
    let first = get(proxy.address(), "/busy", None);
    assert_eq!(first.status, 200);
    let cookie = cookie_of(&first);
    assert!(
        overloaded(&proxy),
        "the controller never saw the ORCA report"
    );

    let rejected = get(proxy.address(), "/", None);
    assert_eq!(rejected.status, 503);
    assert_eq!(rejected.header("retry-after"), Some("12"));
    assert!(String::from_utf8_lossy(&rejected.body).contains("busy"));
    assert!(rejected.header("set-cookie").is_none());

    let continued = get(proxy.address(), "/", Some(&cookie));
    assert_eq!(continued.status, 200, "a session in progress passes");
    // Issued under T/16 (3.75 s) ago: the client's cookie is kept, not
    // re-issued.
    assert!(
        continued.header("set-cookie").is_none(),
        "a fresh cookie was re-issued"
    );
    assert_eq!(get(proxy.address(), "/", Some(&cookie)).status, 200);

    // Forged, expired, over-age: new sessions, rejected.
    let now = wall_clock();
    let ours = TokenSigner::new(&key_bytes(KEY)).unwrap();
    let forged = TokenSigner::new(b"somebody else's key, 32 bytes!!")
        .unwrap()
        .issue(1, now, Nanos::from_secs(60));
    let expired = ours.issue(
        2,
        now.saturating_sub(Nanos::from_secs(120)),
        Nanos::from_secs(60),
    );
    let over_age = ours.encode(&vantage_core::admission::session::SessionToken {
        session_id: 3,
        issued: now.saturating_sub(Nanos::from_secs(601)),
        expires: now + Nanos::from_secs(60),
    });
    let future = ours.issue(4, now + Nanos::from_secs(3600), Nanos::from_secs(60));
    for token in [
        &forged,
        &expired,
        &over_age,
        &future,
        &"garbage".to_string(),
    ] {
        let reply = get(
            proxy.address(),
            "/",
            Some(&format!("vantage_session={token}")),
        );
        assert_eq!(reply.status, 503, "token {token} passed");
    }
    for reason in ["bad_signature", "expired", "too_old", "future", "malformed"] {
        assert_eq!(
            metric(
                &proxy,
                &format!("vantage_proxy_session_tokens_refused_total{{reason=\"{reason}\"}}")
            ),
            1.0,
            "{reason}"
        );
    }
    assert_eq!(metric(&proxy, "vantage_proxy_sessions_rejected_total"), 6.0);
    assert_eq!(metric(&proxy, "vantage_proxy_sessions_admitted_total"), 1.0);
    // Only the admitted session's requests reached the backend.
    assert_eq!(backend.seen.count(), 3);
}

#[test]
fn key_rotation_by_reload() {
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(&[backend.address], &sbac_text(&[KEY], ""))).unwrap();
    let old = cookie_of(&get(proxy.address(), "/busy", None));
    // The new key first, the old one kept: the old cookie continues.
    proxy
        .reload(config(&[backend.address], &sbac_text(&[NEW_KEY, KEY], "")))
        .unwrap();
    // Wait for the fresh controller to see the overload.
    assert_eq!(get(proxy.address(), "/busy", Some(&old)).status, 200);
    assert!(overloaded(&proxy));
    let continued = get(proxy.address(), "/", Some(&old));
    assert_eq!(continued.status, 200);
    let refreshed = cookie_of(&continued);
    // Now signed with the new key: the old key alone refuses it.
    let value = refreshed.split_once('=').unwrap().1;
    let now = wall_clock();
    assert!(TokenSigner::new(&key_bytes(KEY))
        .unwrap()
        .verify(value, now)
        .is_err());
    assert!(TokenSigner::new(&key_bytes(NEW_KEY))
        .unwrap()
        .verify(value, now)
        .is_ok());
    // The old key retired: a replay of the old cookie is a new session.
    proxy
        .reload(config(&[backend.address], &sbac_text(&[NEW_KEY], "")))
        .unwrap();
    assert_eq!(get(proxy.address(), "/busy", Some(&refreshed)).status, 200);
    assert!(overloaded(&proxy));
    assert_eq!(get(proxy.address(), "/", Some(&old)).status, 503);
    assert_eq!(get(proxy.address(), "/", Some(&refreshed)).status, 200);
}

#[test]
fn rejection_by_redirect() {
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        &sbac_text(
            &[KEY],
            "reject = { redirect = \"https://example.org/later\" }\n",
        ),
    ))
    .unwrap();
    assert_eq!(get(proxy.address(), "/busy", None).status, 200);
    assert!(overloaded(&proxy));
    let reply = get(proxy.address(), "/", None);
    assert_eq!(reply.status, 302);
    assert_eq!(reply.header("location"), Some("https://example.org/later"));
}

#[test]
fn the_access_log_names_session_and_verdict_and_is_reopened() {
    let dir = std::env::temp_dir().join(format!("vantage-proxy-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.jsonl");
    let backend = Backend::start("b");
    let proxy = Proxy::start(config(
        &[backend.address],
        &format!(
            "access_log = \"{}\"\n{}",
            path.display(),
            sbac_text(&[KEY], "")
        ),
    ))
    .unwrap();
    let cookie = cookie_of(&get(proxy.address(), "/a", None));
    assert_eq!(get(proxy.address(), "/b", Some(&cookie)).status, 200);
    assert!(eventually(|| std::fs::read_to_string(&path)
        .map(|t| t.lines().count() == 2)
        .unwrap_or(false)));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["verdict"], "admitted");
    assert_eq!(lines[1]["verdict"], "continue");
    assert_eq!(lines[0]["session"], lines[1]["session"]);
    assert_eq!(lines[1]["target"], "/b");
    assert_eq!(lines[1]["status"], 200);
    std::fs::rename(&path, dir.join("access.jsonl.1")).unwrap();
    proxy.reopen_log().unwrap();
    assert_eq!(get(proxy.address(), "/c", Some(&cookie)).status, 200);
    assert!(eventually(|| std::fs::read_to_string(&path)
        .map(|t| t.contains("\"/c\""))
        .unwrap_or(false)));
    drop(proxy);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn config_errors_name_file_line_and_key_and_a_bad_reload_keeps_the_old() {
    let dir = std::env::temp_dir().join(format!("vantage-proxy-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("proxy.toml");
    std::fs::write(
        &path,
        "listen = \"127.0.0.1:0\"\nupstreams = [\"127.0.0.1:1\"]\n[utilization]\nconcurrency = 4\n[limits]\nmax_connections = -3\n",
    )
    .unwrap();
    let error = ProxyConfig::load(&path).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("{}:6: `limits.max_connections`", path.display())),
        "{error}"
    );

    let a = Backend::start("a");
    let b = Backend::start("b");
    let proxy = Proxy::start(config(&[a.address], "[utilization]\nconcurrency = 4\n")).unwrap();
    let listen = proxy.address();
    let valid = |upstream: std::net::SocketAddr| {
        format!(
            "listen = \"{listen}\"\nupstreams = [\"{upstream}\"]\n[utilization]\nconcurrency = 4\n"
        )
    };
    // Invalid: refused, the old configuration serves on.
    std::fs::write(
        &path,
        valid(b.address).replace("concurrency = 4", "concurrency = 0"),
    )
    .unwrap();
    assert!(matches!(
        proxy.reload_file(&path),
        Err(ProxyError::Config(_))
    ));
    assert_eq!(get(listen, "/", None).header("x-backend"), Some("a"));
    // A change that needs a restart: refused too.
    let other_port = valid(b.address).replace(&listen.to_string(), "127.0.0.1:1");
    std::fs::write(&path, other_port).unwrap();
    assert!(matches!(
        proxy.reload_file(&path),
        Err(ProxyError::NeedsRestart { key: "listen" })
    ));
    // Valid: applied to the next request.
    std::fs::write(&path, valid(b.address)).unwrap();
    proxy.reload_file(&path).unwrap();
    assert_eq!(get(listen, "/", None).header("x-backend"), Some("b"));
    assert_eq!(
        metric(&proxy, "vantage_proxy_reloads_total{result=\"refused\"}"),
        2.0
    );
    assert_eq!(
        metric(&proxy, "vantage_proxy_reloads_total{result=\"ok\"}"),
        1.0
    );
    std::thread::sleep(Duration::from_millis(10));
    drop(proxy);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn aborted_requests_reach_hybrid_and_sessions_reach_predictive() {
    let backend = Backend::start("b");
    let text = |strategy: &str, extra: &str| {
        format!(
            "[utilization]\nconcurrency = 4\n[sbac]\nstrategy = \"{strategy}\"\ninterval_s = 0.05\nkeys = [\"{KEY}\"]\n{extra}"
        )
    };
    // Hybrid: k starts at 0.1 and jumps to 1 after an interval with an
    // aborted request (here an upstream 5xx), Section 11.
    let proxy = Proxy::start(config(&[backend.address], &text("hybrid", ""))).unwrap();
    assert!(eventually(|| metric(
        &proxy,
        "vantage_proxy_controller_weight"
    ) == 0.1));
    assert_eq!(get(proxy.address(), "/", None).status, 200);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(
        metric(&proxy, "vantage_proxy_controller_weight"),
        0.1,
        "no trouble yet"
    );
    assert_eq!(get(proxy.address(), "/error", None).status, 500);
    assert!(eventually(|| metric(
        &proxy,
        "vantage_proxy_controller_weight"
    ) == 1.0));
    drop(proxy);
    // Predictive with a known capacity: the quota of new sessions follows
    // Eq. 7 once sessions and their requests have been counted.
    let proxy = Proxy::start(config(
        &[backend.address],
        &text("predictive", "capacity_requests_per_s = 1000\n"),
    ))
    .unwrap();
    let cookie = cookie_of(&get(proxy.address(), "/", None));
    for _ in 0..4 {
        assert_eq!(get(proxy.address(), "/", Some(&cookie)).status, 200);
    }
    assert!(eventually(|| metric(
        &proxy,
        "vantage_proxy_controller_quota"
    ) > 0.0));
}
