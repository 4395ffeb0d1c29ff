//! The netlink socket bound to one queue: open, configure, receive without
//! blocking, send batches of verdicts.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::error::NfqError;
use super::wire::{
    encode_config, encode_verdict, ConfigCommand, ConfigMessage, CopyMode, Message, Messages,
    Verdict, CONFIG_FLAG_FAIL_OPEN,
};
use crate::socket::set_int_option;

/// Largest buffer handed to one `send`: stays well under the default
/// `net.core.wmem_default` so the kernel never refuses it with `EMSGSIZE`.
const MAX_SEND_BYTES: usize = 64 * 1024;
/// Room for the message headers and attributes around a packet's payload.
const RECEIVE_MARGIN_BYTES: usize = 4096;
/// How long a configuration request may wait for the kernel's answer.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
/// Bound on datagrams read while waiting for one acknowledgement.
const ACK_MAX_DATAGRAMS: usize = 1 << 20;
/// Bound on immediate retries of a system call interrupted by a signal.
const EINTR_RETRIES: usize = 16;

/// How to open a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// The `--queue-num` of the iptables/nftables rule.
    pub queue_num: u16,
    /// How much of each packet to copy to user space.
    pub copy_mode: CopyMode,
    /// Packets the kernel keeps waiting for a verdict (kernel default 1024).
    pub queue_maxlen: u32,
    /// Accept packets instead of dropping them when the queue or the socket
    /// is full (`NFQA_CFG_F_FAIL_OPEN`).
    pub fail_open: bool,
    /// Socket receive buffer to ask for with `SO_RCVBUFFORCE` (falls back to
    /// `SO_RCVBUF`, capped by `net.core.rmem_max`, without `CAP_NET_ADMIN`).
    /// `None` keeps the system default.
    pub recv_buffer_bytes: Option<usize>,
    /// Set `NETLINK_NO_ENOBUFS`: the kernel stops reporting receive-buffer
    /// overruns. Leave it off to count them (see [`Received::Overrun`]).
    pub no_enobufs: bool,
}

impl QueueConfig {
    /// Kernel defaults for everything but the queue number: whole packets,
    /// 1024 queued packets, fail-closed, default buffer, overruns reported.
    pub fn new(queue_num: u16) -> Self {
        QueueConfig {
            queue_num,
            copy_mode: CopyMode::Packet { copy_range: 0xffff },
            queue_maxlen: 1024,
            fail_open: false,
            recv_buffer_bytes: None,
            no_enobufs: false,
        }
    }
}

/// What one non-blocking receive found.
#[derive(Debug)]
pub enum Received<'a> {
    /// One datagram: its netlink messages, borrowing the receive buffer.
    Messages(Messages<'a>),
    /// The socket's receive buffer overflowed (`ENOBUFS`) since the last
    /// receive: the kernel could not deliver one or more packets. With
    /// fail-open they were accepted unseen, otherwise dropped. Counted in
    /// [`Queue::overruns`].
    Overrun,
}

/// Verdicts collected into one buffer, sent with as few `send` calls as
/// the size allows (each call carries up to 64 KiB of messages).
#[derive(Clone, Debug)]
pub struct VerdictBatch {
    queue_num: u16,
    bytes: Vec<u8>,
    count: usize,
}

impl VerdictBatch {
    pub fn new(queue_num: u16) -> Self {
        VerdictBatch {
            queue_num,
            bytes: Vec::with_capacity(MAX_SEND_BYTES),
            count: 0,
        }
    }

    /// Adds `verdict` for packet `packet_id`.
    pub fn push(&mut self, packet_id: u32, verdict: Verdict) {
        encode_verdict(&mut self.bytes, self.queue_num, packet_id, verdict, None);
        self.count += 1;
    }

    /// Adds `verdict` for packet `packet_id` and sets its mark, e.g.
    /// `Verdict::Repeat` with a mark a later rule rejects on.
    pub fn push_with_mark(&mut self, packet_id: u32, verdict: Verdict, mark: u32) {
        encode_verdict(
            &mut self.bytes,
            self.queue_num,
            packet_id,
            verdict,
            Some(mark),
        );
        self.count += 1;
    }

    /// Number of verdicts in the batch.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded messages, back to back.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.count = 0;
    }
}

/// A netlink socket bound to one NFQUEUE queue. Closing it (drop) makes the
/// kernel destroy the queue; packets still waiting for a verdict are then
/// dropped, so release them first.
#[derive(Debug)]
pub struct Queue {
    fd: OwnedFd,
    queue_num: u16,
    portid: u32,
    next_seq: u32,
    recv_buf: Vec<u8>,
    /// The receive timeout now set on the socket (`SO_RCVTIMEO`) for
    /// [`Queue::recv_wait`]; `None` before the first call.
    recv_timeout: Option<Duration>,
    overruns: u64,
    discarded_while_configuring: u64,
}

impl AsRawFd for Queue {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Queue {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn getsockopt_int(fd: RawFd, level: i32, name: i32) -> std::io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and `len` holds the size of `value`.
    let rc =
        unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut i32).cast(), &mut len) };
    if rc == 0 {
        Ok(value)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl Queue {
    /// Opens a netlink socket, binds it to `config.queue_num` and applies
    /// the configuration. Needs `CAP_NET_ADMIN` in the current network
    /// namespace.
    pub fn open(config: &QueueConfig) -> Result<Queue, NfqError> {
        let queue_num = config.queue_num;
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_NETFILTER,
            )
        };
        if raw < 0 {
            return Err(NfqError::last_os_error(
                "socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER)",
            ));
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let copy_range = match config.copy_mode {
            CopyMode::Meta => 0,
            CopyMode::Packet { copy_range } => copy_range.min(0xffff) as usize,
        };
        let mut queue = Queue {
            fd,
            queue_num,
            portid: 0,
            next_seq: 1,
            recv_buf: vec![0; copy_range + RECEIVE_MARGIN_BYTES],
            recv_timeout: None,
            overruns: 0,
            discarded_while_configuring: 0,
        };
        if let Some(bytes) = config.recv_buffer_bytes {
            match queue.set_recv_buffer_force(bytes) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                    queue.set_recv_buffer(bytes)?;
                }
                Err(e) => return Err(e),
            }
        }
        if config.no_enobufs {
            queue.set_no_enobufs(true)?;
        }
        queue.bind_socket()?;
        queue.request(
            &ConfigMessage {
                command: Some(ConfigCommand::Bind),
                ..Default::default()
            },
            format!("bind queue {queue_num}"),
        )?;
        let fail_open = if config.fail_open {
            CONFIG_FLAG_FAIL_OPEN
        } else {
            0
        };
        let configured = queue.request(
            &ConfigMessage {
                command: None,
                copy_mode: Some(config.copy_mode),
                queue_maxlen: Some(config.queue_maxlen),
                flags: Some((fail_open, CONFIG_FLAG_FAIL_OPEN)),
            },
            format!(
                "configure queue {queue_num} (copy {:?}, maxlen {}, fail-open {})",
                config.copy_mode, config.queue_maxlen, config.fail_open
            ),
        );
        if let Err(e) = configured {
            // Closing the socket also destroys the queue; this is only tidier.
            let _ = queue.unbind_in_place();
            return Err(e);
        }
        Ok(queue)
    }

    fn bind_socket(&mut self) -> Result<(), NfqError> {
        // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        // SAFETY: `address` is a valid sockaddr_nl of length `len`.
        let rc = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&address as *const libc::sockaddr_nl).cast(),
                len,
            )
        };
        if rc != 0 {
            return Err(NfqError::last_os_error("bind netlink socket"));
        }
        let mut bound_len = len;
        // SAFETY: `address` has room for `bound_len` bytes.
        let rc = unsafe {
            libc::getsockname(
                self.fd.as_raw_fd(),
                (&mut address as *mut libc::sockaddr_nl).cast(),
                &mut bound_len,
            )
        };
        if rc != 0 {
            return Err(NfqError::last_os_error("getsockname on netlink socket"));
        }
        self.portid = address.nl_pid;
        Ok(())
    }

    /// The queue number this socket is bound to.
    pub fn queue_num(&self) -> u16 {
        self.queue_num
    }

    /// The socket's netlink port id, as the kernel assigned it.
    pub fn portid(&self) -> u32 {
        self.portid
    }

    /// Times a receive reported `ENOBUFS` (see [`Received::Overrun`]).
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// Packets that arrived while a configuration request waited for its
    /// acknowledgement; they got no verdict from here (only possible when
    /// reconfiguring or unbinding a queue already receiving traffic).
    pub fn discarded_while_configuring(&self) -> u64 {
        self.discarded_while_configuring
    }

    /// Sets the receive buffer with `SO_RCVBUFFORCE`, past
    /// `net.core.rmem_max` (needs `CAP_NET_ADMIN`). Returns the size the
    /// kernel reports afterwards (it doubles the request for bookkeeping).
    pub fn set_recv_buffer_force(&self, bytes: usize) -> Result<usize, NfqError> {
        let value = bytes.min(i32::MAX as usize / 2) as i32;
        set_int_option(&self.fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, value).map_err(
            |source| NfqError::Io {
                operation: format!("setsockopt(SO_RCVBUFFORCE, {bytes})"),
                source,
            },
        )?;
        self.recv_buffer_size()
    }

    /// Sets the receive buffer with `SO_RCVBUF`, capped by
    /// `net.core.rmem_max`. Returns the size the kernel reports afterwards.
    pub fn set_recv_buffer(&self, bytes: usize) -> Result<usize, NfqError> {
        let value = bytes.min(i32::MAX as usize / 2) as i32;
        set_int_option(&self.fd, libc::SOL_SOCKET, libc::SO_RCVBUF, value).map_err(|source| {
            NfqError::Io {
                operation: format!("setsockopt(SO_RCVBUF, {bytes})"),
                source,
            }
        })?;
        self.recv_buffer_size()
    }

    /// The socket's receive buffer size as the kernel reports it.
    pub fn recv_buffer_size(&self) -> Result<usize, NfqError> {
        getsockopt_int(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF)
            .map(|v| v.max(0) as usize)
            .map_err(|source| NfqError::Io {
                operation: "getsockopt(SO_RCVBUF)".into(),
                source,
            })
    }

    /// Sets or clears `NETLINK_NO_ENOBUFS`.
    pub fn set_no_enobufs(&self, on: bool) -> Result<(), NfqError> {
        set_int_option(
            &self.fd,
            libc::SOL_NETLINK,
            libc::NETLINK_NO_ENOBUFS,
            i32::from(on),
        )
        .map_err(|source| NfqError::Io {
            operation: format!("setsockopt(NETLINK_NO_ENOBUFS, {on})"),
            source,
        })
    }

    /// Receives one datagram without blocking. `Ok(None)` when nothing is
    /// pending. The messages borrow this queue's buffer until dropped.
    pub fn recv(&mut self) -> Result<Option<Received<'_>>, NfqError> {
        self.receive(libc::MSG_DONTWAIT)
    }

    /// Receives one datagram, waiting at most `timeout` for it (at least
    /// one microsecond). `Ok(None)` when none came in time or a signal
    /// interrupted the wait. One system call where `wait_readable` and
    /// `recv` take two: the lower latency of a sleeping reader.
    pub fn recv_wait(&mut self, timeout: Duration) -> Result<Option<Received<'_>>, NfqError> {
        let timeout = timeout.max(Duration::from_micros(1));
        if self.recv_timeout != Some(timeout) {
            let value = libc::timeval {
                tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
                tv_usec: timeout.subsec_micros() as libc::suseconds_t,
            };
            // SAFETY: `value` is a live timeval and its size is passed alongside.
            let rc = unsafe {
                libc::setsockopt(
                    self.fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    (&value as *const libc::timeval).cast(),
                    std::mem::size_of::<libc::timeval>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(NfqError::last_os_error("setsockopt SO_RCVTIMEO"));
            }
            self.recv_timeout = Some(timeout);
        }
        self.receive(0)
    }

    fn receive(&mut self, flags: i32) -> Result<Option<Received<'_>>, NfqError> {
        let blocking = flags & libc::MSG_DONTWAIT == 0;
        let mut attempts = 0;
        let received = loop {
            // SAFETY: the buffer is valid for writes of its full length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.recv_buf.as_mut_ptr().cast(),
                    self.recv_buf.len(),
                    flags | libc::MSG_TRUNC,
                )
            };
            if n >= 0 {
                break n as usize;
            }
            let error = std::io::Error::last_os_error();
            match error.raw_os_error() {
                // Nothing pending, the wait's timeout, or a signal during
                // the wait (the caller looks at its stop flag and waits again).
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EINTR) if blocking => return Ok(None),
                Some(libc::ENOBUFS) => {
                    self.overruns += 1;
                    return Ok(Some(Received::Overrun));
                }
                Some(libc::EINTR) if attempts < EINTR_RETRIES => attempts += 1,
                _ => {
                    return Err(NfqError::Io {
                        operation: format!("receive on queue {}", self.queue_num),
                        source: error,
                    })
                }
            }
        };
        if received > self.recv_buf.len() {
            return Err(NfqError::DatagramTooLarge {
                length: received,
                buffer: self.recv_buf.len(),
            });
        }
        Ok(Some(Received::Messages(Messages::new(
            &self.recv_buf[..received],
        ))))
    }

    /// Waits until a datagram (or an error report) is pending, at most
    /// `timeout`. Returns whether the socket is readable.
    pub fn wait_readable(&self, timeout: Duration) -> Result<bool, NfqError> {
        let mut poll_fd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut poll_fd, 1, timeout_ms) };
        match rc {
            0 => Ok(false),
            rc if rc > 0 => Ok(true),
            _ => {
                let error = std::io::Error::last_os_error();
                if error.raw_os_error() == Some(libc::EINTR) {
                    Ok(false)
                } else {
                    Err(NfqError::Io {
                        operation: format!("poll queue {}", self.queue_num),
                        source: error,
                    })
                }
            }
        }
    }

    /// Sends every verdict of `batch` (in as few `send` calls as the 64 KiB
    /// limit allows) and clears it, also on error. A verdict the kernel
    /// refuses (unknown packet id) comes back later as a
    /// [`Message::Error`] from [`Queue::recv`].
    pub fn send_verdicts(&self, batch: &mut VerdictBatch) -> Result<(), NfqError> {
        let result = self.send_messages(batch.as_bytes(), batch.len());
        batch.clear();
        result
    }

    /// Sends back-to-back netlink messages, cutting only at message
    /// boundaries.
    fn send_messages(&self, bytes: &[u8], count: usize) -> Result<(), NfqError> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let mut chunk = 0;
            while chunk < rest.len() {
                let Some(len_bytes) = rest.get(chunk..chunk + 4) else {
                    break;
                };
                let len =
                    u32::from_ne_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]])
                        as usize;
                let len = (len + 3) & !3;
                if len == 0 || (chunk > 0 && chunk + len > MAX_SEND_BYTES) {
                    break;
                }
                chunk = (chunk + len).min(rest.len());
            }
            if chunk == 0 {
                chunk = rest.len();
            }
            self.send_all(&rest[..chunk], count)?;
            rest = &rest[chunk..];
        }
        Ok(())
    }

    fn send_all(&self, bytes: &[u8], count: usize) -> Result<(), NfqError> {
        for _ in 0..=EINTR_RETRIES {
            // SAFETY: `bytes` is valid for reads of its length.
            let n =
                unsafe { libc::send(self.fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), 0) };
            if n >= 0 {
                return Ok(());
            }
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EINTR) {
                return Err(NfqError::Io {
                    operation: format!(
                        "send {} bytes of verdicts ({count} in the batch) to queue {}",
                        bytes.len(),
                        self.queue_num
                    ),
                    source: error,
                });
            }
        }
        Err(NfqError::Io {
            operation: format!("send verdicts to queue {}", self.queue_num),
            source: std::io::Error::from_raw_os_error(libc::EINTR),
        })
    }

    /// Sends one configuration message and waits for the kernel's answer.
    fn request(&mut self, message: &ConfigMessage, operation: String) -> Result<(), NfqError> {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        let mut bytes = Vec::with_capacity(64);
        encode_config(&mut bytes, seq, self.queue_num, message);
        self.send_all(&bytes, 1).map_err(|e| match e {
            NfqError::Io { source, .. } => NfqError::Io {
                operation: operation.clone(),
                source,
            },
            other => other,
        })?;
        self.wait_ack(seq, operation)
    }

    fn wait_ack(&mut self, seq: u32, operation: String) -> Result<(), NfqError> {
        let deadline = Instant::now() + ACK_TIMEOUT;
        for _ in 0..ACK_MAX_DATAGRAMS {
            let mut discarded = 0;
            let answer = match self.recv()? {
                None => None,
                Some(Received::Overrun) => None,
                Some(Received::Messages(messages)) => {
                    let mut answer = None;
                    for message in messages {
                        match message? {
                            Message::Ack { seq: s } if s == seq => answer = Some(Ok(())),
                            Message::Error { seq: s, errno, .. } if s == seq => {
                                answer = Some(Err(errno))
                            }
                            Message::Packet(_) => discarded += 1,
                            _ => {}
                        }
                    }
                    answer
                }
            };
            self.discarded_while_configuring += discarded;
            match answer {
                Some(Ok(())) => return Ok(()),
                Some(Err(errno)) => return Err(NfqError::Kernel { operation, errno }),
                None => {}
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            self.wait_readable(deadline - now)?;
        }
        Err(NfqError::NoAcknowledgement {
            operation,
            timeout_ms: ACK_TIMEOUT.as_millis() as u64,
        })
    }

    fn unbind_in_place(&mut self) -> Result<(), NfqError> {
        let queue_num = self.queue_num;
        self.request(
            &ConfigMessage {
                command: Some(ConfigCommand::Unbind),
                ..Default::default()
            },
            format!("unbind queue {queue_num}"),
        )
    }

    /// Unbinds the queue and closes the socket. Packets still waiting for a
    /// verdict are dropped by the kernel, and packets that arrive while the
    /// unbind waits for its acknowledgement get no verdict from here.
    pub fn unbind(mut self) -> Result<(), NfqError> {
        self.unbind_in_place()
    }
}
