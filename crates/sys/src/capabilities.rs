//! Whether this process holds a capability, from `CapEff` in
//! `/proc/self/status`: used to explain an `EPERM` after trying the
//! operation, never to refuse before trying.

/// `CAP_NET_ADMIN`'s bit (linux/capability.h).
pub const CAP_NET_ADMIN: u32 = 12;

/// The effective capability set, `None` when unreadable.
pub fn effective() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cap_eff(&status)
}

pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Whether the effective set holds `capability` (unknown: assumed held,
/// so an error is not blamed on it).
pub fn holds(capability: u32) -> bool {
    !matches!(effective(), Some(set) if set & (1 << capability) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cap_eff() {
        let status = "Name:\tx\nCapEff:\t0000000000001000\n";
        assert_eq!(parse_cap_eff(status), Some(1 << CAP_NET_ADMIN));
        assert!(effective().is_some());
    }
}
