//! The upstreams: round robin with passive failure detection. An upstream
//! whose connect failed or whose response timed out is skipped for
//! `timeouts.upstream_down_ms`; when every upstream is down, the one whose
//! skip ends first is tried (a proxy never refuses everything because of a
//! stale mark). Connections are pooled by hyper-util's client (keep-alive,
//! at most `limits.upstream_idle_connections` idle per upstream).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The upstream set and each one's state.
#[derive(Debug)]
pub struct Upstreams {
    addresses: Vec<SocketAddr>,
    down_until: Mutex<Vec<Option<Instant>>>,
    next: AtomicUsize,
    down_for: Duration,
}

impl Upstreams {
    pub fn new(addresses: Vec<SocketAddr>, down_for: Duration) -> Upstreams {
        let n = addresses.len();
        Upstreams {
            addresses,
            down_until: Mutex::new(vec![None; n]),
            next: AtomicUsize::new(0),
            down_for,
        }
    }

    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    pub fn address(&self, index: usize) -> SocketAddr {
        self.addresses[index]
    }

    /// The next upstream in turn that is not marked down (`exclude`: ones
    /// already tried for this request); `None` only when `exclude` covers
    /// them all.
    pub fn pick(&self, exclude: &[usize]) -> Option<usize> {
        let n = self.addresses.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let down = self.down_until.lock().ok()?;
        let candidates = (0..n)
            .map(|i| (start + i) % n)
            .filter(|i| !exclude.contains(i));
        let mut fallback: Option<(usize, Instant)> = None;
        for i in candidates {
            match down[i] {
                Some(until) if until > now => {
                    if fallback.is_none_or(|(_, t)| until < t) {
                        fallback = Some((i, until));
                    }
                }
                _ => return Some(i),
            }
        }
        fallback.map(|(i, _)| i)
    }

    /// The upstream refused, could not be reached or timed out.
    pub fn mark_down(&self, index: usize) {
        if let Ok(mut down) = self.down_until.lock() {
            if let Some(slot) = down.get_mut(index) {
                *slot = Some(Instant::now() + self.down_for);
            }
        }
    }

    /// The upstream answered.
    pub fn mark_up(&self, index: usize) {
        if let Ok(mut down) = self.down_until.lock() {
            if let Some(slot) = down.get_mut(index) {
                *slot = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Upstreams {
        let a = |p| SocketAddr::from(([127, 0, 0, 1], p));
        Upstreams::new(vec![a(1), a(2), a(3)], Duration::from_secs(60))
    }

    #[test]
    fn round_robin_skips_the_down_ones() {
        let u = three();
        let picks: Vec<_> = (0..6).map(|_| u.pick(&[]).unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        u.mark_down(1);
        let picks: Vec<_> = (0..4).map(|_| u.pick(&[]).unwrap()).collect();
        assert!(!picks.contains(&1), "{picks:?}");
        assert_eq!(u.pick(&[0, 2]), Some(1), "down, but the only one left");
        assert_eq!(u.pick(&[0, 1, 2]), None);
        u.mark_up(1);
        let picks: Vec<_> = (0..3).map(|_| u.pick(&[]).unwrap()).collect();
        assert!(picks.contains(&1), "{picks:?}");
        // All down: the one back first is tried.
        u.mark_down(2);
        u.mark_down(0);
        u.mark_down(1);
        assert_eq!(u.pick(&[]), Some(2));
    }
}
