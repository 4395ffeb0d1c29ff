//! Running `nft`: the one place that finds the program, hands it a script
//! on standard input (`nft -f -`: the whole script is one transaction,
//! applied completely or not at all) or runs one command, and turns a
//! failure into an [`NftError`] naming the command and quoting its
//! standard error.
//!
//! Callers own their tables and their scripts. `nft -c` (check) sends the
//! script to the kernel and aborts the transaction: it tells whether the
//! kernel has every expression the script uses (a `queue` statement needs
//! `nft_queue`), without changing anything.

use std::path::{Path, PathBuf};

use crate::command::{find_program, run_command, run_command_with_input};

/// A command that could not start or that exited with a failure.
pub type NftError = crate::command::CommandError;

/// Finds `nft` in `PATH`, then `/usr/sbin` and `/sbin`.
pub fn find() -> Option<PathBuf> {
    find_program("nft")
}

/// Runs `program args…` to completion and returns its standard output.
pub fn run<S: AsRef<str>>(program: &Path, args: &[S]) -> Result<String, NftError> {
    let output = run_command(program, args)?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs `program -f -` (with `-c` when `check_only`) with `script` on its
/// standard input: one transaction.
pub fn run_script(program: &Path, script: &str, check_only: bool) -> Result<String, NftError> {
    let args: &[&str] = if check_only {
        &["-c", "-f", "-"]
    } else {
        &["-f", "-"]
    };
    let output = run_command_with_input(program, args, script)?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_an_error_naming_the_command() {
        let error = run_script(Path::new("/nonexistent/nft"), "list tables", true).unwrap_err();
        assert!(
            matches!(error, NftError::Spawn { ref command, .. } if command == "/nonexistent/nft -c -f -"),
            "{error:?}"
        );
    }

    #[test]
    fn the_script_goes_to_standard_input() {
        // `sh -f -` reads its script from standard input as `nft -f -` does.
        let out = run_script(Path::new("sh"), "echo one transaction\n", false).unwrap();
        assert_eq!(out, "one transaction\n");
        let error = run_script(Path::new("sh"), "echo no >&2; exit 4\n", false).unwrap_err();
        assert!(
            error.to_string().ends_with("failed (exit 4): no"),
            "{error}"
        );
    }

    #[test]
    fn a_failing_command_quotes_its_status_and_stderr() {
        let error = run(Path::new("sh"), &["-c", "echo ' no table ' >&2; exit 1"]).unwrap_err();
        assert!(
            error.to_string().ends_with("failed (exit 1): no table"),
            "{error}"
        );
    }
}
