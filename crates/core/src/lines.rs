//! Lines out of a growing byte stream (a JSON Lines file another process
//! appends to), with bounded memory.
//!
//! Sans-IO: the caller reads the bytes and hands them over in pieces of
//! any size; a line is given once its newline came, so a partial last line
//! waits for the rest. A line longer than the cap is not kept: its bytes
//! are counted and it is given as [`Piece::Oversized`] once its newline
//! came, so memory stays at the cap whatever the writer does. Line numbers
//! count from 1 at the start of the stream (or of the last [`restart`]).
//!
//! [`restart`]: LineAssembler::restart

/// What [`LineAssembler::push`] gives.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A whole line, without its newline (and without a `\r` before it).
    Line { number: u64, text: &'a [u8] },
    /// A line longer than the cap: its number and length in bytes.
    Oversized { number: u64, length: u64 },
}

/// Assembles lines; holds at most `max_line_bytes` of a partial line.
#[derive(Debug)]
pub struct LineAssembler {
    max_line_bytes: usize,
    partial: Vec<u8>,
    /// The partial line is over the cap: its length so far (not kept).
    oversized: Option<u64>,
    /// The partial line was skipped (`skip`): given neither as a line nor
    /// as oversized.
    skipping: bool,
    /// Lines finished so far.
    lines: u64,
}

impl LineAssembler {
    /// `max_line_bytes`: the longest line kept (at least 1).
    pub fn new(max_line_bytes: usize) -> LineAssembler {
        LineAssembler {
            max_line_bytes: max_line_bytes.max(1),
            partial: Vec::new(),
            oversized: None,
            skipping: false,
            lines: 0,
        }
    }

    /// Lines finished so far (the number of the last one given or skipped).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Bytes of a partial line held.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Forgets a partial line and counts lines from 1 again (the stream
    /// starts over: a file truncated or replaced).
    pub fn restart(&mut self) {
        self.partial.clear();
        self.oversized = None;
        self.skipping = false;
        self.lines = 0;
    }

    /// Bytes passed over unread (what was in a file before it was
    /// followed): lines are counted, none is given; a line they end in the
    /// middle of is skipped too when its newline comes.
    pub fn skip(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        if newlines > 0 {
            self.lines += newlines;
            self.partial.clear();
            self.oversized = None;
        }
        self.skipping = bytes.last() != Some(&b'\n');
    }

    /// Adds bytes; gives each line they finish.
    pub fn push(&mut self, mut bytes: &[u8], mut each: impl FnMut(Piece<'_>)) {
        while !bytes.is_empty() {
            let (part, finished) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..at], true),
                None => (bytes, false),
            };
            bytes = if finished {
                &bytes[part.len() + 1..]
            } else {
                &[]
            };
            if !self.skipping {
                match &mut self.oversized {
                    Some(length) => *length += part.len() as u64,
                    None if self.partial.len() + part.len() > self.max_line_bytes => {
                        self.oversized = Some((self.partial.len() + part.len()) as u64);
                        self.partial.clear();
                    }
                    None => self.partial.extend_from_slice(part),
                }
            }
            if !finished {
                continue;
            }
            self.lines += 1;
            let number = self.lines;
            if self.skipping {
                self.skipping = false;
            } else if let Some(length) = self.oversized.take() {
                each(Piece::Oversized { number, length });
            } else {
                let text = self.partial.strip_suffix(b"\r").unwrap_or(&self.partial);
                each(Piece::Line { number, text });
            }
            self.partial.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(assembler: &mut LineAssembler, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        assembler.push(bytes, |piece| {
            out.push(match piece {
                Piece::Line { number, text } => {
                    format!("{number}:{}", String::from_utf8_lossy(text))
                }
                Piece::Oversized { number, length } => format!("{number}:oversized {length}"),
            })
        });
        out
    }

    #[test]
    fn a_partial_line_waits_for_its_newline() {
        let mut a = LineAssembler::new(100);
        assert_eq!(run(&mut a, b"one\ntw"), vec!["1:one"]);
        assert_eq!(a.pending(), 2);
        assert!(run(&mut a, b"o").is_empty());
        assert_eq!(
            run(&mut a, b"\r\n\nthree\n"),
            vec!["2:two", "3:", "4:three"]
        );
        assert_eq!(a.lines(), 4);
        assert_eq!(a.pending(), 0);
    }

    #[test]
    fn an_oversized_line_is_counted_not_kept() {
        let mut a = LineAssembler::new(4);
        assert_eq!(run(&mut a, b"1234\n12"), vec!["1:1234"]);
        assert!(run(&mut a, b"345").is_empty());
        assert_eq!(a.pending(), 0, "nothing of an oversized line is held");
        assert!(run(&mut a, &[b'x'; 1000]).is_empty());
        assert_eq!(a.pending(), 0);
        assert_eq!(run(&mut a, b"\nok\n"), vec!["2:oversized 1005", "3:ok"]);
    }

    #[test]
    fn skipped_bytes_count_lines_and_end_a_partial_line() {
        let mut a = LineAssembler::new(100);
        a.skip(b"old\nold\nhalf");
        assert_eq!(a.lines(), 2);
        assert_eq!(run(&mut a, b" of it\nnew\n"), vec!["4:new"]);
        a.skip(b"whole\n");
        assert_eq!(run(&mut a, b"next\n"), vec!["6:next"]);
        a.restart();
        assert_eq!(run(&mut a, b"first\n"), vec!["1:first"]);
    }
}
