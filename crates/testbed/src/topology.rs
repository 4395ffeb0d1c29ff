//! The testbed's network: one server namespace, one router namespace and N
//! client namespaces, each client and the server joined to the router by its
//! own veth link.
//!
//! ```text
//!  vtb-<tag>-c0  10.78.0.2 ─eth0──c0─┐
//!  vtb-<tag>-c1  10.78.1.2 ─eth0──c1─┤ vtb-<tag>-rtr ─srv──eth0─ 10.77.0.2 vtb-<tag>-srv
//!  …                                 ┘  (forwards; the WAN emulator holds
//!                                        packets on its FORWARD hook)
//! ```
//!
//! Every address lives inside these namespaces; the machine's own namespace
//! gets nothing. TSO, GSO and GRO are off on every veth so that captures and
//! the emulator's loss see one packet per TCP segment.
//!
//! The [`Topology`] deletes what it made when dropped — on normal exit, on
//! error and on panic unwinding. Namespaces carry the `vtb-` prefix so that
//! [`clean`] (`vantage testbed clean`) can remove the leftovers of a run that
//! was killed before it could clean up.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::netns::{self, Netns, NetnsError};

/// Prefix of every namespace the testbed creates.
pub const NAMESPACE_PREFIX: &str = "vtb-";
/// Most client namespaces one topology may have (one /24 each).
pub const MAX_CLIENTS: usize = 250;

/// What to build.
#[derive(Clone, Debug)]
pub struct TopologySpec {
    /// Number of client namespaces, 1..=[`MAX_CLIENTS`].
    pub clients: usize,
    /// Short tag that makes this run's namespace names unique
    /// (letters, digits and `-`, at most 16 characters).
    pub tag: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("the testbed needs root: it creates network namespaces, veth links and iptables rules (run as root, or under `sudo`)")]
    NotRoot,
    #[error("topology: clients = {0} is out of range (allowed 1..={MAX_CLIENTS})")]
    Clients(usize),
    #[error("topology: tag {0:?} must be 1..=16 characters of letters, digits and '-'")]
    Tag(String),
    #[error("topology: namespace {0} already exists (a run with this tag is active, or left over: `vantage testbed clean`)")]
    Exists(String),
    #[error("topology: {0}")]
    Command(#[from] NetnsError),
}

/// The server's address.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The router's address on the server link.
pub const ROUTER_SERVER_SIDE: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// Address of client `index`: 10.78.<index>.2.
pub fn client_addr(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 78, index as u8, 2)
}

/// The router's address on client `index`'s link: 10.78.<index>.1.
pub fn router_client_side(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 78, index as u8, 1)
}

/// Name of the router's interface towards client `index`.
pub fn router_client_iface(index: usize) -> String {
    format!("c{index}")
}

/// Name of the router's interface towards the server.
pub const ROUTER_SERVER_IFACE: &str = "srv";
/// Name of the interface inside the server and client namespaces.
pub const HOST_IFACE: &str = "eth0";

/// A built testbed network, deleted when dropped.
#[derive(Debug)]
pub struct Topology {
    pub tag: String,
    pub server: Netns,
    pub router: Netns,
    pub clients: Vec<Netns>,
    /// Every namespace made, in creation order; torn down in reverse.
    created: Vec<Netns>,
}

impl Topology {
    /// Builds the network. On failure everything made so far is deleted.
    pub fn build(spec: &TopologySpec) -> Result<Topology, TopologyError> {
        if !vantage_sys::privilege::is_root() {
            return Err(TopologyError::NotRoot);
        }
        if spec.clients == 0 || spec.clients > MAX_CLIENTS {
            return Err(TopologyError::Clients(spec.clients));
        }
        let tag_ok = !spec.tag.is_empty()
            && spec.tag.len() <= 16
            && spec
                .tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !tag_ok {
            return Err(TopologyError::Tag(spec.tag.clone()));
        }
        let existing = netns::list();
        let name = |suffix: &str| format!("{NAMESPACE_PREFIX}{}-{suffix}", spec.tag);
        let mut wanted = vec![name("rtr"), name("srv")];
        wanted.extend((0..spec.clients).map(|i| name(&format!("c{i}"))));
        if let Some(taken) = wanted.iter().find(|w| existing.contains(w)) {
            return Err(TopologyError::Exists(taken.clone()));
        }

        let mut topology = Topology {
            tag: spec.tag.clone(),
            server: Netns::existing(&wanted[1]),
            router: Netns::existing(&wanted[0]),
            clients: Vec::new(),
            created: Vec::new(),
        };
        // From here on, an early return drops `topology`, which deletes
        // whatever namespaces were already created.
        for ns_name in &wanted {
            let ns = Netns::create(ns_name)?;
            topology.created.push(ns);
        }
        topology.clients = wanted[2..].iter().map(|n| Netns::existing(n)).collect();

        let router = topology.router.clone();
        router.sysctl("net.ipv4.ip_forward", "1")?;
        connect(
            &topology.server,
            &router,
            ROUTER_SERVER_IFACE,
            SERVER_ADDR,
            ROUTER_SERVER_SIDE,
        )?;
        for (index, client) in topology.clients.iter().enumerate() {
            connect(
                client,
                &router,
                &router_client_iface(index),
                client_addr(index),
                router_client_side(index),
            )?;
        }
        Ok(topology)
    }

    /// Every namespace of this topology.
    pub fn namespaces(&self) -> &[Netns] {
        &self.created
    }

    /// Deletes the namespaces (killing any process left in them). Called by
    /// `Drop`; calling it twice is harmless.
    pub fn teardown(&mut self) -> Result<(), TopologyError> {
        let mut first_error = None;
        while let Some(ns) = self.created.pop() {
            if let Err(e) = ns.destroy(Duration::from_millis(500)) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("testbed: teardown: {e}");
        }
    }
}

/// One veth link between a host namespace (server or client) and the
/// router, with /24 addresses, a default route on the host side and
/// offloads off on both ends.
fn connect(
    host: &Netns,
    router: &Netns,
    router_iface: &str,
    host_addr: Ipv4Addr,
    router_addr: Ipv4Addr,
) -> Result<(), NetnsError> {
    netns::ip(&[
        "link",
        "add",
        "name",
        HOST_IFACE,
        "netns",
        host.name(),
        "type",
        "veth",
        "peer",
        "name",
        router_iface,
        "netns",
        router.name(),
    ])?;
    host.ip(&["addr", "add", &format!("{host_addr}/24"), "dev", HOST_IFACE])?;
    router.ip(&[
        "addr",
        "add",
        &format!("{router_addr}/24"),
        "dev",
        router_iface,
    ])?;
    for (ns, iface) in [(host, HOST_IFACE), (router, router_iface)] {
        ns.exec(
            "ethtool",
            &["-K", iface, "tso", "off", "gso", "off", "gro", "off"],
        )?;
        ns.ip(&["link", "set", iface, "up"])?;
    }
    host.ip(&["route", "add", "default", "via", &router_addr.to_string()])?;
    Ok(())
}

/// Removes every testbed namespace (`vtb-*`), or only those of `tag`,
/// killing the processes inside. Returns the names removed.
pub fn clean(tag: Option<&str>) -> Result<Vec<String>, TopologyError> {
    if !vantage_sys::privilege::is_root() {
        return Err(TopologyError::NotRoot);
    }
    let prefix = match tag {
        Some(tag) => format!("{NAMESPACE_PREFIX}{tag}-"),
        None => NAMESPACE_PREFIX.to_string(),
    };
    let mut removed = Vec::new();
    let mut first_error = None;
    for name in netns::list().into_iter().filter(|n| n.starts_with(&prefix)) {
        match Netns::existing(&name).destroy(Duration::from_millis(500)) {
            Ok(()) => removed.push(name),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e.into()),
        None => Ok(removed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addressing_plan_is_one_slash_24_per_client() {
        assert_eq!(client_addr(0), Ipv4Addr::new(10, 78, 0, 2));
        assert_eq!(router_client_side(249), Ipv4Addr::new(10, 78, 249, 1));
        assert_eq!(router_client_iface(7), "c7");
    }
}
