//! Validation of every TOML format of the project: one [`Checker`] per file,
//! whose errors name the file, the line and the full key path
//! (`sweep.values[1]`, `listeners[0].port`) and say what is allowed.
//!
//! Lines come from the document's spans (`toml_edit`): the key itself when
//! it is in the text, else the nearest parent table or array item, else no
//! line (a default value that fails has no line of its own).

use std::marker::PhantomData;
use std::ops::Range;

use serde::de::DeserializeOwned;
use toml_edit::{ImDocument, Item, Value};

/// Most characters of an offending line echoed in a syntax error.
pub const MAX_ECHOED_CHARS: usize = 200;

/// Largest configuration, scenario or spec file read (16 MiB): the
/// largest shipped is a few kilobytes.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Largest counters file read (256 MiB: some 4 million rows, as many as
/// one estimate run takes intervals).
pub const MAX_COUNTERS_BYTES: u64 = 256 << 20;

/// Why [`read_capped`] gave no text.
#[derive(Debug, thiserror::Error)]
pub enum ReadCappedError {
    #[error("larger than {}, the most this tool reads for such a file", size(*cap))]
    TooLarge { cap: u64 },
    #[error("not UTF-8 text (byte {offset})")]
    NotText { offset: usize },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// Reads a whole text file of at most `cap` bytes from an opened reader;
/// a larger one (or an endless one, `/dev/zero`) is refused after `cap`
/// bytes, never read to its end.
pub fn read_capped(reader: impl std::io::Read, cap: u64) -> Result<String, ReadCappedError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    reader.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(ReadCappedError::TooLarge { cap });
    }
    String::from_utf8(bytes).map_err(|e| ReadCappedError::NotText {
        offset: e.utf8_error().valid_up_to(),
    })
}

/// A reader that fails once more than `cap` bytes were read through it:
/// for files read a line at a time.
pub struct CappedReader<R> {
    inner: R,
    left: u64,
    cap: u64,
}

impl<R> CappedReader<R> {
    pub fn new(inner: R, cap: u64) -> CappedReader<R> {
        CappedReader {
            inner,
            left: cap,
            cap,
        }
    }
}

impl<R: std::io::Read> std::io::Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // One byte beyond the cap tells a file of exactly `cap` bytes from
        // a longer one.
        let wanted = (buf.len() as u64).min(self.left.saturating_add(1)) as usize;
        let n = self.inner.read(&mut buf[..wanted])?;
        if n as u64 > self.left {
            return Err(std::io::Error::other(ReadCappedError::TooLarge {
                cap: self.cap,
            }));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// A configuration file that cannot be used, with where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML, or not the expected tables and keys (unknown key, wrong
    /// type).
    #[error("{origin}{}: {message}{}", at_line(*line), echo(excerpt))]
    Syntax {
        origin: String,
        line: Option<usize>,
        message: String,
        /// The offending line, at most [`MAX_ECHOED_CHARS`] characters.
        excerpt: Option<String>,
    },
    /// A value out of range or inconsistent with another.
    #[error("{origin}{}: `{key}` {problem}", at_line(*line))]
    Invalid {
        origin: String,
        line: Option<usize>,
        key: String,
        problem: String,
    },
}

impl ConfigError {
    /// The key path an [`ConfigError::Invalid`] names.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Syntax { .. } => None,
        }
    }

    /// The line the error points at, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Invalid { line, .. } | ConfigError::Syntax { line, .. } => *line,
        }
    }
}

fn at_line(line: Option<usize>) -> String {
    line.map_or_else(String::new, |line| format!(":{line}"))
}

fn echo(excerpt: &Option<String>) -> String {
    excerpt
        .as_ref()
        .map_or_else(String::new, |text| format!("\n  | {text}"))
}

/// Checks the values of one file. `E` is the error type of the format's
/// reader (any type a [`ConfigError`] converts into), so that a reader's
/// functions return their own error.
pub struct Checker<'a, E = ConfigError> {
    origin: &'a str,
    text: &'a str,
    document: Option<ImDocument<&'a str>>,
    error: PhantomData<fn() -> E>,
}

impl<'a, E: From<ConfigError>> Checker<'a, E> {
    /// A checker for `text`, named `origin` (a path or a name) in errors.
    pub fn new(origin: &'a str, text: &'a str) -> Self {
        Checker {
            origin,
            text,
            document: ImDocument::parse(text).ok(),
            error: PhantomData,
        }
    }

    /// The file's name in errors.
    pub fn origin(&self) -> &'a str {
        self.origin
    }

    /// Deserializes the whole text; a syntax error or a key serde refuses
    /// names its line and echoes it.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, E> {
        toml::from_str(self.text).map_err(|e| {
            let line = e.span().map(|span| line_of(self.text, span.start));
            E::from(ConfigError::Syntax {
                origin: self.origin.to_string(),
                line,
                message: shorten_quoted(e.message().trim_end()),
                excerpt: line.map(|line| excerpt(self.text, line)),
            })
        })
    }

    /// An error about the value at `key` (a full key path).
    pub fn fail(&self, key: &str, problem: String) -> E {
        E::from(ConfigError::Invalid {
            origin: self.origin.to_string(),
            line: self.line_of_key(key),
            key: key.to_string(),
            problem: shorten_quoted(&problem),
        })
    }

    /// `value` if it is finite and in [low, high].
    pub fn range(&self, key: &str, value: f64, low: f64, high: f64) -> Result<f64, E> {
        if value.is_finite() && value >= low && value <= high {
            Ok(value)
        } else {
            Err(self.fail(
                key,
                format!("must be between {low} and {high}, got {value}"),
            ))
        }
    }

    /// `value` if it is a whole number in [low, high].
    pub fn whole(&self, key: &str, value: f64, low: f64, high: f64) -> Result<u64, E> {
        if value.is_finite() && value.fract() == 0.0 && value >= low && value <= high {
            Ok(value as u64)
        } else {
            Err(self.fail(
                key,
                format!("must be a whole number between {low} and {high}, got {value}"),
            ))
        }
    }

    /// Every value of a list in [low, high]; an empty list is an error.
    pub fn list(&self, key: &str, values: &[f64], low: f64, high: f64) -> Result<Vec<f64>, E> {
        if values.is_empty() {
            return Err(self.fail(key, "must list at least one value".into()));
        }
        values
            .iter()
            .enumerate()
            .map(|(i, v)| self.range(&format!("{key}[{i}]"), *v, low, high))
            .collect()
    }

    /// The line of `key` (`a.b[2].c`) in the text: the key's own, else its
    /// nearest parent's; `None` when not even the first segment is there.
    pub fn line_of_key(&self, key: &str) -> Option<usize> {
        let document = self.document.as_ref()?;
        let mut item = document.as_item();
        let mut best: Option<Range<usize>> = None;
        for segment in segments(key) {
            let found = match segment {
                Segment::Key(name) => child(item, name),
                Segment::Index(index) => element(item, index),
            };
            let Some((span, next)) = found else { break };
            if span.is_some() {
                best = span;
            }
            item = next;
        }
        best.map(|span| line_of(self.text, span.start))
    }

    /// The value of a renamed key: the one under `new_key`, else the one
    /// under its old name `old_key` with a warning pushed to `warnings`
    /// that names the file, the line, the old key and the new one (old
    /// names are read until [`OLD_NAMES_REFUSED_FROM`]). Both given is an
    /// error naming both.
    pub fn renamed<T>(
        &self,
        new_key: &str,
        new: Option<T>,
        old_key: &str,
        old: Option<T>,
        warnings: &mut Vec<String>,
    ) -> Result<Option<T>, E> {
        match (new, old) {
            (Some(_), Some(_)) => Err(self.fail(
                old_key,
                format!("and `{new_key}` are the same setting under its old and new name: give only `{new_key}`"),
            )),
            (Some(value), None) => Ok(Some(value)),
            (None, Some(value)) => {
                warnings.push(format!(
                    "{}{}: `{old_key}` is the old name of `{new_key}`; it is read until vantage {OLD_NAMES_REFUSED_FROM}, rename it",
                    self.origin,
                    at_line(self.line_of_key(old_key))
                ));
                Ok(Some(value))
            }
            (None, None) => Ok(None),
        }
    }
}

/// The release from which a key's old name (`scenario.clients`,
/// `scenario.profiles`, `filter.clients`; docs/scenarios.md, "Names across
/// studies") is an unknown key; until then [`Checker::renamed`] reads it
/// with a warning.
pub const OLD_NAMES_REFUSED_FROM: &str = "0.2.0";

enum Segment<'k> {
    Key(&'k str),
    Index(usize),
}

/// `a.b[2].c` → `a`, `b`, `[2]`, `c`.
fn segments(key: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(at) => (&part[..at], &part[at..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            out.push(Segment::Key(name));
        }
        while let Some(stripped) = rest.strip_prefix('[') {
            let Some(end) = stripped.find(']') else { break };
            match stripped[..end].parse() {
                Ok(index) => out.push(Segment::Index(index)),
                Err(_) => return out,
            }
            rest = &stripped[end + 1..];
        }
    }
    out
}

/// The span of `name` in a table (its key, else its value) and its item.
fn child<'i>(item: &'i Item, name: &str) -> Option<(Option<Range<usize>>, &'i Item)> {
    match item {
        Item::Table(table) => {
            let (key, value) = table.get_key_value(name)?;
            Some((key.span().or_else(|| value.span()), value))
        }
        Item::Value(Value::InlineTable(table)) => {
            let (key, value) = table.get_key_value(name)?;
            Some((key.span().or_else(|| value.span()), value))
        }
        _ => None,
    }
}

/// The span of item `index` of an array or array of tables, and its item.
fn element(item: &Item, index: usize) -> Option<(Option<Range<usize>>, &Item)> {
    let span = match item {
        Item::ArrayOfTables(tables) => tables.get(index)?.span(),
        Item::Value(Value::Array(array)) => array.get(index)?.span(),
        _ => return None,
    };
    Some((span, item.get(index)?))
}

/// 1-based line of byte `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Line `line` (1-based) of `text`, cut at [`MAX_ECHOED_CHARS`] characters.
/// `text` with every `quoted` or "quoted" span cut to its first
/// [`MAX_ECHOED_CHARS`] characters: messages quote what the file holds (an
/// unknown key, a value), which may be a line of megabytes.
fn shorten_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4 * MAX_ECHOED_CHARS));
    let mut quote: Option<char> = None;
    let mut quoted = 0usize;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                out.push(c);
            }
            Some(_) => {
                quoted += 1;
                if quoted <= MAX_ECHOED_CHARS {
                    out.push(c);
                } else if quoted == MAX_ECHOED_CHARS + 1 {
                    out.push('…');
                }
            }
            None => {
                if c == '`' || c == '"' {
                    quote = Some(c);
                    quoted = 0;
                }
                out.push(c);
            }
        }
    }
    out
}

fn excerpt(text: &str, line: usize) -> String {
    let full = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let mut cut: String = full.chars().take(MAX_ECHOED_CHARS).collect();
    if full.chars().count() > MAX_ECHOED_CHARS {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {

    #[test]
    fn text_files_are_read_up_to_a_cap() {
        assert_eq!(read_capped("a = 1\n".as_bytes(), 6).unwrap(), "a = 1\n");
        let err = read_capped("a = 1\n".as_bytes(), 5).unwrap_err();
        assert!(matches!(err, ReadCappedError::TooLarge { cap: 5 }));
        // An endless input is refused after the cap.
        let err = read_capped(std::io::repeat(0), MAX_CONFIG_BYTES).unwrap_err();
        assert_eq!(
            err.to_string(),
            "larger than 16 MiB, the most this tool reads for such a file"
        );
        let err = read_capped(&[b'a', 0xff][..], 10).unwrap_err();
        assert_eq!(err.to_string(), "not UTF-8 text (byte 1)");
        use std::io::Read;
        let mut text = String::new();
        let mut capped = CappedReader::new("abcdef".as_bytes(), 6);
        capped.read_to_string(&mut text).unwrap();
        assert_eq!(text, "abcdef");
        let mut capped = CappedReader::new(std::io::repeat(b'a'), 1000);
        let err = capped.read_to_string(&mut String::new()).unwrap_err();
        assert!(
            err.to_string().starts_with("larger than 1000 bytes"),
            "{err}"
        );
    }

    use super::*;

    const TEXT: &str = r#"[scenario]
title = "t"

[sweep]
parameter = "workload.mean"
values = [
  10,
  20,
]

[[listeners]]
port = 80

[[listeners]]
address = "10.0.0.1"
port = 81

[filter]
population = { "linux-6.5" = 0.7, macos = 0.3 }
"#;

    fn checker() -> Checker<'static> {
        Checker::new("f.toml", TEXT)
    }

    #[test]
    fn lines_of_nested_keys_and_array_items() {
        let c = checker();
        assert_eq!(c.line_of_key("scenario.title"), Some(2));
        assert_eq!(c.line_of_key("sweep.parameter"), Some(5));
        assert_eq!(c.line_of_key("sweep.values[1]"), Some(8));
        assert_eq!(c.line_of_key("listeners[1].port"), Some(16));
        assert_eq!(c.line_of_key("listeners[1]"), Some(14));
        assert_eq!(c.line_of_key("filter.population.macos"), Some(19));
    }

    #[test]
    fn missing_keys_fall_back_to_the_nearest_parent() {
        let c = checker();
        assert_eq!(c.line_of_key("sweep.values[9]"), Some(6));
        assert_eq!(c.line_of_key("filter.bucket_size"), Some(18));
        assert_eq!(c.line_of_key("workload.mean"), None);
        let e = c.fail("sweep.values[1]", "must be positive".into());
        assert_eq!(
            e.to_string(),
            "f.toml:8: `sweep.values[1]` must be positive"
        );
        assert_eq!(
            c.fail("workload", "is missing".into()).to_string(),
            "f.toml: `workload` is missing"
        );
    }

    #[test]
    fn ranges_and_whole_numbers() {
        let c = checker();
        assert_eq!(c.range("scenario.title", 3.0, 0.0, 5.0), Ok(3.0));
        let e = c.range("scenario.title", 7.0, 0.0, 5.0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml:2: `scenario.title` must be between 0 and 5, got 7"
        );
        assert_eq!(c.whole("k", 4.0, 1.0, 65535.0), Ok(4));
        let e = c.whole("k", 1.5, 1.0, 65535.0).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("must be a whole number between 1 and 65535, got 1.5"),
            "{e}"
        );
        assert!(c.whole("k", f64::NAN, 0.0, 1.0).is_err());
        assert!(c.list("sweep.values", &[], 0.0, 1.0).is_err());
        let e = c.list("sweep.values", &[0.5, 2.0], 0.0, 1.0).unwrap_err();
        assert_eq!(e.key(), Some("sweep.values[1]"));
        assert_eq!(e.line(), Some(8));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Small {
        a: u32,
    }

    #[test]
    fn syntax_errors_name_the_line_and_echo_at_most_200_characters() {
        let long = format!("a = 1\nb = \"{}\"\n", "x".repeat(500));
        let c: Checker = Checker::new("s.toml", &long);
        let e = c.deserialize::<Small>().unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("s.toml:2: unknown field `b`"), "{text}");
        let echoed = text.lines().last().unwrap_or("");
        assert_eq!(echoed.chars().count(), "  | ".len() + MAX_ECHOED_CHARS + 1);
        let c: Checker = Checker::new("s.toml", "a = 1\n[oops\n");
        let e = c.deserialize::<Small>().unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
        assert!(e.to_string().ends_with("  | [oops"), "{e}");
        // A key of 5,000 characters is quoted by its first 200.
        let long = format!("{} = 1\n", "k".repeat(5000));
        let c: Checker = Checker::new("s.toml", &long);
        let text = c.deserialize::<Small>().unwrap_err().to_string();
        assert!(text.chars().count() < 3 * MAX_ECHOED_CHARS + 100, "{text}");
        assert!(
            text.contains(&format!("`{}…`", "k".repeat(MAX_ECHOED_CHARS))),
            "{text}"
        );
        let c: Checker = Checker::new("s.toml", "a = 1\n");
        let e = c.fail("a", format!("names unknown \"{}\"", "v".repeat(5000)));
        assert!(e.to_string().chars().count() < 300, "{e}");
    }

    #[test]
    fn errors_convert_into_a_reader_error() {
        #[derive(Debug, thiserror::Error)]
        enum ReaderError {
            #[error(transparent)]
            Config(#[from] ConfigError),
        }
        let c: Checker<ReaderError> = Checker::new("r.toml", "a = 1\n");
        let e: ReaderError = c.fail("a", "is wrong".into());
        assert_eq!(e.to_string(), "r.toml:1: `a` is wrong");
    }

    #[test]
    fn a_renamed_key_reads_either_name_and_refuses_both() {
        let text = "[scenario]\nclients = 1\n";
        let c: Checker = Checker::new("f.toml", text);
        let mut warnings = Vec::new();
        let value = c
            .renamed(
                "scenario.populations",
                None,
                "scenario.clients",
                Some(1),
                &mut warnings,
            )
            .unwrap();
        assert_eq!(value, Some(1));
        assert_eq!(
            warnings,
            [format!("f.toml:2: `scenario.clients` is the old name of `scenario.populations`; it is read until vantage {OLD_NAMES_REFUSED_FROM}, rename it")]
        );
        let mut warnings = Vec::new();
        let value = c
            .renamed(
                "scenario.populations",
                Some(2),
                "scenario.clients",
                None,
                &mut warnings,
            )
            .unwrap();
        assert_eq!((value, warnings.len()), (Some(2), 0));
        let none: Option<u8> = c
            .renamed(
                "scenario.populations",
                None,
                "scenario.clients",
                None,
                &mut warnings,
            )
            .unwrap();
        assert_eq!((none, warnings.len()), (None, 0));
        let e = c
            .renamed(
                "scenario.populations",
                Some(2),
                "scenario.clients",
                Some(1),
                &mut warnings,
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "f.toml:2: `scenario.clients` and `scenario.populations` are the same setting"
            ),
            "{e}"
        );
        assert!(warnings.is_empty());
    }
}
