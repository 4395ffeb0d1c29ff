//! Capturing a listener's TCP segments in process: an `AF_PACKET` socket
//! (`SOCK_DGRAM`: packets start at the network header) with a TPACKET_V3
//! receive ring shared with the kernel, a classic BPF filter attached in the
//! kernel ([`listener_filter`]) so that only what Certes needs is copied,
//! nanosecond timestamps, and the ring's drops read with
//! `PACKET_STATISTICS` ([`PacketRing::statistics`]).
//!
//! Memory: the ring is `block_size × block_count` bytes, mapped once
//! ([`RingConfig`]; 1 MiB × 32 = 32 MiB by default). A block is handed to
//! user space when full or after [`RingConfig::block_timeout_ms`]; a
//! packet that finds no free block is dropped by the kernel and counted.
//!
//! Written by hand: the Rust packet-capture crates either wrap libpcap (a C
//! library and its filter compiler) or offer TPACKET_V3 without a way to
//! attach a filter of our own and read its statistics; the ring protocol
//! is a few offsets of `linux/if_packet.h`.
//!
//! Needs `CAP_NET_RAW` (the socket) — [`PacketRingError::MissingCapability`]
//! says so when it is missing.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Duration;

use crate::capabilities;

/// `CAP_NET_RAW`'s bit (linux/capability.h).
pub const CAP_NET_RAW: u32 = 13;

/// Bytes of each kept packet copied to the ring, from the network header:
/// an IPv4 or IPv6 header and a TCP header with options (at most 60 + 60
/// bytes for IPv4); Certes needs no payload byte.
pub const SNAP_LENGTH: u32 = 128;

/// Most listener ports one filter takes: each costs two comparisons, and
/// a classic BPF conditional jump reaches at most 255 instructions ahead.
pub const MAX_PORTS: usize = 64;

const ETH_P_ALL: u16 = 0x0003;
const ETH_P_IP: u32 = 0x0800;
const ETH_P_IPV6: u32 = 0x86dd;
const ARPHRD_LOOPBACK: u32 = 772;
const PACKET_OUTGOING: u32 = 4;
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_KERNEL: u32 = 0;
/// Offsets in `struct tpacket_block_desc` (`hdr.bh1`).
const BLOCK_STATUS: usize = 8;
const BLOCK_PACKETS: usize = 12;
const BLOCK_FIRST_PACKET: usize = 16;
/// Offsets in `struct tpacket3_hdr`, and the `sockaddr_ll` after it.
const PACKET_NEXT: usize = 0;
const PACKET_SEC: usize = 4;
const PACKET_NSEC: usize = 8;
const PACKET_SNAPLEN: usize = 12;
const PACKET_LEN: usize = 16;
const PACKET_MAC: usize = 24;
const TPACKET3_HDRLEN: usize = 48;
const SLL_PROTOCOL: usize = 2;
const SLL_IFINDEX: usize = 4;

/// Classic BPF opcodes and the kernel's ancillary loads (linux/filter.h).
mod op {
    pub const LD_W_ABS: u16 = 0x20;
    pub const LD_H_ABS: u16 = 0x28;
    pub const LD_B_ABS: u16 = 0x30;
    pub const LD_H_IND: u16 = 0x48;
    pub const LD_B_IND: u16 = 0x50;
    pub const LD_MEM: u16 = 0x60;
    pub const LDX_IMM: u16 = 0x01;
    pub const LDX_MEM: u16 = 0x61;
    pub const LDX_B_MSH: u16 = 0xb1;
    pub const ST: u16 = 0x02;
    pub const ALU_ADD_K: u16 = 0x04;
    pub const ALU_ADD_X: u16 = 0x0c;
    pub const ALU_RSH_K: u16 = 0x74;
    pub const ALU_LSH_K: u16 = 0x64;
    pub const TXA: u16 = 0x87;
    pub const JA: u16 = 0x05;
    pub const JEQ_K: u16 = 0x15;
    pub const JSET_K: u16 = 0x45;
    pub const JGT_X: u16 = 0x2d;
    pub const RET_K: u16 = 0x06;
    pub const AD_OFF: i32 = -0x1000;
    pub const AD_PROTOCOL: i32 = 0;
    pub const AD_PKTTYPE: i32 = 4;
    pub const AD_HATYPE: i32 = 28;
}

/// Why a capture cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum PacketRingError {
    #[error("{operation} needs CAP_NET_RAW (run as root, or give the binary or the service CAP_NET_RAW)")]
    MissingCapability { operation: &'static str },
    #[error("{operation}: {source}")]
    Io {
        operation: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("no interface named `{0}`")]
    NoInterface(String),
    #[error("ring: {0}")]
    Config(String),
    #[error("filter: {0}")]
    Filter(String),
}

fn io_error(operation: &'static str) -> PacketRingError {
    let source = std::io::Error::last_os_error();
    if source.raw_os_error() == Some(libc::EPERM) && !capabilities::holds(CAP_NET_RAW) {
        return PacketRingError::MissingCapability { operation };
    }
    PacketRingError::Io { operation, source }
}

/// The ring's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes per block: a multiple of the page size, a power of two.
    pub block_size: u32,
    /// Blocks in the ring.
    pub block_count: u32,
    /// A block not yet full is handed over after this long.
    pub block_timeout_ms: u32,
}

impl Default for RingConfig {
    fn default() -> RingConfig {
        RingConfig {
            block_size: 1 << 20,
            block_count: 32,
            block_timeout_ms: 50,
        }
    }
}

/// Largest ring accepted (1 GiB).
pub const MAX_RING_BYTES: u64 = 1 << 30;

impl RingConfig {
    /// Bytes the ring maps.
    pub fn bytes(&self) -> u64 {
        u64::from(self.block_size) * u64::from(self.block_count)
    }

    /// Checks the shape the kernel and this reader need.
    pub fn check(&self) -> Result<(), PacketRingError> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u32;
        if self.block_size < page
            || !self.block_size.is_power_of_two()
            || !self.block_size.is_multiple_of(page)
        {
            return Err(PacketRingError::Config(format!(
                "block size {} must be a power of two and at least the page size ({page})",
                self.block_size
            )));
        }
        if self.block_count == 0 {
            return Err(PacketRingError::Config(
                "block count must be at least 1".into(),
            ));
        }
        if self.bytes() > MAX_RING_BYTES {
            return Err(PacketRingError::Config(format!(
                "{} blocks of {} bytes is {} bytes, above the {MAX_RING_BYTES}-byte cap",
                self.block_count,
                self.block_size,
                self.bytes()
            )));
        }
        if self.block_timeout_ms == 0 || self.block_timeout_ms > 1000 {
            return Err(PacketRingError::Config(format!(
                "block timeout {} ms is outside 1..=1000",
                self.block_timeout_ms
            )));
        }
        Ok(())
    }
}

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instruction {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// Where a jump goes while the program is assembled.
#[derive(Clone, Copy)]
enum To {
    Next,
    Label(&'static str),
}

struct Assembler {
    code: Vec<(u16, To, To, u32)>,
    labels: Vec<(&'static str, usize)>,
}

impl Assembler {
    fn new() -> Assembler {
        Assembler {
            code: Vec::new(),
            labels: Vec::new(),
        }
    }
    fn op(&mut self, code: u16, k: u32) -> &mut Self {
        self.code.push((code, To::Next, To::Next, k));
        self
    }
    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) -> &mut Self {
        self.code.push((code, jt, jf, k));
        self
    }
    fn label(&mut self, name: &'static str) -> &mut Self {
        self.labels.push((name, self.code.len()));
        self
    }
    fn finish(&self) -> Result<Vec<Instruction>, PacketRingError> {
        let at = |name: &str| {
            self.labels
                .iter()
                .find(|(l, _)| *l == name)
                .map(|(_, i)| *i)
                .ok_or_else(|| PacketRingError::Filter(format!("no label {name}")))
        };
        let mut out = Vec::with_capacity(self.code.len());
        for (i, &(code, jt, jf, k)) in self.code.iter().enumerate() {
            let offset = |to: To| -> Result<u8, PacketRingError> {
                match to {
                    To::Next => Ok(0),
                    To::Label(name) => {
                        let target = at(name)?;
                        target
                            .checked_sub(i + 1)
                            .and_then(|d| u8::try_from(d).ok())
                            .ok_or_else(|| {
                                PacketRingError::Filter(format!("jump to {name} out of reach"))
                            })
                    }
                }
            };
            let (jt, jf, k) = if code == op::JA {
                let target = match jt {
                    To::Label(name) => at(name)?,
                    To::Next => i + 1,
                };
                (0, 0, (target - (i + 1)) as u32)
            } else {
                (offset(jt)?, offset(jf)?, k)
            };
            out.push(Instruction { code, jt, jf, k });
        }
        Ok(out)
    }
}

fn ancillary(field: i32) -> u32 {
    (op::AD_OFF + field) as u32
}

/// The kernel-side filter: generated for one or more listener ports, IPv4
/// and IPv6, it keeps the TCP segments to or from those ports that carry
/// SYN, FIN or RST, or a payload (the server's data segments, and the
/// client's request, whose ACK of the SYN-ACK stands in for a handshake
/// ACK without payload), and copies [`SNAP_LENGTH`] bytes of each:
/// Certes needs the handshake, the tear-down and the server's data times
/// only. Dropped: every other packet, pure ACKs, IPv4 fragments after the
/// first, IPv6 with extension headers before TCP, and the second copy a
/// loopback interface shows of each packet (its outgoing one).
pub fn listener_filter(ports: &[u16]) -> Result<Vec<Instruction>, PacketRingError> {
    if ports.is_empty() || ports.len() > MAX_PORTS {
        return Err(PacketRingError::Filter(format!(
            "give 1 to {MAX_PORTS} listener ports (got {})",
            ports.len()
        )));
    }
    let mut a = Assembler::new();
    // A loopback device shows every packet twice: keep the incoming copy.
    a.op(op::LD_W_ABS, ancillary(op::AD_HATYPE)).jump(
        op::JEQ_K,
        ARPHRD_LOOPBACK,
        To::Next,
        To::Label("protocol"),
    );
    a.op(op::LD_B_ABS, ancillary(op::AD_PKTTYPE)).jump(
        op::JEQ_K,
        PACKET_OUTGOING,
        To::Label("drop"),
        To::Next,
    );
    a.label("protocol")
        .op(op::LD_H_ABS, ancillary(op::AD_PROTOCOL))
        .jump(op::JEQ_K, ETH_P_IP, To::Label("ipv4"), To::Next)
        .jump(op::JEQ_K, ETH_P_IPV6, To::Label("ipv6"), To::Label("drop"));
    // IPv4: TCP, first fragment; M[0] = total length, M[1] = X = header
    // length.
    a.label("ipv4")
        .op(op::LD_B_ABS, 9)
        .jump(op::JEQ_K, 6, To::Next, To::Label("drop"))
        .op(op::LD_H_ABS, 6)
        .jump(op::JSET_K, 0x1fff, To::Label("drop"), To::Next)
        .op(op::LD_H_ABS, 2)
        .op(op::ST, 0)
        .op(op::LDX_B_MSH, 0)
        .op(op::TXA, 0)
        .op(op::ST, 1)
        .jump(op::JA, 0, To::Label("ports"), To::Next);
    // IPv6: TCP as the next header; total = payload length + 40.
    a.label("ipv6")
        .op(op::LD_B_ABS, 6)
        .jump(op::JEQ_K, 6, To::Next, To::Label("drop"))
        .op(op::LD_H_ABS, 4)
        .op(op::ALU_ADD_K, 40)
        .op(op::ST, 0)
        .op(op::LDX_IMM, 40)
        .op(op::TXA, 0)
        .op(op::ST, 1);
    // Destination port, then source port, against each listener port.
    a.label("ports").op(op::LD_H_IND, 2);
    for &port in ports {
        a.jump(op::JEQ_K, u32::from(port), To::Label("tcp"), To::Next);
    }
    a.op(op::LD_H_IND, 0);
    for &port in ports {
        a.jump(op::JEQ_K, u32::from(port), To::Label("tcp"), To::Next);
    }
    a.op(op::RET_K, 0);
    // SYN, FIN or RST: keep; else keep when total > IP + TCP headers.
    a.label("tcp")
        .op(op::LD_B_IND, 13)
        .jump(op::JSET_K, 0x07, To::Label("keep"), To::Next)
        .op(op::LD_B_IND, 12)
        .op(op::ALU_RSH_K, 4)
        .op(op::ALU_LSH_K, 2)
        .op(op::LDX_MEM, 1)
        .op(op::ALU_ADD_X, 0)
        .op(op::ST, 2)
        .op(op::LDX_MEM, 2)
        .op(op::LD_MEM, 0)
        .jump(op::JGT_X, 0, To::Label("keep"), To::Label("drop"));
    a.label("keep").op(op::RET_K, SNAP_LENGTH);
    a.label("drop").op(op::RET_K, 0);
    a.finish()
}

/// One captured packet, borrowed from the ring until the next call.
#[derive(Clone, Copy, Debug)]
pub struct RingPacket<'a> {
    /// Nanoseconds since the UNIX epoch (the kernel's receive time).
    pub timestamp_ns: u64,
    /// Length on the wire (larger than `data` when cut to the snap length).
    pub original_len: u32,
    /// The ethertype (0x0800, 0x86dd).
    pub protocol: u16,
    pub ifindex: i32,
    /// From the network header on.
    pub data: &'a [u8],
}

/// What the kernel counted for the ring since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStatistics {
    /// Packets the filter kept (delivered or dropped).
    pub packets: u64,
    /// Of those, dropped because no block was free.
    pub drops: u64,
    /// Times the ring was full and froze.
    pub freezes: u64,
}

/// An open capture (see the module docs).
pub struct PacketRing {
    socket: OwnedFd,
    map: *mut u8,
    config: RingConfig,
    /// The block to read next, and the packet within it.
    block: u32,
    next_packet: Option<(usize, u32)>,
    statistics: RingStatistics,
}

// SAFETY: the mapping belongs to this value alone; nothing else aliases it
// in this process, and the kernel side is synchronized through the block
// status word.
unsafe impl Send for PacketRing {}

fn set_option<T>(
    socket: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    operation: &'static str,
) -> Result<(), PacketRingError> {
    // SAFETY: `value` points to a live `T` of the size passed.
    let result = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if result != 0 {
        return Err(io_error(operation));
    }
    Ok(())
}

/// The index of interface `name`.
pub fn interface_index(name: &str) -> Result<i32, PacketRingError> {
    let c = CString::new(name).map_err(|_| PacketRingError::NoInterface(name.to_string()))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(PacketRingError::NoInterface(name.to_string()));
    }
    i32::try_from(index).map_err(|_| PacketRingError::NoInterface(name.to_string()))
}

impl PacketRing {
    /// Opens a ring on `interface` (`None`: every interface) that keeps
    /// what [`listener_filter`] keeps for `ports`.
    pub fn open(
        interface: Option<&str>,
        ports: &[u16],
        config: RingConfig,
    ) -> Result<PacketRing, PacketRingError> {
        config.check()?;
        let filter = listener_filter(ports)?;
        let ifindex = match interface {
            Some(name) => interface_index(name)?,
            None => 0,
        };
        // Protocol 0: no packet is queued before the filter and the ring
        // are in place; bind names the protocol.
        // SAFETY: plain socket(2).
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io_error("socket(AF_PACKET)"));
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned here.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        let program = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        };
        set_option(
            &socket,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &program,
            "attach the filter (SO_ATTACH_FILTER)",
        )?;
        set_option(
            &socket,
            SOL_PACKET,
            PACKET_VERSION,
            &TPACKET_V3,
            "PACKET_VERSION TPACKET_V3",
        )?;
        let frame_size = 2048u32.min(config.block_size);
        let request: [u32; 7] = [
            config.block_size,
            config.block_count,
            frame_size,
            (config.block_size / frame_size) * config.block_count,
            config.block_timeout_ms,
            0,
            0,
        ];
        set_option(
            &socket,
            SOL_PACKET,
            PACKET_RX_RING,
            &request,
            "PACKET_RX_RING",
        )?;
        let length = config.bytes() as usize;
        // SAFETY: maps the ring the kernel just allocated for this socket.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                socket.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io_error("mmap of the ring"));
        }
        let ring = PacketRing {
            socket,
            map: map as *mut u8,
            config,
            block: 0,
            next_packet: None,
            statistics: RingStatistics::default(),
        };
        // SAFETY: sockaddr_ll is plain data; zero is a valid value.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = ETH_P_ALL.to_be();
        address.sll_ifindex = ifindex;
        // SAFETY: `address` is a valid sockaddr_ll of the size passed.
        let bound = unsafe {
            libc::bind(
                ring.socket.as_raw_fd(),
                &address as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if bound != 0 {
            return Err(io_error("bind the packet socket"));
        }
        Ok(ring)
    }

    /// The ring's shape.
    pub fn config(&self) -> RingConfig {
        self.config
    }

    fn block_base(&self, block: u32) -> *mut u8 {
        // SAFETY: block < block_count, so the offset is inside the mapping.
        unsafe {
            self.map
                .add(block as usize * self.config.block_size as usize)
        }
    }

    fn status(&self, block: u32) -> &AtomicU32 {
        // SAFETY: the status word is a 4-byte-aligned u32 inside the block
        // header, shared with the kernel; read and written atomically.
        unsafe { &*(self.block_base(block).add(BLOCK_STATUS) as *const AtomicU32) }
    }

    fn read_u32(&self, offset: usize) -> u32 {
        let base = self.block_base(self.block);
        // SAFETY: callers check `offset + 4 <= block_size`; unaligned read.
        unsafe { std::ptr::read_unaligned(base.add(offset) as *const u32) }
    }

    fn read_u16(&self, offset: usize) -> u16 {
        let base = self.block_base(self.block);
        // SAFETY: callers check `offset + 2 <= block_size`; unaligned read.
        unsafe { std::ptr::read_unaligned(base.add(offset) as *const u16) }
    }

    /// Hands the current block back to the kernel.
    fn release_block(&mut self) {
        fence(Ordering::Release);
        self.status(self.block)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.block = (self.block + 1) % self.config.block_count;
        self.next_packet = None;
    }

    /// The next packet, waiting at most `timeout` for one; `None` when the
    /// time passed first (the caller's clock goes on) or a signal came.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<RingPacket<'_>>, PacketRingError> {
        let block_size = self.config.block_size as usize;
        loop {
            if let Some((offset, left)) = self.next_packet {
                if left == 0 {
                    self.release_block();
                    continue;
                }
                if offset + TPACKET3_HDRLEN + 16 > block_size {
                    // A header the kernel would not write: skip the block.
                    self.release_block();
                    continue;
                }
                let next = self.read_u32(offset + PACKET_NEXT) as usize;
                let sec = u64::from(self.read_u32(offset + PACKET_SEC));
                let nsec = u64::from(self.read_u32(offset + PACKET_NSEC));
                let snaplen = self.read_u32(offset + PACKET_SNAPLEN) as usize;
                let original_len = self.read_u32(offset + PACKET_LEN);
                let mac = usize::from(self.read_u16(offset + PACKET_MAC));
                let sll = offset + TPACKET3_HDRLEN;
                let protocol = u16::from_be(self.read_u16(sll + SLL_PROTOCOL));
                let ifindex = self.read_u32(sll + SLL_IFINDEX) as i32;
                let start = offset + mac;
                self.next_packet = if left > 1 && next > 0 {
                    Some((offset + next, left - 1))
                } else {
                    Some((offset, 0))
                };
                if start + snaplen > block_size {
                    continue;
                }
                let base = self.block_base(self.block);
                // SAFETY: [start, start + snaplen) lies inside the current
                // block, which user space owns until it is released (not
                // before the next call, which the borrow of `self` ensures).
                let data = unsafe { std::slice::from_raw_parts(base.add(start), snaplen) };
                return Ok(Some(RingPacket {
                    timestamp_ns: sec * 1_000_000_000 + nsec,
                    original_len,
                    protocol,
                    ifindex,
                    data,
                }));
            }
            if self.status(self.block).load(Ordering::Acquire) & TP_STATUS_USER != 0 {
                fence(Ordering::Acquire);
                let packets = self.read_u32(BLOCK_PACKETS);
                let first = self.read_u32(BLOCK_FIRST_PACKET) as usize;
                self.next_packet = Some((first, packets));
                continue;
            }
            let mut poll = libc::pollfd {
                fd: self.socket.as_raw_fd(),
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            let millis = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut poll, 1, millis) };
            if ready < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    return Ok(None);
                }
                return Err(PacketRingError::Io {
                    operation: "poll the ring",
                    source: error,
                });
            }
            if self.status(self.block).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                return Ok(None);
            }
        }
    }

    /// The kernel's counts since the ring opened (each read resets the
    /// kernel's, so they are added up here).
    pub fn statistics(&mut self) -> Result<RingStatistics, PacketRingError> {
        let mut stats = [0u32; 3];
        let mut length = std::mem::size_of_val(&stats) as libc::socklen_t;
        // SAFETY: `stats` is a writable tpacket_stats_v3 of `length` bytes.
        let result = unsafe {
            libc::getsockopt(
                self.socket.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                stats.as_mut_ptr() as *mut libc::c_void,
                &mut length,
            )
        };
        if result != 0 {
            return Err(io_error("PACKET_STATISTICS"));
        }
        self.statistics.packets += u64::from(stats[0]);
        self.statistics.drops += u64::from(stats[1]);
        self.statistics.freezes += u64::from(stats[2]);
        Ok(self.statistics)
    }
}

impl Drop for PacketRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`.
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.config.bytes() as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_assembles_and_refuses_bad_port_lists() {
        let one = listener_filter(&[80]).unwrap();
        assert_eq!(one.last().map(|i| i.code), Some(op::RET_K));
        let two = listener_filter(&[80, 443]).unwrap();
        assert_eq!(two.len(), one.len() + 2);
        assert!(listener_filter(&[]).is_err());
        assert!(listener_filter(&[1; MAX_PORTS + 1]).is_err());
        assert!(listener_filter(&[1; MAX_PORTS]).is_ok());
        assert!(RingConfig::default().check().is_ok());
        assert!(RingConfig {
            block_size: 3000,
            ..RingConfig::default()
        }
        .check()
        .is_err());
        assert!(RingConfig {
            block_count: 1 << 20,
            ..RingConfig::default()
        }
        .check()
        .is_err());
    }

    /// One served connection to `listener` from a client: request,
    /// response, both sides read everything, so both closes are FINs.
    fn exchange(listener: &std::net::TcpListener) {
        use std::io::{Read, Write};
        let address = listener.local_addr().unwrap();
        let mut client = std::net::TcpStream::connect(address).unwrap();
        let (mut served, _) = listener.accept().unwrap();
        client.write_all(b"request").unwrap();
        let mut request = [0u8; 7];
        served.read_exact(&mut request).unwrap();
        served.write_all(b"response").unwrap();
        let mut response = [0u8; 8];
        client.read_exact(&mut response).unwrap();
    }

    /// The TCP flags and timestamps of up to `n` packets from the ring
    /// (5 s at most), each checked to be TCP of `protocol`.
    fn take(ring: &mut PacketRing, n: usize, protocol: u16) -> (Vec<u8>, Vec<u64>) {
        let mut flags = Vec::new();
        let mut timestamps = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline && flags.len() < n {
            if let Some(packet) = ring.next(Duration::from_millis(100)).unwrap() {
                assert_eq!(packet.protocol, protocol);
                let tcp = if protocol == 0x0800 {
                    assert_eq!(packet.data[9], 6, "only TCP passes the filter");
                    usize::from(packet.data[0] & 0xf) * 4
                } else {
                    assert_eq!(packet.data[6], 6, "only TCP passes the filter");
                    40
                };
                flags.push(packet.data[tcp + 13]);
                timestamps.push(packet.timestamp_ns);
            }
        }
        (flags, timestamps)
    }

    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const FIN: u8 = 0x01;

    fn check_connection(flags: &[u8]) {
        assert_eq!(flags.first(), Some(&SYN), "{flags:x?}");
        assert_eq!(flags.get(1), Some(&(SYN | ACK)), "{flags:x?}");
        assert_eq!(
            flags.iter().filter(|f| *f & FIN != 0).count(),
            2,
            "{flags:x?}"
        );
        // No pure ACK: the handshake ACK and the ACKs of the FINs are
        // filtered out; the request and the response (payload) pass.
        assert!(flags.iter().all(|f| *f != ACK), "{flags:x?}");
    }

    /// In a fresh network namespace (this thread's alone, gone with it):
    /// a loopback connection's SYN, SYN-ACK and FINs are captured with
    /// nanosecond timestamps, over IPv4 and IPv6, and a UDP datagram to
    /// the same port is not.
    #[test]
    fn captures_a_loopback_handshake_and_filters_udp() {
        if !crate::privilege::is_root() {
            eprintln!("skipped: needs root (a network namespace and CAP_NET_RAW)");
            return;
        }
        let worker = std::thread::spawn(|| {
            // SAFETY: unshare(2) on this thread only.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            let up = std::process::Command::new("ip")
                .args(["link", "set", "lo", "up"])
                .status()
                .expect("ip");
            assert!(up.success());
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            // The same port on ::1, when IPv6 is there.
            let listener6 = std::net::TcpListener::bind(("::1", port)).ok();
            let mut ring = PacketRing::open(Some("lo"), &[port], RingConfig::default()).unwrap();
            let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            udp.send_to(b"not tcp", ("127.0.0.1", port)).unwrap();
            let before = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            exchange(&listener);
            let (flags, timestamps) = take(&mut ring, 6, 0x0800);
            let flags6 = listener6.map(|listener6| {
                exchange(&listener6);
                take(&mut ring, 6, 0x86dd).0
            });
            let stats = ring.statistics().unwrap();
            (flags, timestamps, flags6, before, stats)
        });
        let (flags, timestamps, flags6, before, stats) = worker.join().unwrap();
        check_connection(&flags);
        match &flags6 {
            Some(flags6) => check_connection(flags6),
            None => eprintln!("no IPv6 on loopback: the IPv6 half is not checked"),
        }
        assert!(timestamps.iter().all(|t| *t >= before - 1_000_000_000));
        // Nanosecond resolution: not all on whole microseconds.
        assert!(timestamps.iter().any(|t| t % 1000 != 0), "{timestamps:?}");
        assert!(timestamps.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(stats.drops, 0);
        let kept = flags.len() + flags6.map_or(0, |f| f.len());
        assert_eq!(stats.packets, kept as u64, "{stats:?}");
    }
}
