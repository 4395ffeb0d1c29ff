//! What the kernel knows about one TCP socket and about TCP memory as a
//! whole: `TCP_INFO`, `SO_MEMINFO`, `SO_SNDBUF`/`SO_RCVBUF`,
//! `/proc/net/sockstat`'s TCP `mem`, `net.ipv4.tcp_mem` and
//! `net.core.{w,r}mem_max`.
//!
//! `struct tcp_info` has grown with every kernel; the kernel copies
//! `min(len, sizeof)` bytes and returns the length it wrote. libc's
//! `tcp_info` stops at `tcpi_total_retrans`, so the struct is read into a
//! byte buffer and decoded by its offsets in `include/uapi/linux/tcp.h`
//! (written by hand, for that reason); a field beyond the returned length
//! (an older kernel) is `None`, never zero.
//!
//! Buffer sizes: `setsockopt(SO_SNDBUF, v)` stores `2·v` (the kernel's
//! allowance for `sk_buff` overhead, `socket(7)`), capped at
//! `wmem_max`·2 and floored at its own minimum; `getsockopt` returns the
//! doubled value. [`set_send_buffer`] and [`set_receive_buffer`] take the
//! size the kernel is to hold (what `getsockopt` will report) and pass
//! half of it; both return what the kernel then reports.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::path::Path;

/// Bytes of `struct tcp_info` this module knows (through `tcpi_rcv_wnd`).
const TCP_INFO_KNOWN_BYTES: usize = 236;

/// The fields of `TCP_INFO` the buffer allocation reads. Times in
/// microseconds, as the kernel gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// `tcpi_state` (`TCP_ESTABLISHED` = 1, …).
    pub state: u8,
    /// Window scale the peer announced (our sends are shifted by it).
    pub snd_wscale: u8,
    /// Window scale we announced.
    pub rcv_wscale: u8,
    pub rto_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    /// Segments sent and not yet acknowledged; on a listening socket, the
    /// connections waiting in its accept queue.
    pub unacked: u32,
    /// `tcpi_sacked`: segments selectively acknowledged; on a listening
    /// socket, its backlog (`listen(2)`'s, capped by `somaxconn`).
    pub sacked: u32,
    /// `tcpi_last_ack_recv`: milliseconds (a jiffy's resolution) since the
    /// last segment carrying an ACK arrived. On a socket just accepted, the
    /// time since the handshake's final ACK created it, unless the client
    /// sent more since (its request resets it).
    pub last_ack_recv_ms: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd: u32,
    pub total_retrans: u32,
    pub data_segs_out: Option<u32>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub notsent_bytes: Option<u32>,
    /// Microseconds the connection had data in flight.
    pub busy_time_us: Option<u64>,
    /// Microseconds limited by the receiver's window.
    pub rwnd_limited_us: Option<u64>,
    /// Microseconds limited by the send buffer.
    pub sndbuf_limited_us: Option<u64>,
    /// Segments received out of order (a hole held data back).
    pub rcv_ooopack: Option<u32>,
    /// The peer's advertised window, bytes.
    pub snd_wnd: Option<u32>,
    /// The window we advertise, bytes.
    pub rcv_wnd: Option<u32>,
    /// Bytes of `struct tcp_info` the kernel returned.
    pub returned_bytes: usize,
}

fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    let b = bytes.get(offset..offset + 4)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn u64_at(bytes: &[u8], offset: usize) -> Option<u64> {
    let b = bytes.get(offset..offset + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_ne_bytes(a))
}

impl TcpInfo {
    /// Decodes the bytes the kernel returned. Fewer than the 104 bytes
    /// every kernel since 2.6 writes (through `tcpi_total_retrans`) is an
    /// error.
    pub fn decode(bytes: &[u8]) -> io::Result<TcpInfo> {
        let short = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "TCP_INFO returned {} bytes, fewer than the 104 of its oldest layout",
                    bytes.len()
                ),
            )
        };
        let base = |offset| u32_at(bytes, offset).ok_or_else(short);
        let state = *bytes.first().ok_or_else(short)?;
        let wscale = *bytes.get(6).ok_or_else(short)?;
        Ok(TcpInfo {
            state,
            snd_wscale: wscale & 0x0f,
            rcv_wscale: wscale >> 4,
            rto_us: base(8)?,
            snd_mss: base(16)?,
            rcv_mss: base(20)?,
            unacked: base(24)?,
            sacked: base(28)?,
            last_ack_recv_ms: base(56)?,
            rtt_us: base(68)?,
            rttvar_us: base(72)?,
            snd_cwnd: base(80)?,
            total_retrans: base(100)?,
            bytes_acked: u64_at(bytes, 120),
            bytes_received: u64_at(bytes, 128),
            notsent_bytes: u32_at(bytes, 144),
            data_segs_out: u32_at(bytes, 156),
            busy_time_us: u64_at(bytes, 168),
            rwnd_limited_us: u64_at(bytes, 176),
            sndbuf_limited_us: u64_at(bytes, 184),
            rcv_ooopack: u32_at(bytes, 224),
            snd_wnd: u32_at(bytes, 228),
            rcv_wnd: u32_at(bytes, 232),
            returned_bytes: bytes.len(),
        })
    }
}

/// `getsockopt(IPPROTO_TCP, TCP_INFO)`.
pub fn tcp_info(fd: impl AsFd) -> io::Result<TcpInfo> {
    let mut buffer = [0u8; TCP_INFO_KNOWN_BYTES];
    let mut length = buffer.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `length` bytes into `buffer` and
    // stores the count it wrote in `length`.
    let status = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buffer.as_mut_ptr().cast(),
            &mut length,
        )
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    TcpInfo::decode(&buffer[..(length as usize).min(buffer.len())])
}

/// `SO_MEMINFO`: a socket's memory, bytes (the `SK_MEMINFO_*` array).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketMemory {
    /// Receive-queue memory allocated (in-order and out-of-order data,
    /// with `sk_buff` overhead).
    pub rmem_alloc: u32,
    pub rcvbuf: u32,
    /// Send memory in flight below the socket (qdisc, driver).
    pub wmem_alloc: u32,
    pub sndbuf: u32,
    pub fwd_alloc: u32,
    /// Send-queue memory (unsent and unacknowledged data).
    pub wmem_queued: u32,
    pub optmem: u32,
    pub backlog: u32,
    pub drops: u32,
}

/// `getsockopt(SOL_SOCKET, SO_MEMINFO)`.
pub fn socket_memory(fd: impl AsFd) -> io::Result<SocketMemory> {
    let mut values = [0u32; 9];
    let mut length = std::mem::size_of_val(&values) as libc::socklen_t;
    // SAFETY: as for TCP_INFO: bounded by `length`, which the kernel updates.
    let status = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            values.as_mut_ptr().cast(),
            &mut length,
        )
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    if (length as usize) < std::mem::size_of_val(&values) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("SO_MEMINFO returned {length} bytes, fewer than its 36"),
        ));
    }
    Ok(SocketMemory::from_values(values))
}

impl SocketMemory {
    fn from_values(values: [u32; 9]) -> SocketMemory {
        SocketMemory {
            rmem_alloc: values[0],
            rcvbuf: values[1],
            wmem_alloc: values[2],
            sndbuf: values[3],
            fwd_alloc: values[4],
            wmem_queued: values[5],
            optmem: values[6],
            backlog: values[7],
            drops: values[8],
        }
    }

    /// Decodes the `SK_MEMINFO_*` array as the kernel writes it (native
    /// byte order; `sock_diag`'s `INET_DIAG_SKMEMINFO` carries the same
    /// array). Fewer than its 36 bytes is an error.
    pub fn decode(bytes: &[u8]) -> io::Result<SocketMemory> {
        let mut values = [0u32; 9];
        for (i, value) in values.iter_mut().enumerate() {
            *value = u32_at(bytes, 4 * i).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("SK_MEMINFO has {} bytes, fewer than its 36", bytes.len()),
                )
            })?;
        }
        Ok(SocketMemory::from_values(values))
    }
}

fn get_int(fd: impl AsFd, name: libc::c_int) -> io::Result<u32> {
    let mut value: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is a live c_int and its size is passed.
    let status = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut length,
        )
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value.max(0) as u32)
}

fn set_buffer(fd: impl AsFd, name: libc::c_int, bytes: u64) -> io::Result<u32> {
    let half = (bytes / 2).min(libc::c_int::MAX as u64) as libc::c_int;
    crate::socket::set_int_option(fd.as_fd(), libc::SOL_SOCKET, name, half)?;
    get_int(fd, name)
}

/// Sets the send buffer so the kernel holds `bytes` (it doubles what it is
/// given, so half is passed); returns what it holds now (capped at twice
/// `wmem_max`, floored at its minimum). Turns send autotuning off for the
/// socket.
pub fn set_send_buffer(fd: impl AsFd, bytes: u64) -> io::Result<u32> {
    set_buffer(fd, libc::SO_SNDBUF, bytes)
}

/// As [`set_send_buffer`], for the receive buffer (`rmem_max`). Set it
/// only after the handshake: set before, it clamps the window scale.
pub fn set_receive_buffer(fd: impl AsFd, bytes: u64) -> io::Result<u32> {
    set_buffer(fd, libc::SO_RCVBUF, bytes)
}

/// The smallest send and receive buffers the kernel holds
/// (`SOCK_MIN_SNDBUF`, `SOCK_MIN_RCVBUF`: they follow the size of its
/// `sk_buff`), probed once per process on a socket of its own; `None` if
/// that failed.
fn minimum_buffers() -> Option<(u32, u32)> {
    static MINIMA: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    *MINIMA.get_or_init(|| {
        // SAFETY: socket(2) returns a new descriptor or -1.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a descriptor just created and owned by no one else.
        let socket = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        let mut minima = [0u32; 2];
        for (minimum, name) in minima.iter_mut().zip([libc::SO_SNDBUF, libc::SO_RCVBUF]) {
            crate::socket::set_int_option(socket.as_fd(), libc::SOL_SOCKET, name, 0).ok()?;
            *minimum = get_int(&socket, name).ok()?;
        }
        Some((minima[0], minima[1]))
    })
}

/// Which of a socket's buffers [`set_buffer_computed`] sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketBuffer {
    Send,
    Receive,
}

/// As [`set_send_buffer`] and [`set_receive_buffer`], with one system
/// call instead of two: what the kernel holds is its own rule
/// (`sk_setsockopt`), not read back — twice the value given (half of
/// `bytes`), at most `max_held` (the caller's twice `wmem_max` /
/// `rmem_max`, read when it started: a sysctl lowered since makes the
/// value returned too large until the caller reads the limits again), at
/// least the kernel's minimum. Falls back to reading it back when the
/// minima could not be probed.
pub fn set_buffer_computed(
    fd: impl AsFd,
    buffer: SocketBuffer,
    bytes: u64,
    max_held: u64,
) -> io::Result<u32> {
    let name = match buffer {
        SocketBuffer::Send => libc::SO_SNDBUF,
        SocketBuffer::Receive => libc::SO_RCVBUF,
    };
    let Some((send_minimum, receive_minimum)) = minimum_buffers() else {
        return set_buffer(fd, name, bytes);
    };
    let half = (bytes / 2).min(libc::c_int::MAX as u64) as libc::c_int;
    crate::socket::set_int_option(fd.as_fd(), libc::SOL_SOCKET, name, half)?;
    let minimum = match buffer {
        SocketBuffer::Send => send_minimum,
        SocketBuffer::Receive => receive_minimum,
    };
    let held = (2 * half as u64).min(max_held).min(u64::from(u32::MAX)) as u32;
    Ok(held.max(minimum))
}

/// The send buffer the kernel holds (`getsockopt(SO_SNDBUF)`, doubled).
pub fn send_buffer(fd: impl AsFd) -> io::Result<u32> {
    get_int(fd, libc::SO_SNDBUF)
}

/// The receive buffer the kernel holds (`getsockopt(SO_RCVBUF)`, doubled).
pub fn receive_buffer(fd: impl AsFd) -> io::Result<u32> {
    get_int(fd, libc::SO_RCVBUF)
}

/// Bytes received and not yet read (`ioctl(FIONREAD)`): on a keep-alive
/// connection, a request that has arrived before the server read it.
pub fn unread_bytes(fd: impl AsFd) -> io::Result<u32> {
    let mut count: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which points at
    // `count`.
    let r = unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), libc::FIONREAD, &mut count) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(count.max(0) as u32)
}

/// The system's page size, bytes (the unit of `tcp_mem` and sockstat).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

fn invalid(what: &str, text: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what}: cannot parse {:?}", text.trim()),
    )
}

/// The TCP `mem` field (pages) of a `/proc/net/sockstat` text.
pub fn parse_sockstat_tcp_pages(text: &str) -> io::Result<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .ok_or_else(|| invalid("/proc/net/sockstat has no TCP line", text))?;
    let mut words = line.split_whitespace();
    while let Some(word) = words.next() {
        if word == "mem" {
            if let Some(pages) = words.next().and_then(|v| v.parse().ok()) {
                return Ok(pages);
            }
        }
    }
    Err(invalid("/proc/net/sockstat TCP mem", line))
}

/// Pages the kernel charges to TCP now (`/proc/net/sockstat`, TCP `mem`).
pub fn tcp_memory_pages() -> io::Result<u64> {
    parse_sockstat_tcp_pages(&std::fs::read_to_string("/proc/net/sockstat")?)
}

/// `net.ipv4.tcp_mem`: below `low` no pressure, from `pressure` the
/// kernel moderates buffers, `high` is the hard limit. Pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpMemLimits {
    pub low: u64,
    pub pressure: u64,
    pub high: u64,
}

/// Parses `net.ipv4.tcp_mem`'s three numbers.
pub fn parse_tcp_mem(text: &str) -> io::Result<TcpMemLimits> {
    let values: Vec<u64> = text
        .split_whitespace()
        .map(|v| v.parse().map_err(|_| invalid("net.ipv4.tcp_mem", text)))
        .collect::<io::Result<_>>()?;
    match values[..] {
        [low, pressure, high] => Ok(TcpMemLimits {
            low,
            pressure,
            high,
        }),
        _ => Err(invalid("net.ipv4.tcp_mem (three numbers)", text)),
    }
}

/// Reads `net.ipv4.tcp_mem`.
pub fn tcp_mem_limits() -> io::Result<TcpMemLimits> {
    parse_tcp_mem(&std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem")?)
}

fn read_number(path: &Path) -> io::Result<u64> {
    let text = std::fs::read_to_string(path)?;
    text.trim()
        .parse()
        .map_err(|_| invalid(&path.display().to_string(), &text))
}

/// `net.core.wmem_max`: the largest `SO_SNDBUF` value accepted (the kernel
/// holds up to twice it).
pub fn wmem_max() -> io::Result<u64> {
    read_number(Path::new("/proc/sys/net/core/wmem_max"))
}

/// `net.core.rmem_max`, as [`wmem_max`] for `SO_RCVBUF`.
pub fn rmem_max() -> io::Result<u64> {
    read_number(Path::new("/proc/sys/net/core/rmem_max"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn the_computed_buffer_is_what_the_kernel_holds() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let send_max = 2 * wmem_max().unwrap();
        let receive_max = 2 * rmem_max().unwrap();
        for bytes in [
            0,
            1000,
            4944,
            65_536,
            100_001,
            1 << 20,
            send_max,
            2 * send_max,
        ] {
            let computed =
                set_buffer_computed(&socket, SocketBuffer::Send, bytes, send_max).unwrap();
            assert_eq!(computed, send_buffer(&socket).unwrap(), "send {bytes}");
        }
        for bytes in [
            0,
            1000,
            4944,
            65_536,
            100_001,
            1 << 20,
            receive_max,
            2 * receive_max,
        ] {
            let computed =
                set_buffer_computed(&socket, SocketBuffer::Receive, bytes, receive_max).unwrap();
            assert_eq!(
                computed,
                receive_buffer(&socket).unwrap(),
                "receive {bytes}"
            );
        }
    }
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn unread_bytes_counts_what_arrived_and_was_not_read() {
        let (mut client, mut server) = pair();
        assert_eq!(unread_bytes(&server).unwrap(), 0);
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while unread_bytes(&server).unwrap() < 18 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(unread_bytes(&server).unwrap(), 18);
        let mut buf = [0u8; 18];
        server.read_exact(&mut buf).unwrap();
        assert_eq!(unread_bytes(&server).unwrap(), 0);
    }

    /// A child socket's last-ACK time is set when the handshake's final
    /// ACK creates it, so at accept it tells how long the connection
    /// waited in the accept queue (what `vantage proxy`'s Certes stream
    /// takes the SYN's arrival from); a later segment from the client
    /// resets it.
    #[test]
    fn last_ack_recv_at_accept_is_the_accept_queue_wait() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (server, _) = listener.accept().unwrap();
        let waited = tcp_info(&server).unwrap().last_ack_recv_ms;
        // A jiffy is at most 10 ms (HZ ≥ 100).
        assert!((290..2000).contains(&waited), "{waited} ms");

        let mut late = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        late.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (server, _) = listener.accept().unwrap();
        let since_request = tcp_info(&server).unwrap().last_ack_recv_ms;
        assert!(since_request < 200, "{since_request} ms");
    }

    #[test]
    fn tcp_info_of_a_loopback_connection() {
        let (mut client, mut server) = pair();
        let payload = vec![7u8; 100_000];
        client.write_all(&payload).unwrap();
        let mut received = vec![0u8; payload.len()];
        server.read_exact(&mut received).unwrap();
        let info = tcp_info(&client).unwrap();
        assert_eq!(info.state, 1, "established");
        assert!(info.snd_mss > 0 && info.rtt_us > 0 && info.rto_us >= 200_000);
        assert!(info.data_segs_out.unwrap() > 0);
        assert!(info.bytes_acked.unwrap() >= payload.len() as u64);
        assert!(info.snd_wnd.unwrap() > 0);
        assert!(info.busy_time_us.is_some());
        assert!(info.returned_bytes >= 236);
        // Both ends announced window scaling on loopback.
        let peer = tcp_info(&server).unwrap();
        assert_eq!(info.snd_wscale, peer.rcv_wscale);
    }

    #[test]
    fn a_short_struct_leaves_the_newer_fields_out() {
        let mut bytes = [0u8; 236];
        bytes[0] = 1;
        bytes[6] = 0x79; // rcv_wscale 7, snd_wscale 9
        bytes[100..104].copy_from_slice(&5u32.to_ne_bytes());
        bytes[156..160].copy_from_slice(&1000u32.to_ne_bytes());
        let full = TcpInfo::decode(&bytes).unwrap();
        assert_eq!((full.snd_wscale, full.rcv_wscale), (9, 7));
        assert_eq!(full.data_segs_out, Some(1000));
        let old = TcpInfo::decode(&bytes[..104]).unwrap();
        assert_eq!(old.total_retrans, 5);
        assert_eq!(old.data_segs_out, None);
        assert_eq!(old.snd_wnd, None);
        let partial = TcpInfo::decode(&bytes[..160]).unwrap();
        assert_eq!(partial.data_segs_out, Some(1000));
        assert_eq!(partial.busy_time_us, None);
        assert!(TcpInfo::decode(&bytes[..103]).is_err());
    }

    #[test]
    fn memory_and_buffer_sizes_of_a_loopback_connection() {
        let (mut client, mut server) = pair();
        client.write_all(&[1u8; 5000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let memory = socket_memory(&server).unwrap();
        assert!(memory.rmem_alloc >= 5000, "{memory:?}");
        assert_eq!(memory.rcvbuf, receive_buffer(&server).unwrap());
        let mut sink = [0u8; 5000];
        server.read_exact(&mut sink).unwrap();
        // The kernel holds what was asked (it doubles the half passed).
        let held = set_send_buffer(&client, 64 << 10).unwrap();
        assert_eq!(held, 64 << 10);
        assert_eq!(send_buffer(&client).unwrap(), held);
        assert_eq!(socket_memory(&client).unwrap().sndbuf, held);
        let held = set_receive_buffer(&server, 32 << 10).unwrap();
        assert_eq!(held, 32 << 10);
        // Below its minimum the kernel floors.
        assert!(set_send_buffer(&client, 2).unwrap() > 2);
    }

    #[test]
    fn system_wide_tcp_memory() {
        let limits = tcp_mem_limits().unwrap();
        assert!(limits.low <= limits.pressure && limits.pressure <= limits.high);
        tcp_memory_pages().unwrap();
        assert!(wmem_max().unwrap() > 0 && rmem_max().unwrap() > 0);
        assert_eq!(
            parse_sockstat_tcp_pages(
                "sockets: used 5\nTCP: inuse 5 orphan 0 tw 0 alloc 7 mem 12\nUDP: inuse 0 mem 3\n"
            )
            .unwrap(),
            12
        );
        assert!(parse_sockstat_tcp_pages("TCP: inuse 5\n").is_err());
        assert!(parse_tcp_mem("1 2").is_err());
        assert_eq!(
            parse_tcp_mem("10\t20\t30\n").unwrap(),
            TcpMemLimits {
                low: 10,
                pressure: 20,
                high: 30
            }
        );
    }
}
