//! Crafted TCP SYNs sent through a raw socket at a steady rate: load for
//! the gate's tests and benchmarks (a SYN flood that never completes a
//! handshake).
//!
//! Hand-written with `libc` because the standard library has no raw
//! sockets. The packets are built with etherparse's `PacketBuilder`
//! (IPv4 + TCP with correct checksums) and sent on an `IPPROTO_RAW` socket
//! (the IP header is ours, `IP_HDRINCL` implied). Sent to a local address
//! — `127.0.0.1` on `lo`, or an address of a dummy interface — they leave
//! through OUTPUT, loop back and arrive through PREROUTING and INPUT like
//! a client's SYNs, where the gate's rule queues them.
//!
//! Each SYN comes from the same source address and the next source port of
//! a range, with a fresh sequence number; nothing answers the server's
//! SYN-ACKs but the local stack's RST. Needs `CAP_NET_RAW`; use it only
//! inside a network namespace of your own.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etherparse::PacketBuilder;

/// Builds one SYN from `source` to `destination` into `out` (cleared
/// first).
pub fn syn_packet(
    source: SocketAddrV4,
    destination: SocketAddrV4,
    sequence: u32,
    out: &mut Vec<u8>,
) {
    out.clear();
    let builder = PacketBuilder::ipv4(source.ip().octets(), destination.ip().octets(), 64)
        .tcp(source.port(), destination.port(), sequence, 64240)
        .syn();
    // Writing into a Vec cannot fail.
    let _ = builder.write(out, &[]);
}

/// What a flood sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FloodReport {
    pub sent: u64,
    /// `sendto` failures (e.g. `ENOBUFS`), each retried later.
    pub send_errors: u64,
}

/// A raw socket sending SYNs from one address and a range of ports.
pub struct SynFlood {
    fd: OwnedFd,
    source: Ipv4Addr,
    ports: std::ops::RangeInclusive<u16>,
    next_port: u16,
    sequence: u32,
    destination: SocketAddrV4,
    packet: Vec<u8>,
}

impl SynFlood {
    /// Opens the raw socket. SYNs go to `destination` from `source` with
    /// source ports cycling through `ports`.
    pub fn open(
        source: Ipv4Addr,
        ports: std::ops::RangeInclusive<u16>,
        destination: SocketAddrV4,
    ) -> io::Result<SynFlood> {
        if ports.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "empty source port range",
            ));
        }
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::IPPROTO_RAW,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(SynFlood {
            fd,
            source,
            next_port: *ports.start(),
            ports,
            sequence: 0x5647_0000,
            destination,
            packet: Vec::with_capacity(64),
        })
    }

    /// Sends one SYN.
    pub fn send_one(&mut self) -> io::Result<()> {
        let port = self.next_port;
        self.next_port = if port >= *self.ports.end() {
            *self.ports.start()
        } else {
            port + 1
        };
        self.sequence = self
            .sequence
            .wrapping_mul(1_103_515_245)
            .wrapping_add(12_345);
        syn_packet(
            SocketAddrV4::new(self.source, port),
            self.destination,
            self.sequence,
            &mut self.packet,
        );
        // SAFETY: sockaddr_in is plain data; all-zero is valid.
        let mut address: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        address.sin_family = libc::AF_INET as libc::sa_family_t;
        address.sin_addr.s_addr = u32::from_ne_bytes(self.destination.ip().octets());
        // SAFETY: the buffer and the address are valid for their lengths.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                self.packet.as_ptr().cast(),
                self.packet.len(),
                0,
                (&address as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Sends `rate` SYNs per second for `duration` (or until `stop`),
    /// paced every half millisecond; a rate beyond what the core can send
    /// means "as fast as possible", still for `duration` only. Send
    /// failures are counted and the packet is tried again at the next step.
    pub fn run(&mut self, rate: u64, duration: Duration, stop: &AtomicBool) -> FloodReport {
        /// Sends between two looks at the clock while catching up.
        const CHECK_EVERY: u64 = 256;
        let mut report = FloodReport::default();
        let start = Instant::now();
        'steps: loop {
            let elapsed = start.elapsed();
            if elapsed >= duration || stop.load(Ordering::Relaxed) {
                break;
            }
            let due = (elapsed.as_secs_f64() * rate as f64) as u64;
            while report.sent < due {
                if report.sent % CHECK_EVERY == 0 && start.elapsed() >= duration {
                    break 'steps;
                }
                match self.send_one() {
                    Ok(()) => report.sent += 1,
                    Err(_) => {
                        report.send_errors += 1;
                        break;
                    }
                }
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::config::Listener;
    use crate::gate::packet::{classify, PacketClass};

    #[test]
    fn a_crafted_syn_is_a_syn_to_the_listener() {
        let mut packet = Vec::new();
        syn_packet(
            "127.0.0.2:40000".parse().unwrap(),
            "127.0.0.1:80".parse().unwrap(),
            7,
            &mut packet,
        );
        assert_eq!(packet.len(), 40);
        let listeners = [Listener {
            address: Some(Ipv4Addr::LOCALHOST.into()),
            port: 80,
        }];
        assert_eq!(classify(&packet, &listeners), PacketClass::Syn);
    }
}
