//! Link-layer header types of pcap and pcapng files (the tcpdump.org
//! `LINKTYPE_*` registry), shared by the file reader and the decoder.

use serde::Serialize;

/// A link-layer header type (`LINKTYPE_*` value of a pcap or pcapng file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct LinkType(pub u16);

impl LinkType {
    pub const NULL: LinkType = LinkType(0);
    pub const ETHERNET: LinkType = LinkType(1);
    pub const FDDI: LinkType = LinkType(10);
    /// `DLT_RAW` on most systems, found in old files.
    pub const RAW_12: LinkType = LinkType(12);
    /// `DLT_RAW` on OpenBSD, found in old files.
    pub const RAW_14: LinkType = LinkType(14);
    pub const RAW: LinkType = LinkType(101);
    pub const LOOP: LinkType = LinkType(108);
    pub const LINUX_SLL: LinkType = LinkType(113);
    pub const IPV4: LinkType = LinkType(228);
    pub const IPV6: LinkType = LinkType(229);
    pub const LINUX_SLL2: LinkType = LinkType(276);
}
