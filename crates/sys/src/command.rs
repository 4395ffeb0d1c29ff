//! Running an external program to completion: the one place that spawns
//! it, captures its output and turns a failure into a [`CommandError`]
//! naming the command line and quoting its standard error.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A command that could not start or that exited with a failure.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
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

/// Runs `program args…` (a path, or a name looked up in `PATH`) to
/// completion and returns its output; a failure to start or a non-zero
/// exit is an error (status -1 when a signal ended it).
pub fn run_command<P: AsRef<Path>, S: AsRef<str>>(
    program: P,
    args: &[S],
) -> Result<Output, CommandError> {
    let program = program.as_ref();
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let command = format!("{} {}", program.display(), args.join(" "));
    let output = Command::new(program)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| CommandError::Spawn {
            command: command.clone(),
            source,
        })?;
    checked(command, output)
}

/// [`run_command`] with `input` on the program's standard input.
pub fn run_command_with_input<P: AsRef<Path>, S: AsRef<str>>(
    program: P,
    args: &[S],
    input: &str,
) -> Result<Output, CommandError> {
    let program = program.as_ref();
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let command = format!("{} {}", program.display(), args.join(" "));
    let spawn_error = |source| CommandError::Spawn {
        command: command.clone(),
        source,
    };
    let mut child = Command::new(program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A program that exits early closes the pipe: its status tells why.
        let _ = stdin.write_all(input.as_bytes());
    }
    let output = child.wait_with_output().map_err(spawn_error)?;
    checked(command, output)
}

/// The first executable `name` in `PATH`, then `/usr/sbin` and `/sbin`
/// (where Debian puts the netfilter tools, often outside a user's `PATH`).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn checked(command: String, output: Output) -> Result<Output, CommandError> {
    if !output.status.success() {
        return Err(CommandError::Failed {
            command,
            status: output.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_an_error_naming_the_command() {
        let error = run_command("/nonexistent/ip", &["netns", "list"]).unwrap_err();
        assert!(
            matches!(error, CommandError::Spawn { ref command, .. } if command == "/nonexistent/ip netns list"),
            "{error:?}"
        );
    }

    #[test]
    fn success_returns_the_output() {
        let output = run_command("sh", &["-c", "echo hello"]).unwrap();
        assert_eq!(output.stdout, b"hello\n");
    }
}
