//! Netlink framing, the one owner for every netlink protocol here
//! (`nfqueue`, `sock_diag`): message headers and attributes split off a
//! received buffer with every length checked, padding to 4 bytes.
//!
//! ```text
//! nlmsghdr   u32 len | u16 type | u16 flags | u32 seq | u32 portid     16 B
//! nlattr     u16 len | u16 type | payload | pad to 4                      4 B + …
//! ```
//!
//! Written by hand: the netlink crates allocate per message and attribute,
//! and these paths (the gate's verdict loop) must not.

/// Bytes of `struct nlmsghdr`.
pub(crate) const NLMSG_HDRLEN: usize = 16;
/// Bytes of `struct nlattr`.
pub(crate) const NLA_HDRLEN: usize = 4;
/// `NLA_F_NESTED | NLA_F_NET_BYTEORDER` cleared from an attribute's type.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A netlink message from the kernel that does not have the expected shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("{what} truncated: needs {needed} bytes, {available} available")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("{what} declares length {length}, but {available} bytes are left")]
    BadLength {
        what: &'static str,
        length: usize,
        available: usize,
    },
    #[error("packet message without the {0} attribute")]
    MissingAttribute(&'static str),
}

pub(crate) const fn align4(len: usize) -> usize {
    (len + 3) & !3
}

pub(crate) fn read_u16_ne(bytes: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([bytes[at], bytes[at + 1]])
}

pub(crate) fn read_u32_ne(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// One message's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub msg_type: u16,
    pub seq: u32,
}

/// Splits the first message off `bytes`: (its header, its body after the
/// header, the rest after padding).
pub(crate) fn split_message(bytes: &[u8]) -> Result<(Header, &[u8], &[u8]), ParseError> {
    if bytes.len() < NLMSG_HDRLEN {
        return Err(ParseError::Truncated {
            what: "netlink message header",
            needed: NLMSG_HDRLEN,
            available: bytes.len(),
        });
    }
    let len = read_u32_ne(bytes, 0) as usize;
    if len < NLMSG_HDRLEN || len > bytes.len() {
        return Err(ParseError::BadLength {
            what: "netlink message",
            length: len,
            available: bytes.len(),
        });
    }
    let header = Header {
        msg_type: read_u16_ne(bytes, 4),
        seq: read_u32_ne(bytes, 8),
    };
    let next = align4(len).min(bytes.len());
    Ok((header, &bytes[NLMSG_HDRLEN..len], &bytes[next..]))
}

/// Iterates over the attributes `(type, payload)` of a message body. After
/// a malformed attribute it yields that error once and stops.
pub(crate) struct Attributes<'a> {
    rest: &'a [u8],
}

impl<'a> Attributes<'a> {
    pub(crate) fn new(rest: &'a [u8]) -> Self {
        Attributes { rest }
    }
}

impl<'a> Iterator for Attributes<'a> {
    type Item = Result<(u16, &'a [u8]), ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        if self.rest.len() < NLA_HDRLEN {
            let available = self.rest.len();
            self.rest = &[];
            return Some(Err(ParseError::Truncated {
                what: "netlink attribute header",
                needed: NLA_HDRLEN,
                available,
            }));
        }
        let len = read_u16_ne(self.rest, 0) as usize;
        if len < NLA_HDRLEN || len > self.rest.len() {
            let available = self.rest.len();
            self.rest = &[];
            return Some(Err(ParseError::BadLength {
                what: "netlink attribute",
                length: len,
                available,
            }));
        }
        let attr_type = read_u16_ne(self.rest, 2) & NLA_TYPE_MASK;
        let payload = &self.rest[NLA_HDRLEN..len];
        self.rest = &self.rest[align4(len).min(self.rest.len())..];
        Some(Ok((attr_type, payload)))
    }
}
