//! What one interval of the resource control loop reads and sets: the
//! pool under kernel memory pressure, whether the connections are read,
//! and which buffers are set now.
//!
//! The thesis (Section 3.1) re-divides the pool every interval from fresh
//! measurements and re-sizes every buffer whose assignment changed; it
//! says nothing of the loop's own cost. A live loop pays one socket read
//! per connection and one call per buffer set, so its worst interval is
//! one that reads every connection and sets every buffer. Three rules,
//! beyond the thesis, bound that interval without weakening the cut or
//! E-ATBT's inputs:
//!
//! * **A pressure cut does not read.** The cut scales the current
//!   assignments down (the pool shrinks, the allocator re-divides it over
//!   the demands it holds), so it needs no fresh measurement: the interval
//!   that cuts sets the shrinks and reads nothing, and the next interval
//!   reads again. Under pressure that lasts, the intervals alternate: one
//!   cuts without reading, the next reads and holds the pool, the next
//!   cuts again — the first cut (a quarter: at least 25 %)
//!   still lands within one interval, later ones every second interval
//!   instead of every interval, so that demands are never more than one
//!   interval old while the pool keeps falling.
//! * **A bound on buffer sets** in an interval that reads
//!   ([`set_budget`]: an eighth of the connections, at least
//!   [`MIN_SETS_PER_INTERVAL`]). Shrinks go first (they free memory; a
//!   growth set before the shrink that pays for it would overcommit the
//!   pool), then growths, each class most-moved first (relative to the
//!   buffer held); the rest wait for the next interval, where they are
//!   weighed again, and are counted. Not bounded: the shrinks of a
//!   pressure cut (the cut must land in its interval) and buffers never
//!   set (they are still autotuned, outside the pool's accounting).
//! * **A dead band** ([`needs_set`]): a buffer is set only when it moves by
//!   more than 1/16 of what it holds; one within 1/16 of its assignment
//!   holds at least 15/16 of the ρ̄·rtt E-ATBT asked for.
//!
//! Not done: keeping the last reading of a connection that moved no bytes
//! since. E-ATBT's inputs can change without data: the loss estimator's
//! window of intervals advances every interval, the peer's window
//! (W_max) opens with a pure window update, and whether a connection is
//! idle at all (nothing left in its send buffer) is itself read.

/// A buffer is set again only when it moves by more than 1/`CHANGE_DIVISOR`.
pub const CHANGE_DIVISOR: u64 = 16;
/// Connections per buffer set allowed in an interval that reads.
pub const SETS_DIVISOR: usize = 8;
/// The fewest buffer sets allowed in an interval that reads.
pub const MIN_SETS_PER_INTERVAL: usize = 128;

/// The pool for the next interval: a quarter less under kernel memory
/// pressure, else an eighth of the configured pool more, up to it.
pub fn next_pool(pool: u64, configured: u64, pressure: bool) -> u64 {
    if pressure {
        pool - pool / 4
    } else {
        pool.saturating_add(configured / 8).min(configured)
    }
}

/// Whether a buffer holding `applied` bytes (None: never set) is to be set
/// to `target`.
pub fn needs_set(applied: Option<u64>, target: u64) -> bool {
    match applied {
        None => true,
        Some(a) => a.abs_diff(target) > a / CHANGE_DIVISOR,
    }
}

/// Buffer sets allowed in an interval that reads, over `tracked`
/// connections.
pub fn set_budget(tracked: usize) -> usize {
    (tracked / SETS_DIVISOR).max(MIN_SETS_PER_INTERVAL)
}

/// What an interval does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntervalPlan {
    /// The pool for this interval (bytes).
    pub pool: u64,
    /// The pool was cut for pressure this interval.
    pub cut: bool,
    /// The connections are read this interval.
    pub read: bool,
}

/// The pool and the read schedule across intervals.
#[derive(Clone, Debug)]
pub struct PoolSchedule {
    configured: u64,
    pool: u64,
    last_read: bool,
}

impl PoolSchedule {
    pub fn new(configured: u64) -> PoolSchedule {
        PoolSchedule {
            configured,
            pool: configured,
            last_read: true,
        }
    }

    pub fn pool(&self) -> u64 {
        self.pool
    }

    /// The pool configured (what it regrows to).
    pub fn configured(&self) -> u64 {
        self.configured
    }

    /// Starts an interval: `pressure`, whether the kernel (or the cgroup)
    /// reports memory pressure now.
    pub fn begin_interval(&mut self, pressure: bool) -> IntervalPlan {
        let cut = pressure && self.last_read;
        if cut || !pressure {
            self.pool = next_pool(self.pool, self.configured, pressure);
        }
        let read = !cut;
        self.last_read = read;
        IntervalPlan {
            pool: self.pool,
            cut,
            read,
        }
    }
}

/// One buffer the loop would set: the bytes it holds now (None: never
/// set) and its new target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferMove {
    pub id: u64,
    pub applied: Option<u64>,
    pub target: u64,
}

impl BufferMove {
    fn shrinks(&self) -> bool {
        self.applied.is_some_and(|a| self.target < a)
    }

    /// The move relative to the buffer held.
    fn relative(&self) -> f64 {
        let applied = self.applied.unwrap_or(0).max(1);
        applied.abs_diff(self.target) as f64 / applied as f64
    }
}

/// The buffers to set this interval and how many moves wait.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetPlan {
    pub set: Vec<BufferMove>,
    /// Moves beyond the bound, left to the next interval.
    pub deferred: usize,
}

/// Chooses the buffers to set among `moves` (those within the dead band
/// are dropped): buffers never set, and every shrink when `cut` (a
/// pressure cut), without bound; then shrinks before growths, each most
/// moved first, up to `budget` sets in all.
pub fn plan_sets(moves: Vec<BufferMove>, budget: usize, cut: bool) -> SetPlan {
    let mut set = Vec::new();
    let mut shrinks = Vec::new();
    let mut growths = Vec::new();
    for m in moves {
        if !needs_set(m.applied, m.target) {
            continue;
        }
        if m.applied.is_none() || (cut && m.shrinks()) {
            set.push(m);
        } else if m.shrinks() {
            shrinks.push(m);
        } else {
            growths.push(m);
        }
    }
    let mut room = budget.saturating_sub(set.len());
    let mut deferred = 0;
    for mut class in [shrinks, growths] {
        if class.len() > room {
            // Most moved first: only the chosen ones need ordering.
            if room > 0 {
                class
                    .select_nth_unstable_by(room - 1, |a, b| b.relative().total_cmp(&a.relative()));
            }
            deferred += class.len() - room;
            class.truncate(room);
        }
        room -= class.len();
        set.extend(class);
    }
    SetPlan { set, deferred }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(id: u64, applied: u64, target: u64) -> BufferMove {
        BufferMove {
            id,
            applied: Some(applied),
            target,
        }
    }

    fn ids(plan: &SetPlan) -> Vec<u64> {
        let mut ids: Vec<u64> = plan.set.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn the_pool_is_cut_by_a_quarter_under_pressure_and_regrows() {
        let configured = 64 << 20;
        let cut = next_pool(configured, configured, true);
        assert!(cut <= configured - configured / 4);
        let twice = next_pool(cut, configured, true);
        assert!(twice <= cut - cut / 4);
        let mut pool = twice;
        for _ in 0..8 {
            pool = next_pool(pool, configured, false);
        }
        assert_eq!(pool, configured);
    }

    #[test]
    fn a_cut_does_not_read_and_the_next_interval_does() {
        let configured = 1 << 30;
        let mut schedule = PoolSchedule::new(configured);
        let quiet = schedule.begin_interval(false);
        assert_eq!(
            (quiet.pool, quiet.cut, quiet.read),
            (configured, false, true)
        );
        // Pressure: a quarter off at once, without reading.
        let cut = schedule.begin_interval(true);
        assert_eq!(
            (cut.pool, cut.cut, cut.read),
            (configured / 4 * 3, true, false)
        );
        // It lasts: the next interval reads and holds, the one after cuts.
        let held = schedule.begin_interval(true);
        assert_eq!((held.pool, held.cut, held.read), (cut.pool, false, true));
        let again = schedule.begin_interval(true);
        assert_eq!(again.pool, cut.pool - cut.pool / 4);
        assert!(again.cut && !again.read);
        // Over: read, and regrow by an eighth of the configured pool.
        let after = schedule.begin_interval(false);
        assert!(after.read && !after.cut);
        assert_eq!(after.pool, again.pool + configured / 8);
        assert_eq!(schedule.pool(), after.pool);
    }

    #[test]
    fn buffers_are_set_again_only_when_they_move() {
        assert!(needs_set(None, 4096));
        assert!(!needs_set(Some(65536), 65536 + 4096));
        assert!(needs_set(Some(65536), 65536 + 4097));
        assert!(needs_set(Some(65536), 32768));
    }

    #[test]
    fn the_bound_takes_shrinks_first_then_the_most_moved_growths() {
        let moves = vec![
            moved(1, 100_000, 200_000), // grows ×2
            moved(2, 100_000, 120_000), // grows 20 %
            moved(3, 100_000, 90_000),  // shrinks 10 %
            moved(4, 100_000, 300_000), // grows ×3
            moved(5, 100_000, 101_000), // within the dead band
            moved(6, 100_000, 50_000),  // shrinks half
        ];
        let plan = plan_sets(moves.clone(), 3, false);
        assert_eq!(ids(&plan), vec![3, 4, 6]);
        assert_eq!(plan.deferred, 2);
        let plan = plan_sets(moves.clone(), 4, false);
        assert_eq!(ids(&plan), vec![1, 3, 4, 6]);
        assert_eq!(plan.deferred, 1);
        // Shrinks alone beyond the bound: the larger first.
        let plan = plan_sets(moves.clone(), 1, false);
        assert_eq!(ids(&plan), vec![6]);
        assert_eq!(plan.deferred, 4);
        let all = plan_sets(moves, 10, false);
        assert_eq!(ids(&all), vec![1, 2, 3, 4, 6]);
        assert_eq!(all.deferred, 0);
    }

    #[test]
    fn a_cut_sets_every_shrink_and_new_buffers_are_never_deferred() {
        let mut moves: Vec<BufferMove> = (0..1000).map(|id| moved(id, 80_000, 60_000)).collect();
        moves.push(moved(1000, 60_000, 90_000));
        moves.push(BufferMove {
            id: 1001,
            applied: None,
            target: 60_000,
        });
        let plan = plan_sets(moves.clone(), 10, true);
        assert_eq!(plan.set.len(), 1001, "every shrink and the new buffer");
        assert!(plan.set.iter().all(|m| m.id != 1000));
        assert_eq!(plan.deferred, 1, "the growth waits");
        // Without a cut the same shrinks are bounded; the new one is not.
        let plan = plan_sets(moves, 10, false);
        assert_eq!(plan.set.len(), 10);
        assert!(plan.set.iter().any(|m| m.id == 1001));
        assert_eq!(plan.deferred, 992);
    }

    #[test]
    fn the_budget_is_an_eighth_of_the_connections_with_a_floor() {
        assert_eq!(set_budget(0), MIN_SETS_PER_INTERVAL);
        assert_eq!(set_budget(9872), 1234);
    }
}
