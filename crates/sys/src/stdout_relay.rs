//! Standard output that a reader who leaves early cannot break.
//!
//! `vantage … | head -1` closes the pipe after one line. Rust ignores
//! SIGPIPE, so the next `println!` — here or in any library crate — fails
//! with EPIPE and panics, and the run stops before writing its result files.
//! Instead, when standard output is a pipe or a socket, fd 1 is pointed at an
//! internal pipe and a thread relays it to the real output; once the reader
//! is gone the relay discards what follows, so every `println!` succeeds and
//! the program runs to its end with its own exit status (0 on success).
//! Standard error joins the relay when it is the same pipe (`2>&1 | head`).
//! A terminal or a file cannot be closed by its reader and is left alone.
//!
//! Hand-written on `libc`: no crate redirects fd 1 under `println!` this way.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

const STDOUT: RawFd = 1;
const STDERR: RawFd = 2;

/// How long the relay waits for more output once the program has finished
/// (output of child processes that still hold the pipe), in milliseconds.
const DRAIN_QUIET_MS: libc::c_int = 100;

/// The relay between fd 1 and the real standard output; ended (flushed,
/// drained, fd 1 restored) when dropped, also while a panic unwinds.
pub struct StdoutRelay {
    /// A copy of the real standard output, put back on fd 1 at the end.
    real: File,
    /// Standard error was the same pipe and now writes to the relay too.
    stderr_relayed: bool,
    finished: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StdoutRelay {
    /// Starts the relay when standard output is a pipe or a socket; `None`
    /// (output untouched) otherwise, or when the pipe cannot be made.
    pub fn start() -> Option<StdoutRelay> {
        let stdout = file_status(STDOUT)?;
        let kind = stdout.st_mode & libc::S_IFMT;
        if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
            return None;
        }
        let stderr_shared = file_status(STDERR)
            .is_some_and(|e| e.st_dev == stdout.st_dev && e.st_ino == stdout.st_ino);
        // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own, or -1.
        let real = unsafe { libc::fcntl(STDOUT, libc::F_DUPFD_CLOEXEC, 3) };
        if real < 0 {
            return None;
        }
        // SAFETY: `real` is a fresh descriptor owned by nobody else.
        let real = unsafe { File::from_raw_fd(real) };
        let mut ends = [0; 2];
        // SAFETY: `ends` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: both ends are fresh descriptors owned by nobody else.
        let (read_end, write_end) =
            unsafe { (File::from_raw_fd(ends[0]), File::from_raw_fd(ends[1])) };
        let _ = std::io::stdout().flush();
        // SAFETY: dup2 onto the standard descriptors; `write_end` stays
        // valid for the call. The copies on fd 1 and 2 are not CLOEXEC, so
        // child processes keep writing to standard output as before.
        if unsafe { libc::dup2(write_end.as_raw_fd(), STDOUT) } < 0 {
            return None;
        }
        let stderr_relayed =
            stderr_shared && unsafe { libc::dup2(write_end.as_raw_fd(), STDERR) } >= 0;
        drop(write_end);
        let finished = Arc::new(AtomicBool::new(false));
        let output = match real.try_clone() {
            Ok(output) => output,
            Err(_) => {
                restore(&real, stderr_relayed);
                return None;
            }
        };
        let thread = std::thread::Builder::new()
            .name("stdout-relay".into())
            .spawn({
                let finished = Arc::clone(&finished);
                move || relay(read_end, output, &finished)
            });
        match thread {
            Ok(thread) => Some(StdoutRelay {
                real,
                stderr_relayed,
                finished,
                thread: Some(thread),
            }),
            Err(_) => {
                restore(&real, stderr_relayed);
                None
            }
        }
    }
}

impl Drop for StdoutRelay {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        restore(&self.real, self.stderr_relayed);
        self.finished.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Puts the real standard output back on fd 1 (and 2), which closes this
/// process's write ends of the internal pipe.
fn restore(real: &File, stderr_relayed: bool) {
    // SAFETY: dup2 of a descriptor we own onto the standard descriptors.
    unsafe {
        libc::dup2(real.as_raw_fd(), STDOUT);
        if stderr_relayed {
            libc::dup2(real.as_raw_fd(), STDERR);
        }
    }
}

fn file_status(fd: RawFd) -> Option<libc::stat> {
    // SAFETY: fstat fills the zeroed struct or fails.
    let mut status: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut status) } == 0).then_some(status)
}

/// Copies the internal pipe to the real output until every writer has
/// closed it, or the program has finished and nothing came for
/// [`DRAIN_QUIET_MS`]. After a failed write (the reader left) the rest is
/// read and discarded.
fn relay(mut input: File, mut output: File, finished: &AtomicBool) {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut reader_gone = false;
    loop {
        let mut poll = libc::pollfd {
            fd: input.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, DRAIN_QUIET_MS) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if ready == 0 {
            if finished.load(Ordering::Acquire) {
                break;
            }
            continue;
        }
        let count = match input.read(&mut buffer) {
            Ok(0) => break,
            Ok(count) => count,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if !reader_gone && output.write_all(&buffer[..count]).is_err() {
            reader_gone = true;
        }
    }
}
