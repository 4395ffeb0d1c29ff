//! Proxy resource management (Okamoto 2003, the proxy thesis): socket
//! buffers sized per connection and idle persistent connections reclaimed
//! when resources run short.
//!
//! * [`send_buffer`] — E-ATBT: send buffers from expected throughput, max-min
//!   with proportional re-assignment, and the up/down coupling (Sections
//!   3.1.1 and 3.1.3).
//! * [`receive_buffer`] — receive buffers from their peak utilization and
//!   the receive rate (Section 3.1.2).
//! * [`loss`] — each connection's loss estimate for E-ATBT, from the
//!   sender's counters.
//! * [`connections`] — the persistent-connection list, thresholds over
//!   several resources, idle-buffer shrinking (Section 3.2).
//! * [`interval`] — what one interval of a live loop reads and sets: the
//!   pool cut under memory pressure, and a bound on buffer sets.

pub mod connections;
pub mod interval;
pub mod loss;
pub mod receive_buffer;
pub mod send_buffer;

pub use connections::{
    ConnectionManager, ConnectionManagerParams, Resource, ResourceUsage, Threshold,
};
pub use interval::{
    needs_set, next_pool, plan_sets, set_budget, BufferMove, IntervalPlan, PoolSchedule, SetPlan,
};
pub use loss::{LossEstimator, LossEstimatorParams};
pub use receive_buffer::{
    IntervalObservation, ReceiveBufferTuner, ReceiveDecision, ReceiveTunerParams,
};
pub use send_buffer::{
    max_min_proportional, CouplingParams, Occupancy, SendBufferAllocator, SendBufferError,
};
