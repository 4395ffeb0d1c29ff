//! Following a file another process appends to, like `tail -F`: the lines
//! it gains, whole (`vantage_core::lines::LineAssembler`: a partial last
//! line waits for its newline, a line over the cap is counted and skipped),
//! across rotation and truncation.
//!
//! * A file that is there at the first poll is read from its end (its
//!   lines are counted, so line numbers stay the file's); one that appears
//!   later, or replaces it, is new and read from its start.
//! * Rotation: the path names another file (device and inode) — what is
//!   left of the old one is read first, then the new one from its start.
//!   A path that names no file any more (renamed, not yet replaced) is
//!   waited for, the old file read to its end meanwhile.
//! * Truncation: the file is shorter than what was read of it — read again
//!   from its start.
//! * A missing file is waited for and said once ([`Followed::Missing`]),
//!   never an error.
//!
//! Each [`FileFollower::poll`] reads at most [`MAX_READ_PER_POLL`] bytes,
//! so a large file does not hold up its caller.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use vantage_core::lines::{LineAssembler, Piece};

/// Most bytes one poll reads.
pub const MAX_READ_PER_POLL: usize = 4 << 20;
const CHUNK: usize = 64 << 10;

/// What a poll found, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Followed {
    Line {
        number: u64,
        text: Vec<u8>,
    },
    /// A line over the cap, skipped.
    Oversized {
        number: u64,
        length: u64,
    },
    /// The path names no file (said once until it is there again).
    Missing,
    /// The file was opened (`from_start`: read from its start).
    Opened {
        from_start: bool,
    },
    /// The path names another file now: it is read from its start.
    Rotated,
    /// The file got shorter than what was read: read again from its start.
    Truncated,
    /// A partial last line was left when the file was rotated or
    /// truncated; its bytes are dropped.
    PartialDropped {
        number: u64,
        bytes: usize,
    },
    /// Reading failed (said once until a read succeeds).
    Failed(String),
}

impl Followed {
    /// What the daemon logs about an event other than a line (`None` for
    /// a line, which the input reads): `input` names it ("gate log",
    /// "proxy stream"), `cap` is its line cap, `while_missing` is added to
    /// the message of a missing file.
    pub fn message(
        &self,
        input: &str,
        file: &str,
        cap: usize,
        while_missing: &str,
    ) -> Option<String> {
        Some(match self {
            Followed::Line { .. } => return None,
            Followed::Oversized { number, length } => format!(
                "{input} {file}, line {number}: {length} bytes, longer than {cap}: skipped"
            ),
            Followed::Missing => format!("{input} {file}: no such file yet; waiting for it{while_missing}"),
            Followed::Opened { from_start } => format!(
                "{input} {file}: following it from its {}",
                if *from_start { "start" } else { "end" }
            ),
            Followed::Rotated => format!("{input} {file}: a new file; reading it from its start"),
            Followed::Truncated => format!("{input} {file}: truncated; reading it from its start"),
            Followed::PartialDropped { number, bytes } => format!(
                "{input} {file}, line {number}: {bytes} bytes without a newline left when the file was replaced: not used"
            ),
            Followed::Failed(e) => format!("{input} {e}"),
        })
    }
}

struct Open {
    file: File,
    identity: (u64, u64),
    /// Bytes read (or skipped) of it.
    offset: u64,
    /// Bytes at the start to skip rather than give (what was there when
    /// following started).
    skip_to: u64,
}

/// One followed path.
pub struct FileFollower {
    path: PathBuf,
    lines: LineAssembler,
    open: Option<Open>,
    /// Whether a poll was made (a file there at the first one is read from
    /// its end).
    polled_before: bool,
    missing_said: bool,
    failure_said: bool,
    buffer: Vec<u8>,
}

impl FileFollower {
    /// Follows `path`; lines over `max_line_bytes` are skipped. Nothing is
    /// read before the first poll.
    pub fn new(path: &Path, max_line_bytes: usize) -> FileFollower {
        FileFollower {
            path: path.to_path_buf(),
            lines: LineAssembler::new(max_line_bytes),
            open: None,
            polled_before: false,
            missing_said: false,
            failure_said: false,
            buffer: vec![0; CHUNK],
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the path names no file now.
    pub fn waiting(&self) -> bool {
        self.open.is_none()
    }

    /// Reads what the file gained since the last poll.
    pub fn poll(&mut self) -> Vec<Followed> {
        let mut out = Vec::new();
        let mut budget = MAX_READ_PER_POLL;
        if self.open.is_none() {
            self.try_open(&mut out);
        }
        self.polled_before = true;
        // What the path names now (None: nothing).
        let named = match std::fs::metadata(&self.path) {
            Ok(m) => Some((m.dev(), m.ino(), m.len())),
            Err(_) => None,
        };
        let Some(open) = &self.open else {
            return out;
        };
        match named {
            Some((dev, ino, len)) if (dev, ino) == open.identity => {
                if len < open.offset {
                    out.push(Followed::Truncated);
                    self.drop_partial(&mut out);
                    self.lines.restart();
                    if let Some(open) = &mut self.open {
                        open.offset = 0;
                        open.skip_to = 0;
                        if let Err(e) = open.file.seek(SeekFrom::Start(0)) {
                            self.fail(&mut out, e);
                            self.open = None;
                            return out;
                        }
                    }
                }
                self.read(&mut out, &mut budget);
            }
            other => {
                // Rotated or gone: the rest of the old file first.
                self.read(&mut out, &mut budget);
                if budget == 0 {
                    return out;
                }
                self.drop_partial(&mut out);
                self.lines.restart();
                self.open = None;
                if other.is_some() {
                    out.push(Followed::Rotated);
                    self.try_open(&mut out);
                    self.read(&mut out, &mut budget);
                } else {
                    self.say_missing(&mut out);
                }
            }
        }
        out
    }

    fn say_missing(&mut self, out: &mut Vec<Followed>) {
        if !self.missing_said {
            self.missing_said = true;
            out.push(Followed::Missing);
        }
    }

    fn fail(&mut self, out: &mut Vec<Followed>, e: std::io::Error) {
        if !self.failure_said {
            self.failure_said = true;
            out.push(Followed::Failed(format!("{}: {e}", self.path.display())));
        }
    }

    fn drop_partial(&mut self, out: &mut Vec<Followed>) {
        let bytes = self.lines.pending();
        if bytes > 0 {
            out.push(Followed::PartialDropped {
                number: self.lines.lines() + 1,
                bytes,
            });
        }
    }

    fn try_open(&mut self, out: &mut Vec<Followed>) {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                self.say_missing(out);
                return;
            }
            Err(e) => {
                self.fail(out, e);
                return;
            }
        };
        let metadata = match file.metadata() {
            Ok(m) => m,
            Err(e) => {
                self.fail(out, e);
                return;
            }
        };
        let from_start = self.polled_before;
        self.missing_said = false;
        self.lines.restart();
        self.open = Some(Open {
            file,
            identity: (metadata.dev(), metadata.ino()),
            offset: 0,
            skip_to: if from_start { 0 } else { metadata.len() },
        });
        out.push(Followed::Opened { from_start });
    }

    fn read(&mut self, out: &mut Vec<Followed>, budget: &mut usize) {
        let Some(open) = &mut self.open else {
            return;
        };
        while *budget > 0 {
            let want = self.buffer.len().min(*budget);
            let n = match open.file.read(&mut self.buffer[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    if !self.failure_said {
                        self.failure_said = true;
                        out.push(Followed::Failed(format!("{}: {e}", self.path.display())));
                    }
                    return;
                }
            };
            self.failure_said = false;
            *budget -= n;
            let bytes = &self.buffer[..n];
            // The part before `skip_to` is counted, not given.
            let skipped = (open.skip_to.saturating_sub(open.offset) as usize).min(n);
            self.lines.skip(&bytes[..skipped]);
            self.lines.push(&bytes[skipped..], |piece| {
                out.push(match piece {
                    Piece::Line { number, text } => Followed::Line {
                        number,
                        text: text.to_vec(),
                    },
                    Piece::Oversized { number, length } => Followed::Oversized { number, length },
                })
            });
            open.offset += n as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    struct Dir(PathBuf);
    impl Dir {
        fn new(name: &str) -> Dir {
            let dir =
                std::env::temp_dir().join(format!("vantage-follow-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn append(path: &Path, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    fn lines(found: &[Followed]) -> Vec<(u64, String)> {
        found
            .iter()
            .filter_map(|f| match f {
                Followed::Line { number, text } => {
                    Some((*number, String::from_utf8_lossy(text).into_owned()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_existing_file_is_followed_from_its_end_and_a_partial_line_waits() {
        let dir = Dir::new("end");
        let path = dir.0.join("gate.jsonl");
        append(&path, b"old 1\nold 2\nhalf");
        let mut f = FileFollower::new(&path, 100);
        let found = f.poll();
        assert_eq!(found, vec![Followed::Opened { from_start: false }]);
        append(&path, b" done\nnew 4\npart");
        assert_eq!(lines(&f.poll()), vec![(4, "new 4".to_string())]);
        assert!(f.poll().is_empty());
        append(&path, b"ial\n");
        assert_eq!(lines(&f.poll()), vec![(5, "partial".to_string())]);
    }

    #[test]
    fn a_missing_file_is_waited_for_and_said_once() {
        let dir = Dir::new("missing");
        let path = dir.0.join("gate.jsonl");
        let mut f = FileFollower::new(&path, 100);
        assert_eq!(f.poll(), vec![Followed::Missing]);
        assert!(f.poll().is_empty());
        assert!(f.waiting());
        append(&path, b"first\n");
        let found = f.poll();
        // Appeared after following started: new, read from its start.
        assert_eq!(found[0], Followed::Opened { from_start: true });
        assert_eq!(lines(&found), vec![(1, "first".to_string())]);
        append(&path, b"second\n");
        assert_eq!(lines(&f.poll()), vec![(2, "second".to_string())]);
        assert!(!f.waiting());
    }

    #[test]
    fn rotation_reads_the_old_rest_then_the_new_file_from_its_start() {
        let dir = Dir::new("rotate");
        let path = dir.0.join("gate.jsonl");
        append(&path, b"");
        let mut f = FileFollower::new(&path, 100);
        f.poll();
        append(&path, b"a\nb\n");
        assert_eq!(lines(&f.poll()).len(), 2);
        append(&path, b"c\npartial");
        std::fs::rename(&path, dir.0.join("gate.jsonl.1")).unwrap();
        // Renamed, not yet replaced: the rest of the old file, then waiting.
        let found = f.poll();
        assert_eq!(lines(&found), vec![(3, "c".to_string())]);
        assert!(found.contains(&Followed::PartialDropped {
            number: 4,
            bytes: 7
        }));
        assert!(found.contains(&Followed::Missing));
        append(&path, b"new 1\n");
        let found = f.poll();
        assert_eq!(found[0], Followed::Opened { from_start: true });
        assert_eq!(lines(&found), vec![(1, "new 1".to_string())]);
        // Replaced at once (logrotate's create): same.
        append(&path, b"new 2\n");
        std::fs::rename(&path, dir.0.join("gate.jsonl.2")).unwrap();
        append(&path, b"newer 1\n");
        let found = f.poll();
        assert!(found.contains(&Followed::Rotated), "{found:?}");
        assert_eq!(
            lines(&found),
            vec![(2, "new 2".to_string()), (1, "newer 1".to_string())]
        );
    }

    #[test]
    fn truncation_reads_again_from_the_start() {
        let dir = Dir::new("truncate");
        let path = dir.0.join("gate.jsonl");
        append(&path, b"");
        let mut f = FileFollower::new(&path, 100);
        f.poll();
        append(&path, b"one\ntwo\n");
        assert_eq!(lines(&f.poll()).len(), 2);
        std::fs::write(&path, b"x\n").unwrap();
        let found = f.poll();
        assert_eq!(found[0], Followed::Truncated);
        assert_eq!(lines(&found), vec![(1, "x".to_string())]);
    }

    #[test]
    fn an_oversized_line_is_skipped_with_its_number() {
        let dir = Dir::new("oversized");
        let path = dir.0.join("gate.jsonl");
        append(&path, b"");
        let mut f = FileFollower::new(&path, 8);
        f.poll();
        append(&path, &[b'x'; 100]);
        assert!(f.poll().is_empty());
        append(&path, b"\nshort\n");
        let found = f.poll();
        assert_eq!(
            found,
            vec![
                Followed::Oversized {
                    number: 1,
                    length: 100
                },
                Followed::Line {
                    number: 2,
                    text: b"short".to_vec()
                }
            ]
        );
    }
}
