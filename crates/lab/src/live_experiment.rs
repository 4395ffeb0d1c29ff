//! What the testbed experiment commands (`vantage testbed sbac`,
//! `resources`, `certes-live`) share: reading the plan file, and the shape
//! of their error (the plan's, the run's, or writing the results).

use std::path::{Path, PathBuf};

use vantage_core::config::{read_capped, ReadCappedError, MAX_CONFIG_BYTES};

use crate::LabError;

/// Why a testbed experiment command failed: `P` is its plan's error, `L`
/// its run's.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError<P, L>
where
    P: std::error::Error + 'static,
    L: std::error::Error + 'static,
{
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: ReadCappedError,
    },
    #[error(transparent)]
    Plan(P),
    #[error(transparent)]
    Live(L),
    #[error(transparent)]
    Write(#[from] LabError),
}

/// A plan file's text and the name its errors and the manifest give it.
pub(crate) struct PlanFile {
    pub origin: String,
    pub text: String,
}

/// Reads the plan `file` whole, refusing one larger than
/// `MAX_CONFIG_BYTES` (or endless, `/dev/zero`) after that many bytes.
pub(crate) fn read_plan_file<P, L>(file: &Path) -> Result<PlanFile, ExperimentError<P, L>>
where
    P: std::error::Error + 'static,
    L: std::error::Error + 'static,
{
    let read = |source| ExperimentError::Read {
        path: file.to_path_buf(),
        source,
    };
    let opened = std::fs::File::open(file).map_err(|e| read(ReadCappedError::Io(e)))?;
    let text = read_capped(opened, MAX_CONFIG_BYTES).map_err(read)?;
    Ok(PlanFile {
        origin: file.display().to_string(),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type Error = ExperimentError<std::io::Error, std::io::Error>;

    #[test]
    fn an_endless_or_missing_plan_is_refused_naming_the_file() {
        let endless = read_plan_file::<std::io::Error, std::io::Error>(Path::new("/dev/zero"));
        match endless {
            Err(e @ Error::Read { .. }) => {
                let message = e.to_string();
                assert!(message.contains("/dev/zero"), "{message}");
                assert!(
                    std::error::Error::source(&e)
                        .is_some_and(|s| s.to_string().contains("larger than 16 MiB")),
                    "{e:?}"
                );
            }
            other => panic!("not refused: {:?}", other.err()),
        }
        let missing =
            read_plan_file::<std::io::Error, std::io::Error>(Path::new("/nonexistent/plan.toml"));
        assert!(missing
            .err()
            .is_some_and(|e| e.to_string().contains("/nonexistent/plan.toml")));
    }
}

/// Why [`join_lists`] returns no list: the first failure met, in thread
/// order.
#[derive(Debug)]
pub enum JoinFailure<E> {
    /// A thread's work failed.
    Work(E),
    /// A thread could not enter its network namespace.
    Netns(vantage_testbed::netns::NetnsError),
    /// A thread panicked.
    Panicked,
}

/// A thread from `Netns::spawn` whose work returns a list of records.
pub type ListThread<R, E> =
    std::thread::JoinHandle<Result<Result<Vec<R>, E>, vantage_testbed::netns::NetnsError>>;

/// Joins every thread spawned by `Netns::spawn` whose work returns a list
/// of records, and concatenates the lists in thread order; every thread is
/// joined even after a failure, and the first failure is returned.
pub fn join_lists<R, E>(threads: Vec<ListThread<R, E>>) -> Result<Vec<R>, JoinFailure<E>> {
    let mut records = Vec::new();
    let mut first_failure = None;
    for thread in threads {
        let failure = match thread.join() {
            Ok(Ok(Ok(list))) => {
                records.extend(list);
                continue;
            }
            Ok(Ok(Err(e))) => JoinFailure::Work(e),
            Ok(Err(e)) => JoinFailure::Netns(e),
            Err(_) => JoinFailure::Panicked,
        };
        first_failure.get_or_insert(failure);
    }
    match first_failure {
        Some(failure) => Err(failure),
        None => Ok(records),
    }
}

/// The statements of a live experiment as a Markdown table (paper | ours |
/// criterion | holds), its second column named `context` (what a check's
/// `profile` holds there: the users, the test, …).
pub fn checks_markdown(out: &mut String, context: &str, checks: &[crate::Check]) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "| figure | {context} | statement | paper | ours | criterion | holds |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for c in checks {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            c.figure,
            c.profile,
            c.claim,
            c.paper,
            c.ours,
            c.criterion,
            if c.holds { "yes" } else { "no" }
        );
    }
}
