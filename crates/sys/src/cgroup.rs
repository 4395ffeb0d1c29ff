//! The TCP memory limit of the calling thread's memory cgroup, and the
//! `/proc/PID/cgroup` format.
//!
//! A memory cgroup can limit its sockets' memory below the host's
//! `net.ipv4.tcp_mem`, and then `/proc/net/sockstat` (the host's count)
//! shows no pressure while the cgroup's sockets are refused memory:
//!
//! * cgroup v1: `memory.kmem.tcp.limit_in_bytes` and
//!   `memory.kmem.tcp.usage_in_bytes` — TCP memory alone;
//! * cgroup v2: `memory.max` (all of the cgroup's memory) and the `sock`
//!   line of `memory.stat` (its sockets' share).
//!
//! Only the cgroup itself is read, not its ancestors. The thread's own
//! cgroup (`/proc/thread-self/cgroup`): under v1 one thread of a process
//! may be in a cgroup of its own, and the threads it starts are born there.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A v1 limit at or above this is the kernel's "no limit" (it writes
/// `PAGE_COUNTER_MAX` pages, about 2⁶³ bytes).
const UNLIMITED_V1: u64 = 1 << 60;

/// Which files the limit and usage come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupMemorySource {
    /// cgroup v1 `memory.kmem.tcp.*`.
    V1Tcp,
    /// cgroup v2 `memory.max` and `memory.stat`'s `sock`.
    V2Memory,
}

impl CgroupMemorySource {
    pub fn name(self) -> &'static str {
        match self {
            CgroupMemorySource::V1Tcp => "cgroup v1 memory.kmem.tcp",
            CgroupMemorySource::V2Memory => "cgroup v2 memory.max / memory.stat sock",
        }
    }
}

/// A memory cgroup with a limit that covers its TCP sockets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupTcpMemory {
    pub source: CgroupMemorySource,
    /// The cgroup's directory.
    pub dir: PathBuf,
    pub limit_bytes: u64,
}

/// The path of `controller`'s cgroup in a v1 hierarchy, from a
/// `/proc/PID/cgroup` text (`ID:controllers:path` lines).
pub fn v1_cgroup_of(text: &str, controller: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _ = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_string())
    })
}

/// The path of the unified (v2) cgroup, the `0::path` line.
pub fn v2_cgroup_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_string)
}

/// A limit file's value: `max` (v2) or the v1 "no limit" value is `None`.
pub fn parse_limit(text: &str) -> io::Result<Option<u64>> {
    let text = text.trim();
    if text == "max" {
        return Ok(None);
    }
    let bytes: u64 = text.parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cgroup memory limit {text:?}: not a number of bytes or \"max\""),
        )
    })?;
    Ok((bytes < UNLIMITED_V1).then_some(bytes))
}

/// The `sock` line of a v2 `memory.stat`, bytes.
pub fn parse_memory_stat_sock(text: &str) -> io::Result<u64> {
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix("sock "))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "memory.stat: no sock line"))?;
    value.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("memory.stat: sock {value:?} is not a number"),
        )
    })
}

fn read_number(path: &Path) -> io::Result<u64> {
    let text = fs::read_to_string(path)?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {:?} is not a number", path.display(), text.trim()),
        )
    })
}

impl CgroupTcpMemory {
    /// The calling thread's memory cgroup, if it limits TCP memory.
    pub fn own() -> io::Result<Option<CgroupTcpMemory>> {
        let text = fs::read_to_string("/proc/thread-self/cgroup")
            .or_else(|_| fs::read_to_string("/proc/self/cgroup"))?;
        CgroupTcpMemory::find(
            &text,
            Path::new("/sys/fs/cgroup/memory"),
            &[
                Path::new("/sys/fs/cgroup"),
                Path::new("/sys/fs/cgroup/unified"),
            ],
        )
    }

    /// The memory cgroup a `/proc/PID/cgroup` text names, under the v1
    /// memory hierarchy `v1_root` or one of the v2 roots, if it has a
    /// limit: v1 first (a hybrid host's memory controller is there).
    /// Files that are missing mean no limit; unreadable ones are errors.
    pub fn find(
        proc_cgroup: &str,
        v1_root: &Path,
        v2_roots: &[&Path],
    ) -> io::Result<Option<CgroupTcpMemory>> {
        if let Some(path) = v1_cgroup_of(proc_cgroup, "memory") {
            let dir = v1_root.join(path.trim_start_matches('/'));
            let limit_file = dir.join("memory.kmem.tcp.limit_in_bytes");
            match fs::read_to_string(&limit_file) {
                Ok(text) => {
                    return Ok(parse_limit(&text)?.map(|limit_bytes| CgroupTcpMemory {
                        source: CgroupMemorySource::V1Tcp,
                        dir,
                        limit_bytes,
                    }))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let Some(path) = v2_cgroup_of(proc_cgroup) else {
            return Ok(None);
        };
        for root in v2_roots {
            let dir = root.join(path.trim_start_matches('/'));
            match fs::read_to_string(dir.join("memory.max")) {
                Ok(text) => {
                    return Ok(parse_limit(&text)?.map(|limit_bytes| CgroupTcpMemory {
                        source: CgroupMemorySource::V2Memory,
                        dir,
                        limit_bytes,
                    }))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The TCP memory the cgroup is charged now, bytes.
    pub fn usage_bytes(&self) -> io::Result<u64> {
        match self.source {
            CgroupMemorySource::V1Tcp => {
                read_number(&self.dir.join("memory.kmem.tcp.usage_in_bytes"))
            }
            CgroupMemorySource::V2Memory => {
                parse_memory_stat_sock(&fs::read_to_string(self.dir.join("memory.stat"))?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "9:name=systemd:/\n4:memory:/process_api/4c62\n1:cpu,cpuacct:/\n0::/\n";
    const UNIFIED: &str = "0::/system.slice/proxy.service\n";

    /// A fresh directory under the system's temporary one.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("vantage-cgroup-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn proc_cgroup_lines_name_the_v1_and_v2_paths() {
        assert_eq!(
            v1_cgroup_of(HYBRID, "memory").as_deref(),
            Some("/process_api/4c62")
        );
        assert_eq!(v1_cgroup_of(HYBRID, "cpuacct").as_deref(), Some("/"));
        assert_eq!(v1_cgroup_of(UNIFIED, "memory"), None);
        assert_eq!(v2_cgroup_of(HYBRID).as_deref(), Some("/"));
        assert_eq!(
            v2_cgroup_of(UNIFIED).as_deref(),
            Some("/system.slice/proxy.service")
        );
        assert_eq!(v2_cgroup_of(""), None);
    }

    #[test]
    fn limits_parse_and_no_limit_is_none() {
        assert_eq!(parse_limit("67108864\n").unwrap(), Some(64 << 20));
        assert_eq!(parse_limit("max\n").unwrap(), None);
        assert_eq!(parse_limit("9223372036854771712\n").unwrap(), None);
        assert!(parse_limit("lots").is_err());
        let stat = "anon 1000\nfile 2000\nkernel 30\nsock 4096\nshmem 0\n";
        assert_eq!(parse_memory_stat_sock(stat).unwrap(), 4096);
        assert!(parse_memory_stat_sock("anon 1\n").is_err());
        assert!(parse_memory_stat_sock("sock many\n").is_err());
    }

    #[test]
    fn finds_a_v1_tcp_limit_and_reads_its_usage() {
        let root = scratch("v1");
        let dir = root.join("memory/process_api/4c62");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("memory.kmem.tcp.limit_in_bytes"), "33554432\n").unwrap();
        fs::write(dir.join("memory.kmem.tcp.usage_in_bytes"), "1228800\n").unwrap();
        let v2 = root.join("unified");
        let found = CgroupTcpMemory::find(HYBRID, &root.join("memory"), &[&v2])
            .unwrap()
            .unwrap();
        assert_eq!(found.source, CgroupMemorySource::V1Tcp);
        assert_eq!(found.limit_bytes, 32 << 20);
        assert_eq!(found.usage_bytes().unwrap(), 1_228_800);
        // Unlimited: none.
        fs::write(
            dir.join("memory.kmem.tcp.limit_in_bytes"),
            "9223372036854771712\n",
        )
        .unwrap();
        assert_eq!(
            CgroupTcpMemory::find(HYBRID, &root.join("memory"), &[&v2]).unwrap(),
            None
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn finds_a_v2_memory_limit_and_reads_the_sockets_share() {
        let root = scratch("v2");
        let dir = root.join("system.slice/proxy.service");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("memory.max"), "268435456\n").unwrap();
        fs::write(dir.join("memory.stat"), "anon 1\nsock 65536\n").unwrap();
        let missing = root.join("absent");
        let found = CgroupTcpMemory::find(UNIFIED, &root.join("memory"), &[&missing, &root])
            .unwrap()
            .unwrap();
        assert_eq!(found.source, CgroupMemorySource::V2Memory);
        assert_eq!(found.limit_bytes, 256 << 20);
        assert_eq!(found.usage_bytes().unwrap(), 65_536);
        fs::write(dir.join("memory.max"), "max\n").unwrap();
        assert_eq!(
            CgroupTcpMemory::find(UNIFIED, &root.join("memory"), &[&root]).unwrap(),
            None
        );
        // Neither hierarchy has the files: no limit, not an error.
        assert_eq!(
            CgroupTcpMemory::find(HYBRID, &missing, &[&missing]).unwrap(),
            None
        );
        fs::remove_dir_all(&root).unwrap();
    }
}
