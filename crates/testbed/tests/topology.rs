//! Root tests of the testbed network: it routes clients to the server, and
//! leaves nothing behind, also when the building thread panics.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use vantage_sys::privilege::is_root;
use vantage_testbed::netns;
use vantage_testbed::topology::{self, Topology, TopologySpec, SERVER_ADDR};

fn skip() -> bool {
    if !is_root() {
        eprintln!("skipped: needs root to create network namespaces and veth links");
        return true;
    }
    false
}

fn ours(tag: &str) -> Vec<String> {
    let prefix = format!("vtb-{tag}-");
    netns::list()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

#[test]
fn clients_reach_the_server_through_the_router_and_teardown_removes_everything() {
    if skip() {
        return;
    }
    let tag = format!("t{}", std::process::id());
    {
        let topo = Topology::build(&TopologySpec {
            clients: 2,
            tag: tag.clone(),
        })
        .unwrap();
        assert_eq!(ours(&tag).len(), 4);
        assert_eq!(topo.router.read_sysctl("net.ipv4.ip_forward").unwrap(), "1");
        let offloads = topo.router.exec("ethtool", &["-k", "c1"]).unwrap();
        let text = String::from_utf8_lossy(&offloads.stdout);
        for feature in [
            "tcp-segmentation-offload: off",
            "generic-segmentation-offload: off",
            "generic-receive-offload: off",
        ] {
            assert!(
                text.contains(feature),
                "router c1: {feature} not found in\n{text}"
            );
        }
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let server = topo
            .server
            .spawn("echo", move || {
                let listener = TcpListener::bind(SocketAddr::from((SERVER_ADDR, 7000))).unwrap();
                ready_tx.send(()).unwrap();
                let mut seen = Vec::new();
                for _ in 0..2 {
                    let (mut stream, peer) = listener.accept().unwrap();
                    let mut buf = [0u8; 4];
                    stream.read_exact(&mut buf).unwrap();
                    stream.write_all(&buf).unwrap();
                    seen.push(peer.ip());
                }
                seen
            })
            .unwrap();
        ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        for client in &topo.clients {
            let echoed = client
                .run(|| {
                    let mut s = TcpStream::connect_timeout(
                        &SocketAddr::from((SERVER_ADDR, 7000)),
                        Duration::from_secs(3),
                    )
                    .unwrap();
                    s.write_all(b"ping").unwrap();
                    let mut buf = [0u8; 4];
                    s.read_exact(&mut buf).unwrap();
                    buf
                })
                .unwrap();
            assert_eq!(&echoed, b"ping");
        }
        let peers = server.join().unwrap().unwrap();
        assert_eq!(
            peers,
            vec![topology::client_addr(0), topology::client_addr(1)]
        );
    }
    assert!(ours(&tag).is_empty(), "left behind: {:?}", ours(&tag));
}

#[test]
fn a_panic_after_building_still_tears_down() {
    if skip() {
        return;
    }
    let tag = format!("p{}", std::process::id());
    let spec = TopologySpec {
        clients: 1,
        tag: tag.clone(),
    };
    let result = std::panic::catch_unwind(move || {
        let _topo = Topology::build(&spec).unwrap();
        panic!("deliberate");
    });
    assert!(result.is_err());
    assert!(ours(&tag).is_empty(), "left behind: {:?}", ours(&tag));
}

#[test]
fn clean_removes_leftovers_of_a_killed_run() {
    if skip() {
        return;
    }
    let tag = format!("k{}", std::process::id());
    let topo = Topology::build(&TopologySpec {
        clients: 1,
        tag: tag.clone(),
    })
    .unwrap();
    // A killed run never drops its topology.
    std::mem::forget(topo);
    assert_eq!(ours(&tag).len(), 3);
    let removed = topology::clean(Some(&tag)).unwrap();
    assert_eq!(removed.len(), 3);
    assert!(ours(&tag).is_empty());
}

#[test]
fn a_second_run_with_the_same_tag_is_refused() {
    if skip() {
        return;
    }
    let tag = format!("d{}", std::process::id());
    let _first = Topology::build(&TopologySpec {
        clients: 1,
        tag: tag.clone(),
    })
    .unwrap();
    let second = Topology::build(&TopologySpec {
        clients: 1,
        tag: tag.clone(),
    });
    assert!(matches!(second, Err(topology::TopologyError::Exists(_))));
    assert_eq!(
        ours(&tag).len(),
        3,
        "the refused build must not delete the first run's namespaces"
    );
}
