//! CPU selection and pinning for the verdict threads: with `cpu_fanout` the
//! kernel sends a CPU's SYNs to queue `first + CPU mod queues`, and a
//! wake-up on the core that handled the SYN is cheaper than one on another
//! core (an inter-processor interrupt), so each queue's thread is pinned to
//! the CPUs whose SYNs it receives.

/// The CPUs whose packets `--queue-cpu-fanout` sends to the queue at
/// `index` of `queues` (the kernel picks `first + CPU mod queues`), among
/// the `allowed` CPUs; empty when none of them maps there.
pub fn fanout_cpus(index: u16, queues: u16, allowed: &[usize]) -> Vec<usize> {
    let queues = usize::from(queues.max(1));
    allowed
        .iter()
        .copied()
        .filter(|cpu| cpu % queues == usize::from(index))
        .collect()
}

/// The CPUs this thread may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Runs the calling thread only on `cpus` (`sched_setaffinity`).
pub fn pin_current_thread(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is past CPU_SETSIZE"),
            ));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fanout_gives_each_queue_the_cpus_that_map_to_it() {
        let all: Vec<usize> = (0..8).collect();
        assert_eq!(fanout_cpus(0, 2, &all), [0, 2, 4, 6]);
        assert_eq!(fanout_cpus(1, 2, &all), [1, 3, 5, 7]);
        assert_eq!(fanout_cpus(2, 3, &all), [2, 5]);
        // Every allowed CPU belongs to exactly one queue.
        let mut seen: Vec<usize> = (0..3).flat_map(|i| fanout_cpus(i, 3, &all)).collect();
        seen.sort_unstable();
        assert_eq!(seen, all);
        // A restricted affinity mask can leave a queue without a CPU.
        assert!(fanout_cpus(1, 2, &[0, 2]).is_empty());
    }

    #[test]
    fn pinning_keeps_the_thread_on_the_cpus_given() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let first = allowed[0];
        std::thread::spawn(move || {
            pin_current_thread(&[first]).unwrap();
            assert_eq!(allowed_cpus().unwrap(), [first]);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(&[libc::CPU_SETSIZE as usize]).is_err());
    }
}
