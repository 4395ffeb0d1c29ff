//! The emulator's clock and its wake-up timer: `CLOCK_MONOTONIC` read as
//! [`Nanos`], and a `timerfd` armed at an absolute instant of that clock.
//!
//! `poll`'s own timeout counts whole milliseconds and gets timer slack added
//! (50 µs by default); a timerfd is an hrtimer with no slack, so the
//! emulator wakes within microseconds of a packet's release time.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use vantage_core::Nanos;

/// `CLOCK_MONOTONIC` now.
pub fn monotonic_now() -> Nanos {
    clock_now(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Nanos {
    clock_now(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_now(clock: libc::clockid_t) -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Nanos((ts.tv_sec.max(0) as u64).saturating_mul(1_000_000_000) + ts.tv_nsec.max(0) as u64)
}

/// A non-blocking `timerfd` on `CLOCK_MONOTONIC`.
#[derive(Debug)]
pub struct WakeTimer {
    fd: OwnedFd,
    armed_at: Option<Nanos>,
}

impl AsFd for WakeTimer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl WakeTimer {
    pub fn new() -> io::Result<WakeTimer> {
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(WakeTimer {
            // SAFETY: `raw` is a fresh descriptor that nothing else owns.
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
            armed_at: None,
        })
    }

    /// Arms the timer to fire at `at` (absolute, monotonic clock), or
    /// disarms it with `None`. Does nothing when already set so.
    pub fn set(&mut self, at: Option<Nanos>) -> io::Result<()> {
        if self.armed_at == at {
            return Ok(());
        }
        // An all-zero it_value disarms, so an instant of 0 becomes 1 ns
        // (long past: fires at once).
        let value = at.map_or(0, |t| t.as_nanos().max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (value / 1_000_000_000) as libc::time_t,
                tv_nsec: (value % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid descriptor and itimerspec; the old value is not asked for.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            self.armed_at = None;
            return Err(io::Error::last_os_error());
        }
        self.armed_at = at;
        Ok(())
    }

    /// Consumes a pending expiry so the descriptor stops being readable,
    /// and forgets the armed instant (it has passed).
    pub fn acknowledge(&mut self) {
        let mut expirations = [0u8; 8];
        // SAFETY: reads at most 8 bytes into an 8-byte buffer; EAGAIN (no
        // expiry pending) is fine to ignore.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
        if n == 8 {
            self.armed_at = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_fires_at_its_absolute_instant() {
        let mut timer = WakeTimer::new().unwrap();
        let start = monotonic_now();
        let at = start + Nanos::from_millis(3);
        timer.set(Some(at)).unwrap();
        let mut poll_fd = libc::pollfd {
            fd: timer.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll_fd, 1, 1000) };
        let woke = monotonic_now();
        assert_eq!(ready, 1);
        assert!(woke >= at, "woke {} ns early", (at - woke).as_nanos());
        timer.acknowledge();
        timer.set(None).unwrap();
        // SAFETY: one valid pollfd.
        assert_eq!(
            unsafe { libc::poll(&mut poll_fd, 1, 10) },
            0,
            "disarmed timer fired"
        );
    }

    #[test]
    fn clocks_advance() {
        let a = monotonic_now();
        let cpu = thread_cpu_time();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(monotonic_now() > a);
        assert!(thread_cpu_time() > cpu);
    }
}
