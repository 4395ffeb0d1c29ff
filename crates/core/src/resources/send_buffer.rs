//! E-ATBT send-buffer allocation (proxy thesis, Section 3.1.1).
//!
//! Each connection's demand is its expected throughput ρ̄_i (the Padhye et
//! al. formula, [`crate::tcp::throughput`]) times its RTT: B_i = ρ̄_i·rtt_i.
//! When the demands exceed the pool, the pool is shared max-min fairly with
//! *proportional* re-assignment of the excess: every connection first gets
//! the smaller of its demand and an equal share; what the satisfied ones
//! leave is handed to the others in proportion to their demands, capped at
//! each demand, until nothing is left or everyone is satisfied.
//!
//! Up/down coupling (Section 3.1.3): a connection whose send buffer stayed
//! under-used for an interval (its upstream feeds it more slowly than its
//! path drains) has its demand capped near what it used, so the buffer goes
//! to others; the cap is lifted once it fills its assignment again.
//! The thesis gives no numbers for this rule; ours are
//! [`CouplingParams::default`]. Use is measured against the buffer the
//! connection had during the interval, not the new assignment: a
//! connection whose assignment just grew (its loss fell, or it was reused
//! after idling with a shrunken buffer) could not have filled the new one,
//! and capping it near what the old one held would let it grow only by
//! `headroom` per interval.
//!
//! Departure: the thesis monitors the peak use inside the kernel; a live
//! driver reads the send buffer once per interval, and a connection that
//! sent its responses in a few milliseconds (a fast path) or waited for
//! its upstream is read empty, although its upstream was not slow. Capped
//! at `min_bytes` on that evidence, every later response went out through
//! a 4 KB buffer. So where the driver measures how long the connection
//! had data in flight ([`Occupancy::busy_fraction`]), an interval is judged
//! under-used only if it sent for at least `judged_when_busy` (half) of
//! it — a connection fed by a slow upstream sends all the time with little
//! queued — and the kernel's report that the buffer limited the sender
//! ([`Occupancy::buffer_limited`]) lifts a cap as a full buffer does.
//!
//! A connection reused after idling (Section 3.2 shrinks idle buffers) may
//! take back what it held before at once, as far as the pool has room
//! ([`SendBufferAllocator::resume_bound`]); the next re-assignment evens
//! it out.

use std::collections::BTreeMap;

use crate::tcp::throughput::{self, PathEstimate};
use crate::OutOfRange;

/// Splits `pool` bytes among `demands` (bytes): max-min fair with
/// proportional re-assignment of the excess. The result has one entry per
/// demand, never more than that demand, and sums to at most `pool`.
pub fn max_min_proportional(demands: &[u64], pool: u64) -> Vec<u64> {
    let total: u128 = demands.iter().map(|&d| u128::from(d)).sum();
    if total <= u128::from(pool) {
        return demands.to_vec();
    }
    // The rounds of re-assignment end with every connection either at its
    // demand or at S + λ·d_i (S the equal share, λ the proportional
    // excess per byte of demand), and the satisfied ones are exactly those
    // with the smallest demands. So sort the demands and find how many are
    // satisfied: O(n log n) instead of rounds over every connection.
    let count = demands.len();
    let equal_share = pool as f64 / count as f64;
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by_key(|&i| demands[i]);
    let mut satisfied = order
        .iter()
        .take_while(|&&i| demands[i] as f64 <= equal_share)
        .count();
    let mut satisfied_sum: f64 = order[..satisfied].iter().map(|&i| demands[i] as f64).sum();
    let mut wanting: f64 = order[satisfied..].iter().map(|&i| demands[i] as f64).sum();
    let lambda = loop {
        let unsatisfied = (count - satisfied) as f64;
        let lambda = (pool as f64 - satisfied_sum - unsatisfied * equal_share) / wanting;
        let smallest = demands[order[satisfied]] as f64;
        if satisfied + 1 == count || equal_share + lambda * smallest < smallest {
            break lambda;
        }
        satisfied_sum += smallest;
        wanting -= smallest;
        satisfied += 1;
    };
    let assigned: Vec<f64> = demands
        .iter()
        .map(|&d| (equal_share + lambda * d as f64).min(d as f64))
        .collect();
    let mut bytes: Vec<u64> = assigned.iter().map(|&a| a.floor() as u64).collect();
    // Floating-point sums may overshoot by a byte or two: trim the largest.
    let mut sum: u128 = bytes.iter().map(|&b| u128::from(b)).sum();
    while sum > u128::from(pool) {
        if let Some(largest) = bytes.iter_mut().max() {
            let cut = (*largest).min((sum - u128::from(pool)) as u64);
            *largest -= cut;
            sum -= u128::from(cut);
        }
    }
    bytes
}

/// Demand B = ρ̄·rtt in bytes for a path, segments of `mss` bytes.
pub fn demand_bytes(path: &PathEstimate, mss: u32) -> Result<u64, OutOfRange> {
    let rate = throughput::bytes_per_sec(path, mss)?;
    Ok((rate * path.rtt_secs).ceil() as u64)
}

/// One connection's send-buffer use over an interval (Section 3.1.3).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Occupancy {
    pub id: u64,
    /// The most data it held in its send buffer (or, where the peak is not
    /// tracked, what it held when sampled).
    pub peak_bytes: u64,
    /// The send buffer it had during the interval (data bytes).
    pub buffer_bytes: u64,
    /// The share of the interval it had data in flight (Linux
    /// `tcpi_busy_time`), if measured. A connection that sent for less
    /// than [`CouplingParams::judged_when_busy`] of the interval is not
    /// judged under-used (see the module doc). None: every interval is
    /// judged (a driver that tracks the true peak).
    pub busy_fraction: Option<f64>,
    /// Whether the buffer limited the sender during the interval (Linux
    /// `tcpi_sndbuf_limited` grew): it was full, which lifts a cap as an
    /// occupancy at `lift_at` does.
    pub buffer_limited: bool,
}

impl Occupancy {
    /// An interval whose peak is tracked exactly: judged by it alone.
    pub fn peak(id: u64, peak_bytes: u64, buffer_bytes: u64) -> Occupancy {
        Occupancy {
            id,
            peak_bytes,
            buffer_bytes,
            busy_fraction: None,
            buffer_limited: false,
        }
    }
}

/// The under-use rule of Section 3.1.3.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CouplingParams {
    /// An interval whose peak occupancy is below this fraction of the
    /// assignment counts as under-used.
    pub under_used_below: f64,
    /// The cap set on an under-used connection, as a multiple of its peak
    /// occupancy.
    pub headroom: f64,
    /// An interval whose peak occupancy reaches this fraction lifts the cap.
    pub lift_at: f64,
    /// No cap goes below this many bytes.
    pub min_bytes: u64,
    /// An interval is judged under-used only if the connection had data in
    /// flight for at least this share of it (when that is measured).
    pub judged_when_busy: f64,
}

impl Default for CouplingParams {
    fn default() -> Self {
        CouplingParams {
            under_used_below: 0.5,
            headroom: 2.0,
            lift_at: 0.8,
            min_bytes: 4096,
            judged_when_busy: 0.5,
        }
    }
}

/// Why the allocator refused a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SendBufferError {
    #[error("send buffer allocator: {0}")]
    OutOfRange(#[from] OutOfRange),
    #[error("send buffer allocator holds {cap} connections, its cap")]
    Full { cap: usize },
}

#[derive(Clone, Copy, Debug)]
struct Connection {
    demand: u64,
    coupling_cap: Option<u64>,
    assigned: u64,
}

/// E-ATBT over a pool of send-buffer memory, keyed by connection id.
///
/// Holds at most `max_connections` entries; adding one more is refused with
/// [`SendBufferError::Full`].
#[derive(Clone, Debug)]
pub struct SendBufferAllocator {
    pool_bytes: u64,
    mss: u32,
    max_connections: usize,
    coupling: CouplingParams,
    connections: BTreeMap<u64, Connection>,
    /// The sum of the assignments, kept by each re-assignment.
    total_assigned: u64,
}

impl SendBufferAllocator {
    pub fn new(
        pool_bytes: u64,
        mss: u32,
        max_connections: usize,
        coupling: CouplingParams,
    ) -> Result<Self, SendBufferError> {
        OutOfRange::check(mss > 0, "mss", "a positive number of bytes", mss)?;
        OutOfRange::check(
            coupling.under_used_below > 0.0
                && coupling.under_used_below <= coupling.lift_at
                && coupling.lift_at <= 1.0,
            "coupling thresholds",
            "0 < under_used_below ≤ lift_at ≤ 1",
            format!("{} / {}", coupling.under_used_below, coupling.lift_at),
        )?;
        OutOfRange::check(
            (0.0..=1.0).contains(&coupling.judged_when_busy),
            "coupling judged_when_busy",
            "a fraction in [0, 1]",
            coupling.judged_when_busy,
        )?;
        OutOfRange::check(
            coupling.headroom >= 1.0,
            "coupling headroom",
            "at least 1",
            coupling.headroom,
        )?;
        Ok(SendBufferAllocator {
            pool_bytes,
            mss,
            max_connections,
            coupling,
            connections: BTreeMap::new(),
            total_assigned: 0,
        })
    }

    /// Sets (or updates) a connection's path estimate and re-assigns.
    pub fn set_path(&mut self, id: u64, path: &PathEstimate) -> Result<(), SendBufferError> {
        let demand = demand_bytes(path, self.mss)?;
        let at_cap = self.connections.len() >= self.max_connections;
        match self.connections.get_mut(&id) {
            Some(connection) => connection.demand = demand,
            None if at_cap => {
                return Err(SendBufferError::Full {
                    cap: self.max_connections,
                })
            }
            None => {
                self.connections.insert(
                    id,
                    Connection {
                        demand,
                        coupling_cap: None,
                        assigned: 0,
                    },
                );
            }
        }
        self.reassign();
        Ok(())
    }

    /// Updates the estimates of connections already held and re-assigns
    /// once (cheaper than one `set_path` each). Returns how many ids were
    /// unknown and skipped.
    pub fn update_paths(
        &mut self,
        paths: &[(u64, PathEstimate)],
    ) -> Result<usize, SendBufferError> {
        let mut skipped = 0;
        for (id, path) in paths {
            let demand = demand_bytes(path, self.mss)?;
            match self.connections.get_mut(id) {
                Some(connection) => connection.demand = demand,
                None => skipped += 1,
            }
        }
        self.reassign();
        Ok(skipped)
    }

    /// Sets (or updates) the path estimates of many connections and
    /// re-assigns once; as [`Self::set_path`] each, but one re-assignment.
    /// Connections beyond the cap are refused and counted in the result.
    pub fn set_paths(&mut self, paths: &[(u64, PathEstimate)]) -> Result<usize, SendBufferError> {
        let mut refused = 0;
        for (id, path) in paths {
            let demand = demand_bytes(path, self.mss)?;
            let at_cap = self.connections.len() >= self.max_connections;
            match self.connections.get_mut(id) {
                Some(connection) => connection.demand = demand,
                None if at_cap => refused += 1,
                None => {
                    self.connections.insert(
                        *id,
                        Connection {
                            demand,
                            coupling_cap: None,
                            assigned: 0,
                        },
                    );
                }
            }
        }
        self.reassign();
        Ok(refused)
    }

    /// Forgets a connection (closed) and frees its share, O(log n): the
    /// others keep their assignments until the next re-assignment (the
    /// next `set_paths`, `update_paths`, `observe_peak_occupancy` or
    /// `set_pool_bytes`), so that closing many connections one at a time
    /// does not re-divide the pool once per close. True if it was held.
    pub fn release(&mut self, id: u64) -> bool {
        match self.connections.remove(&id) {
            Some(connection) => {
                self.total_assigned -= connection.assigned;
                true
            }
            None => false,
        }
    }

    /// Changes the pool (e.g. cut under memory pressure) and re-assigns.
    pub fn set_pool_bytes(&mut self, pool_bytes: u64) {
        self.pool_bytes = pool_bytes;
        self.reassign();
    }

    /// Forgets a connection (closed) and re-assigns its share.
    pub fn remove(&mut self, id: u64) -> bool {
        let removed = self.connections.remove(&id).is_some();
        if removed {
            self.reassign();
        }
        removed
    }

    /// Reports connections' peak send-buffer occupancy over the last
    /// interval against the buffer each had (Section 3.1.3), and
    /// re-assigns once.
    pub fn observe_peak_occupancy(&mut self, observations: &[Occupancy]) {
        let params = self.coupling;
        for &Occupancy {
            id,
            peak_bytes,
            buffer_bytes,
            busy_fraction,
            buffer_limited,
        } in observations
        {
            let Some(connection) = self.connections.get_mut(&id) else {
                continue;
            };
            let utilization = peak_bytes as f64 / buffer_bytes.max(1) as f64;
            let sending = busy_fraction.is_none_or(|busy| busy >= params.judged_when_busy);
            if buffer_limited || utilization >= params.lift_at {
                connection.coupling_cap = None;
            } else if sending && utilization < params.under_used_below {
                let cap =
                    ((peak_bytes as f64 * params.headroom).ceil() as u64).max(params.min_bytes);
                connection.coupling_cap = Some(cap);
            }
        }
        self.reassign();
    }

    /// Bytes assigned to a connection, if it is known.
    pub fn assigned(&self, id: u64) -> Option<u64> {
        self.connections.get(&id).map(|c| c.assigned)
    }

    /// The demand E-ATBT computed for a connection (before coupling caps).
    pub fn demand(&self, id: u64) -> Option<u64> {
        self.connections.get(&id).map(|c| c.demand)
    }

    pub fn total_assigned(&self) -> u64 {
        self.total_assigned
    }

    /// What a connection coming back into use may take at once, before the
    /// next re-assignment (data bytes): `before`, what it had before it
    /// idled, at most what the pool has unassigned — or, if less is free,
    /// an equal share of the pool among the connections held and this one.
    pub fn resume_bound(&self, before: u64) -> u64 {
        let free = self.pool_bytes.saturating_sub(self.total_assigned);
        let equal_share = self.pool_bytes / (self.connections.len() as u64 + 1);
        before.min(free.max(equal_share))
    }

    pub fn pool_bytes(&self) -> u64 {
        self.pool_bytes
    }

    pub fn len(&self) -> usize {
        self.connections.len()
    }

    pub fn is_empty(&self) -> bool {
        self.connections.is_empty()
    }

    fn reassign(&mut self) {
        let demands: Vec<u64> = self
            .connections
            .values()
            .map(|c| c.coupling_cap.map_or(c.demand, |cap| cap.min(c.demand)))
            .collect();
        let shares = max_min_proportional(&demands, self.pool_bytes);
        self.total_assigned = shares.iter().sum();
        for (connection, share) in self.connections.values_mut().zip(shares) {
            connection.assigned = share;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn batch_insertion_and_a_pool_cut() {
        let path = |loss| PathEstimate {
            rtt_secs: 0.1,
            rto_secs: 0.4,
            loss,
            max_window_segments: 1000.0,
        };
        let mut one =
            SendBufferAllocator::new(1 << 20, 1448, 3, CouplingParams::default()).unwrap();
        let mut batch = one.clone();
        let paths: Vec<(u64, PathEstimate)> =
            (0..4).map(|i| (i, path(0.001 * (i + 1) as f64))).collect();
        for (id, p) in &paths[..3] {
            one.set_path(*id, p).unwrap();
        }
        assert_eq!(batch.set_paths(&paths).unwrap(), 1);
        for id in 0..3 {
            assert_eq!(one.assigned(id), batch.assigned(id));
        }
        assert_eq!(batch.assigned(3), None);
        one.remove(0);
        one.remove(1);
        let mut two = batch.clone();
        assert!(two.release(0) && two.release(1) && !two.release(7));
        two.update_paths(&[]).unwrap();
        assert_eq!(one.assigned(2), two.assigned(2));
        let before = batch.total_assigned();
        batch.set_pool_bytes(before / 4);
        assert!(batch.total_assigned() <= before / 4);
        assert_eq!(batch.pool_bytes(), before / 4);
    }

    #[test]
    fn a_release_frees_its_share_and_leaves_the_others_until_the_next_reassignment() {
        let path = PathEstimate {
            rtt_secs: 0.2,
            rto_secs: 1.0,
            loss: 0.0001,
            max_window_segments: 1e6,
        };
        // The pool binds: three equal shares of 90,000.
        let mut allocator =
            SendBufferAllocator::new(90_000, 1460, 16, CouplingParams::default()).unwrap();
        let paths: Vec<(u64, PathEstimate)> = (1..=3).map(|id| (id, path)).collect();
        allocator.set_paths(&paths).unwrap();
        assert_eq!(allocator.total_assigned(), 90_000);
        assert!(allocator.release(2));
        assert!(!allocator.release(2), "already gone");
        assert_eq!(allocator.assigned(2), None);
        // The others are untouched; the freed share is unassigned.
        assert_eq!(allocator.assigned(1), Some(30_000));
        assert_eq!(allocator.assigned(3), Some(30_000));
        assert_eq!(allocator.total_assigned(), 60_000);
        assert_eq!(allocator.resume_bound(u64::MAX), 30_000);
        // The next re-assignment divides it.
        allocator.update_paths(&[]).unwrap();
        assert_eq!(allocator.assigned(1), Some(45_000));
        assert_eq!(allocator.total_assigned(), 90_000);
        // Releasing everything leaves nothing assigned.
        assert!(allocator.release(1) && allocator.release(3));
        assert_eq!(allocator.total_assigned(), 0);
        assert!(allocator.is_empty());
    }

    #[test]
    fn a_batch_update_matches_one_update_at_a_time() {
        let path = |loss: f64| PathEstimate {
            rtt_secs: 0.1,
            rto_secs: 0.4,
            loss,
            max_window_segments: 1e6,
        };
        let mut one = SendBufferAllocator::new(60_000, 1460, 8, CouplingParams::default()).unwrap();
        for id in 0..3 {
            one.set_path(id, &path(0.01)).unwrap();
        }
        let mut batch = one.clone();
        let updates = [(0, path(0.001)), (2, path(0.0001)), (9, path(0.1))];
        for (id, p) in &updates[..2] {
            one.set_path(*id, p).unwrap();
        }
        assert_eq!(batch.update_paths(&updates).unwrap(), 1);
        for id in 0..3 {
            assert_eq!(batch.assigned(id), one.assigned(id));
        }
        assert_eq!(batch.len(), 3);
    }

    #[test]
    fn demands_that_fit_are_met() {
        assert_eq!(max_min_proportional(&[10, 20, 30], 100), vec![10, 20, 30]);
    }

    #[test]
    fn excess_goes_in_proportion_to_demand() {
        // Equal share 300/3 = 100: the first needs 40, leaving 60 excess,
        // split 200:400 = 20 and 40 between the other two.
        assert_eq!(
            max_min_proportional(&[40, 200, 400], 300),
            vec![40, 120, 140]
        );
    }

    #[test]
    fn a_small_demand_above_the_share_keeps_the_equal_share() {
        // Share 50 each; nobody is satisfied; nothing is left to re-assign.
        assert_eq!(max_min_proportional(&[60, 1000], 100), vec![50, 50]);
    }

    #[test]
    fn demand_is_throughput_times_rtt() {
        let path = PathEstimate {
            rtt_secs: 0.1,
            rto_secs: 0.4,
            loss: 0.01,
            max_window_segments: 1e6,
        };
        // 79.431 segments/s · 1460 bytes · 0.1 s = 11 596.9 bytes
        assert_eq!(demand_bytes(&path, 1460).unwrap(), 11_597);
    }

    #[test]
    fn higher_loss_gets_a_smaller_buffer() {
        let mut allocator =
            SendBufferAllocator::new(1 << 30, 1460, 16, CouplingParams::default()).unwrap();
        for (id, loss) in [(1, 0.01), (2, 0.001), (3, 0.0001)] {
            let path = PathEstimate {
                rtt_secs: 0.2,
                rto_secs: 1.0,
                loss,
                max_window_segments: 1e6,
            };
            allocator.set_path(id, &path).unwrap();
        }
        let a = |id| allocator.assigned(id).unwrap();
        assert!(a(1) < a(2) && a(2) < a(3));
    }

    #[test]
    fn under_used_connections_give_buffer_back() {
        let mut allocator =
            SendBufferAllocator::new(100_000, 1460, 16, CouplingParams::default()).unwrap();
        let path = PathEstimate {
            rtt_secs: 0.2,
            rto_secs: 1.0,
            loss: 0.0001,
            max_window_segments: 1e6,
        };
        allocator.set_path(1, &path).unwrap();
        allocator.set_path(2, &path).unwrap();
        assert_eq!(allocator.assigned(1), Some(50_000));
        let occupancy = |peak_bytes, buffer_bytes| Occupancy::peak(1, peak_bytes, buffer_bytes);
        allocator.observe_peak_occupancy(&[occupancy(10_000, 50_000)]);
        assert_eq!(allocator.assigned(1), Some(20_000));
        assert_eq!(allocator.assigned(2), Some(80_000));
        allocator.observe_peak_occupancy(&[occupancy(19_000, 20_000)]);
        assert_eq!(allocator.assigned(1), Some(50_000));
        assert!(allocator.remove(1));
        assert_eq!(allocator.assigned(2), Some(100_000));
    }

    /// A client connection on a 100 Mbit/s, 10 ms path (Experiment 1's
    /// path 1) as the live loop reads it once per interval: RTT 10 ms, no
    /// retransmission yet, the client's window 64 KB; SURGE responses
    /// drain in milliseconds, so the send buffer is empty when read, and
    /// data was in flight for 2 % of the interval.
    #[test]
    fn a_connection_that_sent_only_briefly_is_not_judged_under_used() {
        let path = PathEstimate {
            rtt_secs: 0.010,
            rto_secs: 0.210,
            loss: 0.0,
            max_window_segments: (65_536 / 1448) as f64,
        };
        let mut allocator =
            SendBufferAllocator::new(25 << 20, 1448, 16, CouplingParams::default()).unwrap();
        allocator.set_path(1, &path).unwrap();
        let demand = allocator.assigned(1).unwrap();
        assert!(demand >= 60_000, "the window bounds the demand: {demand}");
        let sampled = |busy_fraction| Occupancy {
            id: 1,
            peak_bytes: 0,
            buffer_bytes: demand,
            busy_fraction,
            buffer_limited: false,
        };
        allocator.observe_peak_occupancy(&[sampled(Some(0.02))]);
        assert_eq!(allocator.assigned(1), Some(demand));
        // Judged by the sample alone (as every interval was before the busy
        // share was read), the empty buffer caps it at the 4 KB floor:
        // what Experiment 1 measured on path 1.
        allocator.observe_peak_occupancy(&[sampled(None)]);
        assert_eq!(allocator.assigned(1), Some(4096));
        // The kernel saw the buffer limit the sender: the cap is lifted.
        allocator.observe_peak_occupancy(&[Occupancy {
            buffer_bytes: 4096,
            buffer_limited: true,
            ..sampled(Some(0.02))
        }]);
        assert_eq!(allocator.assigned(1), Some(demand));
        // Sending all interval with little queued (a slow upstream feeds
        // it): under-used, capped near what it held (Section 3.1.3).
        allocator.observe_peak_occupancy(&[Occupancy {
            peak_bytes: 3_000,
            ..sampled(Some(0.9))
        }]);
        assert_eq!(allocator.assigned(1), Some(6_000));
    }

    #[test]
    fn a_buffer_that_just_grew_is_judged_by_the_one_it_had() {
        // Alone in a large pool: the whole demand is assigned.
        let mut allocator =
            SendBufferAllocator::new(1 << 30, 1448, 16, CouplingParams::default()).unwrap();
        let path = |loss| PathEstimate {
            rtt_secs: 0.05,
            rto_secs: 0.25,
            loss,
            max_window_segments: 1e6,
        };
        allocator.set_path(1, &path(0.01)).unwrap();
        let before = allocator.assigned(1).unwrap();
        // The loss falls: the demand grows about threefold. The connection
        // filled the buffer it had; against the new assignment that is
        // under half, yet it is not capped.
        allocator.set_path(1, &path(0.001)).unwrap();
        let after = allocator.assigned(1).unwrap();
        assert!(after > 3 * before, "{before} → {after}");
        allocator.observe_peak_occupancy(&[Occupancy::peak(1, before, before)]);
        assert_eq!(allocator.assigned(1), Some(after));
    }

    #[test]
    fn a_resumed_connection_takes_back_its_buffer_as_far_as_the_pool_has_room() {
        let path = PathEstimate {
            rtt_secs: 0.2,
            rto_secs: 1.0,
            loss: 0.0001,
            max_window_segments: 1e6,
        };
        let mut allocator =
            SendBufferAllocator::new(100_000, 1460, 16, CouplingParams::default()).unwrap();
        // Room in the pool: everything it had.
        assert_eq!(allocator.resume_bound(60_000), 60_000);
        allocator.set_path(1, &path).unwrap();
        allocator.set_path(2, &path).unwrap();
        assert_eq!(allocator.total_assigned(), 100_000);
        // The pool is taken: an equal share among three.
        assert_eq!(allocator.resume_bound(60_000), 33_333);
        assert_eq!(allocator.resume_bound(20_000), 20_000);
        allocator.set_pool_bytes(400_000);
        let free = 400_000 - allocator.total_assigned();
        assert_eq!(allocator.resume_bound(u64::MAX), free.max(400_000 / 3));
    }

    #[test]
    fn refuses_beyond_its_cap() {
        let mut allocator =
            SendBufferAllocator::new(100_000, 1460, 1, CouplingParams::default()).unwrap();
        let path = PathEstimate {
            rtt_secs: 0.2,
            rto_secs: 1.0,
            loss: 0.01,
            max_window_segments: 100.0,
        };
        allocator.set_path(1, &path).unwrap();
        allocator.set_path(1, &path).unwrap();
        assert_eq!(
            allocator.set_path(2, &path),
            Err(SendBufferError::Full { cap: 1 })
        );
    }

    proptest! {
        #[test]
        fn allocation_properties(
            demands in proptest::collection::vec(0u64..10_000_000, 1..40),
            pool in 0u64..50_000_000,
        ) {
            let shares = max_min_proportional(&demands, pool);
            let n = demands.len() as u64;
            let sum: u64 = shares.iter().sum();
            prop_assert!(sum <= pool);
            let total: u64 = demands.iter().sum();
            if total <= pool {
                prop_assert_eq!(&shares, &demands);
            } else {
                // Work-conserving up to rounding.
                prop_assert!(sum + n + 1 >= pool);
            }
            let equal_share = pool / n;
            for (&a, &d) in shares.iter().zip(&demands) {
                prop_assert!(a <= d);
                // Nobody short of its demand sits below the equal share.
                prop_assert!(a + 2 >= d.min(equal_share));
            }
            // No connection below its demand while another gets more than
            // its share in proportion: among those short of their demand,
            // the extra above the equal share is proportional to demand.
            let short: Vec<(u64, u64)> = shares
                .iter()
                .zip(&demands)
                .filter(|(&a, &d)| a + 1 < d)
                .map(|(&a, &d)| (a, d))
                .collect();
            for &(a1, d1) in &short {
                for &(a2, d2) in &short {
                    let extra1 = a1 as f64 - pool as f64 / n as f64;
                    let extra2 = a2 as f64 - pool as f64 / n as f64;
                    prop_assert!((extra1 * d2 as f64 - extra2 * d1 as f64).abs()
                        <= 2.0 * (d1.max(d2) as f64) + 1e-6);
                    if d1 <= d2 {
                        prop_assert!(a1 <= a2 + 1);
                    }
                }
            }
        }
    }
}
