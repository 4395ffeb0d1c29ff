//! The kernel's TCP counters under `/proc/net`: the `Group: names…` /
//! `Group: values…` line pairs of `netstat` and `snmp`, and the listening
//! rows of `tcp` and `tcp6`.
//!
//! These are the counters Certes (Section 3) reads from the server alone and
//! the gate's `refill_rate = "measure"` reads for capacity: SYNs dropped on a
//! full accept queue ([`LISTEN_OVERFLOWS`], [`LISTEN_DROPS`]), handshakes
//! completed ([`PASSIVE_OPENS`]). Parsing text is pure; reading a file is a
//! thin wrapper over it.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Counter values keyed `Group.Name` (`TcpExt.ListenDrops`, `Tcp.PassiveOpens`).
pub type Counters = BTreeMap<String, u64>;

/// SYNs dropped because the accept queue was full.
pub const LISTEN_OVERFLOWS: &str = "TcpExt.ListenOverflows";
/// SYNs dropped by a listener for any reason (overflows included).
pub const LISTEN_DROPS: &str = "TcpExt.ListenDrops";
/// SYNs dropped because the SYN queue was full.
pub const REQ_QUEUE_FULL_DROPS: &str = "TcpExt.TCPReqQFullDrop";
/// Handshakes completed: connections queued for `accept`.
pub const PASSIVE_OPENS: &str = "Tcp.PassiveOpens";

pub const SNMP_PATH: &str = "/proc/net/snmp";
pub const TCP_PATH: &str = "/proc/net/tcp";
pub const TCP6_PATH: &str = "/proc/net/tcp6";

#[derive(Debug, thiserror::Error)]
pub enum ProcNetError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {problem}")]
    Malformed {
        path: String,
        line: usize,
        problem: String,
    },
}

/// Parses the `Group: names…` / `Group: values…` line pairs of
/// `/proc/net/netstat` and `/proc/net/snmp` (`path` only names the source
/// in errors).
pub fn parse_counters(text: &str, path: &str) -> Result<Counters, ProcNetError> {
    let malformed = |line: usize, problem: String| ProcNetError::Malformed {
        path: path.to_string(),
        line,
        problem,
    };
    let mut counters = Counters::new();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if !lines.len().is_multiple_of(2) {
        return Err(malformed(
            lines.len(),
            "odd number of lines: a header without values".into(),
        ));
    }
    for (pair, chunk) in lines.chunks(2).enumerate() {
        let line = pair * 2 + 1;
        let (group, names) = chunk[0]
            .split_once(':')
            .ok_or_else(|| malformed(line, "no `Group:` prefix".into()))?;
        let (value_group, values) = chunk[1]
            .split_once(':')
            .ok_or_else(|| malformed(line + 1, "no `Group:` prefix".into()))?;
        if group != value_group {
            return Err(malformed(
                line + 1,
                format!("values of `{value_group}` follow names of `{group}`"),
            ));
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        if names.len() != values.len() {
            return Err(malformed(
                line + 1,
                format!(
                    "{} names but {} values in `{group}`",
                    names.len(),
                    values.len()
                ),
            ));
        }
        for (name, value) in names.iter().zip(values) {
            // Tcp.MaxConn is −1 ("no limit"): kept as 0, it is a constant.
            let parsed = match value.parse::<i64>() {
                Ok(v) => v.max(0) as u64,
                Err(_) => value.parse::<u64>().map_err(|_| {
                    malformed(
                        line + 1,
                        format!("`{group}.{name}` = {value:?} is not a number"),
                    )
                })?,
            };
            counters.insert(format!("{group}.{name}"), parsed);
        }
    }
    Ok(counters)
}

/// Reads and parses one counter file.
pub fn read_counters(path: &str) -> Result<Counters, ProcNetError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProcNetError::Read {
        path: path.to_string(),
        source,
    })?;
    parse_counters(&text, path)
}

/// Both counter files of the calling thread's network namespace, through
/// `/proc/thread-self/net/…` (`/proc/self/net` would show the namespace of
/// the process's main thread).
pub fn read_thread_namespace_counters() -> Result<Counters, ProcNetError> {
    let mut all = Counters::new();
    for file in ["netstat", "snmp"] {
        all.extend(read_counters(&format!("/proc/thread-self/net/{file}"))?);
    }
    Ok(all)
}

/// A listening socket's row of `/proc/net/tcp` (or `tcp6` when `ipv6`):
/// local address, port, accept-queue length. For a listener, `rx_queue` is
/// the accept-queue length (`sk_ack_backlog`); other rows give `None`.
///
/// Addresses in these files are the kernel's `__be32` words printed as
/// host-order hexadecimal, so their bytes come back with `to_ne_bytes`.
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

#[cfg(test)]
mod tests {
    use super::*;

    const NETSTAT: &str = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
TcpExt: 0 12 14\n\
IpExt: InNoRoutes InOctets\n\
IpExt: 0 123456\n";

    #[test]
    fn parses_name_value_pairs_by_group() {
        let c = parse_counters(NETSTAT, "netstat").unwrap();
        assert_eq!(c[LISTEN_OVERFLOWS], 12);
        assert_eq!(c[LISTEN_DROPS], 14);
        assert_eq!(c["IpExt.InOctets"], 123456);
        let snmp = parse_counters(
            "Tcp: RtoAlgorithm MaxConn PassiveOpens\nTcp: 1 -1 7\n",
            "snmp",
        )
        .unwrap();
        assert_eq!(snmp["Tcp.MaxConn"], 0);
        assert_eq!(snmp[PASSIVE_OPENS], 7);
    }

    #[test]
    fn passive_opens_from_a_whole_snmp_file() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails\nTcp: 1 200 120000 -1 63751 63381 166\nUdp: InDatagrams\nUdp: 5\n";
        let c = parse_counters(snmp, "snmp").unwrap();
        assert_eq!(c.get(PASSIVE_OPENS), Some(&63381));
        let c = parse_counters("Tcp: A B\nTcp: 1 2\n", "snmp").unwrap();
        assert_eq!(c.get(PASSIVE_OPENS), None);
        assert!(parse_counters("", "snmp").unwrap().is_empty());
        assert!(parse_counters("Tcp: PassiveOpens\nTcp: x\n", "snmp").is_err());
    }

    #[test]
    fn malformed_input_names_file_and_line() {
        let e = parse_counters("TcpExt: A B\nTcpExt: 1\n", "/proc/x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/proc/x, line 2") && e.contains("2 names but 1 values"),
            "{e}"
        );
        let e = parse_counters("TcpExt: A\nIpExt: 1\n", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = parse_counters("TcpExt: A\nTcpExt: x\n", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("TcpExt.A"), "{e}");
        assert!(parse_counters("TcpExt: A\n", "f").is_err());
        assert!(parse_counters("no colon\nhere\n", "f").is_err());
    }

    #[test]
    fn a_missing_file_is_a_read_error_naming_it() {
        let e = read_counters("/proc/net/no-such-file").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read /proc/net/no-such-file: "),
            "{e}"
        );
    }

    #[test]
    fn reads_this_machines_counters() {
        let c = read_thread_namespace_counters().unwrap();
        assert!(c.contains_key(LISTEN_DROPS));
        assert!(c.contains_key(PASSIVE_OPENS));
        assert!(read_counters(SNMP_PATH)
            .unwrap()
            .contains_key(PASSIVE_OPENS));
    }

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
    fn listen_rows_give_address_port_and_accept_queue() {
        let server = Ipv4Addr::new(10, 77, 0, 2);
        assert_eq!(
            parse_listen_row(&row(&v4(server), 80, "0A", 7), false),
            Some((IpAddr::V4(server), 80, 7))
        );
        assert_eq!(
            parse_listen_row(&row(&v4(server), 80, "01", 7), false),
            None
        );
        assert_eq!(
            parse_listen_row(
                "  sl  local_address rem_address   st tx_queue rx_queue",
                false
            ),
            None
        );
        assert_eq!(parse_listen_row("garbage", false), None);
        assert_eq!(parse_listen_row("", false), None);
        let mapped = server.to_ipv6_mapped();
        assert_eq!(
            parse_listen_row(&row(&v6(mapped), 80, "0A", 5), true),
            Some((IpAddr::V6(mapped), 80, 5))
        );
        assert_eq!(parse_listen_row(&row("ABC", 80, "0A", 100), true), None);
    }
}
