//! A CPU cap for a backend, and a kernel TCP memory limit for a proxy
//! ([`TcpMemoryCap`]).
//!
//! The CPU cap: one cgroup whose CPU bandwidth is limited, so
//! the backend's capacity is real and limited (the SBAC experiment's
//! overload is relative to it).
//!
//! cgroup v2 (`cpu.max`) is used when the unified hierarchy offers the `cpu`
//! controller; on hybrid hosts, where `cpu` is bound to a v1 hierarchy
//! (`/sys/fs/cgroup/cpu`), the same cap is written as `cpu.cfs_quota_us` /
//! `cpu.cfs_period_us`. There the cap also makes a cgroup of the same name
//! in the unified hierarchy, with no controller, only to account the
//! processes' CPU time (its `cpu.stat` `usage_usec`, in microseconds; the
//! processes' own `/proc` times count 10 ms ticks, too coarse for a small
//! cap). The cgroups are removed on drop: their processes are moved back
//! to the parent first, so removal also works while they live.

use std::fs;
use std::path::{Path, PathBuf};

use vantage_sys::cgroup::v1_cgroup_of;

/// Which interface the cap uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    V2,
    V1,
}

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no cgroup hierarchy with the cpu controller (looked for cgroup v2 `cpu` in {v2} and a v1 `cpu` hierarchy in {v1})")]
    NoCpuController { v2: String, v1: String },
    #[error("cpu cap must be in [0.001, 1024] cores, got {0}")]
    Range(f64),
    #[error("no memory cgroup with a TCP memory limit (looked for cgroup v2 `memory` in {v2} and the v1 `memory.kmem.tcp.limit_in_bytes` in {v1})")]
    NoMemoryController { v2: String, v1: String },
    #[error("TCP memory limit must be in [1 MiB, 1 TiB], got {0} bytes")]
    MemoryRange(u64),
    #[error("cgroup v2's memory controller takes whole processes, not one thread")]
    ThreadsUnsupported,
    #[error("cgroup {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A cgroup with a CPU cap; removed on drop.
#[derive(Debug)]
pub struct CpuCap {
    dir: PathBuf,
    parent: PathBuf,
    version: CgroupVersion,
    cores: f64,
    /// v1 only: the cgroup in the unified hierarchy that accounts the CPU
    /// time of the same processes (`None` where there is none).
    accounting: Option<PathBuf>,
}

/// The unified hierarchy of a hybrid host, which accounts CPU time
/// (`cpu.stat` `usage_usec`) without the `cpu` controller.
const UNIFIED: &str = "/sys/fs/cgroup/unified";

/// Shortest CFS period used for the cap, microseconds: short, so a capped
/// server is throttled in small slices rather than stalled for 100 ms at a
/// time; longer when the quota would fall below the kernel's 1 ms minimum.
const MIN_PERIOD_US: u64 = 10_000;
const MIN_QUOTA_US: u64 = 1_000;
const MAX_PERIOD_US: u64 = 1_000_000;

fn v2_root() -> Option<PathBuf> {
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let controllers = fs::read_to_string(Path::new(root).join("cgroup.controllers"));
        if let Ok(text) = controllers {
            if text.split_whitespace().any(|c| c == "cpu") {
                return Some(PathBuf::from(root));
            }
        }
    }
    None
}

impl CpuCap {
    /// Creates cgroup `name` capped at `cores` CPUs (e.g. 0.05 = 5 % of one).
    pub fn create(name: &str, cores: f64) -> Result<CpuCap, CgroupError> {
        if !(cores.is_finite() && (0.001..=1024.0).contains(&cores)) {
            return Err(CgroupError::Range(cores));
        }
        let period =
            ((MIN_QUOTA_US as f64 / cores).ceil() as u64).clamp(MIN_PERIOD_US, MAX_PERIOD_US);
        let quota = ((cores * period as f64).round() as u64).max(MIN_QUOTA_US);
        let (parent, version) = if let Some(root) = v2_root() {
            // The controller must be enabled for the root's children.
            let control = root.join("cgroup.subtree_control");
            fs::write(&control, "+cpu").map_err(io(&control))?;
            (root, CgroupVersion::V2)
        } else {
            let v1 = PathBuf::from("/sys/fs/cgroup/cpu");
            if !v1.join("cpu.cfs_quota_us").exists() {
                return Err(CgroupError::NoCpuController {
                    v2: "/sys/fs/cgroup, /sys/fs/cgroup/unified".into(),
                    v1: v1.display().to_string(),
                });
            }
            (v1, CgroupVersion::V1)
        };
        let dir = parent.join(name);
        if dir.exists() {
            // Left by a run that was killed: empty it and start again.
            remove(&dir, &parent);
        }
        fs::create_dir(&dir).map_err(io(&dir))?;
        let mut cap = CpuCap {
            dir,
            parent,
            version,
            cores,
            accounting: None,
        };
        match version {
            CgroupVersion::V2 => {
                let path = cap.dir.join("cpu.max");
                fs::write(&path, format!("{quota} {period}")).map_err(io(&path))?;
            }
            CgroupVersion::V1 => {
                let period_file = cap.dir.join("cpu.cfs_period_us");
                fs::write(&period_file, period.to_string()).map_err(io(&period_file))?;
                let path = cap.dir.join("cpu.cfs_quota_us");
                fs::write(&path, quota.to_string()).map_err(io(&path))?;
                // Best effort: where the unified hierarchy cannot be
                // written, the CPU time is read from `/proc`, as before.
                let unified = Path::new(UNIFIED);
                if unified.join("cpu.stat").exists() {
                    let accounting = unified.join(name);
                    if accounting.exists() {
                        remove(&accounting, unified);
                    }
                    if fs::create_dir(&accounting).is_ok() {
                        cap.accounting = Some(accounting);
                    }
                }
            }
        }
        Ok(cap)
    }

    /// Moves process `pid` (all its threads) into the cgroup.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        add_process(&self.dir, pid)?;
        if let Some(accounting) = &self.accounting {
            add_process(accounting, pid)?;
        }
        Ok(())
    }

    /// Moves `pid` and its direct children (e.g. nginx's workers).
    pub fn add_with_children(&self, pid: u32) -> Result<usize, CgroupError> {
        let moved = add_process_with_children(&self.dir, pid)?;
        if let Some(accounting) = &self.accounting {
            add_process_with_children(accounting, pid)?;
        }
        Ok(moved)
    }

    /// A cgroup v2 directory whose `cpu.stat` `usage_usec` is the CPU time
    /// of the capped processes: the cap itself under v2, the accounting
    /// cgroup on a hybrid host; `None` where neither exists.
    pub fn usage_cgroup(&self) -> Option<&Path> {
        match self.version {
            CgroupVersion::V2 => Some(&self.dir),
            CgroupVersion::V1 => self.accounting.as_deref(),
        }
    }

    /// CPU time used by the cgroup's processes so far, microseconds.
    pub fn usage_us(&self) -> Result<u64, CgroupError> {
        match self.usage_cgroup() {
            Some(dir) => {
                let path = dir.join("cpu.stat");
                let text = fs::read_to_string(&path).map_err(io(&path))?;
                Ok(text
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0))
            }
            None => {
                // No unified hierarchy (cpuacct is a separate v1 one
                // here): read the processes' own times instead.
                let path = self.dir.join("cgroup.procs");
                let text = fs::read_to_string(&path).map_err(io(&path))?;
                Ok(text
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok())
                    .map(process_cpu_us)
                    .sum())
            }
        }
    }

    /// The cap, CPUs.
    pub fn cores(&self) -> f64 {
        self.cores
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        remove(&self.dir, &self.parent);
        if let Some(accounting) = &self.accounting {
            remove(accounting, Path::new(UNIFIED));
        }
    }
}

/// A kernel TCP memory limit for a proxy under test: one memory cgroup,
/// removed on drop (its tasks moved back to the parent first).
///
/// cgroup v1 (the `memory` controller in `/sys/fs/cgroup/memory`):
/// `memory.kmem.tcp.limit_in_bytes`, which charges the TCP socket memory
/// of the cgroup's tasks, and only that, from the moment it is set; above
/// it the cgroup's sockets are under memory pressure (as under the
/// host's `tcp_mem` pressure mark) and allocations that can fail do. It
/// is created below the calling process's own memory cgroup, so that it
/// nests in whatever limit that one has. cgroup v2 (`memory` in the
/// unified hierarchy): `memory.max`, which charges socket buffers with
/// the rest of the tasks' memory.
#[derive(Debug)]
pub struct TcpMemoryCap {
    dir: PathBuf,
    parent: PathBuf,
    version: CgroupVersion,
    bytes: u64,
}

/// The v1 memory hierarchy.
const MEMORY_V1: &str = "/sys/fs/cgroup/memory";

fn v2_memory_root() -> Option<PathBuf> {
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let controllers = fs::read_to_string(Path::new(root).join("cgroup.controllers"));
        if controllers.is_ok_and(|t| t.split_whitespace().any(|c| c == "memory")) {
            return Some(PathBuf::from(root));
        }
    }
    None
}

/// The calling process's cgroup in the v1 hierarchy of `controller`
/// (`/proc/self/cgroup`).
fn own_v1_cgroup(controller: &str) -> Option<String> {
    v1_cgroup_of(&fs::read_to_string("/proc/self/cgroup").ok()?, controller)
}

/// Where [`TcpMemoryCap::create`] makes its cgroups.
fn memory_parent() -> Result<(PathBuf, CgroupVersion), CgroupError> {
    if let Some(root) = v2_memory_root() {
        return Ok((root, CgroupVersion::V2));
    }
    let missing = |v1: String| CgroupError::NoMemoryController {
        v2: "/sys/fs/cgroup, /sys/fs/cgroup/unified".into(),
        v1,
    };
    let own = own_v1_cgroup("memory").ok_or_else(|| missing(MEMORY_V1.into()))?;
    let parent = Path::new(MEMORY_V1).join(own.trim_start_matches('/'));
    if !parent.join("memory.kmem.tcp.limit_in_bytes").exists() {
        return Err(missing(parent.display().to_string()));
    }
    Ok((parent, CgroupVersion::V1))
}

impl TcpMemoryCap {
    /// The cgroups beside where [`Self::create`] makes one whose name
    /// `stale` accepts (e.g. left by a run that was killed): emptied and
    /// removed. Returns how many were removed.
    pub fn remove_stale(stale: impl Fn(&str) -> bool) -> Result<usize, CgroupError> {
        let (parent, _) = memory_parent()?;
        let entries = fs::read_dir(&parent).map_err(io(&parent))?;
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() && stale(&name) {
                remove(&entry.path(), &parent);
                removed += usize::from(!entry.path().exists());
            }
        }
        Ok(removed)
    }

    /// Creates memory cgroup `name` with a TCP memory limit of `bytes`.
    pub fn create(name: &str, bytes: u64) -> Result<TcpMemoryCap, CgroupError> {
        if !(1 << 20..=1 << 40).contains(&bytes) {
            return Err(CgroupError::MemoryRange(bytes));
        }
        let (parent, version) = memory_parent()?;
        let limit_file = match version {
            CgroupVersion::V2 => {
                let control = parent.join("cgroup.subtree_control");
                fs::write(&control, "+memory").map_err(io(&control))?;
                "memory.max"
            }
            CgroupVersion::V1 => "memory.kmem.tcp.limit_in_bytes",
        };
        let dir = parent.join(name);
        if dir.exists() {
            // Left by a run that was killed: empty it and start again.
            remove(&dir, &parent);
        }
        fs::create_dir(&dir).map_err(io(&dir))?;
        let cap = TcpMemoryCap {
            dir,
            parent,
            version,
            bytes,
        };
        let path = cap.dir.join(limit_file);
        fs::write(&path, bytes.to_string()).map_err(io(&path))?;
        Ok(cap)
    }

    /// Moves process `pid` (all its threads) into the cgroup.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        add_process(&self.dir, pid)
    }

    /// Moves `pid` and its direct children (e.g. nginx's workers).
    pub fn add_with_children(&self, pid: u32) -> Result<usize, CgroupError> {
        add_process_with_children(&self.dir, pid)
    }

    /// Moves the calling thread alone into the cgroup (v1 only: v2's
    /// memory controller takes whole processes); the threads it starts
    /// afterwards are born in it, and the sockets they create or accept
    /// are charged to it.
    pub fn add_current_thread(&self) -> Result<(), CgroupError> {
        if self.version == CgroupVersion::V2 {
            return Err(CgroupError::ThreadsUnsupported);
        }
        let path = self.dir.join("tasks");
        fs::write(&path, nix::unistd::gettid().as_raw().to_string()).map_err(io(&path))
    }

    /// The most TCP memory (v1) or memory (v2) charged so far, bytes.
    pub fn peak_bytes(&self) -> Result<u64, CgroupError> {
        let file = match self.version {
            CgroupVersion::V1 => "memory.kmem.tcp.max_usage_in_bytes",
            CgroupVersion::V2 => "memory.peak",
        };
        let path = self.dir.join(file);
        let text = fs::read_to_string(&path).map_err(io(&path))?;
        text.trim().parse().map_err(|_| CgroupError::Io {
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, text.trim().to_string()),
        })
    }

    /// The limit, bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TcpMemoryCap {
    fn drop(&mut self) {
        remove(&self.dir, &self.parent);
    }
}

/// Moves process `pid` (all its threads) into cgroup `dir`.
fn add_process(dir: &Path, pid: u32) -> Result<(), CgroupError> {
    let path = dir.join("cgroup.procs");
    fs::write(&path, pid.to_string()).map_err(io(&path))
}

/// Moves `pid` and its direct children into cgroup `dir`; how many moved.
fn add_process_with_children(dir: &Path, pid: u32) -> Result<usize, CgroupError> {
    add_process(dir, pid)?;
    let mut moved = 1;
    for child in children(pid) {
        // A child that exited in between is not an error.
        if add_process(dir, child).is_ok() {
            moved += 1;
        }
    }
    Ok(moved)
}

/// Moves every process of `dir` to `parent`, then removes `dir`.
fn remove(dir: &Path, parent: &Path) {
    for _ in 0..50 {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = fs::write(parent.join("cgroup.procs"), pid);
        }
        // v1: threads moved alone are listed in `tasks` only.
        let tasks = fs::read_to_string(dir.join("tasks")).unwrap_or_default();
        for tid in tasks.split_whitespace() {
            let _ = fs::write(parent.join("tasks"), tid);
        }
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Direct children of `pid`, from `/proc/*/stat`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s.rsplit_once(')')?.1.to_string();
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// `utime + stime` of a process, microseconds (0 when it is gone).
fn process_cpu_us(pid: u32) -> u64 {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100)
        .max(1) as u64;
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1.to_string();
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: u64 = fields.get(11)?.parse().ok()?;
            let system: u64 = fields.get(12)?.parse().ok()?;
            Some((user + system) * 1_000_000 / ticks)
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_out_of_range_is_refused() {
        assert!(matches!(
            CpuCap::create("x", 0.0),
            Err(CgroupError::Range(_))
        ));
        assert!(matches!(
            CpuCap::create("x", f64::NAN),
            Err(CgroupError::Range(_))
        ));
    }

    #[test]
    fn a_memory_limit_out_of_range_is_refused() {
        assert!(matches!(
            TcpMemoryCap::create("x", 1000),
            Err(CgroupError::MemoryRange(1000))
        ));
    }

    #[test]
    fn the_own_cgroup_is_read_by_controller() {
        let text = "9:name=systemd:/\n4:memory:/runner/abc\n3:cpu,cpuacct:/x\n0::/\n";
        assert_eq!(v1_cgroup_of(text, "memory").as_deref(), Some("/runner/abc"));
        assert_eq!(v1_cgroup_of(text, "cpuacct").as_deref(), Some("/x"));
        assert_eq!(v1_cgroup_of(text, "pids"), None);
    }

    #[test]
    fn a_capped_process_is_accounted_in_microseconds_and_the_cgroups_go_away() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: creating cgroups needs root");
            return;
        }
        let name = format!("vantage-test-usage-{}", std::process::id());
        let cap = CpuCap::create(&name, 0.5).expect("cap");
        let hybrid = Path::new(UNIFIED).join("cpu.stat").exists();
        if cap.version() == CgroupVersion::V2 || hybrid {
            let usage = cap
                .usage_cgroup()
                .expect("a cgroup v2 directory accounts the CPU");
            assert!(usage.join("cpu.stat").exists(), "{}", usage.display());
        }
        let mut spin = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("spawn sh");
        cap.add(spin.id()).expect("add");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let used = cap.usage_us().expect("usage");
        let _ = spin.kill();
        let _ = spin.wait();
        // 300 ms at half a core: about 150 ms; with /proc's 10 ms ticks it
        // could read 0 only when no tick fell in the spin.
        assert!(used > 0, "no CPU time accounted");
        let dirs: Vec<PathBuf> = std::iter::once(cap.path().to_path_buf())
            .chain(cap.usage_cgroup().map(Path::to_path_buf))
            .collect();
        drop(cap);
        for dir in dirs {
            assert!(!dir.exists(), "{} left behind", dir.display());
        }
    }

    #[test]
    fn the_current_process_has_a_parent_among_its_parents_children() {
        let me = std::process::id();
        let parent = nix::unistd::getppid().as_raw() as u32;
        assert!(children(parent).contains(&me));
    }
}
