//! The descriptor budget. What the shut-down path needs (running iptables
//! or nft: pipes and a fork) must work when a listener has exhausted the
//! descriptors: connections an endpoint may hold are capped well below
//! `RLIMIT_NOFILE` ([`connection_cap`]), and a [`DescriptorReserve`] is
//! held from start-up and released just before that path runs. The
//! verdict path needs no new descriptor.

use std::fs::File;

/// Descriptors a [`DescriptorReserve`] holds.
pub const RESERVED_DESCRIPTORS: usize = 16;
/// Most connections one endpoint holds, whatever the limit.
pub const MAX_ENDPOINT_CONNECTIONS: u64 = 64;

/// The soft `RLIMIT_NOFILE`.
pub fn descriptor_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(limit.rlim_cur)
}

/// Connections an endpoint may hold under a descriptor limit: an eighth of
/// what is left after a reserve of 64, at least 1, at most
/// [`MAX_ENDPOINT_CONNECTIONS`].
pub fn connection_cap(descriptor_limit: u64) -> usize {
    (descriptor_limit.saturating_sub(64) / 8).clamp(1, MAX_ENDPOINT_CONNECTIONS) as usize
}

/// Descriptors held open (on `/dev/null`) for the shut-down path.
#[derive(Debug)]
pub struct DescriptorReserve {
    held: Vec<File>,
}

impl DescriptorReserve {
    /// Holds up to [`RESERVED_DESCRIPTORS`] (fewer if they run out).
    pub fn hold() -> DescriptorReserve {
        let held = (0..RESERVED_DESCRIPTORS)
            .map_while(|_| File::open("/dev/null").ok())
            .collect();
        DescriptorReserve { held }
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Closes them, so the caller can use them.
    pub fn release(&mut self) {
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_stays_well_below_the_limit() {
        assert_eq!(connection_cap(1024), 64);
        assert_eq!(connection_cap(256), 24);
        assert_eq!(connection_cap(64), 1);
        assert_eq!(connection_cap(0), 1);
        assert_eq!(connection_cap(1 << 20), 64);
        assert!(descriptor_limit().unwrap() > 0);
        let mut reserve = DescriptorReserve::hold();
        assert_eq!(reserve.len(), RESERVED_DESCRIPTORS);
        reserve.release();
        assert!(reserve.is_empty());
    }
}
