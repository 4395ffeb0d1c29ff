//! The kernel counters `refill_rate = "measure"` reads, from `/proc` of the
//! gate's network namespace (the server's).
//!
//! * `/proc/net/snmp`, `Tcp: PassiveOpens` — handshakes completed, every
//!   listener of the namespace together (the kernel counts it when the
//!   final ACK creates the connection and queues it for `accept`).
//! * `/proc/net/tcp` and `/proc/net/tcp6`, rows in state `0A` (LISTEN) —
//!   for a listening socket `rx_queue` is the current accept-queue length
//!   (`sk_ack_backlog`) and `tx_queue` its limit. A listener of the gate
//!   matches a row on its port and, when it names an address, on that
//!   address, the wildcard `0.0.0.0`, and in `tcp6` the wildcard `::` (a
//!   dual-stack socket takes IPv4 connections) or `::ffff:ADDRESS`.
//!
//! The files are read line by line into one reused buffer: a table of tens
//! of thousands of half-open connections during a flood costs time, not
//! memory. The parsers are pure and tested on text.
//!
//! Addresses in these files are the kernel's `__be32` words printed as
//! host-order hexadecimal, so their bytes come back with `to_ne_bytes`.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::config::Listener;
use super::GateError;

pub const SNMP_PATH: &str = "/proc/net/snmp";
pub const TCP_PATH: &str = "/proc/net/tcp";
pub const TCP6_PATH: &str = "/proc/net/tcp6";

/// `Tcp: PassiveOpens` from the text of `/proc/net/snmp`.
pub fn parse_passive_opens(snmp: &str) -> Option<u64> {
    let mut tcp_lines = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let names = tcp_lines.next()?;
    let values = tcp_lines.next()?;
    let column = names.split_whitespace().position(|n| n == "PassiveOpens")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// Reads `Tcp: PassiveOpens`.
pub fn read_passive_opens() -> Result<u64, GateError> {
    let text = std::fs::read_to_string(SNMP_PATH).map_err(|e| GateError::Proc {
        path: SNMP_PATH.into(),
        problem: e.to_string(),
    })?;
    parse_passive_opens(&text).ok_or_else(|| GateError::Proc {
        path: SNMP_PATH.into(),
        problem: "no `Tcp: … PassiveOpens` counter".into(),
    })
}

/// A listening socket's row: local address, port, accept-queue length.
pub fn parse_listen_row(line: &str, ipv6: bool) -> Option<(IpAddr, u16, u64)> {
    let mut fields = line.split_whitespace();
    let _slot = fields.next()?;
    let local = fields.next()?;
    let _remote = fields.next()?;
    let state = fields.next()?;
    if state != "0A" {
        return None;
    }
    let queues = fields.next()?;
    let (_tx, rx) = queues.split_once(':')?;
    let accept_queue = u64::from_str_radix(rx, 16).ok()?;
    let (address, port) = local.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let address = if ipv6 {
        if address.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, chunk) in bytes.chunks_mut(4).enumerate() {
            let word = u32::from_str_radix(address.get(i * 8..i * 8 + 8)?, 16).ok()?;
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        IpAddr::V6(Ipv6Addr::from(bytes))
    } else {
        if address.len() != 8 {
            return None;
        }
        let word = u32::from_str_radix(address, 16).ok()?;
        IpAddr::V4(Ipv4Addr::from(word.to_ne_bytes()))
    };
    Some((address, port, accept_queue))
}

/// Whether a listening socket bound to `local:port` takes the SYNs the
/// gate passes for `listener`.
pub fn serves(listener: &Listener, local: IpAddr, port: u16) -> bool {
    if listener.port != port {
        return false;
    }
    match (listener.address, local) {
        (_, IpAddr::V4(a)) if a.is_unspecified() => true,
        (_, IpAddr::V6(a)) if a.is_unspecified() => true,
        (None, _) => true,
        (Some(want), IpAddr::V4(a)) => a == want,
        (Some(want), IpAddr::V6(a)) => a.to_ipv4_mapped() == Some(want),
    }
}

/// Sums the accept queues of the listening sockets that serve any of
/// `listeners`, over the rows `lines` of `/proc/net/tcp` (or `tcp6`).
pub fn accept_queue_of<'a>(
    lines: impl Iterator<Item = &'a str>,
    ipv6: bool,
    listeners: &[Listener],
) -> u64 {
    lines
        .filter_map(|line| parse_listen_row(line, ipv6))
        .filter(|(address, port, _)| listeners.iter().any(|l| serves(l, *address, *port)))
        .map(|(_, _, queue)| queue)
        .sum()
}

/// The accept-queue length of the listeners, from `/proc/net/tcp` and
/// `/proc/net/tcp6` (absent when IPv6 is off).
pub fn read_accept_queue(listeners: &[Listener]) -> Result<u64, GateError> {
    let mut total = 0;
    for (path, ipv6) in [(TCP_PATH, false), (TCP6_PATH, true)] {
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if ipv6 && e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(GateError::Proc {
                    path: path.into(),
                    problem: e.to_string(),
                })
            }
        };
        let mut reader = BufReader::new(file);
        let mut line = String::with_capacity(256);
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => total += accept_queue_of(std::iter::once(line.as_str()), ipv6, listeners),
                Err(e) => {
                    return Err(GateError::Proc {
                        path: path.into(),
                        problem: e.to_string(),
                    })
                }
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(address: Ipv4Addr) -> String {
        format!("{:08X}", u32::from_ne_bytes(address.octets()))
    }

    fn v6(address: Ipv6Addr) -> String {
        address
            .octets()
            .chunks(4)
            .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
            .collect()
    }

    fn row(local: &str, port: u16, state: &str, rx: u64) -> String {
        format!(
            "   3: {local}:{port:04X} 00000000:0000 {state} 00000080:{rx:08X} 00:00000000 00000000     0        0 1579 1 00000000afe365ae 100 0 0 10 0"
        )
    }

    #[test]
    fn passive_opens_from_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails\nTcp: 1 200 120000 -1 63751 63381 166\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(parse_passive_opens(snmp), Some(63381));
        assert_eq!(parse_passive_opens("Tcp: A B\nTcp: 1 2\n"), None);
        assert_eq!(parse_passive_opens(""), None);
        assert_eq!(parse_passive_opens("Tcp: PassiveOpens\nTcp: x\n"), None);
    }

    #[test]
    fn listen_rows_and_their_accept_queues() {
        let server = Ipv4Addr::new(10, 77, 0, 2);
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
        let table = [
            header.to_string(),
            row(&v4(server), 80, "0A", 7),
            row(&v4(Ipv4Addr::UNSPECIFIED), 80, "0A", 2),
            row(&v4(Ipv4Addr::new(10, 77, 0, 3)), 80, "0A", 100),
            row(&v4(server), 81, "0A", 100),
            row(&v4(server), 80, "01", 100), // an established connection
            "garbage".to_string(),
            String::new(),
        ];
        assert_eq!(
            parse_listen_row(&table[1], false),
            Some((IpAddr::V4(server), 80, 7))
        );
        let one = [Listener {
            address: Some(server),
            port: 80,
        }];
        assert_eq!(
            accept_queue_of(table.iter().map(String::as_str), false, &one),
            9
        );
        let any = [Listener {
            address: None,
            port: 80,
        }];
        assert_eq!(
            accept_queue_of(table.iter().map(String::as_str), false, &any),
            109
        );
        let six = [
            row(&v6(Ipv6Addr::UNSPECIFIED), 80, "0A", 4),
            row(&v6(server.to_ipv6_mapped()), 80, "0A", 5),
            row(&v6("2001:db8::1".parse().unwrap()), 80, "0A", 100),
            row("ABC", 80, "0A", 100),
        ];
        assert_eq!(
            parse_listen_row(&six[1], true),
            Some((IpAddr::V6(server.to_ipv6_mapped()), 80, 5))
        );
        assert_eq!(
            accept_queue_of(six.iter().map(String::as_str), true, &one),
            9
        );
        assert_eq!(parse_listen_row(&six[3], true), None);
    }

    #[test]
    fn reads_this_hosts_files() {
        // Whatever the host listens on, the files parse.
        assert!(read_passive_opens().is_ok());
        let any = [Listener {
            address: None,
            port: 1,
        }];
        assert!(read_accept_queue(&any).is_ok());
    }
}
