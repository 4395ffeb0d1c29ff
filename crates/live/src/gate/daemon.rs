//! `vantage gate run`: binds the queues, installs the rules, runs one
//! [`QueueWorker`] thread per queue and, on the main thread, the interval
//! clock (counters, capacity measurement, metrics, log), until a signal.
//!
//! Start-up order: build the filter, open the metrics socket and the log,
//! bind every queue (fail-open, 8 MiB forced receive buffer, no `ENOBUFS`),
//! then install the rules — so a SYN is never queued to a queue nobody
//! reads — then write the ready file (the daemon's pid), then start the
//! workers.
//!
//! Shut-down order (SIGINT, SIGTERM, SIGHUP, an error, a worker's end):
//! remove the rules first, so no new SYN is queued; let each worker give
//! a verdict to what is still arriving; unbind the queues; write the last
//! (short) interval; remove the ready file. The rules and the ready file
//! are guards: an error or a panic on the main thread removes them too.
//! Only `SIGKILL` leaves the rules — and then `--queue-bypass` lets every
//! SYN through until `vantage gate clean`.
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

use vantage_core::admission::syn::{CapacityConfig, CapacityEstimator};
use vantage_core::Nanos;
use vantage_sys::nfqueue::Queue;

use super::config::{GateConfig, Refill};
use super::cpu::{allowed_cpus, fanout_cpus, pin_current_thread};
use super::kernel::{read_accept_queue, read_passive_opens};
use super::log::{CapacityRecord, GateCounts, IntervalLog, IntervalRecord};
use super::metrics::{GateMetrics, MetricsServer};
use super::rules::GateRules;
use super::worker::{queue_config, Gate, QueueWorker, WorkerReport};
use super::GateError;

/// How long the main thread sleeps at most between looks at the stop
/// flag and the workers.
const TICK_POLL: Duration = Duration::from_millis(50);
/// After the rules are gone: how long a queue must stay quiet, and how long
/// the final drain may take at most.
const DRAIN_QUIET: Duration = Duration::from_millis(50);
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Options of one run beside the configuration.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Created (with the pid) once the queues are bound and the rules are
    /// in; removed on exit.
    pub ready_file: Option<PathBuf>,
    /// Set by a signal handler (see [`register_signals`]) or by the
    /// caller; the gate then stops cleanly.
    pub stop: Arc<AtomicBool>,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RunSummary {
    pub duration_s: f64,
    pub intervals: u64,
    pub workers: Vec<WorkerReport>,
    pub totals: GateCounts,
}

/// Sets `stop` on SIGINT, SIGTERM and SIGHUP. A second SIGINT or SIGTERM
/// while stopping ends the process at once.
pub fn register_signals(stop: &Arc<AtomicBool>) -> Result<(), GateError> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(stop))
            .map_err(GateError::Signal)?;
    }
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(stop)).map_err(GateError::Signal)?;
    }
    Ok(())
}

/// The ready file; removed on drop.
struct ReadyFile {
    path: PathBuf,
}

impl ReadyFile {
    fn create(path: &Path) -> Result<ReadyFile, GateError> {
        let error = |source| GateError::ReadyFile {
            path: path.to_path_buf(),
            source,
        };
        // Written beside and renamed: whoever sees the file sees the pid.
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        std::fs::write(&partial, format!("{}\n", std::process::id())).map_err(error)?;
        std::fs::rename(&partial, path).map_err(error)?;
        Ok(ReadyFile {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for ReadyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The capacity measurement of `refill_rate = "measure"`.
struct Measurement {
    estimator: CapacityEstimator,
    failed_before: bool,
}

impl Measurement {
    fn measure(&mut self, gate: &Gate, metrics: Option<&GateMetrics>) -> Option<CapacityRecord> {
        let readings = read_passive_opens()
            .and_then(|opens| read_accept_queue(gate.listeners()).map(|queue| (opens, queue)));
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
            m.set_capacity(accept_queue, interval.map(|i| i.accept_rate));
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

/// Runs the gate until `options.stop` is set; returns what it did. Needs
/// root (`CAP_NET_ADMIN`) for the queues and the rules.
pub fn run(config: &GateConfig, options: &RunOptions) -> Result<RunSummary, GateError> {
    if !vantage_sys::privilege::is_root() {
        return Err(GateError::NotRoot);
    }
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
    let metrics = Arc::new(GateMetrics::new(
        gate.counters(),
        config.filter.kind,
        &initial,
        config.dry_run,
        measuring,
    ));
    let _server = match config.metrics_listen {
        None => None,
        Some(address) => {
            let gate = Arc::clone(&gate);
            let metrics = Arc::clone(&metrics);
            Some(MetricsServer::start(address, move || {
                metrics.set_filter(&gate.snapshot());
                metrics.encode()
            })?)
        }
    };
    let mut log = match &config.log {
        None => None,
        Some(path) => Some(IntervalLog::create(path)?),
    };

    let mut queues: Vec<Queue> = Vec::new();
    for queue_num in config.queue_numbers() {
        let queue =
            Queue::open(&queue_config(queue_num, config.queue_maxlen)).map_err(|source| {
                GateError::Queue {
                    queue: queue_num,
                    source,
                }
            })?;
        queues.push(queue);
    }
    let mut rules = GateRules::install(config)?;
    let ready = match &options.ready_file {
        None => None,
        Some(path) => Some(ReadyFile::create(path)?),
    };
    eprintln!(
        "vantage gate: {} on {} (queue{} {}), chain {}{}; stop with Ctrl-C",
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
    );

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
    let mut spawn_error = None;
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
                spawn_error = Some(GateError::Thread(e));
                break;
            }
        }
    }

    // The interval clock.
    let mut ticks: u64 = 0;
    let mut previous_totals = GateCounts::default();
    let mut previous_tick = gate.started();
    let mut failure: Option<GateError> = spawn_error;
    while failure.is_none() && !options.stop.load(Ordering::Relaxed) {
        if workers.iter().any(|w| w.thread.is_finished()) {
            break;
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
            config,
            ticks,
            now.duration_since(previous_tick),
            &mut previous_totals,
            measurement.as_mut(),
            &metrics,
        );
        previous_tick = now;
        ticks += 1;
        if let Some(log) = log.as_mut() {
            if let Err(e) = log.write(&record) {
                failure = Some(e);
            }
        }
    }

    // Shut down: rules first, then the workers drain and unbind.
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
        config,
        ticks,
        now.duration_since(previous_tick),
        &mut previous_totals,
        None,
        &metrics,
    );
    if let Some(log) = log.as_mut() {
        if let Err(e) = log.write(&last) {
            failure.get_or_insert(e);
        }
    }
    drop(ready);
    if let Some(e) = failure {
        return Err(e);
    }
    removed?;
    Ok(RunSummary {
        duration_s: gate.now().as_secs_f64(),
        intervals: ticks + 1,
        workers: reports,
        totals: gate.counters().totals().into(),
    })
}

/// Closes interval `index`: counts since the last record, the capacity
/// measurement (when given), the filter's snapshot for the gauges.
fn interval_record(
    gate: &Gate,
    config: &GateConfig,
    index: u64,
    elapsed: Duration,
    previous_totals: &mut GateCounts,
    measurement: Option<&mut Measurement>,
    metrics: &GateMetrics,
) -> IntervalRecord {
    let totals = gate.counters().totals();
    let delta = totals.since(previous_totals);
    *previous_totals = totals;
    let capacity = measurement.and_then(|m| m.measure(gate, Some(metrics)));
    let filter = gate.snapshot();
    metrics.set_filter(&filter);
    let interval_s = config.interval.as_secs_f64();
    IntervalRecord {
        time_s: Nanos(config.interval.as_nanos().saturating_mul(index)).as_secs_f64(),
        interval_s,
        elapsed_s: elapsed.as_secs_f64(),
        arrivals: delta.syns(),
        counts: delta,
        dry_run: config.dry_run,
        filter,
        capacity,
    }
}
