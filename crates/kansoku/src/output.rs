//! What the CLI prints besides reports: the closing summary of a written
//! trace, and JSON documents.

use std::io::{self, Write};

use pipeline::{Error, SinkSummary};
use serde::Serialize;

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

/// `text` (a program's listing) on standard output as it is: all a
/// command asked `-d` does.
pub fn print_text(text: &str) -> pipeline::Result<pipeline::Report> {
    io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(Error::stdout)?;
    Ok(pipeline::Report::default())
}
