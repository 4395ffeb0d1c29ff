//! Root test: nginx from the distribution serves the configured files inside
//! the server namespace, logs `$request_time`, and stops cleanly.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use vantage_sys::privilege::is_root;
use vantage_testbed::server::nginx::{parse_access_log, Nginx, NginxConfig, StaticFile};
use vantage_testbed::topology::{Topology, TopologySpec, SERVER_ADDR};

#[test]
fn nginx_serves_files_of_the_configured_sizes_to_a_client_namespace() {
    if !is_root() {
        eprintln!("skipped: needs root to create network namespaces");
        return;
    }
    if std::process::Command::new("nginx")
        .arg("-v")
        .output()
        .is_err()
    {
        panic!("nginx is not installed: `bash scripts/test` installs it (apt package nginx)");
    }
    let topo = Topology::build(&TopologySpec {
        clients: 1,
        tag: format!("n{}", std::process::id()),
    })
    .unwrap();
    let dir = std::env::temp_dir().join(format!("vantage-nginx-{}", std::process::id()));
    let config = NginxConfig {
        backlog: 32,
        files: vec![
            StaticFile {
                path: "/a".into(),
                bytes: 1000,
            },
            StaticFile {
                path: "/b".into(),
                bytes: 100_000,
            },
        ],
        ..NginxConfig::default()
    };
    let listen = SocketAddr::from((SERVER_ADDR, 80));
    let mut nginx = Nginx::start(&topo.server, &config, listen, &dir).unwrap();
    let bodies = topo.clients[0]
        .run(move || {
            ["/a", "/b", "/missing"]
                .iter()
                .map(|path| {
                    let mut s =
                        TcpStream::connect_timeout(&listen, Duration::from_secs(3)).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    write!(s, "GET {path} HTTP/1.0\r\nHost: t\r\n\r\n").unwrap();
                    let mut response = Vec::new();
                    s.read_to_end(&mut response).unwrap();
                    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                    let status = String::from_utf8_lossy(&response[..12]).to_string();
                    (status, response.len() - split - 4)
                })
                .collect::<Vec<_>>()
        })
        .unwrap();
    assert!(bodies[0].0.ends_with("200"), "{:?}", bodies[0]);
    assert_eq!(bodies[0].1, 1000);
    assert_eq!(bodies[1].1, 100_000);
    assert!(bodies[2].0.ends_with("404"));
    nginx.stop();
    let (entries, bad) = parse_access_log(&std::fs::read_to_string(nginx.access_log()).unwrap());
    assert!(bad.is_empty(), "unparsed access log lines {bad:?}");
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[1].body_bytes, 100_000);
    assert!(entries.iter().all(|e| e.client.starts_with("10.78.0.2:")));
    drop(topo);
    std::fs::remove_dir_all(&dir).unwrap();
}
