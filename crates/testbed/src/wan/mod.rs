//! The WAN emulator: per-client delay, jitter, loss and bottleneck rate on
//! the router of the testbed, through NFQUEUE verdicts on its FORWARD hook.
//!
//! The Certes testbed put a DummyNet box between its clients and Apache;
//! `netem` would do the same on Linux, but it is not available everywhere
//! (not on the machines this project runs on). This emulator needs only
//! iptables with NFQUEUE: the router's forwarded packets are queued to user
//! space, held for their delay and accepted at their release instant.
//!
//! Split the smoltcp / quinn-proto way:
//!
//! * [`link`] — the sans-IO [`Link`]: given arrival time, length and a
//!   seeded random generator, a packet's [`Fate`] (release instant or drop
//!   reason). All the emulation logic, unit-tested with explicit time.
//! * [`emulator`] — the driver: the queue, a min-heap of held packets, a
//!   timerfd for precise wake-ups, batched verdicts, and [`WanStats`]
//!   (including the kernel overflow counters that tell whether every packet
//!   really went through the emulator).
//! * [`rules`] — the iptables rule that feeds the queue, removed on drop.
//! * [`prefix`] — client address prefixes that select a link.
//! * [`clock`] — `CLOCK_MONOTONIC` as `Nanos`, and the timerfd.
//!
//! Typical use, on a thread that entered the router namespace:
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use vantage_testbed::wan::{Emulator, ForwardQueueRule, LinkConfig, LinkRule, WanConfig};
//!
//! let link = LinkConfig { delay_ms: 25.0, ..Default::default() };
//! let config = WanConfig::new(0, vec![LinkRule::symmetric("10.78.0.0/16".parse()?, link)]);
//! let emulator = Emulator::bind(&config)?; // bind first: no packet waits for nobody
//! let _rule = ForwardQueueRule::install(config.queue_num)?;
//! let stop = AtomicBool::new(false); // set from another thread or a signal handler
//! let stats = emulator.run(&stop, 42)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod clock;
pub mod emulator;
pub mod link;
pub mod prefix;
pub mod router;
pub mod rules;

pub use emulator::{
    run, DirectionStats, Emulator, LinkRule, LinkStats, LossControl, WanConfig, WanError, WanStats,
};
pub use link::{ConfigError, DropReason, Fate, JitterDistribution, Link, LinkConfig, LinkCounters};
pub use prefix::ClientPrefix;
pub use router::RouterEmulator;
pub use rules::{ForwardQueueRule, RuleError};
