//! `plot`: kansoku's charts. [`chart`] draws line and stacked charts to SVG
//! or PNG with plotters and an embedded font, the same on every machine;
//! [`summaries`] lays out aguri summaries over time on those charts, as
//! agurim draws them (stacked bits/s and packets/s of the top aggregates)
//! or as lines of the total and the top aggregates, to an image or a
//! self-contained HTML page. `kansoku plot` and the benchmarks' figures
//! (`kansoku bench capture -o`, `bench web-paper`, `bench ipsec`) draw
//! through it.

#![forbid(unsafe_code)]

pub mod chart;
pub mod summaries;

pub use chart::{
    register_font, si, Band, Chart, ImageKind, LabelFormatter, LineChart, Panel, Series,
    StackedChart, FONT_FAMILY,
};
pub use summaries::{plot_summaries, Style, SummaryPlot};

/// Why a chart could not be drawn: what was asked cannot be drawn (an
/// unknown image type, fewer than two summaries for a time series) is a
/// usage error, data that cannot be drawn as asked an input error, a chart
/// that could not be written an output failure naming its path.
pub use outcome::{Error, Result};
