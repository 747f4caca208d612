//! Errors that end a command, and the exit codes they map to.
//!
//! Every error is one of three kinds, and the kind alone decides the exit
//! code ([`ExitCode`]): a usage error (bad flags, settings out of range),
//! an input error (a file that is not a trace, a rule file with an error,
//! corrupt data), or an output failure (the disk is full, the output
//! cannot be created). Messages name the file: `FILE: what was wrong`.

use std::fmt;
use std::io;
use std::path::Path;

/// The process exit codes of every kansoku command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// The job ran and found nothing wrong.
    Ok = 0,
    /// The job ran and found problems: truncated input, drops, mismatches,
    /// a file's reading interrupted by a signal.
    Problems = 1,
    /// Usage or input error: bad flags, a file that is not a trace, a rule
    /// file with an error.
    Usage = 2,
    /// The output could not be written (a full disk, a read-only file
    /// system); everything written before the failure is readable.
    Output = 3,
}

impl ExitCode {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad flags or settings.
    Usage,
    /// The input is not what it should be.
    Input,
    /// Writing the output failed.
    Output,
    /// Standard output was closed by its reader: stop quietly.
    BrokenPipe,
}

/// An error that ends a command. One pointer wide (the kind and message
/// are boxed), so that the `Result`s of per-packet calls stay small.
#[derive(Debug)]
pub struct Error(Box<ErrorInner>);

/// What an [`Error`] holds; its fields read through `error.kind`, `error.message`.
#[derive(Debug)]
pub struct ErrorInner {
    pub kind: ErrorKind,
    pub message: String,
}

impl std::ops::Deref for Error {
    type Target = ErrorInner;

    fn deref(&self) -> &ErrorInner {
        &self.0
    }
}

impl std::ops::DerefMut for Error {
    fn deref_mut(&mut self) -> &mut ErrorInner {
        &mut self.0
    }
}

impl Error {
    fn new(kind: ErrorKind, message: String) -> Error {
        Error(Box::new(ErrorInner { kind, message }))
    }
}

impl Error {
    pub fn usage(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Usage, message.into())
    }

    pub fn input(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Input, message.into())
    }

    /// An output failure; a closed pipe is [`ErrorKind::BrokenPipe`].
    pub fn output(message: impl Into<String>, e: &io::Error) -> Error {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return Error::new(ErrorKind::BrokenPipe, String::new());
        }
        Error::new(ErrorKind::Output, format!("{}: {e}", message.into()))
    }

    /// A failed write to standard output (a closed pipe stops quietly).
    pub fn stdout(e: io::Error) -> Error {
        Error::output("standard output", &e)
    }

    /// A failed write to the file at `path`: `PATH: error`, an output failure.
    pub fn writing(path: &Path, e: io::Error) -> Error {
        Error::output(display_path(path), &e)
    }

    /// An input error about `path`: `PATH: error`.
    pub fn file(path: &Path, e: impl fmt::Display) -> Error {
        Error::input(format!("{}: {e}", display_path(path)))
    }

    /// The exit code this error ends the process with.
    pub fn exit_code(&self) -> ExitCode {
        match self.kind {
            ErrorKind::Usage | ErrorKind::Input => ExitCode::Usage,
            ErrorKind::Output => ExitCode::Output,
            ErrorKind::BrokenPipe => ExitCode::Ok,
        }
    }

    /// The error with `context: ` put in front of its message.
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// How a path is named in messages (`-` is standard input or output).
pub fn display_path(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "(standard stream)".to_string()
    } else {
        path.display().to_string()
    }
}

/// A message with every run of more than `max` characters without
/// whitespace shortened to its first `max / 2` characters and a count: a
/// 100,000-character token in a bad input is not echoed whole. File names
/// are far shorter than the limit the CLI uses (200).
pub fn clip_long_words(message: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let long = |w: &str| w.chars().count() > max;
    if !message.split_whitespace().any(long) {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut out = String::with_capacity(message.len().min(4 * max));
    let mut rest = message;
    while !rest.is_empty() {
        // Whitespace as it is, then one word.
        let ws = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..ws]);
        rest = &rest[ws..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..end];
        let n = word.chars().count();
        if n > max {
            out.extend(word.chars().take(max / 2));
            out.push_str(&format!("…[{n} characters]"));
        } else {
            out.push_str(word);
        }
        rest = &rest[end..];
    }
    std::borrow::Cow::Owned(out)
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod clip_tests {
    use super::clip_long_words;

    #[test]
    fn long_words_are_shortened_and_the_rest_kept() {
        let long = "A".repeat(100_000);
        let m = format!("rules:1:18: expected a source address, found `{long}` here");
        let c = clip_long_words(&m, 200);
        assert!(c.len() < 400, "{}", c.len());
        assert!(c.starts_with("rules:1:18: expected a source address, found `AAAA"));
        assert!(
            c.contains("…[100002 characters]") && c.ends_with(" here"),
            "{c}"
        );
        // Short messages, and multi-byte text, come back as they were.
        let m = "données: ligne 2: «héhé»  two  spaces";
        assert_eq!(clip_long_words(m, 200), m);
        let m = "é".repeat(300);
        assert_eq!(
            clip_long_words(&m, 200).chars().count(),
            100 + "…[300 characters]".chars().count()
        );
    }
}
