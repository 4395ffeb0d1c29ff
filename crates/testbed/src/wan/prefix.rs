//! IPv4 address prefixes (`10.78.0.0/16`, or one address) that name which
//! clients a link rule covers.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An IPv4 prefix; the network address is stored with its host bits
/// cleared. Written `a.b.c.d/len`, or `a.b.c.d` for a single address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientPrefix {
    network: Ipv4Addr,
    len: u8,
}

impl ClientPrefix {
    /// The prefix of `len` bits (0..=32) containing `address`.
    pub fn new(address: Ipv4Addr, len: u8) -> Option<ClientPrefix> {
        (len <= 32).then(|| ClientPrefix {
            network: Ipv4Addr::from(u32::from(address) & Self::mask(len)),
            len,
        })
    }

    fn mask(len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        }
    }

    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for `0.0.0.0/0`, which matches every address.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, address: Ipv4Addr) -> bool {
        u32::from(address) & Self::mask(self.len) == u32::from(self.network)
    }
}

impl fmt::Display for ClientPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.len)
    }
}

impl FromStr for ClientPrefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || format!("{s:?} is not an IPv4 address or prefix (e.g. 10.78.0.0/16)");
        let (address, len) = match s.split_once('/') {
            Some((address, len)) => (address, len.parse::<u8>().map_err(|_| invalid())?),
            None => (s, 32),
        };
        let address: Ipv4Addr = address.parse().map_err(|_| invalid())?;
        ClientPrefix::new(address, len).ok_or_else(invalid)
    }
}

impl Serialize for ClientPrefix {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ClientPrefix {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prefixes_and_single_addresses() {
        let p: ClientPrefix = "10.78.3.9/16".parse().unwrap();
        assert_eq!(p.to_string(), "10.78.0.0/16");
        assert!(p.contains(Ipv4Addr::new(10, 78, 200, 1)));
        assert!(!p.contains(Ipv4Addr::new(10, 77, 0, 2)));
        let one: ClientPrefix = "10.78.0.2".parse().unwrap();
        assert_eq!(one.len(), 32);
        assert!(one.contains(Ipv4Addr::new(10, 78, 0, 2)));
        assert!(!one.contains(Ipv4Addr::new(10, 78, 0, 3)));
        let all: ClientPrefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.is_empty() && all.contains(Ipv4Addr::new(1, 2, 3, 4)));
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "10.78.0.0/33",
            "10.78.0/16",
            "10.78.0.0/",
            "ten/8",
            "10.78.0.0/-1",
        ] {
            let error = bad.parse::<ClientPrefix>().unwrap_err();
            assert!(
                error.contains("not an IPv4 address or prefix"),
                "{bad}: {error}"
            );
        }
    }
}
