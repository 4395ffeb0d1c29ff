//! The kernel counters `refill_rate = "measure"` reads, from `/proc` of the
//! gate's network namespace (the server's).
//!
//! * `/proc/net/snmp`, `Tcp: PassiveOpens` — handshakes completed, every
//!   listener of the namespace together;
//! * `/proc/net/tcp` and `/proc/net/tcp6`, listening rows — the accept-queue
//!   length. A listener of the gate matches a row on its port and, when it
//!   names an address, on that address, the wildcard `0.0.0.0`, and in
//!   `tcp6` the wildcard `::` (a dual-stack socket takes IPv4 connections)
//!   or `::ffff:ADDRESS`.
//!
//! Parsing is [`vantage_sys::proc_net`]'s. The tables are read line by line
//! into one reused buffer: tens of thousands of half-open connections during
//! a flood cost time, not memory.

use std::io::{BufRead, BufReader};
use std::net::IpAddr;

use vantage_sys::proc_net::{
    self, parse_listen_row, ProcNetError, PASSIVE_OPENS, SNMP_PATH, TCP6_PATH, TCP_PATH,
};

use super::config::Listener;
use super::GateError;

/// Reads `Tcp: PassiveOpens`.
pub fn read_passive_opens() -> Result<u64, GateError> {
    let missing = || GateError::Proc {
        path: SNMP_PATH.into(),
        problem: "no `Tcp: … PassiveOpens` counter".into(),
    };
    match proc_net::read_counters(SNMP_PATH) {
        Ok(counters) => counters.get(PASSIVE_OPENS).copied().ok_or_else(missing),
        Err(ProcNetError::Read { source, .. }) => Err(GateError::Proc {
            path: SNMP_PATH.into(),
            problem: source.to_string(),
        }),
        Err(ProcNetError::Malformed { .. }) => Err(missing()),
    }
}

/// Whether a listening socket bound to `local:port` takes the SYNs the
/// gate passes for `listener`.
pub fn serves(listener: &Listener, local: IpAddr, port: u16) -> bool {
    if listener.port != port {
        return false;
    }
    match (listener.address, local) {
        // An IPv4 socket takes no IPv6 connection.
        (Some(IpAddr::V6(_)), IpAddr::V4(_)) => false,
        (_, IpAddr::V4(a)) if a.is_unspecified() => true,
        (_, IpAddr::V6(a)) if a.is_unspecified() => true,
        (None, _) => true,
        (Some(IpAddr::V4(want)), IpAddr::V4(a)) => a == want,
        (Some(IpAddr::V4(want)), IpAddr::V6(a)) => a.to_ipv4_mapped() == Some(want),
        (Some(IpAddr::V6(want)), IpAddr::V6(a)) => a == want,
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
    use std::net::{Ipv4Addr, Ipv6Addr};

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
            address: Some(server.into()),
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
        let ula = [Listener {
            address: Some("2001:db8::1".parse().unwrap()),
            port: 80,
        }];
        assert_eq!(
            accept_queue_of(six.iter().map(String::as_str), true, &ula),
            104
        );
        assert_eq!(
            accept_queue_of(table.iter().map(String::as_str), false, &ula),
            0,
            "an IPv4 socket serves no IPv6 listener"
        );
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
