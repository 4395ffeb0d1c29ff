//! Connection management (proxy thesis, Section 3.2, Figure 4).
//!
//! Idle persistent connections wait in a list in the order they went idle
//! (appended at the tail); one that is reused, or closed by its persistent
//! timer T_p, leaves the list. Once per interval the manager compares the
//! resources in use — descriptors, socket-buffer memory, connections —
//! with their thresholds; when any one reaches its high mark it closes
//! idle connections, oldest first. The buffers of an idle connection are
//! shrunk as its idle time grows (halved every `buffer_half_life`, down to
//! `min_idle_buffer`), since it is ever more likely to be closed.
//!
//! Beyond the thesis, for operators: a connection idle for less than
//! `min_idle_age` is never closed (RFC 9112 §9.6: a client may be sending
//! a request as the server closes); closing continues until every resource
//! is back under its low mark (hysteresis), and at most
//! `max_closes_per_interval` connections are closed per interval.
//!
//! The list holds at most `max_idle` entries: marking one more idle evicts
//! the oldest, which the caller must close.
//!
//! A manager made with [`ConnectionManagerParams::shrink_only`] closes
//! nothing and only ages its idle list for the shrinking: a proxy keeps one
//! for the connections it must never close for resources (its pooled
//! upstream connections), so that one rule shrinks the idle buffers of
//! both kinds. A separate instance rather than a kind in one list: the
//! close decision walks the list oldest first, and entries it may not
//! close would have to be skipped on every walk; the thresholds count
//! the resources of the connections it may close.

use std::collections::{BTreeMap, HashMap};

use crate::{Nanos, OutOfRange};

/// The resources watched, each with its own thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Descriptors,
    SocketBufferBytes,
    Connections,
}

/// Amounts in use of each resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceUsage {
    pub descriptors: u64,
    pub socket_buffer_bytes: u64,
    pub connections: u64,
}

impl ResourceUsage {
    fn get(&self, resource: Resource) -> u64 {
        match resource {
            Resource::Descriptors => self.descriptors,
            Resource::SocketBufferBytes => self.socket_buffer_bytes,
            Resource::Connections => self.connections,
        }
    }
}

/// High and low marks of one resource: closing starts when usage reaches
/// `high` and goes on until it is at or below `low`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threshold {
    pub high: u64,
    pub low: u64,
}

/// The manager's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConnectionManagerParams {
    pub descriptors: Threshold,
    pub socket_buffer_bytes: Threshold,
    pub connections: Threshold,
    /// T_p: an idle connection is closed after this long (None: never).
    pub persistent_timeout: Option<Nanos>,
    /// No connection idle for less than this is closed for resources.
    pub min_idle_age: Nanos,
    pub max_closes_per_interval: usize,
    /// Idle buffers halve every this long (None: no shrinking).
    pub buffer_half_life: Option<Nanos>,
    pub min_idle_buffer: u64,
    /// Cap on the idle list.
    pub max_idle: usize,
}

impl ConnectionManagerParams {
    pub fn validate(&self) -> Result<(), OutOfRange> {
        for (name, t) in [
            ("descriptor thresholds", self.descriptors),
            ("socket buffer thresholds", self.socket_buffer_bytes),
            ("connection thresholds", self.connections),
        ] {
            OutOfRange::check(
                t.low <= t.high,
                name,
                "low ≤ high",
                format!("{} / {}", t.low, t.high),
            )?;
        }
        OutOfRange::check(self.max_idle > 0, "max_idle", "at least 1", self.max_idle)?;
        OutOfRange::check(
            self.buffer_half_life != Some(Nanos::ZERO),
            "buffer_half_life",
            "positive",
            "0",
        )
    }

    /// Settings that close nothing — no mark is ever reached, no
    /// persistent timer, no closes per interval — and shrink idle buffers
    /// (halved every `buffer_half_life`, down to `min_idle_buffer`).
    pub fn shrink_only(
        buffer_half_life: Nanos,
        min_idle_buffer: u64,
        max_idle: usize,
    ) -> ConnectionManagerParams {
        let never = Threshold {
            high: u64::MAX,
            low: u64::MAX,
        };
        ConnectionManagerParams {
            descriptors: never,
            socket_buffer_bytes: never,
            connections: never,
            persistent_timeout: None,
            min_idle_age: Nanos::ZERO,
            max_closes_per_interval: 0,
            buffer_half_life: Some(buffer_half_life),
            min_idle_buffer,
            max_idle,
        }
    }

    fn threshold(&self, resource: Resource) -> Threshold {
        match resource {
            Resource::Descriptors => self.descriptors,
            Resource::SocketBufferBytes => self.socket_buffer_bytes,
            Resource::Connections => self.connections,
        }
    }
}

const RESOURCES: [Resource; 3] = [
    Resource::Descriptors,
    Resource::SocketBufferBytes,
    Resource::Connections,
];

#[derive(Clone, Copy, Debug)]
struct IdleEntry {
    since: Nanos,
    sequence: u64,
    buffer_bytes: u64,
}

/// The persistent-connection list and the close decisions.
#[derive(Clone, Debug)]
pub struct ConnectionManager {
    params: ConnectionManagerParams,
    order: BTreeMap<(Nanos, u64), u64>,
    entries: HashMap<u64, IdleEntry>,
    next_sequence: u64,
    reclaiming: bool,
}

impl ConnectionManager {
    pub fn new(params: ConnectionManagerParams) -> Result<Self, OutOfRange> {
        params.validate()?;
        Ok(ConnectionManager {
            params,
            order: BTreeMap::new(),
            entries: HashMap::new(),
            next_sequence: 0,
            reclaiming: false,
        })
    }

    /// Connection `id`, holding `buffer_bytes` of socket buffer, finished a
    /// transfer at `now`: it goes to the tail of the list. At the cap the
    /// oldest entry is evicted and returned; the caller closes it.
    pub fn mark_idle(&mut self, id: u64, now: Nanos, buffer_bytes: u64) -> Option<u64> {
        self.remove(id);
        let evicted = if self.entries.len() >= self.params.max_idle {
            self.pop_oldest()
        } else {
            None
        };
        let entry = IdleEntry {
            since: now,
            sequence: self.next_sequence,
            buffer_bytes,
        };
        self.next_sequence += 1;
        self.order.insert((entry.since, entry.sequence), id);
        self.entries.insert(id, entry);
        evicted
    }

    /// The connection is reused (or closed by its peer): it leaves the list.
    /// Returns whether it was idle.
    pub fn remove(&mut self, id: u64) -> bool {
        match self.entries.remove(&id) {
            Some(entry) => {
                self.order.remove(&(entry.since, entry.sequence));
                true
            }
            None => false,
        }
    }

    /// The connection is reused: it leaves the list, and the buffer it held
    /// when it went idle is returned (None if it was not idle). Shrinking
    /// is for connections ever more likely to be closed; one in use again
    /// gets that buffer back at once rather than regrow from its decayed
    /// size over the next intervals' measurements.
    pub fn reuse(&mut self, id: u64) -> Option<u64> {
        let entry = self.entries.remove(&id)?;
        self.order.remove(&(entry.since, entry.sequence));
        Some(entry.buffer_bytes)
    }

    /// An idle connection's buffer was re-sized while the last response
    /// still drained from it (a sender's list entry starts when the
    /// response is handed to the socket, its transfer ends when the data
    /// is acknowledged): the size it is given back on reuse, and the one
    /// its decay starts from, is the new one; its place in the list and
    /// its idle age stay. Returns whether it was idle.
    pub fn update_idle_buffer(&mut self, id: u64, buffer_bytes: u64) -> bool {
        match self.entries.get_mut(&id) {
            Some(entry) => {
                entry.buffer_bytes = buffer_bytes;
                true
            }
            None => false,
        }
    }

    pub fn is_idle(&self, id: u64) -> bool {
        self.entries.contains_key(&id)
    }

    pub fn idle_count(&self) -> usize {
        self.entries.len()
    }

    /// Whether the manager is closing connections (between a high mark
    /// being reached and every resource being back under its low mark).
    pub fn is_reclaiming(&self) -> bool {
        self.reclaiming
    }

    /// The socket buffer an idle connection should keep at `now`.
    pub fn idle_buffer_bytes(&self, id: u64, now: Nanos) -> Option<u64> {
        let entry = self.entries.get(&id)?;
        Some(self.decayed(entry, now))
    }

    /// When the oldest idle connection's persistent timer fires.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let timeout = self.params.persistent_timeout?;
        let (&(since, _), _) = self.order.iter().next()?;
        Some(since + timeout)
    }

    /// Removes and returns the connections whose persistent timer has
    /// expired at `now`, oldest first; the caller closes them.
    pub fn expire(&mut self, now: Nanos) -> Vec<u64> {
        let mut expired = Vec::new();
        let Some(timeout) = self.params.persistent_timeout else {
            return expired;
        };
        while let Some((&(since, _), _)) = self.order.iter().next() {
            if since + timeout > now {
                break;
            }
            if let Some(id) = self.pop_oldest() {
                expired.push(id);
            }
        }
        expired
    }

    /// The per-interval decision: given the resources in use at `now`,
    /// the idle connections to close, oldest first (already removed from
    /// the list). Each close is counted as freeing one descriptor, one
    /// connection and the connection's (decayed) buffer.
    pub fn connections_to_close(&mut self, now: Nanos, usage: ResourceUsage) -> Vec<u64> {
        let params = self.params;
        if RESOURCES
            .iter()
            .any(|&r| usage.get(r) >= params.threshold(r).high)
        {
            self.reclaiming = true;
        }
        let mut closing = Vec::new();
        if !self.reclaiming {
            return closing;
        }
        let mut projected = usage;
        let above_low = |u: &ResourceUsage| {
            RESOURCES
                .iter()
                .any(|&r| u.get(r) > params.threshold(r).low)
        };
        while above_low(&projected) && closing.len() < params.max_closes_per_interval {
            let Some((&key, &id)) = self.order.iter().next() else {
                break;
            };
            if now.saturating_sub(key.0) < params.min_idle_age {
                break;
            }
            self.order.remove(&key);
            if let Some(entry) = self.entries.remove(&id) {
                let freed = self.decayed(&entry, now);
                projected.descriptors = projected.descriptors.saturating_sub(1);
                projected.connections = projected.connections.saturating_sub(1);
                projected.socket_buffer_bytes = projected.socket_buffer_bytes.saturating_sub(freed);
            }
            closing.push(id);
        }
        if !above_low(&projected) {
            self.reclaiming = false;
        }
        closing
    }

    fn decayed(&self, entry: &IdleEntry, now: Nanos) -> u64 {
        let Some(half_life) = self.params.buffer_half_life else {
            return entry.buffer_bytes;
        };
        let halvings = now.saturating_sub(entry.since).as_nanos() / half_life.as_nanos();
        let kept = if halvings >= 64 {
            0
        } else {
            entry.buffer_bytes >> halvings
        };
        kept.max(self.params.min_idle_buffer.min(entry.buffer_bytes))
    }

    fn pop_oldest(&mut self) -> Option<u64> {
        let (&key, &id) = self.order.iter().next()?;
        self.order.remove(&key);
        self.entries.remove(&id);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params() -> ConnectionManagerParams {
        ConnectionManagerParams {
            descriptors: Threshold {
                high: 1_000,
                low: 900,
            },
            socket_buffer_bytes: Threshold {
                high: 1 << 30,
                low: 1 << 29,
            },
            connections: Threshold { high: 10, low: 7 },
            persistent_timeout: Some(Nanos::from_secs(15)),
            min_idle_age: Nanos::from_secs(1),
            max_closes_per_interval: 100,
            buffer_half_life: Some(Nanos::from_secs(2)),
            min_idle_buffer: 1_024,
            max_idle: 1_000,
        }
    }

    fn usage(connections: u64) -> ResourceUsage {
        ResourceUsage {
            descriptors: connections,
            socket_buffer_bytes: 0,
            connections,
        }
    }

    #[test]
    fn closes_the_oldest_first_until_under_the_low_mark() {
        let mut m = ConnectionManager::new(params()).unwrap();
        for id in 0..6 {
            m.mark_idle(id, Nanos::from_secs(id), 0);
        }
        m.remove(1); // reused
                     // 10 connections reach the high mark; close down to 7.
        let closed = m.connections_to_close(Nanos::from_secs(10), usage(10));
        assert_eq!(closed, vec![0, 2, 3]);
        assert!(!m.is_reclaiming());
        assert_eq!(m.idle_count(), 2);
    }

    #[test]
    fn below_the_high_mark_nothing_is_closed() {
        let mut m = ConnectionManager::new(params()).unwrap();
        m.mark_idle(1, Nanos::ZERO, 0);
        assert!(m
            .connections_to_close(Nanos::from_secs(10), usage(9))
            .is_empty());
    }

    #[test]
    fn any_one_resource_triggers_closing() {
        let mut m = ConnectionManager::new(params()).unwrap();
        m.mark_idle(1, Nanos::ZERO, 1 << 28);
        m.mark_idle(2, Nanos::ZERO, 1 << 28);
        let busy = ResourceUsage {
            descriptors: 2,
            socket_buffer_bytes: 1 << 30,
            connections: 2,
        };
        // Idle since 0, now 1 s (< one half-life): each frees 2^28 bytes;
        // 2^30 − 2·2^28 = 2^29 ≤ low.
        let closed = m.connections_to_close(Nanos::from_secs(1), busy);
        assert_eq!(closed, vec![1, 2]);
    }

    #[test]
    fn young_idle_connections_are_spared_and_reclaiming_continues() {
        let mut m = ConnectionManager::new(params()).unwrap();
        m.mark_idle(1, Nanos::from_millis(9_500), 0);
        assert!(m
            .connections_to_close(Nanos::from_secs(10), usage(10))
            .is_empty());
        assert!(m.is_reclaiming());
        // Still above the low mark (8 > 7) though under the high one.
        assert_eq!(
            m.connections_to_close(Nanos::from_secs(11), usage(8)),
            vec![1]
        );
    }

    #[test]
    fn closes_at_most_the_bound_per_interval() {
        let mut p = params();
        p.max_closes_per_interval = 2;
        let mut m = ConnectionManager::new(p).unwrap();
        for id in 0..5 {
            m.mark_idle(id, Nanos::ZERO, 0);
        }
        assert_eq!(
            m.connections_to_close(Nanos::from_secs(5), usage(10)),
            vec![0, 1]
        );
        assert!(m.is_reclaiming());
    }

    #[test]
    fn persistent_timer_expires_in_order() {
        let mut m = ConnectionManager::new(params()).unwrap();
        m.mark_idle(7, Nanos::from_secs(1), 0);
        m.mark_idle(8, Nanos::from_secs(2), 0);
        m.mark_idle(7, Nanos::from_secs(3), 0); // reused and idle again
        assert_eq!(m.poll_timeout(), Some(Nanos::from_secs(17)));
        assert_eq!(m.expire(Nanos::from_secs(17)), vec![8]);
        assert_eq!(m.expire(Nanos::from_secs(30)), vec![7]);
        assert_eq!(m.poll_timeout(), None);
    }

    #[test]
    fn idle_buffers_halve_with_idle_time() {
        let mut m = ConnectionManager::new(params()).unwrap();
        m.mark_idle(1, Nanos::ZERO, 65_536);
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(1)), Some(65_536));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(2)), Some(32_768));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(9)), Some(4_096));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(600)), Some(1_024));
    }

    #[test]
    fn a_reused_connection_gets_back_what_it_held_before_idling() {
        let mut m = ConnectionManager::new(params()).unwrap();
        m.mark_idle(1, Nanos::ZERO, 65_536);
        m.mark_idle(2, Nanos::from_secs(1), 8_192);
        // Idle 15 s at a half-life of 2 s: down to 512 B, floored at 1,024.
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(15)), Some(1_024));
        assert_eq!(m.reuse(1), Some(65_536));
        assert!(!m.is_idle(1));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(15)), None);
        assert_eq!(m.reuse(1), None, "no longer idle");
        assert_eq!(m.idle_count(), 1);
        // The list's order is intact: the other one is the oldest.
        assert_eq!(
            m.connections_to_close(Nanos::from_secs(16), usage(10)),
            vec![2]
        );
    }

    #[test]
    fn a_buffer_re_sized_while_draining_is_the_one_given_back() {
        let mut m = ConnectionManager::new(params()).unwrap();
        m.mark_idle(1, Nanos::ZERO, 8_192);
        m.mark_idle(2, Nanos::from_secs(1), 8_192);
        assert!(m.update_idle_buffer(1, 65_536));
        assert!(!m.update_idle_buffer(3, 65_536), "not idle");
        // The decay starts from the new size, at the same idle age.
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(2)), Some(32_768));
        // Its place in the list is kept: still the oldest.
        assert_eq!(
            m.connections_to_close(Nanos::from_secs(16), usage(10)),
            vec![1, 2]
        );
        let mut m = ConnectionManager::new(params()).unwrap();
        m.mark_idle(1, Nanos::ZERO, 8_192);
        m.update_idle_buffer(1, 65_536);
        assert_eq!(m.reuse(1), Some(65_536));
    }

    #[test]
    fn a_shrink_only_manager_shrinks_and_never_closes() {
        let p = ConnectionManagerParams::shrink_only(Nanos::from_secs(5), 4_944, 1_000);
        let mut m = ConnectionManager::new(p).unwrap();
        for id in 0..3 {
            assert_eq!(m.mark_idle(id, Nanos::from_secs(id), 262_144), None);
        }
        let exhausted = ResourceUsage {
            descriptors: u64::MAX - 1,
            socket_buffer_bytes: u64::MAX - 1,
            connections: u64::MAX - 1,
        };
        for second in 0..600 {
            assert!(m
                .connections_to_close(Nanos::from_secs(second), exhausted)
                .is_empty());
        }
        assert!(!m.is_reclaiming());
        assert!(m.expire(Nanos::from_secs(3_600)).is_empty());
        assert_eq!(m.poll_timeout(), None);
        assert_eq!(m.idle_count(), 3);
        // Idle since 1 s: whole before one half-life, then halved per
        // half-life, never below the floor.
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(5)), Some(262_144));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(6)), Some(131_072));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(16)), Some(32_768));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(600)), Some(4_944));
        // Reused: it leaves the list and no longer shrinks; idle again, it
        // starts over from the buffer it then holds.
        assert!(m.remove(1));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(20)), None);
        m.mark_idle(1, Nanos::from_secs(20), 65_536);
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(24)), Some(65_536));
        assert_eq!(m.idle_buffer_bytes(1, Nanos::from_secs(25)), Some(32_768));
        // A buffer already below the floor is kept as it is.
        m.mark_idle(9, Nanos::from_secs(20), 2_000);
        assert_eq!(m.idle_buffer_bytes(9, Nanos::from_secs(600)), Some(2_000));
    }

    #[test]
    fn a_shrink_only_manager_validates() {
        assert!(
            ConnectionManager::new(ConnectionManagerParams::shrink_only(Nanos::ZERO, 1, 1))
                .is_err()
        );
        assert!(
            ConnectionManager::new(ConnectionManagerParams::shrink_only(Nanos(1), 1, 0)).is_err()
        );
    }

    #[test]
    fn the_cap_evicts_the_oldest() {
        let mut p = params();
        p.max_idle = 2;
        let mut m = ConnectionManager::new(p).unwrap();
        assert_eq!(m.mark_idle(1, Nanos::ZERO, 0), None);
        assert_eq!(m.mark_idle(2, Nanos::ZERO, 0), None);
        assert_eq!(m.mark_idle(3, Nanos::ZERO, 0), Some(1));
        assert_eq!(m.idle_count(), 2);
    }

    proptest! {
        #[test]
        fn closes_only_old_enough_idle_connections_in_age_order(
            ops in proptest::collection::vec((0u64..20, 0u8..3, 0u64..2_000), 1..200),
            connections in 0u64..20,
        ) {
            let p = params();
            let mut m = ConnectionManager::new(p).unwrap();
            let mut now = Nanos::ZERO;
            let mut idle_since: HashMap<u64, Nanos> = HashMap::new();
            for (id, op, step_ms) in ops {
                now += Nanos::from_millis(step_ms);
                match op {
                    0 => {
                        if let Some(evicted) = m.mark_idle(id, now, 4_096) {
                            idle_since.remove(&evicted);
                        }
                        idle_since.insert(id, now);
                    }
                    1 => {
                        prop_assert_eq!(m.remove(id), idle_since.remove(&id).is_some());
                    }
                    _ => {
                        let closed = m.connections_to_close(now, usage(connections));
                        prop_assert!(closed.len() <= p.max_closes_per_interval);
                        let mut last = Nanos::ZERO;
                        for id in closed {
                            let since = idle_since.remove(&id);
                            prop_assert!(since.is_some());
                            let since = since.unwrap_or_default();
                            prop_assert!(now.saturating_sub(since) >= p.min_idle_age);
                            prop_assert!(since >= last);
                            last = since;
                        }
                    }
                }
                prop_assert_eq!(m.idle_count(), idle_since.len());
                prop_assert!(m.idle_count() <= p.max_idle);
            }
        }
    }
}
