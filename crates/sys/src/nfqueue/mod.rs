//! NFQUEUE over raw netlink, written by hand with `libc`.
//!
//! An iptables/nftables rule with `-j NFQUEUE --queue-num N` hands each
//! matching packet to the user-space program bound to queue `N`, which
//! answers with a verdict (accept, drop, repeat with a new mark) whenever it
//! likes. Vantage uses this for its WAN emulator (hold a packet for its
//! delay, then accept it) and its SYN admission gate.
//!
//! **Why hand-written.** The `nfq` crate keeps its socket to itself: there is
//! no way to raise the receive buffer with `SO_RCVBUFFORCE`, to set
//! `NETLINK_NO_ENOBUFS`, or to get the file descriptor and `poll` it together
//! with a `timerfd` — and a delay emulator with ±0.1 ms precision needs all
//! three. This module is the small part of `libnetfilter_queue` we use:
//!
//! * [`Queue`] — the `AF_NETLINK`/`NETLINK_NETFILTER` socket bound to one
//!   queue, exposed through [`AsRawFd`](std::os::fd::AsRawFd) and
//!   [`AsFd`](std::os::fd::AsFd); non-blocking [`Queue::recv`] returning
//!   `Ok(None)` when nothing is pending and [`Received::Overrun`] (counted,
//!   never an error) when the kernel reports `ENOBUFS`;
//! * [`VerdictBatch`] — many verdicts in one buffer, sent with one `send`
//!   per 64 KiB: the kernel processes back-to-back netlink messages of one
//!   datagram in order;
//! * [`PacketView`] — a queued packet parsed in place, borrowing the receive
//!   buffer (no copy).
//!
//! The message formats are documented in `nfqueue/wire.rs`.
//!
//! A malformed message from the kernel is a [`ParseError`], never a panic.

mod error;
mod queue;
mod wire;

pub use error::{NfqError, ParseError};
pub use queue::{Queue, QueueConfig, Received, VerdictBatch};
pub use wire::{
    encode_config, encode_verdict, ConfigCommand, ConfigMessage, CopyMode, Message, Messages,
    PacketView, Verdict, CONFIG_FLAG_FAIL_OPEN, VERDICT_MESSAGE_LEN, VERDICT_WITH_MARK_MESSAGE_LEN,
};

/// `ETH_P_IP`: the `hw_protocol` of an IPv4 packet.
pub const HW_PROTOCOL_IPV4: u16 = libc::ETH_P_IP as u16;

#[cfg(test)]
mod root_tests {
    //! Binds a real queue inside a private network namespace that exists
    //! only for the test thread (`unshare(CLONE_NEWNET)`): it, and the
    //! iptables rule in it, disappear when the thread ends, pass or fail.

    use super::*;
    use std::net::UdpSocket;
    use std::process::Command;
    use std::time::{Duration, Instant};

    const QUEUE: u16 = 7;
    const MARK_SEEN: u32 = 0x77;

    fn run(program: &str, args: &[&str]) -> Result<(), String> {
        let output = Command::new(program)
            .args(args)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{program} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    /// Waits for the next message that is a packet and returns its id,
    /// hook, original length and payload's IPv4 protocol and destination
    /// port.
    fn next_packet(queue: &mut Queue) -> (u32, u8, u32, u8, u16, Option<u32>) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Some(Received::Messages(messages)) = queue.recv().expect("receive") {
                for message in messages {
                    if let Message::Packet(p) = message.expect("well-formed") {
                        let ihl = usize::from(p.payload[0] & 0x0f) * 4;
                        let port = u16::from_be_bytes([p.payload[ihl + 2], p.payload[ihl + 3]]);
                        return (
                            p.packet_id,
                            p.hook,
                            p.original_len(),
                            p.payload[9],
                            port,
                            p.mark,
                        );
                    }
                }
            }
            queue
                .wait_readable(Duration::from_millis(100))
                .expect("poll");
        }
        panic!("no packet queued within 3 s");
    }

    fn in_private_namespace() -> Result<(), String> {
        // SAFETY: plain system call; affects only this thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(format!("unshare: {}", std::io::Error::last_os_error()));
        }
        run("ip", &["link", "set", "lo", "up"])?;
        run(
            "iptables",
            &[
                "-w",
                "-I",
                "OUTPUT",
                "-p",
                "udp",
                "--dport",
                "45555",
                "-m",
                "mark",
                "!",
                "--mark",
                "0x77",
                "-j",
                "NFQUEUE",
                "--queue-num",
                "7",
            ],
        )?;
        let mut queue = Queue::open(&QueueConfig {
            copy_mode: CopyMode::Packet { copy_range: 128 },
            queue_maxlen: 4096,
            fail_open: true,
            recv_buffer_bytes: Some(8 << 20),
            ..QueueConfig::new(QUEUE)
        })
        .map_err(|e| e.to_string())?;
        assert!(queue.recv_buffer_size().unwrap() >= 8 << 20);
        assert!(queue.recv().unwrap().is_none(), "nothing queued yet");
        let before = Instant::now();
        assert!(queue
            .recv_wait(Duration::from_millis(40))
            .unwrap()
            .is_none());
        let waited = before.elapsed();
        assert!(
            waited >= Duration::from_millis(35) && waited < Duration::from_secs(2),
            "recv_wait(40 ms) returned after {waited:?}"
        );

        let receiver = UdpSocket::bind("127.0.0.1:45555").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 64];

        // 1. Repeat with a mark: the packet goes through OUTPUT again, the
        //    rule now skips it, and it is delivered.
        sender.send_to(b"hello", "127.0.0.1:45555").unwrap();
        let (id, hook, len, protocol, port, mark) = next_packet(&mut queue);
        assert_eq!(hook, 3, "NF_INET_LOCAL_OUT");
        assert_eq!(len, 20 + 8 + 5);
        assert_eq!((protocol, port, mark), (17, 45555, None));
        let mut batch = VerdictBatch::new(QUEUE);
        batch.push_with_mark(id, Verdict::Repeat, MARK_SEEN);
        queue.send_verdicts(&mut batch).unwrap();
        assert!(batch.is_empty());
        let n = receiver.recv(&mut buf).expect("repeated packet delivered");
        assert_eq!(&buf[..n], b"hello");

        // 2. Drop: nothing arrives. A waiting receive gets the packet.
        sender.send_to(b"drop me", "127.0.0.1:45555").unwrap();
        let id = match queue.recv_wait(Duration::from_secs(3)).unwrap() {
            Some(Received::Messages(messages)) => messages
                .filter_map(|m| match m.expect("well-formed") {
                    Message::Packet(p) => Some(p.packet_id),
                    _ => None,
                })
                .next()
                .expect("the packet"),
            other => panic!("recv_wait: {other:?}"),
        };
        batch.push(id, Verdict::Drop);
        queue.send_verdicts(&mut batch).unwrap();
        assert!(receiver.recv(&mut buf).is_err(), "dropped packet arrived");

        // 3. Several verdicts in one send, one of them for an unknown id:
        //    the others still apply and the bad one is reported.
        for i in 0..3u8 {
            sender.send_to(&[i], "127.0.0.1:45555").unwrap();
        }
        let ids: Vec<u32> = (0..3).map(|_| next_packet(&mut queue).0).collect();
        batch.push(ids[0], Verdict::Accept);
        batch.push(ids[2].wrapping_add(1000), Verdict::Accept);
        batch.push(ids[1], Verdict::Accept);
        batch.push(ids[2], Verdict::Accept);
        queue.send_verdicts(&mut batch).unwrap();
        for i in 0..3u8 {
            let n = receiver.recv(&mut buf).expect("batched accept delivered");
            assert_eq!(&buf[..n], &[i]);
        }
        let mut unknown_id_reported = false;
        if queue.wait_readable(Duration::from_secs(1)).unwrap() {
            if let Some(Received::Messages(messages)) = queue.recv().unwrap() {
                for message in messages {
                    if let Message::Error { errno, .. } = message.unwrap() {
                        unknown_id_reported = errno == libc::ENOENT;
                    }
                }
            }
        }
        assert!(
            unknown_id_reported,
            "verdict for an unknown id not reported"
        );
        assert_eq!(queue.overruns(), 0);
        queue.unbind().map_err(|e| e.to_string())
    }

    #[test]
    fn binds_a_queue_and_applies_verdicts() {
        // SAFETY: plain system call.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: binding an NFQUEUE queue needs root (CAP_NET_ADMIN)");
            return;
        }
        if Command::new("iptables").arg("-V").output().is_err() {
            eprintln!("skipped: iptables is not installed");
            return;
        }
        let outcome = std::thread::spawn(in_private_namespace)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        if let Err(e) = outcome {
            panic!("{e}");
        }
    }

    #[test]
    fn binding_twice_names_the_operation_and_the_kernel_error() {
        // SAFETY: plain system call.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: binding an NFQUEUE queue needs root (CAP_NET_ADMIN)");
            return;
        }
        let outcome = std::thread::spawn(|| {
            // SAFETY: plain system call; affects only this thread.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            let _first = Queue::open(&QueueConfig::new(9)).expect("first bind");
            let second = Queue::open(&QueueConfig::new(9)).expect_err("second bind must fail");
            second.to_string()
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        assert!(
            outcome.contains("bind queue 9") && outcome.contains("kernel refused"),
            "{outcome}"
        );
    }
}
