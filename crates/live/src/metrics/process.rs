//! The standard `process_*` metrics of Prometheus's client libraries, read
//! from `/proc/self` at each scrape: CPU seconds, resident memory, open and
//! maximum descriptors (counted by `sys::process::open_descriptors`), start
//! time. A value that cannot be read (e.g. no descriptor free to open
//! `/proc/self/status`) is left out of that scrape.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Registered with `Registry::register_collector`.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// One reading of `/proc/self`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessReading {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessReading {
    pub fn now() -> ProcessReading {
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let fields = stat.as_deref().and_then(stat_fields);
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| boot_time(&s));
        let ticks = (ticks > 0).then_some(ticks as f64);
        ProcessReading {
            cpu_seconds: fields
                .as_ref()
                .zip(ticks)
                .map(|(f, t)| (f.utime + f.stime) as f64 / t),
            resident_bytes: fields
                .as_ref()
                .filter(|_| page > 0)
                .map(|f| f.rss_pages.saturating_mul(page as u64)),
            open_fds: vantage_sys::process::open_descriptors().ok(),
            max_fds: crate::daemon::descriptor_limit().ok(),
            start_time_seconds: fields
                .as_ref()
                .zip(ticks)
                .zip(boot)
                .map(|((f, t), b)| b as f64 + f.start_ticks as f64 / t),
        }
    }
}

/// What the metrics need from `/proc/self/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFields {
    pub utime: u64,
    pub stime: u64,
    pub start_ticks: u64,
    pub rss_pages: u64,
}

/// Parses `/proc/self/stat` (fields after the `)` of the command name:
/// utime 14, stime 15, starttime 22, rss 24, counted from 1).
pub fn stat_fields(stat: &str) -> Option<StatFields> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(StatFields {
        utime: field(14)?,
        stime: field(15)?,
        start_ticks: field(22)?,
        rss_pages: field(24)?,
    })
}

/// `btime` of `/proc/stat`: the boot time in seconds since the epoch.
pub fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = ProcessReading::now();
        if let Some(v) = r.cpu_seconds {
            let m = ConstCounter::new(v);
            m.encode(encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent in seconds",
                Some(&Unit::Seconds),
                m.metric_type(),
            )?)?;
        }
        if let Some(v) = r.resident_bytes {
            let m = ConstGauge::new(v as i64);
            m.encode(encoder.encode_descriptor(
                "process_resident_memory",
                "Resident memory size in bytes",
                Some(&Unit::Bytes),
                m.metric_type(),
            )?)?;
        }
        if let Some(v) = r.open_fds {
            let m = ConstGauge::new(v as i64);
            m.encode(encoder.encode_descriptor(
                "process_open_fds",
                "Number of open file descriptors",
                None,
                m.metric_type(),
            )?)?;
        }
        if let Some(v) = r.max_fds {
            let m = ConstGauge::new(v.min(i64::MAX as u64) as i64);
            m.encode(encoder.encode_descriptor(
                "process_max_fds",
                "Maximum number of open file descriptors",
                None,
                m.metric_type(),
            )?)?;
        }
        if let Some(v) = r.start_time_seconds {
            let m = ConstGauge::new(v);
            m.encode(encoder.encode_descriptor(
                "process_start_time",
                "Start time of the process since unix epoch in seconds",
                Some(&Unit::Seconds),
                m.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_a_space_in_the_name() {
        let stat = "42 (a b) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 4 0 555 1000000 250 18446744073709551615";
        assert_eq!(
            stat_fields(stat),
            Some(StatFields {
                utime: 7,
                stime: 3,
                start_ticks: 555,
                rss_pages: 250
            })
        );
        assert_eq!(boot_time("cpu 1 2\nbtime 1700000000\n"), Some(1700000000));
    }

    #[test]
    fn this_process_reads() {
        let r = ProcessReading::now();
        assert!(r.cpu_seconds.is_some());
        assert!(r.resident_bytes.unwrap() > 0);
        assert!(r.open_fds.unwrap() > 0);
        assert!(r.max_fds.unwrap() > 0);
        assert!(r.start_time_seconds.unwrap() > 1.0e9);
    }
}
