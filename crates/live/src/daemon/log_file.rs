//! An append-only log file: opened with `O_APPEND` (never truncated, so a
//! restart continues it and a failed start cannot damage it), flushed per
//! line, reopened by path on request (SIGUSR1 after logrotate renamed it).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The open file.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    out: BufWriter<File>,
}

fn open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl LogFile {
    /// Opens `path` for appending, creating it if needed.
    pub fn open(path: &Path) -> std::io::Result<LogFile> {
        Ok(LogFile {
            path: path.to_path_buf(),
            out: BufWriter::new(open(path)?),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one line (a newline is added) and flushes it.
    pub fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.out.write_all(line)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    /// Opens the path again (a new file if the old one was renamed); on
    /// error the old file stays in use.
    pub fn reopen(&mut self) -> std::io::Result<()> {
        let file = open(&self.path)?;
        self.out.flush()?;
        self.out = BufWriter::new(file);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_and_reopens_after_a_rename() {
        let dir = std::env::temp_dir().join(format!("vantage-logfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.log");
        std::fs::write(&path, "old\n").unwrap();
        let mut log = LogFile::open(&path).unwrap();
        log.write_line(b"one").unwrap();
        std::fs::rename(&path, dir.join("a.log.1")).unwrap();
        log.write_line(b"two").unwrap();
        log.reopen().unwrap();
        log.write_line(b"three").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("a.log.1")).unwrap(),
            "old\none\ntwo\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
