//! `kansoku plot`: summaries drawn over time, by [`plot::plot_summaries`].

use aguri::SectionKind;
use pipeline::{read_summaries, Report};

use crate::args::{PlotArgs, PlotView};

pub fn run(args: &PlotArgs) -> pipeline::Result<Report> {
    let summaries = read_summaries(&args.inputs)?;
    let kind = match args.view {
        PlotView::Src => SectionKind::SrcAddress,
        PlotView::Dst => SectionKind::DstAddress,
        PlotView::Sport => SectionKind::SrcPort,
        PlotView::Dport => SectionKind::DstPort,
    };
    let what = plot::SummaryPlot {
        kind,
        top: args.top,
        style: args.style,
    };
    plot::plot_summaries(summaries, &what, &args.output)?;
    Ok(Report::default())
}
