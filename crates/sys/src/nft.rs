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

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A command that could not start or that exited with a failure.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error("`{command}` could not start: {source}")]
    Spawn {
        command: String,
        #[source]
        source: io::Error,
    },
    #[error("`{command}` failed (exit {status}): {stderr}")]
    Failed {
        command: String,
        status: i32,
        stderr: String,
    },
}

/// Finds `nft` in `PATH`, then `/usr/sbin` and `/sbin`.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join("nft"))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs `program args…` to completion and returns its standard output.
pub fn run<S: AsRef<str>>(program: &Path, args: &[S]) -> Result<String, NftError> {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let command = format!("{} {}", program.display(), args.join(" "));
    let output = Command::new(program)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NftError::Spawn {
            command: command.clone(),
            source,
        })?;
    finish(command, output)
}

/// Runs `program -f -` (with `-c` when `check_only`) with `script` on its
/// standard input: one transaction.
pub fn run_script(program: &Path, script: &str, check_only: bool) -> Result<String, NftError> {
    let args: &[&str] = if check_only {
        &["-c", "-f", "-"]
    } else {
        &["-f", "-"]
    };
    let command = format!("{} {}", program.display(), args.join(" "));
    let spawn_error = |source| NftError::Spawn {
        command: command.clone(),
        source,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A program that exits early closes the pipe: its status tells why.
        let _ = stdin.write_all(script.as_bytes());
    }
    let output = child.wait_with_output().map_err(spawn_error)?;
    finish(command, output)
}

fn finish(command: String, output: std::process::Output) -> Result<String, NftError> {
    if !output.status.success() {
        return Err(NftError::Failed {
            command,
            status: output.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
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
