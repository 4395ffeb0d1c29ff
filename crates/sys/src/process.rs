//! Whether a process id names a live process (the owner recorded in a
//! gate's rules), and how many descriptors this process holds.

use std::io;

/// True when a process with id `pid` exists (in this pid namespace), even
/// one this process may not signal, and is not a zombie (killed, waiting
/// for its parent to collect its status).
pub fn is_alive(pid: u32) -> bool {
    exists(pid) && !is_zombie(pid)
}

/// The state letter of `/proc/PID/stat` is `Z`.
fn is_zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state …`; comm may hold spaces and parentheses.
    stat.rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next())
        == Some("Z")
}

fn exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Descriptors this process holds: `poll` with no events over every
/// descriptor number its table has room for (`FDSize` in
/// `/proc/self/status`), counting those not reported invalid
/// (`POLLNVAL`); at most the descriptor limit's number of entries per
/// call, which is all `poll` takes. A zero timeout registers no wait, so
/// nothing is left behind. Cheaper than listing `/proc/self/fd`, which
/// builds a directory entry and an inode per descriptor (measured in
/// bench/proxy/README-resources.md); that listing is the fallback when
/// the limit is zero.
pub fn open_descriptors() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let table = status
        .lines()
        .find_map(|line| line.strip_prefix("FDSize:"))
        .and_then(|size| size.trim().parse::<usize>().ok())
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no FDSize in /proc/self/status")
        })?;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let per_call = usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX);
    if per_call == 0 || table > libc::c_int::MAX as usize {
        return listed_descriptors();
    }
    let mut entries: Vec<libc::pollfd> = (0..table as libc::c_int)
        .map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        })
        .collect();
    for chunk in entries.chunks_mut(per_call) {
        // SAFETY: the chunk holds `chunk.len()` initialized pollfds, which
        // poll reads and whose `revents` it writes; the timeout is zero.
        let ready = unsafe { libc::poll(chunk.as_mut_ptr(), chunk.len() as libc::nfds_t, 0) };
        if ready < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(entries
        .iter()
        .filter(|e| e.revents & libc::POLLNVAL == 0)
        .count() as u64)
}

/// Descriptors this process holds, from `/proc/self/fd` (less the one
/// the listing itself opens).
fn listed_descriptors() -> io::Result<u64> {
    let listed = std::fs::read_dir("/proc/self/fd")?.count() as u64;
    Ok(listed.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_descriptors_counts_what_proc_self_fd_lists() {
        // Other tests of this binary open and close descriptors on their
        // own threads: compare counts taken while the listing stays put.
        let mut seen = Vec::new();
        for _ in 0..50 {
            let before = listed_descriptors().unwrap();
            let polled = open_descriptors().unwrap();
            let after = listed_descriptors().unwrap();
            if before == after && polled == before {
                // 40 more are counted as well.
                let files: Vec<std::fs::File> = (0..40)
                    .map(|_| std::fs::File::open("/dev/null").unwrap())
                    .collect();
                let listed = listed_descriptors().unwrap();
                let polled = open_descriptors().unwrap();
                drop(files);
                if listed == before + 40 && polled == listed {
                    return;
                }
            }
            seen.push((before, polled, after));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        panic!("no settled count matched (listed, polled, listed): {seen:?}");
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !is_zombie(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(exists(pid));
        assert!(!is_alive(pid));
        child.wait().unwrap();
    }

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        assert!(is_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!is_alive(pid));
        assert!(!is_alive(0));
        assert!(!is_alive(u32::MAX));
    }
}
