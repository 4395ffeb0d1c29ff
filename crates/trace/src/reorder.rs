//! Capture timestamps out of file order (interfaces merged unsorted, a
//! clock stepped back) are put back in time order within a bounded window,
//! so a packet is never stamped later than what it caused (clamping it
//! instead makes round-trip samples, and the propagation built on them,
//! come out as zero).
//!
//! The window holds [`ReorderBuffer::capacity`] packets (copies; their
//! buffers are reused): a packet leaves once that many newer ones arrived,
//! earliest first, ties in file order. A packet stamped earlier than one
//! already released cannot be placed: it is released as it is, counted in
//! [`ReorderStats::overflow`], and the connection table clamps it.

use std::collections::VecDeque;

use serde::Serialize;
use vantage_core::Nanos;

use crate::file::Packet;
use crate::LinkType;

/// Packets held by default: enough for interfaces merged a few
/// milliseconds apart at 100 k packets/s, at most 1024 buffers of memory.
pub const DEFAULT_REORDER_WINDOW: usize = 1024;

/// A packet copied out of the reader's buffer.
#[derive(Clone, Debug)]
pub struct OwnedPacket {
    pub timestamp: Nanos,
    pub link_type: LinkType,
    pub interface: u32,
    pub original_len: u32,
    pub offset: u64,
    pub data: Vec<u8>,
}

impl OwnedPacket {
    /// The packet, borrowed as the reader hands it out.
    pub fn packet(&self) -> Packet<'_> {
        Packet {
            timestamp: self.timestamp,
            link_type: self.link_type,
            interface: self.interface,
            original_len: self.original_len,
            data: &self.data,
            offset: self.offset,
        }
    }
}

/// What the reordering did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReorderStats {
    /// Packets stamped earlier than one before them in the file, put back
    /// in order.
    pub reordered: u64,
    /// Packets stamped earlier than one already released (beyond the
    /// window): released out of order.
    pub overflow: u64,
}

/// The bounded time-order window over any item (see the module docs):
/// items leave earliest first, ties in arrival order.
///
/// Held sorted in a ring: an item in time order (the common case) goes to
/// the back in O(1); one stamped earlier is inserted after every item
/// stamped at or before it, which is the order a heap keyed on (time,
/// arrival) gives.
pub struct TimeOrder<T> {
    capacity: usize,
    queue: VecDeque<(Nanos, T)>,
    latest_pushed: Option<Nanos>,
    latest_released: Option<Nanos>,
    stats: ReorderStats,
}

impl<T> TimeOrder<T> {
    /// A window of `capacity` items (at least 1).
    pub fn new(capacity: usize) -> TimeOrder<T> {
        TimeOrder {
            capacity: capacity.max(1),
            queue: VecDeque::new(),
            latest_pushed: None,
            latest_released: None,
            stats: ReorderStats::default(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn stats(&self) -> ReorderStats {
        self.stats
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether an item must leave before the next one comes in.
    pub fn is_full(&self) -> bool {
        self.queue.len() >= self.capacity
    }

    /// Puts an item stamped `timestamp` in.
    pub fn push(&mut self, timestamp: Nanos, item: T) {
        if self
            .latest_released
            .is_some_and(|released| timestamp < released)
        {
            self.stats.overflow += 1;
        }
        match self.latest_pushed {
            Some(latest) if timestamp < latest => {
                self.stats.reordered += 1;
                let at = self.queue.partition_point(|(held, _)| *held <= timestamp);
                self.queue.insert(at, (timestamp, item));
            }
            _ => {
                self.latest_pushed = Some(timestamp);
                self.queue.push_back((timestamp, item));
            }
        }
    }

    /// The earliest item held; `None` when empty.
    pub fn pop(&mut self) -> Option<(Nanos, T)> {
        let (timestamp, item) = self.queue.pop_front()?;
        self.latest_released = Some(
            self.latest_released
                .map_or(timestamp, |latest| latest.max(timestamp)),
        );
        Some((timestamp, item))
    }
}

/// The bounded time-order window of whole packets (see the module docs).
pub struct ReorderBuffer {
    order: TimeOrder<usize>,
    slots: Vec<OwnedPacket>,
    free: Vec<usize>,
}

impl ReorderBuffer {
    /// A window of `capacity` packets (at least 1).
    pub fn new(capacity: usize) -> ReorderBuffer {
        ReorderBuffer {
            order: TimeOrder::new(capacity),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.order.capacity()
    }

    pub fn stats(&self) -> ReorderStats {
        self.order.stats()
    }

    /// Packets held.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Whether a packet must leave before the next one comes in.
    pub fn is_full(&self) -> bool {
        self.order.is_full()
    }

    /// Copies a packet in.
    pub fn push(&mut self, packet: &Packet<'_>) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(OwnedPacket {
                    timestamp: Nanos::ZERO,
                    link_type: LinkType(0),
                    interface: 0,
                    original_len: 0,
                    offset: 0,
                    data: Vec::new(),
                });
                self.slots.len() - 1
            }
        };
        let owned = &mut self.slots[slot];
        owned.timestamp = packet.timestamp;
        owned.link_type = packet.link_type;
        owned.interface = packet.interface;
        owned.original_len = packet.original_len;
        owned.offset = packet.offset;
        owned.data.clear();
        owned.data.extend_from_slice(packet.data);
        self.order.push(packet.timestamp, slot);
    }

    /// The earliest packet held (its buffer is reused by the next
    /// [`push`](Self::push)); `None` when empty.
    pub fn pop(&mut self) -> Option<&OwnedPacket> {
        let (_, slot) = self.order.pop()?;
        self.free.push(slot);
        Some(&self.slots[slot])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(micros: u64, data: &[u8]) -> Packet<'_> {
        Packet {
            timestamp: Nanos::from_micros(micros),
            link_type: LinkType::RAW,
            interface: 0,
            original_len: data.len() as u32,
            data,
            offset: micros,
        }
    }

    fn run(capacity: usize, times: &[u64]) -> (Vec<u64>, ReorderStats) {
        let mut buffer = ReorderBuffer::new(capacity);
        let mut out = Vec::new();
        for &t in times {
            if buffer.is_full() {
                out.push(buffer.pop().map(|p| p.offset).unwrap_or_default());
            }
            buffer.push(&packet(t, &[t as u8]));
        }
        while let Some(p) = buffer.pop() {
            assert_eq!(p.data, vec![p.offset as u8]);
            out.push(p.offset);
        }
        (out, buffer.stats())
    }

    #[test]
    fn packets_within_the_window_come_out_in_time_order() {
        let (out, stats) = run(4, &[10, 30, 20, 40, 35, 50]);
        assert_eq!(out, vec![10, 20, 30, 35, 40, 50]);
        assert_eq!(stats.reordered, 2);
        assert_eq!(stats.overflow, 0);
    }

    #[test]
    fn packets_older_than_the_window_are_counted_and_passed_on() {
        let (out, stats) = run(2, &[10, 20, 30, 40, 15]);
        assert_eq!(out, vec![10, 20, 30, 15, 40]);
        assert_eq!(stats.reordered, 1);
        assert_eq!(stats.overflow, 1);
    }

    proptest::proptest! {
        /// The sorted ring releases items exactly as a heap keyed on
        /// (time, arrival) would, with the same counts.
        #[test]
        fn time_order_releases_as_a_heap_would(
            capacity in 1usize..8,
            times in proptest::collection::vec(0u64..20, 0..60),
        ) {
            use std::cmp::Reverse;
            use std::collections::BinaryHeap;
            let mut order = TimeOrder::new(capacity);
            let mut heap = BinaryHeap::new();
            let (mut got, mut want) = (Vec::new(), Vec::new());
            for (arrival, &t) in times.iter().enumerate() {
                if order.is_full() {
                    got.push(order.pop().map(|(_, a)| a));
                    want.push(heap.pop().map(|Reverse((_, a))| a));
                }
                order.push(Nanos(t), arrival);
                heap.push(Reverse((Nanos(t), arrival)));
            }
            while let Some((_, a)) = order.pop() {
                got.push(Some(a));
            }
            while let Some(Reverse((_, a))) = heap.pop() {
                want.push(Some(a));
            }
            proptest::prop_assert_eq!(got, want);
        }
    }
}
