//! `vantage gate run`: binds the queues, installs the rules, runs one
//! [`QueueWorker`] thread per queue and, on the main thread, the interval
//! clock (counters, capacity measurement, metrics, log), until a signal.
//! The signals, ready file, readiness notification, descriptor reserve and
//! log file are the shared skeleton's ([`crate::daemon`]).
//!
//! Start-up order: build the filter, hold the descriptor reserve, open the
//! metrics socket, bind every queue (fail-open, 8 MiB forced receive
//! buffer, no `ENOBUFS`), then install the rules — so a SYN is never
//! queued to a queue nobody reads — then write the ready file (the pid),
//! tell systemd `READY=1`, open the log (append), start the workers.
//! Nothing demands root: each operation is tried and an `EPERM` is
//! explained (missing `CAP_NET_ADMIN`, or a queue bound by another
//! process).
//!
//! Signals only set flags, read here: SIGINT/SIGTERM stop (a second one
//! changes nothing: clean-up runs to its end), SIGHUP reloads the
//! configuration file, SIGUSR1 reopens the log. A reload parses and
//! validates the file; one that fails, or that changes more than the
//! `[filter]` parameters of the same kind and the listeners (queues,
//! backend, endpoint, log, dry run, kind, refill mode need a restart), is
//! refused and logged while the running configuration goes on; an
//! accepted one swaps the filter under its lock, between two batches, and
//! new listeners with [`GateRules::reload`] while the workers decide the
//! SYNs of old and new listeners both — no SYN passes unfiltered.
//!
//! At the end of every interval (at most once a second) [`GateRules::verify`]
//! checks the rules are all in place;
//! if they vanished (`vantage gate clean --force`, a firewall reload) the
//! gate says so, sets `vantage_gate_rules_intact` to 0 and stops with
//! [`GateError::RulesVanished`] (exit status
//! [`EXIT_RULES_VANISHED`](super::EXIT_RULES_VANISHED)).
//!
//! Shut-down order (a stop signal, an error, a worker's end): `STOPPING=1`,
//! release the descriptor reserve, remove the rules, so no new SYN is
//! queued; let each worker give a verdict to what is still arriving;
//! unbind the queues; write the last (short) interval; remove the ready
//! file. The rules and the ready file are guards: an error or a panic on
//! the main thread removes them too. Only `SIGKILL` leaves the rules — and
//! then `--queue-bypass` lets every SYN through until `vantage gate clean`.
//!
//! Every interval the main thread, for `refill_rate = "measure"`, reads
//! `PassiveOpens` and the listeners' accept queues ([`super::kernel`]),
//! feeds them to the sans-IO
//! [`CapacityEstimator`](vantage_core::admission::syn::CapacityEstimator)
//! and hands its estimate to the filter (`set_refill_rate`); then it takes
//! the filter's snapshot for the gauges and writes one log record.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vantage_core::admission::syn::{CapacityConfig, CapacityEstimator, FilterSnapshot};
use vantage_core::Nanos;
use vantage_sys::nfqueue::{NfqError, Queue};

use super::config::{GateConfig, Refill};
use super::cpu::{allowed_cpus, fanout_cpus, pin_current_thread};
use super::kernel::{read_accept_queue, read_passive_opens};
use super::log::{CapacityRecord, GateCounts, IntervalLog, IntervalRecord};
use super::metrics::GateMetrics;
use super::rules::{GateRules, RulesStatus};
use super::worker::{queue_config, Gate, QueueWorker, WorkerReport};
use super::GateError;
use crate::daemon::{
    connection_cap, descriptor_limit, notify, DescriptorReserve, NotifyState, ReadyFile, Signals,
};
use crate::metrics::{Format, Limits, MetricsServer, Render};
use vantage_sys::capabilities::{self, CAP_NET_ADMIN};

/// How long the main thread sleeps at most between looks at the flags and
/// the workers.
const TICK_POLL: Duration = Duration::from_millis(50);
/// After the rules are gone: how long a queue must stay quiet, and how long
/// the final drain may take at most.
const DRAIN_QUIET: Duration = Duration::from_millis(50);
const DRAIN_LIMIT: Duration = Duration::from_secs(1);
/// The rules are checked at the end of an interval, at most this often
/// (each check runs `nft` or `iptables`).
const VERIFY_EVERY: Duration = Duration::from_secs(1);

/// Options of one run beside the configuration.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Created (with the pid) once the queues are bound and the rules are
    /// in; removed on exit. One left by a killed gate is replaced.
    pub ready_file: Option<PathBuf>,
    /// The flags the signal handlers set (see [`Signals::register`]), or
    /// the caller.
    pub signals: Signals,
    /// The file a reload (SIGHUP) reads; without it a reload is refused.
    pub config_path: Option<PathBuf>,
    /// Start even when other gates' rules are in this network namespace.
    pub allow_stacking: bool,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RunSummary {
    pub duration_s: f64,
    pub intervals: u64,
    pub workers: Vec<WorkerReport>,
    pub totals: GateCounts,
}

/// The capacity measurement of `refill_rate = "measure"`.
struct Measurement {
    estimator: CapacityEstimator,
    failed_before: bool,
}

impl Measurement {
    fn measure(&mut self, gate: &Gate, metrics: Option<&GateMetrics>) -> Option<CapacityRecord> {
        let readings = read_passive_opens().and_then(|opens| {
            read_accept_queue(&gate.listeners().listeners).map(|queue| (opens, queue))
        });
        let (passive_opens, accept_queue) = match readings {
            Ok(r) => {
                self.failed_before = false;
                r
            }
            Err(e) => {
                if !self.failed_before {
                    eprintln!("vantage gate: capacity not measured this interval: {e}");
                }
                self.failed_before = true;
                return None;
            }
        };
        let interval = self
            .estimator
            .on_interval(gate.now(), passive_opens, accept_queue);
        if let Some(i) = interval {
            if let Err(e) = gate.set_refill_rate(i.estimate) {
                eprintln!("vantage gate: measured capacity not applied: {e}");
            }
        }
        if let Some(m) = metrics {
            m.set_capacity(accept_queue, passive_opens);
        }
        Some(CapacityRecord {
            passive_opens,
            accept_queue,
            interval,
        })
    }
}

struct WorkerHandle {
    queue_num: u16,
    thread: JoinHandle<Result<WorkerReport, GateError>>,
}

/// The filter's state for the gauges of a scrape. The one place a scrape
/// reads the filter: advanced to now, so an idle stretch shows the tokens
/// refilled rather than frozen at the last SYN.
fn filter_state_for_scrape(gate: &Gate) -> FilterSnapshot {
    gate.snapshot_at(gate.now())
}

/// A queue that could not be bound, with the reason an `EPERM` really has.
fn queue_error(queue: u16, source: NfqError) -> GateError {
    if source.raw_os_error() == Some(libc::EPERM) {
        if capabilities::holds(CAP_NET_ADMIN) {
            return GateError::QueueBusy { queue };
        }
        return GateError::MissingCapability {
            operation: format!("bind NFQUEUE queue {queue}"),
        };
    }
    GateError::Queue { queue, source }
}

/// Why a new configuration cannot replace `running` without a restart.
fn reload_refusal(running: &GateConfig, new: &GateConfig) -> Option<String> {
    let mut changed = Vec::new();
    if running.backend != new.backend {
        changed.push("backend");
    }
    if running.queue != new.queue || running.queues != new.queues {
        changed.push("queue/queues");
    }
    if running.queue_maxlen != new.queue_maxlen {
        changed.push("queue_maxlen");
    }
    if running.reject_mark != new.reject_mark {
        changed.push("reject_mark");
    }
    if running.interval != new.interval {
        changed.push("interval_ms");
    }
    if running.dry_run != new.dry_run {
        changed.push("dry_run");
    }
    if running.busy_poll != new.busy_poll || running.cpu_fanout != new.cpu_fanout {
        changed.push("busy_poll_us/cpu_fanout");
    }
    if running.metrics_listen != new.metrics_listen {
        changed.push("metrics_listen");
    }
    if running.log != new.log {
        changed.push("log");
    }
    if running.filter.kind != new.filter.kind {
        changed.push("filter.kind");
    }
    if running.filter.refill != new.filter.refill {
        changed.push("filter.refill_rate (fixed or \"measure\")");
    }
    (!changed.is_empty())
        .then(|| format!("{} changed: restart the gate for that", changed.join(", ")))
}

/// Reads `path` again and, if it is valid and changes only the filter's
/// parameters and the listeners, swaps the filter and, when they changed,
/// the listeners and the rules. Returns the new configuration, or why
/// not.
///
/// No moment unfiltered: while the rules are replaced the workers decide
/// the SYNs of the old and the new listeners both; only once the new
/// rules are in do they drop the old ones. On error the old rules and
/// listeners stay.
fn reload(
    path: &Path,
    running: &GateConfig,
    gate: &Gate,
    rules: &mut GateRules,
    measurement: &mut Option<Measurement>,
) -> Result<GateConfig, String> {
    let new = GateConfig::load(path).map_err(|e| e.to_string())?;
    if let Some(refusal) = reload_refusal(running, &new) {
        return Err(refusal);
    }
    let filter = new.filter.build().map_err(|e| format!("filter: {e}"))?;
    let estimator = match measurement {
        Some(_) => Some(
            CapacityEstimator::new(CapacityConfig::new(new.filter.params.refill_rate))
                .map_err(|e| format!("filter: {e}"))?,
        ),
        None => None,
    };
    if new.listeners != running.listeners {
        let mut both = running.listeners.clone();
        both.extend(
            new.listeners
                .iter()
                .filter(|l| !running.listeners.contains(l)),
        );
        gate.set_listeners(&both);
        if let Err(e) = rules.reload(&new) {
            gate.set_listeners(&running.listeners);
            return Err(e.to_string());
        }
        gate.set_listeners(&new.listeners);
    }
    gate.replace_filter(filter);
    gate.attach_shortcut(rules.shortcut());
    if let (Some(m), Some(estimator)) = (measurement.as_mut(), estimator) {
        m.estimator = estimator;
    }
    Ok(new)
}

/// Runs the gate until a stop is asked; returns what it did. Needs
/// `CAP_NET_ADMIN` for the queues and the rules.
pub fn run(config: &GateConfig, options: &RunOptions) -> Result<RunSummary, GateError> {
    let signals = &options.signals;
    let mut config = config.clone();
    let filter = config.filter.build().map_err(GateError::Filter)?;
    let initial = filter.snapshot();
    let gate = Arc::new(Gate::new(
        filter,
        config.listeners.clone(),
        config.dry_run,
        config.reject_mark,
    ));
    let measuring = config.filter.refill == Refill::Measure;
    let mut measurement = if measuring {
        Some(Measurement {
            estimator: CapacityEstimator::new(CapacityConfig::new(
                config.filter.params.refill_rate,
            ))
            .map_err(GateError::Filter)?,
            failed_before: false,
        })
    } else {
        None
    };
    // Held from now on, released for the shut-down path only.
    let mut reserve = DescriptorReserve::hold();
    let metrics = Arc::new(GateMetrics::new(
        gate.counters(),
        config.filter.kind,
        &initial,
        config.dry_run,
        measuring,
    ));
    let server = match config.metrics_listen {
        None => None,
        Some(address) => {
            let limits = Limits {
                max_connections: connection_cap(descriptor_limit().unwrap_or(1024)),
                ..Limits::default()
            };
            let scrape_gate = Arc::clone(&gate);
            let scrape_metrics = Arc::clone(&metrics);
            let render: Arc<Render> = Arc::new(move |format: Format| {
                scrape_metrics.set_filter(&filter_state_for_scrape(&scrape_gate));
                scrape_metrics.encode(format)
            });
            let server =
                MetricsServer::start(address, limits, metrics.endpoint_counters(), render)?;
            if server.address().ip().is_unspecified() {
                eprintln!(
                    "vantage gate: warning: metrics on {} answer any host that reaches the port; bind to 127.0.0.1 or an internal address, or firewall it (docs/gate.md)",
                    server.address()
                );
            }
            Some(server)
        }
    };

    let mut queues: Vec<Queue> = Vec::new();
    for queue_num in config.queue_numbers() {
        let queue = Queue::open(&queue_config(queue_num, config.queue_maxlen))
            .map_err(|source| queue_error(queue_num, source))?;
        queues.push(queue);
    }
    let mut rules = GateRules::install_with(&config, config.backend).map_err(|e| {
        if capabilities::holds(CAP_NET_ADMIN) {
            e
        } else {
            GateError::MissingCapability {
                operation: format!("install the gate's rules ({e})"),
            }
        }
    })?;
    gate.attach_shortcut(rules.shortcut());
    if !options.allow_stacking {
        let others = rules.other_gates();
        if !others.is_empty() {
            // `rules` is dropped on the way out: this gate's go again.
            return Err(GateError::OtherGates { others });
        }
    }
    let ready = match &options.ready_file {
        None => None,
        Some(path) => Some(ReadyFile::create(path)?),
    };
    if let Err(e) = notify(NotifyState::Ready) {
        eprintln!("vantage gate: cannot notify systemd: {e}");
    }
    for warning in &config.warnings {
        eprintln!("vantage gate: warning: {warning}");
    }
    eprintln!(
        "vantage gate: {} on {} (queue{} {}), chain {}{}{}; stop with Ctrl-C",
        config.filter.kind.name(),
        config
            .listeners
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if config.queues > 1 { "s" } else { "" },
        if config.queues > 1 {
            format!("{}..{}", config.queue, config.queue + config.queues - 1)
        } else {
            config.queue.to_string()
        },
        rules.chain(),
        if config.dry_run { ", dry run" } else { "" },
        match &server {
            Some(s) => format!(", metrics on http://{}/metrics", s.address()),
            None => String::new(),
        },
    );
    // Opened only now: a gate that failed to start never touched it.
    let mut failure: Option<GateError> = None;
    let mut log = match &config.log {
        None => None,
        Some(path) => match IntervalLog::open(path) {
            Ok(log) => Some(log),
            Err(e) => {
                failure = Some(e);
                None
            }
        },
    };

    let workers_stop = Arc::new(AtomicBool::new(false));
    let busy_poll = config.busy_poll;
    // With --queue-cpu-fanout each thread runs where its queue's SYNs are
    // handled. A thread that cannot be pinned still works, only slower.
    let allowed = if config.cpu_fanout {
        allowed_cpus().unwrap_or_else(|e| {
            eprintln!("vantage gate: cannot read this process's CPUs ({e}); verdict threads are not pinned");
            Vec::new()
        })
    } else {
        Vec::new()
    };
    let mut workers: Vec<WorkerHandle> = Vec::new();
    for queue in queues {
        let queue_num = queue.queue_num();
        let gate = Arc::clone(&gate);
        let stop = Arc::clone(&workers_stop);
        let cpus = fanout_cpus(queue_num - config.queue, config.queues, &allowed);
        if config.cpu_fanout && !allowed.is_empty() && cpus.is_empty() {
            eprintln!(
                "vantage gate: queue {queue_num} gets the SYNs of no CPU this process may use; its thread is not pinned"
            );
        }
        let spawned = std::thread::Builder::new()
            .name(format!("gate-q{queue_num}"))
            .spawn(move || -> Result<WorkerReport, GateError> {
                if !cpus.is_empty() {
                    if let Err(e) = pin_current_thread(&cpus) {
                        eprintln!(
                            "vantage gate: queue {queue_num}: cannot pin to CPUs {cpus:?}: {e}"
                        );
                    }
                }
                let mut worker = QueueWorker::new(queue, gate).with_busy_poll(busy_poll);
                let result = worker.run(&stop, None);
                let drained = result.and_then(|_| worker.drain(DRAIN_QUIET, DRAIN_LIMIT));
                let report = worker.report();
                let unbound = worker
                    .into_queue()
                    .unbind()
                    .map_err(|source| GateError::Queue {
                        queue: queue_num,
                        source,
                    });
                drained?;
                unbound?;
                Ok(report)
            });
        match spawned {
            Ok(thread) => workers.push(WorkerHandle { queue_num, thread }),
            Err(e) => {
                failure.get_or_insert(GateError::Thread(e));
                break;
            }
        }
    }

    // The interval clock.
    let mut ticks: u64 = 0;
    let mut previous_totals = GateCounts::default();
    let mut previous_tick = gate.started();
    // The wall clock when the gate's clock read zero: each record's
    // `t_start_unix_s` is it plus `time_s` (readers on the wall clock align
    // by it; the intervals stay on the gate's monotonic clock).
    let unix_origin_s = unix_now_s() - gate.started().elapsed().as_secs_f64();
    let mut verify_failed_before = false;
    let mut last_verify: Option<Instant> = None;
    while failure.is_none() && !signals.stopping() {
        if workers.iter().any(|w| w.thread.is_finished()) {
            break;
        }
        if signals.take_reload() {
            let _ = notify(NotifyState::Reloading);
            let result = match &options.config_path {
                Some(path) => reload(path, &config, &gate, &mut rules, &mut measurement),
                None => Err("the gate was not started from a file".to_string()),
            };
            match result {
                Ok(new) => {
                    eprintln!(
                        "vantage gate: configuration reloaded: {}",
                        new.filter.kind.name()
                    );
                    for warning in &new.warnings {
                        eprintln!("vantage gate: warning: {warning}");
                    }
                    metrics.count_reload(true);
                    config = new;
                }
                Err(why) => {
                    eprintln!(
                        "vantage gate: reload refused, the running configuration goes on: {why}"
                    );
                    metrics.count_reload(false);
                }
            }
            let _ = notify(NotifyState::Ready);
        }
        if signals.take_reopen() {
            if let Some(log) = log.as_mut() {
                if let Err(e) = log.reopen() {
                    eprintln!("vantage gate: {e}; still writing to the old file");
                }
            }
        }
        let due = gate.started()
            + Duration::from_nanos(config.interval.as_nanos().saturating_mul(ticks + 1));
        let now = Instant::now();
        if now < due {
            std::thread::sleep((due - now).min(TICK_POLL));
            continue;
        }
        let record = interval_record(
            &gate,
            &config,
            ticks,
            now.duration_since(previous_tick),
            &mut previous_totals,
            measurement.as_mut(),
            &metrics,
            unix_origin_s,
        );
        previous_tick = now;
        ticks += 1;
        if let Some(log) = log.as_mut() {
            if let Err(e) = log.write(&record) {
                failure = Some(e);
            }
        }
        if last_verify.is_some_and(|at| at.elapsed() < VERIFY_EVERY) {
            continue;
        }
        last_verify = Some(Instant::now());
        match rules.verify() {
            Ok(RulesStatus::Intact) => verify_failed_before = false,
            Ok(RulesStatus::Vanished(what)) => {
                eprintln!("vantage gate: rules vanished: {what}; stopping");
                metrics.set_rules_intact(false);
                failure.get_or_insert(GateError::RulesVanished { what });
            }
            Err(e) => {
                if !verify_failed_before {
                    eprintln!("vantage gate: cannot check the rules this interval: {e}");
                }
                verify_failed_before = true;
            }
        }
    }

    // Shut down: rules first, then the workers drain and unbind.
    let _ = notify(NotifyState::Stopping);
    reserve.release();
    let removed = rules.remove();
    workers_stop.store(true, Ordering::Relaxed);
    let mut reports = Vec::new();
    for worker in workers {
        match worker.thread.join() {
            Ok(Ok(report)) => reports.push(report),
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(_) => {
                failure.get_or_insert(GateError::WorkerPanicked {
                    queue: worker.queue_num,
                });
            }
        }
    }
    let now = Instant::now();
    let last = interval_record(
        &gate,
        &config,
        ticks,
        now.duration_since(previous_tick),
        &mut previous_totals,
        None,
        &metrics,
        unix_origin_s,
    );
    if let Some(log) = log.as_mut() {
        if let Err(e) = log.write(&last) {
            failure.get_or_insert(e);
        }
    }
    drop(ready);
    drop(server);
    if let Some(e) = failure {
        return Err(e);
    }
    removed?;
    Ok(RunSummary {
        duration_s: gate.now().as_secs_f64(),
        intervals: ticks + 1,
        workers: reports,
        totals: gate.counters().totals(),
    })
}

/// The wall clock, UNIX seconds (0 before 1970).
fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Closes interval `index`: counts since the last record, the capacity
/// measurement (when given), the filter's snapshot for the gauges;
/// `unix_origin_s` is the wall clock when the gate's clock read zero.
#[allow(clippy::too_many_arguments)]
fn interval_record(
    gate: &Gate,
    config: &GateConfig,
    index: u64,
    elapsed: Duration,
    previous_totals: &mut GateCounts,
    measurement: Option<&mut Measurement>,
    metrics: &GateMetrics,
    unix_origin_s: f64,
) -> IntervalRecord {
    gate.sync_shortcut();
    let totals = gate.counters().totals();
    let delta = totals.since(previous_totals);
    *previous_totals = totals;
    let capacity = measurement.and_then(|m| m.measure(gate, Some(metrics)));
    let filter = gate.snapshot();
    metrics.set_filter(&filter);
    let interval_s = config.interval.as_secs_f64();
    let time_s = Nanos(config.interval.as_nanos().saturating_mul(index)).as_secs_f64();
    IntervalRecord {
        time_s,
        // Rounded to the microsecond: the log stays readable.
        t_start_unix_s: Some(((unix_origin_s + time_s) * 1e6).round() / 1e6),
        interval_s,
        elapsed_s: elapsed.as_secs_f64(),
        arrivals: delta.syns(),
        counts: delta,
        dry_run: config.dry_run,
        filter,
        capacity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[gate]\nbackend = \"iptables\"\n[[listeners]]\nport = 80\n[filter]\nkind = \"tbf\"\nbucket_size = 10\nrefill_rate = 10\n";

    fn parse(text: &str) -> GateConfig {
        GateConfig::from_toml(text, "test.toml").unwrap()
    }

    #[test]
    fn a_reload_may_change_listeners_and_parameters_but_not_the_backend() {
        let running = parse(BASE);
        let more = parse(&format!("{BASE}[[listeners]]\nport = 81\n"));
        assert_eq!(reload_refusal(&running, &more), None);
        let bigger = parse(&BASE.replace("bucket_size = 10", "bucket_size = 20"));
        assert_eq!(reload_refusal(&running, &bigger), None);
        let nft = parse(&BASE.replace("\"iptables\"", "\"nft\""));
        let refusal = reload_refusal(&running, &nft).unwrap();
        assert!(refusal.starts_with("backend changed"), "{refusal}");
    }
}
