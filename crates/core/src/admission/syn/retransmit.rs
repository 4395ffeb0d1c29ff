//! Retransmitted SYNs seen: the same connection request (same 4-tuple)
//! again within a window — the clients' retransmissions after a drop that
//! the Abacus paper's Section 2 counts on (T_1, T_2, … after the first
//! SYN). Beyond the paper, for the gate's metrics only: no filter reads it.
//!
//! Bounded: a fixed table of [`RetransmitTable::SLOTS`] slots (16 bytes
//! each), allocated once; a request's key picks one slot, and a newer
//! request whose key picks the same slot overwrites it (the older one's
//! retransmission is then not recognised — an undercount, never an
//! overcount beyond a 64-bit key collision).

use crate::Nanos;

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    key: u64,
    /// When the key was last seen; `None` for an empty slot.
    seen: Option<Nanos>,
}

/// Recognises SYNs seen again within a window, in fixed memory.
#[derive(Clone, Debug)]
pub struct RetransmitTable {
    slots: Box<[Slot]>,
    window: Nanos,
}

impl RetransmitTable {
    /// Slots in the table (1 MiB).
    pub const SLOTS: usize = 1 << 16;

    /// A table that counts a SYN as retransmitted when its key was seen at
    /// most `window` earlier.
    pub fn new(window: Nanos) -> RetransmitTable {
        RetransmitTable {
            slots: vec![Slot::default(); Self::SLOTS].into_boxed_slice(),
            window,
        }
    }

    /// Records a SYN with `key` (a hash of its 4-tuple) at `now`; whether
    /// the same key was seen within the window before.
    pub fn on_syn(&mut self, key: u64, now: Nanos) -> bool {
        // Fibonacci hashing spreads keys whose low bits agree.
        let index = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize % self.slots.len();
        let slot = &mut self.slots[index];
        let again = slot.key == key
            && slot
                .seen
                .is_some_and(|seen| now >= seen && now - seen <= self.window);
        *slot = Slot {
            key,
            seen: Some(now),
        };
        again
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_key_within_the_window_is_a_retransmission() {
        let mut table = RetransmitTable::new(Nanos::from_secs(5));
        assert!(!table.on_syn(42, Nanos::from_secs(10)));
        assert!(table.on_syn(42, Nanos::from_secs(11)));
        assert!(table.on_syn(42, Nanos::from_secs(14)));
        // Too late: a new request.
        assert!(!table.on_syn(42, Nanos::from_secs(20)));
        assert!(!table.on_syn(43, Nanos::from_secs(20)));
    }

    #[test]
    fn a_colliding_newer_key_evicts_the_older() {
        let mut table = RetransmitTable::new(Nanos::from_secs(5));
        let index = |k: u64| (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) as usize;
        let a = 7u64;
        let b = (8u64..).find(|&k| index(k) == index(a)).unwrap();
        assert!(!table.on_syn(a, Nanos::ZERO));
        assert!(!table.on_syn(b, Nanos::from_secs(1)));
        // `a` was evicted by `b`: its retransmission goes unrecognised.
        assert!(!table.on_syn(a, Nanos::from_secs(2)));
        // Memory never grows: a million distinct keys, the same table.
        for key in 0..1_000_000u64 {
            table.on_syn(key, Nanos::from_secs(3));
        }
        assert_eq!(table.slots.len(), RetransmitTable::SLOTS);
    }
}
