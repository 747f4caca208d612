//! What the CLI prints besides tables: where packets go (lines or a trace),
//! and the closing summary of a written trace.

use std::io::{self, Write};

use pipeline::sink::lines::Printer;
use pipeline::{Error, Frame, PacketSink, SinkSummary, TraceSink};
use serde::Serialize;
use trace::Record;

/// Where a reading command's packets go: printed, or written to a trace.
pub enum Out {
    Print(Printer),
    Trace(TraceSink),
}

impl PacketSink for Out {
    fn record(&mut self, rec: &Record<'_>) -> pipeline::Result<()> {
        match self {
            Out::Print(p) => p.record(rec),
            Out::Trace(t) => t.record(rec),
        }
    }

    fn frame(&mut self, f: &Frame<'_>) -> pipeline::Result<()> {
        match self {
            Out::Print(p) => p.frame(f),
            Out::Trace(t) => t.frame(f),
        }
    }

    fn flush(&mut self) -> pipeline::Result<()> {
        match self {
            Out::Print(p) => p.flush(),
            Out::Trace(_) => Ok(()),
        }
    }

    fn idle(&mut self) -> pipeline::Result<()> {
        match self {
            Out::Print(p) => p.idle(),
            Out::Trace(t) => t.idle(),
        }
    }
}

impl Out {
    /// Flushes the lines or closes the trace; for a trace, what it holds.
    pub fn close(self) -> pipeline::Result<Option<SinkSummary>> {
        match self {
            Out::Print(mut p) => PacketSink::flush(&mut p).map(|_| None),
            Out::Trace(t) => t.finish().map(Some),
        }
    }
}

/// Prints a written trace's closing summary: as JSON on standard output (on
/// standard error when the trace itself went to standard output), else as
/// a line on standard error.
pub fn report_summary(s: &SinkSummary, json: bool) -> pipeline::Result<()> {
    if !json {
        eprintln!("kansoku: {}", s.describe());
    } else if s.on_stdout() {
        eprintln!(
            "{}",
            serde_json::to_string(s).map_err(|e| Error::output("standard error", &e.into()))?
        );
    } else {
        print_json(s)?;
    }
    Ok(())
}

/// One JSON document on a line of standard output.
pub fn print_json(v: &impl Serialize) -> pipeline::Result<()> {
    let mut o = io::stdout().lock();
    serde_json::to_writer(&mut o, v).map_err(|e| Error::stdout(e.into()))?;
    writeln!(o).map_err(Error::stdout)?;
    Ok(())
}
