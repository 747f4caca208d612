//! The CLI's errors: a message and an exit code.
//!
//! Messages look like `kansoku: FILE: offset N: what was wrong`. Exit codes:
//! 0 ok, 1 the job found problems (a truncated input, say), 2 usage or input error.

use std::fmt;
use std::io;
use std::path::Path;

/// Exit code when the job ran but found problems.
pub const EXIT_PROBLEMS: i32 = 1;
/// Exit code for usage and input errors.
pub const EXIT_ERROR: i32 = 2;

#[derive(Debug)]
pub enum CliError {
    /// Print this message (after `kansoku: `) and exit with this code.
    Message { message: String, code: i32 },
    /// Standard output was closed by its reader: exit quietly.
    BrokenPipe,
}

impl CliError {
    pub fn input(message: impl Into<String>) -> CliError {
        CliError::Message {
            message: message.into(),
            code: EXIT_ERROR,
        }
    }

    /// An error about `path`, formatted `PATH: error`.
    pub fn file(path: &Path, err: impl fmt::Display) -> CliError {
        CliError::input(format!("{}: {err}", display_path(path)))
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::BrokenPipe
        } else {
            CliError::input(e.to_string())
        }
    }
}

/// How a path is named in messages (`-` is standard input or output).
pub fn display_path(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "(standard stream)".to_string()
    } else {
        path.display().to_string()
    }
}

pub type CliResult<T> = Result<T, CliError>;
