//! Running `iptables` and `ip6tables`: the one place that finds the
//! program and runs it with the caller's arguments ([`crate::command`]
//! turns a failure into an error naming the command line and quoting its
//! standard error).
//!
//! Callers own their rules and their flags (`-w`, `-w 5`); this module adds
//! no argument of its own. The command rather than a netlink library: rules
//! are few, installed once, and the command works with both the legacy and
//! the nf_tables back end.

use crate::command::{find_program, run_command, CommandError};
use std::path::{Path, PathBuf};

/// Which address family's tables a command changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    /// The program's name: `iptables` or `ip6tables`.
    pub fn program_name(self) -> &'static str {
        match self {
            Family::Ipv4 => "iptables",
            Family::Ipv6 => "ip6tables",
        }
    }
}

/// A command that could not start or that exited with a failure.
pub type IptablesError = CommandError;

/// Finds the program of `family` in `PATH`, then `/usr/sbin` and `/sbin`.
pub fn find(family: Family) -> Option<PathBuf> {
    find_program(family.program_name())
}

/// Runs `program args…` (a path, or a name looked up in `PATH`) to
/// completion and returns its standard output.
pub fn run<S: AsRef<str>>(program: &Path, args: &[S]) -> Result<String, IptablesError> {
    let output = run_command(program, args)?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_an_error_naming_the_command() {
        let error = run(Path::new("/nonexistent/iptables"), &["-w", "-S"]).unwrap_err();
        assert!(
            matches!(error, IptablesError::Spawn { ref command, .. } if command == "/nonexistent/iptables -w -S"),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("`/nonexistent/iptables -w -S` could not start: "),
            "{error}"
        );
    }

    #[test]
    fn a_failing_command_quotes_its_status_and_stderr() {
        let error = run(
            Path::new("sh"),
            &["-c", "echo out; echo '  no chain ' >&2; exit 3"],
        )
        .unwrap_err();
        match &error {
            IptablesError::Failed { status, stderr, .. } => {
                assert_eq!((*status, stderr.as_str()), (3, "no chain"));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            error.to_string().ends_with("failed (exit 3): no chain"),
            "{error}"
        );
    }

    #[test]
    fn success_returns_standard_output() {
        assert_eq!(
            run(Path::new("sh"), &["-c", "echo -A INPUT"]).unwrap(),
            "-A INPUT\n"
        );
    }

    #[test]
    fn families_name_their_programs() {
        assert_eq!(Family::Ipv4.program_name(), "iptables");
        assert_eq!(Family::Ipv6.program_name(), "ip6tables");
    }
}
