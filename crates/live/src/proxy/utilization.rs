//! The controllers' input U_i^measured (Section 4's "utilization of the
//! bottleneck resource"), measured live in one of four ways:
//!
//! * **occupancy** — time-integrated requests in flight at the backend over
//!   its declared concurrency: ∫ in_flight dt / (concurrency · elapsed);
//! * **orca** — the backend's own `endpoint-load-metrics` response header
//!   (ORCA, as gRPC and Envoy read it): `TEXT cpu_utilization=0.42, …` or
//!   `JSON {"cpu_utilization": 0.42, …}`; the latest value per upstream,
//!   averaged over the upstreams that reported;
//! * **cgroup** — the backend's cgroup v2 `cpu.stat` `usage_usec` delta over
//!   the interval and the cores it may use (`cpu.max`, else the online
//!   CPUs, or `cores` from the configuration);
//! * **pids** — the same from the backend processes' `/proc/PID/stat`
//!   `utime + stime`.
//!
//! Departure: the paper measures the server's own CPU. A reading that fails
//! (a pid gone, a cgroup unreadable, no ORCA report yet) keeps the previous
//! value and is counted (`vantage_proxy_utilization_unavailable_total`), so
//! a broken input is visible rather than read as an idle backend.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::config::UtilizationConfig;

/// Requests in flight to the backends, integrated over time. Always kept
/// (also for the listen-queue estimate and metrics).
#[derive(Debug)]
pub struct InFlight {
    state: Mutex<InFlightState>,
}

#[derive(Debug)]
struct InFlightState {
    in_flight: u64,
    since: Instant,
    /// ∫ in_flight dt since the last [`InFlight::take`], in request·ns.
    integral: u128,
}

impl InFlightState {
    /// Integrates up to `now`; a reading older than the last one (taken
    /// by a caller before another's) adds nothing and keeps `since`.
    fn advance(&mut self, now: Instant) {
        let Some(dt) = now.checked_duration_since(self.since) else {
            return;
        };
        self.integral += dt.as_nanos() * u128::from(self.in_flight);
        self.since = now;
    }
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            state: Mutex::new(InFlightState {
                in_flight: 0,
                since: Instant::now(),
                integral: 0,
            }),
        }
    }
}

impl InFlight {
    /// A request entered at `now` (the caller's clock reading, shared with
    /// its other uses at that moment).
    pub fn enter(&self, now: Instant) {
        if let Ok(mut s) = self.state.lock() {
            s.advance(now);
            s.in_flight += 1;
        }
    }

    /// A request left at `now`.
    pub fn leave(&self, now: Instant) {
        if let Ok(mut s) = self.state.lock() {
            s.advance(now);
            s.in_flight = s.in_flight.saturating_sub(1);
        }
    }

    pub fn current(&self) -> u64 {
        self.state.lock().map(|s| s.in_flight).unwrap_or(0)
    }

    /// The mean number in flight since the last call, and the current one.
    pub fn take(&self, elapsed: Duration) -> (f64, u64) {
        let Ok(mut s) = self.state.lock() else {
            return (0.0, 0);
        };
        s.advance(Instant::now());
        let integral = std::mem::take(&mut s.integral);
        let mean = if elapsed.is_zero() {
            0.0
        } else {
            integral as f64 / elapsed.as_nanos() as f64
        };
        (mean, s.in_flight)
    }
}

/// The latest ORCA `cpu_utilization` of each upstream.
#[derive(Debug)]
pub struct OrcaReports {
    latest: Mutex<Vec<Option<f64>>>,
}

impl OrcaReports {
    pub fn new(upstreams: usize) -> OrcaReports {
        OrcaReports {
            latest: Mutex::new(vec![None; upstreams]),
        }
    }

    pub fn record(&self, upstream: usize, value: f64) {
        if let Ok(mut latest) = self.latest.lock() {
            if let Some(slot) = latest.get_mut(upstream) {
                *slot = Some(value);
            }
        }
    }

    /// The mean over upstreams that reported; `None` before any did.
    pub fn mean(&self) -> Option<f64> {
        let latest = self.latest.lock().ok()?;
        let values: Vec<f64> = latest.iter().flatten().copied().collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }
}

/// The `cpu_utilization` of an `endpoint-load-metrics` header value, in
/// the TEXT or JSON form; `None` if absent or not a finite number ≥ 0.
pub fn parse_orca(value: &str) -> Option<f64> {
    let value = value.trim();
    let number = if let Some(text) = value.strip_prefix("TEXT ") {
        text.split(',').find_map(|pair| {
            let (key, v) = pair.split_once('=')?;
            (key.trim() == "cpu_utilization").then(|| v.trim().parse::<f64>().ok())?
        })?
    } else if let Some(json) = value.strip_prefix("JSON ") {
        let parsed: serde_json::Value = serde_json::from_str(json).ok()?;
        parsed.get("cpu_utilization")?.as_f64()?
    } else {
        return None;
    };
    (number.is_finite() && number >= 0.0).then_some(number)
}

/// Reads the utilization at the end of each interval.
#[derive(Debug)]
pub enum Sampler {
    Occupancy {
        concurrency: u64,
    },
    Orca,
    Cgroup {
        stat: PathBuf,
        cores: f64,
        last_usec: Option<u64>,
    },
    Pids {
        pids: Vec<u32>,
        cores: f64,
        ticks_per_s: f64,
        last_ticks: Option<u64>,
    },
}

/// Why the cgroup cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("cgroup {}: {problem}", path.display())]
pub struct CgroupError {
    pub path: PathBuf,
    pub problem: String,
}

fn online_cpus() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as f64
    } else {
        1.0
    }
}

/// Cores a cgroup may use from its `cpu.max` (`max PERIOD`: unlimited).
pub fn cpu_max_cores(text: &str) -> Option<f64> {
    let mut fields = text.split_whitespace();
    let quota = fields.next()?;
    let period: f64 = fields.next()?.parse().ok()?;
    if quota == "max" {
        return None;
    }
    let quota: f64 = quota.parse().ok()?;
    (period > 0.0 && quota > 0.0).then(|| quota / period)
}

/// `usage_usec` of a `cpu.stat`.
pub fn usage_usec(cpu_stat: &str) -> Option<u64> {
    cpu_stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

fn read_small(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    vantage_core::config::read_capped(file, 64 << 10).ok()
}

impl Sampler {
    pub fn new(config: &UtilizationConfig) -> Result<Sampler, CgroupError> {
        Ok(match config {
            UtilizationConfig::Occupancy { concurrency } => Sampler::Occupancy {
                concurrency: *concurrency,
            },
            UtilizationConfig::Orca => Sampler::Orca,
            UtilizationConfig::Cgroup { cgroup, cores } => {
                let stat = cgroup.join("cpu.stat");
                let error = |problem: String| CgroupError {
                    path: cgroup.clone(),
                    problem,
                };
                let text = read_small(&stat)
                    .ok_or_else(|| error("cannot read cpu.stat (a cgroup v2 directory?)".into()))?;
                usage_usec(&text).ok_or_else(|| error("cpu.stat has no usage_usec".into()))?;
                let cores = cores
                    .or_else(|| read_small(&cgroup.join("cpu.max")).and_then(|t| cpu_max_cores(&t)))
                    .unwrap_or_else(online_cpus);
                Sampler::Cgroup {
                    stat,
                    cores,
                    last_usec: None,
                }
            }
            UtilizationConfig::Pids { pids, cores } => Sampler::Pids {
                pids: pids.clone(),
                cores: *cores,
                // SAFETY: sysconf has no preconditions.
                ticks_per_s: match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
                    n if n > 0 => n as f64,
                    _ => 100.0,
                },
                last_ticks: None,
            },
        })
    }

    /// Starts the first interval (reads the CPU counters' origin).
    pub fn start(&mut self) {
        let _ = self.sample(Duration::ZERO, 0.0, None);
    }

    /// U_i^measured for an interval of `elapsed`, given the mean requests in
    /// flight and the ORCA mean; `None` when it cannot be read.
    pub fn sample(
        &mut self,
        elapsed: Duration,
        mean_in_flight: f64,
        orca: Option<f64>,
    ) -> Option<f64> {
        let seconds = elapsed.as_secs_f64();
        match self {
            Sampler::Occupancy { concurrency } => Some(mean_in_flight / *concurrency as f64),
            Sampler::Orca => orca,
            Sampler::Cgroup {
                stat,
                cores,
                last_usec,
            } => {
                let now = usage_usec(&read_small(stat)?)?;
                let previous = last_usec.replace(now)?;
                (seconds > 0.0)
                    .then(|| now.saturating_sub(previous) as f64 / 1e6 / seconds / *cores)
            }
            Sampler::Pids {
                pids,
                cores,
                ticks_per_s,
                last_ticks,
            } => {
                let mut total = 0u64;
                for pid in pids.iter() {
                    let stat = read_small(Path::new(&format!("/proc/{pid}/stat")))?;
                    let fields = crate::metrics::process::stat_fields(&stat)?;
                    total += fields.utime + fields.stime;
                }
                let previous = last_ticks.replace(total)?;
                (seconds > 0.0).then(|| {
                    total.saturating_sub(previous) as f64 / *ticks_per_s / seconds / *cores
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orca_text_and_json() {
        assert_eq!(parse_orca("TEXT cpu_utilization=0.42"), Some(0.42));
        assert_eq!(
            parse_orca("TEXT mem_utilization=0.1, cpu_utilization=0.7,rps_fractional=3"),
            Some(0.7)
        );
        assert_eq!(
            parse_orca(r#"JSON {"cpu_utilization": 0.3, "mem_utilization": 0.2}"#),
            Some(0.3)
        );
        for bad in [
            "",
            "cpu_utilization=0.4",
            "TEXT mem_utilization=0.4",
            "TEXT cpu_utilization=-1",
            "TEXT cpu_utilization=NaN",
            "JSON {",
            "BIN abc",
        ] {
            assert_eq!(parse_orca(bad), None, "{bad}");
        }
        let reports = OrcaReports::new(2);
        assert_eq!(reports.mean(), None);
        reports.record(0, 0.2);
        reports.record(1, 0.6);
        reports.record(0, 0.4);
        reports.record(7, 1.0); // no such upstream: ignored
        assert!((reports.mean().unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn cgroup_files() {
        assert_eq!(
            usage_usec("usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n"),
            Some(1234)
        );
        assert_eq!(usage_usec("user_usec 1\n"), None);
        assert_eq!(cpu_max_cores("max 100000\n"), None);
        assert_eq!(cpu_max_cores("50000 100000\n"), Some(0.5));
        assert_eq!(cpu_max_cores("200000 100000"), Some(2.0));
        assert_eq!(cpu_max_cores("junk"), None);
    }

    #[test]
    fn occupancy_integrates_in_flight_requests() {
        let f = InFlight::default();
        f.enter(Instant::now());
        f.enter(Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (mean, now) = f.take(Duration::from_millis(20));
        assert_eq!(now, 2);
        // Two in flight over (at least) the whole interval.
        assert!(mean >= 2.0 * 0.99, "{mean}");
        f.leave(Instant::now());
        f.leave(Instant::now());
        f.leave(Instant::now()); // one too many: stays at zero
        assert_eq!(f.current(), 0);
    }

    #[test]
    fn own_process_cpu_is_readable() {
        let mut s = Sampler::new(&UtilizationConfig::Pids {
            pids: vec![std::process::id()],
            cores: 1.0,
        })
        .unwrap();
        s.start();
        let value = s.sample(Duration::from_millis(100), 0.0, None);
        assert!(value.is_some_and(|v| v >= 0.0));
        let mut gone = Sampler::new(&UtilizationConfig::Pids {
            pids: vec![4_999_999],
            cores: 1.0,
        })
        .unwrap();
        gone.start();
        assert_eq!(gone.sample(Duration::from_secs(1), 0.0, None), None);
    }
}
