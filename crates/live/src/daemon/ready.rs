//! The ready file: the daemon's pid, written once it serves, removed on
//! exit. One left by a killed daemon is recognised by its pid (no such
//! process, or not this program) and replaced; one whose pid runs this
//! program is refused.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ReadyFileError {
    #[error("ready file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ready file {} names pid {pid}, which is running: another instance is ready", path.display())]
    Running { path: PathBuf, pid: u32 },
}

/// A written ready file; removed on drop.
#[derive(Debug)]
pub struct ReadyFile {
    path: PathBuf,
}

/// Whether `pid` is a live process running the same executable as this
/// one.
fn same_program_running(pid: u32) -> bool {
    if pid == std::process::id() {
        return false;
    }
    let theirs = std::fs::read_link(format!("/proc/{pid}/exe"));
    let ours = std::fs::read_link("/proc/self/exe");
    match (theirs, ours) {
        (Ok(theirs), Ok(ours)) => theirs == ours,
        // Unreadable (another user's process): alive, so assume the worst.
        (Err(e), _) if e.kind() == std::io::ErrorKind::PermissionDenied => true,
        _ => false,
    }
}

impl ReadyFile {
    /// Checks for a stale file, then writes the pid beside and renames it
    /// into place: whoever sees the file sees the pid.
    pub fn create(path: &Path) -> Result<ReadyFile, ReadyFileError> {
        let error = |source| ReadyFileError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse::<u32>() {
                if same_program_running(pid) {
                    return Err(ReadyFileError::Running {
                        path: path.to_path_buf(),
                        pid,
                    });
                }
                eprintln!(
                    "{}: replacing a stale ready file (pid {pid} is gone)",
                    path.display()
                );
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_file_is_replaced_and_a_live_one_refused() {
        let dir = std::env::temp_dir().join(format!("vantage-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ready");
        // pid_max is at most 2^22: this pid does not exist.
        std::fs::write(&path, "4999999\n").unwrap();
        let ready = ReadyFile::create(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().trim(),
            std::process::id().to_string()
        );
        drop(ready);
        assert!(!path.exists());
        // Another copy of this test binary, alive: refused.
        let mut child = std::process::Command::new("/proc/self/exe")
            .arg("--list")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        std::fs::write(&path, format!("{pid}\n")).unwrap();
        let alive = child.try_wait().unwrap().is_none();
        let result = ReadyFile::create(&path);
        let _ = child.wait();
        if alive {
            // The child may have ended in between; only a refusal names it.
            if let Err(e) = result {
                assert!(e.to_string().contains(&pid.to_string()), "{e}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
