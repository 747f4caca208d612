//! `kansoku plot`: summaries drawn over time, by [`plot::plot_summaries`].

use aguri::SectionKind;
use pipeline::{display_path, read_summaries, Error, Report};

use crate::args::{PlotArgs, PlotStyle, PlotView};

pub fn run(args: &PlotArgs) -> pipeline::Result<Report> {
    let summaries = read_summaries(&args.inputs)?;
    let kind = match args.view {
        PlotView::Src => SectionKind::SrcAddress,
        PlotView::Dst => SectionKind::DstAddress,
        PlotView::Sport => SectionKind::SrcPort,
        PlotView::Dport => SectionKind::DstPort,
    };
    let style = match args.style {
        PlotStyle::Stacked => plot::Style::Stacked,
        PlotStyle::Lines => plot::Style::Lines,
    };
    let what = plot::SummaryPlot {
        kind,
        top: args.top,
        style,
    };
    plot::plot_summaries(summaries, &what, &args.output).map_err(|e| match e {
        plot::Error::Usage(m) => Error::usage(m),
        plot::Error::Input(m) => Error::input(m),
        plot::Error::Output { path, source } => Error::output(display_path(&path), &source),
    })?;
    Ok(Report::default())
}
