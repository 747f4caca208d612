//! The end-of-run report every command returns, and the one place where the
//! exit code is decided from it.

use std::fmt;

use crate::error::{Error, ErrorKind, ExitCode};

/// Packets lost on the way in: by the kernel (a ring was full) and by
/// kansoku (a writer's queue was full).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    pub kernel: u64,
    pub kansoku: u64,
}

impl Drops {
    pub fn total(&self) -> u64 {
        self.kernel + self.kansoku
    }
}

/// What a run did and what went wrong, for the closing messages and the exit code.
#[derive(Debug, Default)]
pub struct Report {
    /// Packets taken from the source (header-trace lines for `filter match`).
    pub packets: u64,
    /// Their bytes on the wire.
    pub bytes: u64,
    /// The input ended inside a record.
    pub truncation: Option<Truncated>,
    /// The run was stopped by SIGINT or SIGTERM; the name of what it read.
    pub interrupted: Option<String>,
    /// A live capture, whose normal end is a signal.
    pub live: bool,
    /// Packets lost before kansoku could keep them.
    pub drops: Drops,
    /// Problems the job found (mismatches, lint findings, corrupt data
    /// skipped), each a message.
    pub problems: Vec<String>,
    /// Things worth saying that change nothing in the answer (an index that
    /// did not fit the file and was read around), each a message.
    pub warnings: Vec<String>,
    /// The input turned out to be bad part way through (corrupt data).
    pub read_error: Option<Error>,
    /// Writing an output failed; what was written before is readable.
    pub output_error: Option<Error>,
}

/// Where an input was cut: the file's name, and the reader's words, which
/// start with the offset (`offset 1234: file cut short in a pcap record ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncated {
    pub name: String,
    pub offset: u64,
    pub message: String,
}

impl Truncated {
    /// The input `name` cut at `offset`; `message` starts with the offset
    /// (`offset 1234: file cut short in a pcap record ...`).
    pub fn new(name: &str, offset: u64, message: String) -> Truncated {
        Truncated {
            name: name.to_string(),
            offset,
            message,
        }
    }
}

impl fmt::Display for Truncated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: warning: {}", self.name, self.message)
    }
}

impl Report {
    /// A report of a live capture.
    pub fn live() -> Report {
        Report {
            live: true,
            ..Report::default()
        }
    }

    /// Records an output failure (the first one; later ones follow from it).
    pub fn output_failed(&mut self, e: Error) {
        if self.output_error.is_none() {
            self.output_error = Some(e);
        }
    }

    /// Records an error that ended the run part way: an output failure or a
    /// bad input.
    pub fn failed(&mut self, e: Error) {
        match e.kind {
            ErrorKind::Output | ErrorKind::BrokenPipe => self.output_failed(e),
            ErrorKind::Usage | ErrorKind::Input => {
                if self.read_error.is_none() {
                    self.read_error = Some(e);
                }
            }
        }
    }

    /// Adds the report of another run of the same command (`stats` of
    /// several files): counts add up, the first of each failure is kept,
    /// and a second truncation or interruption is kept as a problem.
    pub fn absorb(&mut self, o: Report) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.drops.kernel += o.drops.kernel;
        self.drops.kansoku += o.drops.kansoku;
        match (&self.truncation, o.truncation) {
            (None, t) => self.truncation = t,
            (Some(_), Some(t)) => self.problems.push(t.to_string()),
            (Some(_), None) => {}
        }
        if self.interrupted.is_none() {
            self.interrupted = o.interrupted;
        }
        self.problems.extend(o.problems);
        self.warnings.extend(o.warnings);
        for e in [o.read_error, o.output_error].into_iter().flatten() {
            self.failed(e);
        }
    }

    /// Whether standard output was closed by its reader.
    pub fn broken_pipe(&self) -> bool {
        self.output_error
            .as_ref()
            .is_some_and(|e| e.kind == ErrorKind::BrokenPipe)
    }

    /// The exit code, decided from the report alone: an output failure
    /// first, then a bad input, then problems the job found; a file read to
    /// its end with nothing wrong, or a live capture stopped by a signal
    /// without drops, is 0.
    pub fn exit_code(&self) -> ExitCode {
        if let Some(e) = &self.output_error {
            return e.exit_code();
        }
        if let Some(e) = &self.read_error {
            return e.exit_code();
        }
        let interrupted = self.interrupted.is_some() && !self.live;
        if self.truncation.is_some()
            || interrupted
            || self.drops.total() > 0
            || !self.problems.is_empty()
        {
            return ExitCode::Problems;
        }
        ExitCode::Ok
    }

    /// The closing messages, each to be printed after `kansoku: `.
    pub fn messages(&self) -> Vec<String> {
        let mut m = self.warnings.clone();
        if let Some(t) = &self.truncation {
            m.push(t.to_string());
        }
        if let Some(name) = self.interrupted.as_ref().filter(|_| !self.live) {
            m.push(format!(
                "{name}: interrupted; the output covers the part read"
            ));
        }
        if self.drops.total() > 0 {
            m.push(format!(
                "warning: {} packets dropped by the kernel, {} by kansoku",
                self.drops.kernel, self.drops.kansoku
            ));
        }
        m.extend(self.problems.iter().cloned());
        for e in [&self.read_error, &self.output_error].into_iter().flatten() {
            if e.kind != ErrorKind::BrokenPipe {
                m.push(e.message.clone());
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut() -> Truncated {
        Truncated::new(
            "cut.pcap",
            24,
            "offset 24: file cut short in a pcap record header (16 bytes needed, 3 there)".into(),
        )
    }

    #[test]
    fn exit_codes_follow_the_report() {
        assert_eq!(Report::default().exit_code(), ExitCode::Ok);
        let r = Report {
            truncation: Some(cut()),
            ..Report::default()
        };
        assert_eq!(r.exit_code(), ExitCode::Problems);
        assert!(r.messages()[0].starts_with("cut.pcap: warning: offset 24"));
        // A file's reading stopped by a signal is a problem; a live
        // capture's end by a signal is not, unless it dropped packets.
        let mut r = Report {
            interrupted: Some("in.pcap".into()),
            ..Report::default()
        };
        assert_eq!(r.exit_code(), ExitCode::Problems);
        assert!(r.messages()[0].contains("interrupted"));
        r.live = true;
        assert_eq!(r.exit_code(), ExitCode::Ok);
        assert!(r.messages().is_empty());
        r.drops.kansoku = 1;
        assert_eq!(r.exit_code(), ExitCode::Problems);
        // An output failure wins over everything else.
        r.failed(Error::input("bad"));
        assert_eq!(r.exit_code(), ExitCode::Usage);
        let full = std::io::Error::from_raw_os_error(28);
        r.failed(Error::output("out.pcap", &full));
        assert_eq!(r.exit_code(), ExitCode::Output);
        assert_eq!(ExitCode::Output.code(), 3);
        // A closed pipe ends quietly.
        let mut r = Report::default();
        r.failed(Error::output("x", &std::io::ErrorKind::BrokenPipe.into()));
        assert!(r.broken_pipe());
        assert_eq!(r.exit_code(), ExitCode::Ok);
        assert!(r.messages().is_empty());
    }
}
