//! `TCP_INFO` and `SK_MEMINFO` of many TCP sockets at once, through a
//! `NETLINK_SOCK_DIAG` dump (`inet_diag`, as `ss -tim` reads them): one
//! request per address family, a few dozen sockets per `recvmsg`, instead
//! of one or two `getsockopt` calls per socket.
//!
//! Sockets are named by their cookie (`SO_COOKIE`, read once per socket
//! with [`socket_identity`]; `idiag_cookie` in each reply): a 64-bit
//! number the kernel gives each socket from a counter and never reuses,
//! where the inode (`idiag_inode`) is 32 bits and may be reused after a
//! socket closes.
//!
//! The dump walks every TCP socket of the process's network namespace; an
//! optional bytecode filter ([`PortFilter`]: local ports or remote ports
//! equal to a list, `INET_DIAG_BC_S_EQ`/`D_EQ`, Linux 4.15 and later) lets
//! the kernel skip the others before it builds their replies. Neither
//! needs a capability (only the mark and class-id attributes do).
//!
//! The messages are parsed by hand, every length checked (a malformed or
//! truncated message is an error naming what, never a panic), framed by
//! the one netlink framing of this crate ([`crate::netlink`], NFQUEUE's
//! too): the
//! rust-netlink crate (`netlink-packet-sock-diag`) allocates a vector per
//! message and per attribute, and its `tcp_info` has one fixed length
//! (shorter than this module's and rejected when a kernel writes fewer
//! bytes); here the attribute bytes go to the same decoders as the
//! `getsockopt` path ([`TcpInfo::decode`], [`SocketMemory::decode`]), so
//! the two readings cannot differ.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use crate::netlink::{self, align4, Attributes, NLMSG_HDRLEN};
use crate::tcp_info::{SocketMemory, TcpInfo};

const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;
const NLMSG_DONE: u16 = libc::NLMSG_DONE as u16;
const NLM_F_REQUEST: u16 = libc::NLM_F_REQUEST as u16;
const NLM_F_DUMP: u16 = libc::NLM_F_DUMP as u16;
/// `struct inet_diag_req_v2`.
const REQUEST_BYTES: usize = 56;
/// `struct inet_diag_msg`.
const DIAG_MESSAGE_BYTES: usize = 72;
/// Offset of `idiag_cookie` in `struct inet_diag_msg` (after family,
/// state, timer, retrans and the ports and addresses of the socket id).
const COOKIE_OFFSET: usize = 44;
const INODE_OFFSET: usize = 68;
const INET_DIAG_REQ_BYTECODE: u16 = 1;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_SKMEMINFO: u16 = 7;
const INET_DIAG_BC_JMP: u8 = 1;
const INET_DIAG_BC_S_EQ: u8 = 11;
const INET_DIAG_BC_D_EQ: u8 = 12;
/// Bytes read per `recvmsg`: the kernel fills at most 32 KiB per dump
/// step.
const RECEIVE_BUFFER_BYTES: usize = 64 << 10;
/// Most ports a [`PortFilter`] holds (its bytecode grows 12 bytes a port).
pub const MAX_FILTER_PORTS: usize = 64;

/// `TCPF_*` of the states a socket the process holds open can be in,
/// except `LISTEN` (and the kernel's mini-sockets: `SYN_RECV`,
/// `TIME_WAIT`): established, connecting, and closing in either
/// direction. A socket in `CLOSE` is unhashed and never dumped.
pub const CONNECTED_STATES: u32 = (1 << 1) // ESTABLISHED
    | (1 << 2) // SYN_SENT
    | (1 << 4) // FIN_WAIT1
    | (1 << 5) // FIN_WAIT2
    | (1 << 8) // CLOSE_WAIT
    | (1 << 9) // LAST_ACK
    | (1 << 11); // CLOSING

/// An address family a dump covers (one request each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn code(self) -> u8 {
        match self {
            Family::V4 => libc::AF_INET as u8,
            Family::V6 => libc::AF_INET6 as u8,
        }
    }
}

/// What a registered socket is known by: its cookie, its family (an IPv6
/// socket carrying IPv4 is `V6`) and its ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketIdentity {
    pub cookie: u64,
    pub family: Family,
    pub local_port: u16,
    pub remote_port: u16,
}

fn socket_address(fd: impl AsFd, peer: bool) -> io::Result<(Family, u16)> {
    // SAFETY: sockaddr_storage is plain data for which all zeroes is valid.
    let mut address: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut length = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let pointer = (&mut address as *mut libc::sockaddr_storage).cast::<libc::sockaddr>();
    // SAFETY: the kernel writes at most `length` bytes into `address`.
    let status = unsafe {
        match peer {
            true => libc::getpeername(fd.as_fd().as_raw_fd(), pointer, &mut length),
            false => libc::getsockname(fd.as_fd().as_raw_fd(), pointer, &mut length),
        }
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    match address.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in,
            // which it is large enough and aligned for.
            let v4 = unsafe {
                &*(&address as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            Ok((Family::V4, u16::from_be(v4.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let v6 = unsafe {
                &*(&address as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Ok((Family::V6, u16::from_be(v6.sin6_port)))
        }
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an IPv4 or IPv6 socket (address family {other})"),
        )),
    }
}

/// `getsockopt(SO_COOKIE)`.
pub fn socket_cookie(fd: impl AsFd) -> io::Result<u64> {
    let mut cookie: u64 = 0;
    let mut length = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: `cookie` is a live u64 and its size is passed.
    let status = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut length,
        )
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cookie)
}

/// A connected TCP socket's cookie, family and ports (three system
/// calls: read once, when the socket is registered).
pub fn socket_identity(fd: impl AsFd) -> io::Result<SocketIdentity> {
    let (family, local_port) = socket_address(fd.as_fd(), false)?;
    let (_, remote_port) = socket_address(fd.as_fd(), true)?;
    Ok(SocketIdentity {
        cookie: socket_cookie(fd)?,
        family,
        local_port,
        remote_port,
    })
}

/// Sockets whose local port or remote port is one of a list, for the
/// kernel to skip the rest of the namespace's sockets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortFilter {
    pub local_ports: Vec<u16>,
    pub remote_ports: Vec<u16>,
}

impl PortFilter {
    /// Ports in the filter.
    pub fn len(&self) -> usize {
        self.local_ports.len() + self.remote_ports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `inet_diag` bytecode: `port == p₀ || port == p₁ || …`, each
    /// test `[S_EQ or D_EQ, yes 8, no 12][port]` followed, but for the
    /// last, by `[JMP, yes 4, no → the end]` (reaching the end exactly
    /// accepts). A failed test skips its jump to the next test; the last
    /// one's failure jumps 4 bytes past the end (rejects). Every `no` target lies on the chain of
    /// `yes` steps, as the kernel's audit (`inet_diag_bc_audit`) requires.
    /// An error when empty or above [`MAX_FILTER_PORTS`].
    pub fn bytecode(&self) -> io::Result<Vec<u8>> {
        let tests: Vec<(u8, u16)> = self
            .local_ports
            .iter()
            .map(|&p| (INET_DIAG_BC_S_EQ, p))
            .chain(self.remote_ports.iter().map(|&p| (INET_DIAG_BC_D_EQ, p)))
            .collect();
        if tests.is_empty() || tests.len() > MAX_FILTER_PORTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a sock_diag port filter holds 1 to {MAX_FILTER_PORTS} ports, not {}",
                    tests.len()
                ),
            ));
        }
        let total = 12 * tests.len() - 4;
        let mut code = Vec::with_capacity(total);
        for (i, &(op, port)) in tests.iter().enumerate() {
            code.extend_from_slice(&[op, 8]);
            code.extend_from_slice(&12u16.to_ne_bytes());
            code.extend_from_slice(&[0, 0]);
            code.extend_from_slice(&port.to_ne_bytes());
            if i + 1 < tests.len() {
                // From the jump's start to the end, plus 4: past the end.
                let to_end = (total - code.len()) as u16;
                code.extend_from_slice(&[INET_DIAG_BC_JMP, 4]);
                code.extend_from_slice(&to_end.to_ne_bytes());
            }
        }
        Ok(code)
    }
}

/// What the dump says about one socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiagSocket {
    /// `INET_DIAG_INFO`, if the kernel sent it.
    pub tcp_info: Option<TcpInfo>,
    /// `INET_DIAG_SKMEMINFO`, if the kernel sent it.
    pub memory: Option<SocketMemory>,
}

/// One reply of the dump, attributes not yet decoded.
#[derive(Clone, Copy, Debug)]
pub struct DiagMessage<'a> {
    pub cookie: u64,
    pub state: u8,
    pub inode: u32,
    attributes: &'a [u8],
}

fn malformed(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("sock_diag: {what}"))
}

fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    let b = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

impl DiagMessage<'_> {
    /// Decodes `INET_DIAG_INFO` and `INET_DIAG_SKMEMINFO`; other
    /// attributes are skipped.
    pub fn decode(&self) -> io::Result<DiagSocket> {
        let mut socket = DiagSocket {
            tcp_info: None,
            memory: None,
        };
        for attribute in Attributes::new(self.attributes) {
            let (kind, value) = attribute
                .map_err(|e| malformed(format!("{e} in the reply for socket {}", self.cookie)))?;
            match kind {
                INET_DIAG_INFO => socket.tcp_info = Some(TcpInfo::decode(value)?),
                INET_DIAG_SKMEMINFO => socket.memory = Some(SocketMemory::decode(value)?),
                _ => {}
            }
        }
        Ok(socket)
    }
}

/// Whether a batch of replies ended the dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batch {
    More,
    Done,
}

/// Parses one `recvmsg`'s netlink messages (`seq`: the request's), calling
/// `visit` for each socket reply. `NLMSG_DONE` ends the dump;
/// `NLMSG_ERROR` is the kernel's error; a message of another request, of
/// an unknown type or of a length that does not fit is an error.
pub fn parse_batch(
    bytes: &[u8],
    seq: u32,
    visit: &mut dyn FnMut(&DiagMessage<'_>) -> io::Result<()>,
) -> io::Result<Batch> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let (header, payload, next) = netlink::split_message(rest)
            .map_err(|e| malformed(format!("{e} (of a {}-byte read)", bytes.len())))?;
        let (kind, message_seq) = (header.msg_type, header.seq);
        if message_seq != seq {
            return Err(malformed(format!(
                "reply to request {message_seq} while waiting for {seq}"
            )));
        }
        match kind {
            NLMSG_DONE => return Ok(Batch::Done),
            NLMSG_ERROR => {
                let code = u32_at(payload, 0)
                    .ok_or_else(|| malformed("NLMSG_ERROR without its error code".into()))?
                    as i32;
                return match code {
                    0 => Ok(Batch::Done),
                    code => Err(io::Error::from_raw_os_error(-code)),
                };
            }
            SOCK_DIAG_BY_FAMILY => {
                if payload.len() < DIAG_MESSAGE_BYTES {
                    return Err(malformed(format!(
                        "socket reply of {} bytes, fewer than inet_diag_msg's {DIAG_MESSAGE_BYTES}",
                        payload.len()
                    )));
                }
                let cookie_low = u32_at(payload, COOKIE_OFFSET).unwrap_or(0);
                let cookie_high = u32_at(payload, COOKIE_OFFSET + 4).unwrap_or(0);
                visit(&DiagMessage {
                    cookie: u64::from(cookie_high) << 32 | u64::from(cookie_low),
                    state: payload[1],
                    inode: u32_at(payload, INODE_OFFSET).unwrap_or(0),
                    attributes: &payload[DIAG_MESSAGE_BYTES..],
                })?;
            }
            other => {
                return Err(malformed(format!(
                    "unexpected netlink message type {other}"
                )));
            }
        }
        rest = next;
    }
    Ok(Batch::More)
}

/// The dump request: `nlmsghdr`, `inet_diag_req_v2` (TCP, `states`,
/// `INET_DIAG_INFO` and `INET_DIAG_SKMEMINFO`) and the filter's bytecode.
pub fn request_bytes(family: Family, states: u32, seq: u32, bytecode: Option<&[u8]>) -> Vec<u8> {
    let attribute = bytecode.map_or(0, |code| 4 + align4(code.len()));
    let length = NLMSG_HDRLEN + REQUEST_BYTES + attribute;
    let mut bytes = Vec::with_capacity(length);
    bytes.extend_from_slice(&(length as u32).to_ne_bytes());
    bytes.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    bytes.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    bytes.extend_from_slice(&seq.to_ne_bytes());
    bytes.extend_from_slice(&0u32.to_ne_bytes());
    // inet_diag_req_v2: family, protocol, the extensions wanted (bit
    // attribute − 1), padding, states, then a zero socket id (a dump).
    let extensions = (1u8 << (INET_DIAG_INFO - 1)) | (1u8 << (INET_DIAG_SKMEMINFO - 1));
    bytes.extend_from_slice(&[family.code(), libc::IPPROTO_TCP as u8, extensions, 0]);
    bytes.extend_from_slice(&states.to_ne_bytes());
    bytes.resize(NLMSG_HDRLEN + REQUEST_BYTES, 0);
    if let Some(code) = bytecode {
        bytes.extend_from_slice(&((4 + code.len()) as u16).to_ne_bytes());
        bytes.extend_from_slice(&INET_DIAG_REQ_BYTECODE.to_ne_bytes());
        bytes.extend_from_slice(code);
        bytes.resize(length, 0);
    }
    bytes
}

/// A `NETLINK_SOCK_DIAG` socket and its receive buffer, kept for the
/// dumps of every interval.
pub struct SockDiag {
    socket: OwnedFd,
    buffer: Vec<u8>,
    seq: u32,
}

fn open_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) returns a new descriptor or -1.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a descriptor just created and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

impl SockDiag {
    pub fn open() -> io::Result<SockDiag> {
        Ok(SockDiag {
            socket: open_socket()?,
            buffer: vec![0; RECEIVE_BUFFER_BYTES],
            seq: 0,
        })
    }

    /// Dumps the TCP sockets of `family` in `states` (that `filter`
    /// passes, if given), calling `visit` for each; returns the replies
    /// seen. An error (the kernel's, a malformed reply, or `visit`'s)
    /// stops the dump; the socket is then replaced by a new one, so that
    /// the rest of the abandoned dump cannot reach the next.
    pub fn dump(
        &mut self,
        family: Family,
        states: u32,
        filter: Option<&PortFilter>,
        visit: impl FnMut(&DiagMessage<'_>) -> io::Result<()>,
    ) -> io::Result<usize> {
        let result = self.dump_once(family, states, filter, visit);
        if result.is_err() {
            // If no new socket can be had, the old one stays: the next
            // dump then fails on the abandoned one's replies (a sequence
            // number not its own) and tries again.
            if let Ok(socket) = open_socket() {
                self.socket = socket;
            }
        }
        result
    }

    fn dump_once(
        &mut self,
        family: Family,
        states: u32,
        filter: Option<&PortFilter>,
        mut visit: impl FnMut(&DiagMessage<'_>) -> io::Result<()>,
    ) -> io::Result<usize> {
        let bytecode = filter.map(PortFilter::bytecode).transpose()?;
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let request = request_bytes(family, states, seq, bytecode.as_deref());
        // SAFETY: a kernel address (all zeroes: pid 0) of the right size.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `request` and `kernel` are live for the call, with their
        // lengths.
        let sent = unsafe {
            libc::sendto(
                self.socket.as_raw_fd(),
                request.as_ptr().cast(),
                request.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut replies = 0usize;
        loop {
            // SAFETY: the kernel writes at most `buffer.len()` bytes.
            let received = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    self.buffer.as_mut_ptr().cast(),
                    self.buffer.len(),
                    0,
                )
            };
            if received < 0 {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            let bytes = &self.buffer[..(received as usize).min(self.buffer.len())];
            let mut counted = |m: &DiagMessage<'_>| {
                replies += 1;
                visit(m)
            };
            if parse_batch(bytes, seq, &mut counted)? == Batch::Done {
                return Ok(replies);
            }
            if received == 0 {
                return Err(malformed("the dump ended without NLMSG_DONE".into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u16_at(bytes: &[u8], offset: usize) -> Option<u16> {
        let b = bytes.get(offset..offset.checked_add(2)?)?;
        Some(u16::from_ne_bytes([b[0], b[1]]))
    }
    use crate::tcp_info;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(align4(a.len()), 0);
        a
    }

    fn message(kind: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(payload);
        m.resize(align4(m.len()), 0);
        m
    }

    fn socket_reply(cookie: u64, attributes: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; DIAG_MESSAGE_BYTES];
        p[0] = libc::AF_INET as u8;
        p[1] = 1;
        p[COOKIE_OFFSET..COOKIE_OFFSET + 4].copy_from_slice(&(cookie as u32).to_ne_bytes());
        p[COOKIE_OFFSET + 4..COOKIE_OFFSET + 8]
            .copy_from_slice(&((cookie >> 32) as u32).to_ne_bytes());
        p[INODE_OFFSET..INODE_OFFSET + 4].copy_from_slice(&777u32.to_ne_bytes());
        p.extend_from_slice(attributes);
        p
    }

    fn tcp_info_bytes() -> Vec<u8> {
        let mut info = vec![0u8; 236];
        info[0] = 1;
        info[68..72].copy_from_slice(&2500u32.to_ne_bytes()); // rtt
        info[16..20].copy_from_slice(&1448u32.to_ne_bytes()); // snd_mss
        info[228..232].copy_from_slice(&65535u32.to_ne_bytes()); // snd_wnd
        info
    }

    fn memory_bytes() -> Vec<u8> {
        (1u32..=9).flat_map(|v| (v * 100).to_ne_bytes()).collect()
    }

    /// Cookie, inode and decoded attributes of each reply.
    type Seen = Vec<(u64, u32, DiagSocket)>;

    fn collect(bytes: &[u8], seq: u32) -> io::Result<(Batch, Seen)> {
        let mut seen = Vec::new();
        let batch = parse_batch(bytes, seq, &mut |m| {
            seen.push((m.cookie, m.inode, m.decode()?));
            Ok(())
        })?;
        Ok((batch, seen))
    }

    #[test]
    fn replies_are_decoded_by_cookie_and_the_dump_ends_on_done() {
        let mut attributes = attribute(8, &[0]); // INET_DIAG_SHUTDOWN, skipped
        attributes.extend(attribute(INET_DIAG_INFO, &tcp_info_bytes()));
        attributes.extend(attribute(INET_DIAG_SKMEMINFO, &memory_bytes()));
        let cookie = 0x0000_0001_0000_0002;
        let mut bytes = message(SOCK_DIAG_BY_FAMILY, 9, &socket_reply(cookie, &attributes));
        bytes.extend(message(SOCK_DIAG_BY_FAMILY, 9, &socket_reply(5, &[])));
        let (batch, seen) = collect(&bytes, 9).unwrap();
        assert_eq!(batch, Batch::More);
        assert_eq!(seen.len(), 2);
        let (c, inode, socket) = seen[0];
        assert_eq!((c, inode), (cookie, 777));
        let info = socket.tcp_info.unwrap();
        assert_eq!(
            (info.rtt_us, info.snd_mss, info.snd_wnd),
            (2500, 1448, Some(65535))
        );
        let memory = socket.memory.unwrap();
        assert_eq!((memory.rmem_alloc, memory.drops), (100, 900));
        assert_eq!(
            seen[1].2,
            DiagSocket {
                tcp_info: None,
                memory: None
            }
        );
        bytes.extend(message(NLMSG_DONE, 9, &0i32.to_ne_bytes()));
        assert_eq!(collect(&bytes, 9).unwrap().0, Batch::Done);
    }

    #[test]
    fn malformed_replies_are_errors_that_say_what() {
        let error = |bytes: &[u8]| {
            collect(bytes, 1)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let reply = message(SOCK_DIAG_BY_FAMILY, 1, &socket_reply(3, &[]));
        assert!(
            error(&reply[..10]).contains("netlink message header truncated"),
            "{}",
            error(&reply[..10])
        );
        assert!(
            error(&reply[..40]).contains("declares length 88, but 40 bytes are left"),
            "{}",
            error(&reply[..40])
        );
        let short = message(SOCK_DIAG_BY_FAMILY, 1, &[0u8; 20]);
        assert!(error(&short).contains("fewer than inet_diag_msg"));
        assert!(
            error(&message(SOCK_DIAG_BY_FAMILY, 2, &socket_reply(3, &[]))).contains("request 2")
        );
        assert!(error(&message(99, 1, &[])).contains("type 99"));
        // An attribute longer than what is left, a truncated tcp_info, a
        // truncated meminfo.
        let mut long = attribute(INET_DIAG_INFO, &[0u8; 8]);
        long[0..2].copy_from_slice(&200u16.to_ne_bytes());
        assert!(
            error(&message(SOCK_DIAG_BY_FAMILY, 1, &socket_reply(3, &long)))
                .contains("netlink attribute declares length 200")
        );
        let info = attribute(INET_DIAG_INFO, &[1u8; 50]);
        assert!(
            error(&message(SOCK_DIAG_BY_FAMILY, 1, &socket_reply(3, &info))).contains("TCP_INFO")
        );
        let memory = attribute(INET_DIAG_SKMEMINFO, &[1u8; 20]);
        assert!(
            error(&message(SOCK_DIAG_BY_FAMILY, 1, &socket_reply(3, &memory)))
                .contains("SK_MEMINFO")
        );
        let header = socket_reply(3, &[1, 0]);
        assert!(error(&message(SOCK_DIAG_BY_FAMILY, 1, &header))
            .contains("netlink attribute header truncated"));
        // The kernel's error.
        let refused = message(NLMSG_ERROR, 1, &(-libc::EINVAL).to_ne_bytes());
        let kernel = collect(&refused, 1).err().and_then(|e| e.raw_os_error());
        assert_eq!(kernel, Some(libc::EINVAL));
    }

    #[test]
    fn the_filter_bytecode_chains_its_tests() {
        let filter = PortFilter {
            local_ports: vec![8080],
            remote_ports: vec![80, 443],
        };
        let code = filter.bytecode().unwrap();
        assert_eq!(code.len(), 32);
        // Test, port, jump; test, port, jump; test, port.
        assert_eq!(&code[0..2], &[INET_DIAG_BC_S_EQ, 8]);
        assert_eq!(u16_at(&code, 2), Some(12));
        assert_eq!(u16_at(&code, 6), Some(8080));
        assert_eq!(&code[8..10], &[INET_DIAG_BC_JMP, 4]);
        assert_eq!(
            u16_at(&code, 10),
            Some(24),
            "jump from 8 to the end: accept"
        );
        assert_eq!(&code[12..14], &[INET_DIAG_BC_D_EQ, 8]);
        assert_eq!(u16_at(&code, 22), Some(12));
        assert_eq!(u16_at(&code, 30), Some(443));
        assert!(PortFilter::default().bytecode().is_err());
        let many = PortFilter {
            local_ports: (0..=MAX_FILTER_PORTS as u16).collect(),
            remote_ports: Vec::new(),
        };
        assert!(many.bytecode().is_err());
    }

    fn loopback_pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let address = listener.local_addr().unwrap();
        let mut peer = TcpStream::connect(address).unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        accepted.write_all(&[7u8; 3000]).unwrap();
        let mut sink = [0u8; 3000];
        peer.read_exact(&mut sink).unwrap();
        peer.write_all(&[7u8; 500]).unwrap();
        (accepted, peer)
    }

    /// Without capabilities too: a dump of the process's own namespace
    /// needs none (as `ss`), and the filter is allowed unprivileged.
    #[test]
    fn the_dump_agrees_with_getsockopt_on_loopback_sockets() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (accepted, peer) = loopback_pair(&listener);
        let (other, _other_peer) = loopback_pair(&listener);
        // Let the peer's 500 bytes arrive and stay unread in the queue.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let identity = socket_identity(&accepted).unwrap();
        assert_eq!(identity.family, Family::V4);
        assert_eq!(identity.local_port, listener.local_addr().unwrap().port());
        assert_eq!(identity.remote_port, peer.local_addr().unwrap().port());
        let other_cookie = socket_cookie(&other).unwrap();
        assert_ne!(identity.cookie, other_cookie);
        let mut diag = SockDiag::open().unwrap();
        let filter = PortFilter {
            local_ports: vec![identity.local_port],
            remote_ports: Vec::new(),
        };
        for filter in [None, Some(&filter)] {
            let mut found = None;
            let mut ours = 0;
            let replies = diag
                .dump(Family::V4, CONNECTED_STATES, filter, |m| {
                    if m.cookie == identity.cookie || m.cookie == other_cookie {
                        ours += 1;
                    }
                    if m.cookie == identity.cookie {
                        found = Some(m.decode()?);
                    }
                    Ok(())
                })
                .unwrap();
            assert_eq!(ours, 2, "both accepted sockets, filter {filter:?}");
            if filter.is_some() {
                assert_eq!(replies, 2, "the peers' ends are filtered out");
            }
            let dumped = found.unwrap();
            let info = tcp_info::tcp_info(&accepted).unwrap();
            let memory = tcp_info::socket_memory(&accepted).unwrap();
            let d = dumped.tcp_info.unwrap();
            // Counters of an idle connection do not move between the reads.
            assert_eq!(
                (
                    d.state,
                    d.snd_mss,
                    d.rtt_us,
                    d.rto_us,
                    d.total_retrans,
                    d.data_segs_out
                ),
                (
                    info.state,
                    info.snd_mss,
                    info.rtt_us,
                    info.rto_us,
                    info.total_retrans,
                    info.data_segs_out
                )
            );
            assert_eq!(
                (d.bytes_acked, d.bytes_received, d.snd_wnd, d.rcv_wnd),
                (
                    info.bytes_acked,
                    info.bytes_received,
                    info.snd_wnd,
                    info.rcv_wnd
                )
            );
            // The dump sends the kernel's whole struct; getsockopt, what
            // was asked for.
            assert!(d.returned_bytes >= info.returned_bytes);
            let m = dumped.memory.unwrap();
            assert_eq!(
                (m.rmem_alloc, m.rcvbuf, m.sndbuf, m.wmem_queued),
                (
                    memory.rmem_alloc,
                    memory.rcvbuf,
                    memory.sndbuf,
                    memory.wmem_queued
                )
            );
            assert!(m.rmem_alloc > 0, "the unread 500 bytes");
        }
        // A dump abandoned on the first reply leaves nothing behind for
        // the next one (more sockets than one read carries: about 70).
        let address = listener.local_addr().unwrap();
        let many: Vec<_> = (0..200)
            .map(|_| {
                let peer = TcpStream::connect(address).unwrap();
                (peer, listener.accept().unwrap().0)
            })
            .collect();
        let stopped = diag.dump(Family::V4, CONNECTED_STATES, None, |_| {
            Err(io::Error::other("stop"))
        });
        assert_eq!(
            stopped.err().map(|e| e.to_string()).as_deref(),
            Some("stop")
        );
        let mut seen = false;
        diag.dump(Family::V4, CONNECTED_STATES, None, |m| {
            seen |= m.cookie == identity.cookie;
            Ok(())
        })
        .unwrap();
        assert!(seen);
        drop(many);
        drop(peer);
    }
}
