//! `plot`: kansoku's charts. [`chart`] draws line and stacked charts to SVG
//! or PNG with plotters and an embedded font, the same on every machine;
//! [`summaries`] lays out aguri summaries over time on those charts, as
//! agurim draws them (stacked bits/s and packets/s of the top aggregates)
//! or as lines of the total and the top aggregates, to an image or a
//! self-contained HTML page. `kansoku plot` and the benchmarks' figures
//! (`kansoku bench capture -o`, `bench web-paper`, `bench ipsec`) draw
//! through it.

#![forbid(unsafe_code)]

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

pub mod chart;
pub mod summaries;

pub use chart::{
    register_font, si, Band, Chart, ImageKind, LabelFormatter, LineChart, Panel, Series,
    StackedChart, FONT_FAMILY,
};
pub use summaries::{plot_summaries, Style, SummaryPlot};

/// Why a chart could not be drawn.
#[derive(Debug)]
pub enum Error {
    /// What was asked cannot be drawn: an unknown image type, fewer than
    /// two summaries for a time series.
    Usage(String),
    /// The data cannot be drawn as asked, or the chart could not be laid out.
    Input(String),
    /// The chart could not be written to `path`.
    Output { path: PathBuf, source: io::Error },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) | Error::Input(m) => f.write_str(m),
            Error::Output { path, source } => write!(f, "{}: {source}", display_path(path)),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Output { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The result of drawing a chart.
pub type Result<T> = std::result::Result<T, Error>;

/// How a path is named in messages: `-` is standard output.
fn display_path(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "(standard stream)".to_string()
    } else {
        path.display().to_string()
    }
}
