//! NFQUEUE over raw netlink (being written).
