//! The bytes on the netlink socket: building configuration and verdict
//! messages, parsing what the kernel sends back. Pure functions on byte
//! buffers, so every format is unit-tested without root.
//!
//! Layout (all netlink headers in host byte order, every nfqueue attribute
//! payload in network byte order, everything padded to 4 bytes):
//!
//! ```text
//! nlmsghdr   u32 len | u16 type | u16 flags | u32 seq | u32 portid     16 B
//! nfgenmsg   u8 family | u8 version | be16 queue number                   4 B
//! nlattr     u16 len | u16 type | payload | pad to 4                      4 B + …
//! ```
//!
//! The nfnetlink message type is `(NFNL_SUBSYS_QUEUE << 8) | msg`.
//!
//! **Message formats** (from `linux/netfilter/nfnetlink_queue.h`; netlink
//! headers in host byte order, attribute payloads big-endian):
//!
//! * `NFQNL_MSG_CONFIG` (to the kernel, acknowledged): `NFQA_CFG_CMD`
//!   (`{u8 command; u8 pad; be16 pf}`, bind/unbind), `NFQA_CFG_PARAMS`
//!   (`{be32 copy_range; u8 copy_mode}` packed), `NFQA_CFG_QUEUE_MAXLEN`
//!   (be32), `NFQA_CFG_FLAGS` + `NFQA_CFG_MASK` (be32 each; we use
//!   `NFQA_CFG_F_FAIL_OPEN`).
//! * `NFQNL_MSG_PACKET` (from the kernel): `NFQA_PACKET_HDR`
//!   (`{be32 packet_id; be16 hw_protocol; u8 hook}` packed), `NFQA_MARK`,
//!   `NFQA_IFINDEX_INDEV`/`OUTDEV`, `NFQA_CAP_LEN` (full length when the
//!   payload was cut), `NFQA_PAYLOAD` (from the network header on); other
//!   attributes are skipped.
//! * `NFQNL_MSG_VERDICT` (to the kernel, not acknowledged):
//!   `NFQA_VERDICT_HDR` (`{be32 verdict; be32 id}`) and optionally
//!   `NFQA_MARK` — "set mark and `NF_REPEAT`" lets a later rule act on the
//!   packet (a SYN gate rejects that way).
//! * `NLMSG_ERROR`: an acknowledgement (error 0) or the failure of a request.

use super::error::ParseError;
use crate::netlink::{align4, split_message, Attributes, NLA_HDRLEN, NLMSG_HDRLEN};

pub(crate) const NFGENMSG_LEN: usize = 4;

const NLM_F_REQUEST: u16 = libc::NLM_F_REQUEST as u16;
const NLM_F_ACK: u16 = libc::NLM_F_ACK as u16;
const NLMSG_NOOP: u16 = libc::NLMSG_NOOP as u16;
const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;
const NLMSG_DONE: u16 = libc::NLMSG_DONE as u16;
const NLMSG_OVERRUN: u16 = libc::NLMSG_OVERRUN as u16;

const NFNL_SUBSYS_QUEUE: u16 = libc::NFNL_SUBSYS_QUEUE as u16;
const NFNETLINK_V0: u8 = libc::NFNETLINK_V0 as u8;

const NFQNL_MSG_PACKET: u16 = libc::NFQNL_MSG_PACKET as u16;
const NFQNL_MSG_VERDICT: u16 = libc::NFQNL_MSG_VERDICT as u16;
const NFQNL_MSG_CONFIG: u16 = libc::NFQNL_MSG_CONFIG as u16;

const NFQA_PACKET_HDR: u16 = libc::NFQA_PACKET_HDR as u16;
const NFQA_VERDICT_HDR: u16 = libc::NFQA_VERDICT_HDR as u16;
const NFQA_MARK: u16 = libc::NFQA_MARK as u16;
const NFQA_IFINDEX_INDEV: u16 = libc::NFQA_IFINDEX_INDEV as u16;
const NFQA_IFINDEX_OUTDEV: u16 = libc::NFQA_IFINDEX_OUTDEV as u16;
const NFQA_PAYLOAD: u16 = libc::NFQA_PAYLOAD as u16;
const NFQA_CAP_LEN: u16 = libc::NFQA_CAP_LEN as u16;

const NFQA_CFG_CMD: u16 = libc::NFQA_CFG_CMD as u16;
const NFQA_CFG_PARAMS: u16 = libc::NFQA_CFG_PARAMS as u16;
const NFQA_CFG_QUEUE_MAXLEN: u16 = libc::NFQA_CFG_QUEUE_MAXLEN as u16;
const NFQA_CFG_MASK: u16 = libc::NFQA_CFG_MASK as u16;
const NFQA_CFG_FLAGS: u16 = libc::NFQA_CFG_FLAGS as u16;

/// `NFQA_CFG_F_FAIL_OPEN`: when the queue or the socket is full, the kernel
/// accepts the packet instead of dropping it.
pub const CONFIG_FLAG_FAIL_OPEN: u32 = libc::NFQA_CFG_F_FAIL_OPEN as u32;

/// Length of one verdict message without a mark: header, nfgenmsg and the
/// 8-byte `NFQA_VERDICT_HDR` attribute.
pub const VERDICT_MESSAGE_LEN: usize = NLMSG_HDRLEN + NFGENMSG_LEN + NLA_HDRLEN + 8;
/// Length of one verdict message that also sets the mark.
pub const VERDICT_WITH_MARK_MESSAGE_LEN: usize = VERDICT_MESSAGE_LEN + NLA_HDRLEN + 4;

const fn nfnl_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_QUEUE << 8) | msg
}

/// A command of `NFQA_CFG_CMD` (`struct nfqnl_msg_config_cmd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigCommand {
    /// `NFQNL_CFG_CMD_BIND`: this socket receives the queue's packets.
    Bind,
    /// `NFQNL_CFG_CMD_UNBIND`: stop; packets still waiting for a verdict are
    /// dropped by the kernel.
    Unbind,
}

/// How much of each packet the kernel copies (`NFQNL_COPY_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyMode {
    /// Metadata only, no payload.
    Meta,
    /// Metadata and the first `copy_range` bytes of the packet.
    Packet { copy_range: u32 },
}

/// One `NFQNL_MSG_CONFIG` message; every part present is sent in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConfigMessage {
    pub command: Option<ConfigCommand>,
    pub copy_mode: Option<CopyMode>,
    /// `NFQA_CFG_QUEUE_MAXLEN`: packets the kernel keeps waiting for a
    /// verdict before it drops (or, fail-open, accepts) new ones.
    pub queue_maxlen: Option<u32>,
    /// `NFQA_CFG_FLAGS` and `NFQA_CFG_MASK`: `(flags, mask)`, only the bits in
    /// `mask` are changed.
    pub flags: Option<(u32, u32)>,
}

/// What the kernel does with a queued packet (`NF_*` verdicts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// `NF_DROP`.
    Drop,
    /// `NF_ACCEPT`: continue with the next hook.
    Accept,
    /// `NF_REPEAT`: run the same hook again, typically after setting a mark
    /// that lets a later rule (say, `-m mark --mark 1 -j REJECT`) act on it.
    Repeat,
}

impl Verdict {
    pub const fn code(self) -> u32 {
        match self {
            Verdict::Drop => libc::NF_DROP as u32,
            Verdict::Accept => libc::NF_ACCEPT as u32,
            Verdict::Repeat => libc::NF_REPEAT as u32,
        }
    }
}

/// Appends one netlink message, attribute by attribute, to a buffer and
/// patches its length when finished.
struct MessageWriter<'b> {
    buf: &'b mut Vec<u8>,
    start: usize,
}

impl<'b> MessageWriter<'b> {
    fn begin(buf: &'b mut Vec<u8>, msg_type: u16, flags: u16, seq: u32, queue_num: u16) -> Self {
        let start = buf.len();
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, patched in finish
        buf.extend_from_slice(&msg_type.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // portid 0: the kernel
        buf.push(libc::AF_UNSPEC as u8);
        buf.push(NFNETLINK_V0);
        buf.extend_from_slice(&queue_num.to_be_bytes());
        MessageWriter { buf, start }
    }

    fn attribute(&mut self, attr_type: u16, payload: &[u8]) {
        let len = NLA_HDRLEN + payload.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&attr_type.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.buf.resize(self.buf.len() + align4(len) - len, 0);
    }

    fn finish(self) {
        let len = (self.buf.len() - self.start) as u32;
        self.buf[self.start..self.start + 4].copy_from_slice(&len.to_ne_bytes());
    }
}

/// Appends an `NFQNL_MSG_CONFIG` request for `queue_num`, asking the kernel
/// to acknowledge it.
pub fn encode_config(buf: &mut Vec<u8>, seq: u32, queue_num: u16, config: &ConfigMessage) {
    let mut w = MessageWriter::begin(
        buf,
        nfnl_type(NFQNL_MSG_CONFIG),
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        queue_num,
    );
    if let Some(command) = config.command {
        let code = match command {
            ConfigCommand::Bind => libc::NFQNL_CFG_CMD_BIND,
            ConfigCommand::Unbind => libc::NFQNL_CFG_CMD_UNBIND,
        } as u8;
        // struct nfqnl_msg_config_cmd { u8 command; u8 pad; be16 pf; }; the
        // protocol family is ignored by kernels since 3.8.
        w.attribute(NFQA_CFG_CMD, &[code, 0, 0, 0]);
    }
    if let Some(mode) = config.copy_mode {
        // struct nfqnl_msg_config_params { be32 copy_range; u8 copy_mode; }
        // __attribute__((packed)): 5 bytes.
        let (range, code) = match mode {
            CopyMode::Meta => (0, libc::NFQNL_COPY_META as u8),
            CopyMode::Packet { copy_range } => (copy_range, libc::NFQNL_COPY_PACKET as u8),
        };
        let mut params = [0u8; 5];
        params[..4].copy_from_slice(&range.to_be_bytes());
        params[4] = code;
        w.attribute(NFQA_CFG_PARAMS, &params);
    }
    if let Some(maxlen) = config.queue_maxlen {
        w.attribute(NFQA_CFG_QUEUE_MAXLEN, &maxlen.to_be_bytes());
    }
    if let Some((flags, mask)) = config.flags {
        w.attribute(NFQA_CFG_FLAGS, &flags.to_be_bytes());
        w.attribute(NFQA_CFG_MASK, &mask.to_be_bytes());
    }
    w.finish();
}

/// Appends one `NFQNL_MSG_VERDICT` message: `verdict` for packet `id`, and
/// the packet's new mark if `mark` is given. No acknowledgement is asked
/// for; the kernel still reports a failed verdict with an error message.
pub fn encode_verdict(
    buf: &mut Vec<u8>,
    queue_num: u16,
    id: u32,
    verdict: Verdict,
    mark: Option<u32>,
) {
    let mut w = MessageWriter::begin(
        buf,
        nfnl_type(NFQNL_MSG_VERDICT),
        NLM_F_REQUEST,
        0,
        queue_num,
    );
    // struct nfqnl_msg_verdict_hdr { be32 verdict; be32 id; }
    let mut header = [0u8; 8];
    header[..4].copy_from_slice(&verdict.code().to_be_bytes());
    header[4..].copy_from_slice(&id.to_be_bytes());
    w.attribute(NFQA_VERDICT_HDR, &header);
    if let Some(mark) = mark {
        w.attribute(NFQA_MARK, &mark.to_be_bytes());
    }
    w.finish();
}

/// A queued packet as the kernel described it, borrowing the receive
/// buffer: nothing is copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketView<'a> {
    /// Queue the packet came from (`nfgenmsg.res_id`).
    pub queue_num: u16,
    /// Id to quote in the verdict (`nfqnl_msg_packet_hdr.packet_id`).
    /// Consecutive per queue: a gap means the kernel could not deliver the
    /// packets in between to this socket.
    pub packet_id: u32,
    /// Link-layer protocol (`ETH_P_IP` = 0x0800 for IPv4).
    pub hw_protocol: u16,
    /// Netfilter hook number (`NF_INET_FORWARD` = 2, …).
    pub hook: u8,
    /// `NFQA_MARK`, when the packet carries a non-zero mark.
    pub mark: Option<u32>,
    /// `NFQA_IFINDEX_INDEV`.
    pub in_ifindex: Option<u32>,
    /// `NFQA_IFINDEX_OUTDEV`.
    pub out_ifindex: Option<u32>,
    /// The first bytes of the packet from its network header on, at most
    /// the copy range (empty in [`CopyMode::Meta`]).
    pub payload: &'a [u8],
    /// `NFQA_CAP_LEN`: the packet's full length, sent only when the payload
    /// was cut to the copy range.
    pub captured_from_len: Option<u32>,
}

impl PacketView<'_> {
    /// The packet's length on the wire (network header on), whether or not
    /// the payload was cut.
    pub fn original_len(&self) -> u32 {
        self.captured_from_len.unwrap_or(self.payload.len() as u32)
    }
}

/// One netlink message from the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// `NFQNL_MSG_PACKET`: a packet waiting for a verdict.
    Packet(PacketView<'a>),
    /// `NLMSG_ERROR` with error 0: the request `seq` succeeded.
    Ack { seq: u32 },
    /// `NLMSG_ERROR` with an error: the request `seq` failed with `errno`.
    /// `request` is the start of the failed request as echoed back.
    Error {
        seq: u32,
        errno: i32,
        request: &'a [u8],
    },
    /// Any other message (`NLMSG_NOOP`, `NLMSG_DONE`, other nfnetlink
    /// types): nothing for this binding to act on.
    Other { msg_type: u16 },
}

/// Iterates over the netlink messages of one received datagram. After a
/// malformed message it yields that error once and stops.
#[derive(Clone, Debug)]
pub struct Messages<'a> {
    rest: &'a [u8],
}

impl<'a> Messages<'a> {
    pub fn new(datagram: &'a [u8]) -> Self {
        Messages { rest: datagram }
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Message<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let result = split_message(self.rest);
        match result {
            Ok((header, body, rest)) => {
                self.rest = rest;
                Some(parse_message(header, body))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

fn read_u32_be(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn parse_message(header: crate::netlink::Header, body: &[u8]) -> Result<Message<'_>, ParseError> {
    let (msg_type, seq) = (header.msg_type, header.seq);
    match msg_type {
        NLMSG_ERROR => {
            if body.len() < 4 {
                return Err(ParseError::Truncated {
                    what: "netlink error message",
                    needed: 4,
                    available: body.len(),
                });
            }
            let error = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
            if error == 0 {
                Ok(Message::Ack { seq })
            } else {
                Ok(Message::Error {
                    seq,
                    errno: error.saturating_neg(),
                    request: &body[4..],
                })
            }
        }
        NLMSG_NOOP | NLMSG_DONE | NLMSG_OVERRUN => Ok(Message::Other { msg_type }),
        t if t == nfnl_type(NFQNL_MSG_PACKET) => parse_packet(body).map(Message::Packet),
        _ => Ok(Message::Other { msg_type }),
    }
}

fn expect_len(name: &'static str, payload: &[u8], needed: usize) -> Result<(), ParseError> {
    if payload.len() < needed {
        Err(ParseError::Truncated {
            what: name,
            needed,
            available: payload.len(),
        })
    } else {
        Ok(())
    }
}

fn parse_packet(body: &[u8]) -> Result<PacketView<'_>, ParseError> {
    expect_len("nfgenmsg", body, NFGENMSG_LEN)?;
    let queue_num = u16::from_be_bytes([body[2], body[3]]);
    let mut header = None;
    let mut packet = PacketView {
        queue_num,
        packet_id: 0,
        hw_protocol: 0,
        hook: 0,
        mark: None,
        in_ifindex: None,
        out_ifindex: None,
        payload: &[],
        captured_from_len: None,
    };
    for attribute in Attributes::new(&body[NFGENMSG_LEN..]) {
        let (attr_type, payload) = attribute?;
        match attr_type {
            NFQA_PACKET_HDR => {
                // struct nfqnl_msg_packet_hdr { be32 packet_id; be16
                // hw_protocol; u8 hook; } packed: 7 bytes.
                expect_len("NFQA_PACKET_HDR", payload, 7)?;
                header = Some((
                    read_u32_be(payload, 0),
                    u16::from_be_bytes([payload[4], payload[5]]),
                    payload[6],
                ));
            }
            NFQA_MARK => {
                expect_len("NFQA_MARK", payload, 4)?;
                packet.mark = Some(read_u32_be(payload, 0));
            }
            NFQA_IFINDEX_INDEV => {
                expect_len("NFQA_IFINDEX_INDEV", payload, 4)?;
                packet.in_ifindex = Some(read_u32_be(payload, 0));
            }
            NFQA_IFINDEX_OUTDEV => {
                expect_len("NFQA_IFINDEX_OUTDEV", payload, 4)?;
                packet.out_ifindex = Some(read_u32_be(payload, 0));
            }
            NFQA_CAP_LEN => {
                expect_len("NFQA_CAP_LEN", payload, 4)?;
                packet.captured_from_len = Some(read_u32_be(payload, 0));
            }
            NFQA_PAYLOAD => packet.payload = payload,
            _ => {}
        }
    }
    let (packet_id, hw_protocol, hook) =
        header.ok_or(ParseError::MissingAttribute("NFQA_PACKET_HDR"))?;
    packet.packet_id = packet_id;
    packet.hw_protocol = hw_protocol;
    packet.hook = hook;
    Ok(packet)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::netlink::{read_u16_ne, read_u32_ne};

    /// Builds a packet message the way the kernel does, for parser tests.
    pub(crate) fn kernel_packet_message(
        queue_num: u16,
        packet_id: u32,
        mark: Option<u32>,
        payload: &[u8],
        cap_len: Option<u32>,
    ) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut w = MessageWriter::begin(&mut buf, nfnl_type(NFQNL_MSG_PACKET), 0, 0, queue_num);
        let mut header = Vec::new();
        header.extend_from_slice(&packet_id.to_be_bytes());
        header.extend_from_slice(&0x0800u16.to_be_bytes());
        header.push(2); // NF_INET_FORWARD
        w.attribute(NFQA_PACKET_HDR, &header);
        if let Some(mark) = mark {
            w.attribute(NFQA_MARK, &mark.to_be_bytes());
        }
        w.attribute(NFQA_IFINDEX_INDEV, &7u32.to_be_bytes());
        w.attribute(NFQA_IFINDEX_OUTDEV, &9u32.to_be_bytes());
        w.attribute(99, &[1, 2, 3]); // unknown attribute: skipped
        if let Some(cap_len) = cap_len {
            w.attribute(NFQA_CAP_LEN, &cap_len.to_be_bytes());
        }
        w.attribute(NFQA_PAYLOAD, payload);
        w.finish();
        buf
    }

    fn kernel_error_message(seq: u32, error: i32) -> Vec<u8> {
        let mut buf = Vec::new();
        buf.extend_from_slice(&36u32.to_ne_bytes());
        buf.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        buf.extend_from_slice(&0u16.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&error.to_ne_bytes());
        buf.extend_from_slice(&[0u8; 16]); // the echoed request header
        buf
    }

    #[test]
    fn bind_message_matches_the_kernel_layout() {
        let mut buf = Vec::new();
        encode_config(
            &mut buf,
            7,
            0x0102,
            &ConfigMessage {
                command: Some(ConfigCommand::Bind),
                ..Default::default()
            },
        );
        assert_eq!(buf.len(), 16 + 4 + 8);
        assert_eq!(read_u32_ne(&buf, 0), 28);
        assert_eq!(
            read_u16_ne(&buf, 4),
            0x0302,
            "(NFNL_SUBSYS_QUEUE << 8) | CONFIG"
        );
        assert_eq!(read_u16_ne(&buf, 6), NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(read_u32_ne(&buf, 8), 7);
        assert_eq!(
            &buf[16..20],
            &[0, 0, 0x01, 0x02],
            "family, version, be16 queue"
        );
        assert_eq!(read_u16_ne(&buf, 20), 8);
        assert_eq!(read_u16_ne(&buf, 22), NFQA_CFG_CMD);
        assert_eq!(buf[24], libc::NFQNL_CFG_CMD_BIND as u8);
    }

    #[test]
    fn full_config_message_carries_params_maxlen_and_flags() {
        let mut buf = Vec::new();
        encode_config(
            &mut buf,
            1,
            3,
            &ConfigMessage {
                command: None,
                copy_mode: Some(CopyMode::Packet { copy_range: 128 }),
                queue_maxlen: Some(65536),
                flags: Some((CONFIG_FLAG_FAIL_OPEN, CONFIG_FLAG_FAIL_OPEN)),
            },
        );
        let attrs: Vec<(u16, Vec<u8>)> = Attributes::new(&buf[NLMSG_HDRLEN + NFGENMSG_LEN..])
            .map(|a| a.map(|(t, p)| (t, p.to_vec())).unwrap())
            .collect();
        assert_eq!(
            attrs,
            vec![
                (NFQA_CFG_PARAMS, vec![0, 0, 0, 128, 2]),
                (NFQA_CFG_QUEUE_MAXLEN, vec![0, 1, 0, 0]),
                (NFQA_CFG_FLAGS, vec![0, 0, 0, 1]),
                (NFQA_CFG_MASK, vec![0, 0, 0, 1]),
            ]
        );
        // The 5-byte params attribute is padded to 12 bytes.
        assert_eq!(buf.len(), 16 + 4 + 12 + 8 + 8 + 8);
        assert_eq!(read_u32_ne(&buf, 0) as usize, buf.len());
    }

    #[test]
    fn verdicts_concatenate_into_one_buffer() {
        let mut buf = Vec::new();
        encode_verdict(&mut buf, 5, 0xdead_beef, Verdict::Accept, None);
        encode_verdict(&mut buf, 5, 42, Verdict::Repeat, Some(0x10));
        assert_eq!(
            buf.len(),
            VERDICT_MESSAGE_LEN + VERDICT_WITH_MARK_MESSAGE_LEN
        );
        assert_eq!(read_u16_ne(&buf, 4), 0x0301);
        assert_eq!(read_u16_ne(&buf, 6), NLM_F_REQUEST);
        assert_eq!(&buf[24..32], &[0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef]);
        let second = &buf[VERDICT_MESSAGE_LEN..];
        assert_eq!(
            read_u32_ne(second, 0) as usize,
            VERDICT_WITH_MARK_MESSAGE_LEN
        );
        assert_eq!(&second[24..32], &[0, 0, 0, 4, 0, 0, 0, 42]);
        assert_eq!(read_u16_ne(second, 34), NFQA_MARK);
        assert_eq!(&second[36..40], &[0, 0, 0, 0x10]);
    }

    #[test]
    fn packet_message_parses_without_copying() {
        let payload = [0x45u8, 0, 0, 60, 1, 2, 3];
        let buf = kernel_packet_message(3, 77, Some(5), &payload, Some(1500));
        let messages: Vec<_> = Messages::new(&buf).collect();
        assert_eq!(messages.len(), 1);
        let Ok(Message::Packet(packet)) = messages[0] else {
            panic!("expected a packet, got {:?}", messages[0]);
        };
        assert_eq!(packet.queue_num, 3);
        assert_eq!(packet.packet_id, 77);
        assert_eq!(packet.hw_protocol, 0x0800);
        assert_eq!(packet.hook, 2);
        assert_eq!(packet.mark, Some(5));
        assert_eq!(packet.in_ifindex, Some(7));
        assert_eq!(packet.out_ifindex, Some(9));
        assert_eq!(packet.payload, &payload);
        assert_eq!(packet.original_len(), 1500);
        assert!(std::ptr::eq(
            packet.payload.as_ptr(),
            buf[buf.len() - 8..].as_ptr()
        ));
    }

    #[test]
    fn uncut_packet_length_is_its_payload_length() {
        let buf = kernel_packet_message(0, 1, None, &[0u8; 60], None);
        let Some(Ok(Message::Packet(packet))) = Messages::new(&buf).next() else {
            panic!("expected a packet");
        };
        assert_eq!(packet.mark, None);
        assert_eq!(packet.original_len(), 60);
    }

    #[test]
    fn several_messages_in_one_datagram() {
        let mut buf = kernel_packet_message(0, 1, None, &[1, 2, 3], None);
        buf.extend(kernel_error_message(9, 0));
        buf.extend(kernel_error_message(10, -libc::ENOENT));
        let messages: Vec<_> = Messages::new(&buf).map(Result::unwrap).collect();
        assert!(matches!(messages[0], Message::Packet(p) if p.packet_id == 1));
        assert_eq!(messages[1], Message::Ack { seq: 9 });
        assert!(matches!(
            messages[2],
            Message::Error { seq: 10, errno, .. } if errno == libc::ENOENT
        ));
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        let good = kernel_packet_message(0, 1, Some(3), &[9u8; 40], None);
        // Every truncation of a valid message, and every single-byte
        // corruption of its first 40 bytes, must parse or fail cleanly.
        for cut in 0..good.len() {
            for item in Messages::new(&good[..cut]) {
                let _ = item;
            }
        }
        for at in 0..40 {
            for value in [0u8, 1, 3, 0x7f, 0xff] {
                let mut bad = good.clone();
                bad[at] = value;
                for item in Messages::new(&bad) {
                    let _ = item;
                }
            }
        }
        assert!(matches!(
            Messages::new(&good[..10]).next(),
            Some(Err(ParseError::Truncated { .. }))
        ));
        let mut too_long = good.clone();
        too_long[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
        assert!(matches!(
            Messages::new(&too_long).next(),
            Some(Err(ParseError::BadLength { .. }))
        ));
    }

    #[test]
    fn packet_without_header_attribute_is_rejected() {
        let mut buf = Vec::new();
        let mut w = MessageWriter::begin(&mut buf, nfnl_type(NFQNL_MSG_PACKET), 0, 0, 0);
        w.attribute(NFQA_PAYLOAD, &[1, 2]);
        w.finish();
        assert_eq!(
            Messages::new(&buf).next(),
            Some(Err(ParseError::MissingAttribute("NFQA_PACKET_HDR")))
        );
    }

    #[test]
    fn short_packet_header_attribute_is_rejected() {
        let mut buf = Vec::new();
        let mut w = MessageWriter::begin(&mut buf, nfnl_type(NFQNL_MSG_PACKET), 0, 0, 0);
        w.attribute(NFQA_PACKET_HDR, &[0, 0, 0, 1]);
        w.finish();
        assert!(matches!(
            Messages::new(&buf).next(),
            Some(Err(ParseError::Truncated {
                what: "NFQA_PACKET_HDR",
                ..
            }))
        ));
    }
}
