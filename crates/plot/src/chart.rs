//! Line and stacked charts to SVG or PNG with plotters: `bench capture -o`
//! draws capture rate against offered load with a [`LineChart`], `kansoku
//! plot` draws summaries over time with the same charts ([`crate::summaries`]),
//! and both take their font from [`register_font`].
//!
//! # The font
//!
//! plotters lays out text (in SVG too, to place labels and size the
//! legend) with a font it is given, and has none of its own. The font is
//! DejaVu Sans from the `dejavu` crate, which ships the DejaVu TTF files
//! (Bitstream Vera licence, free to embed and redistribute) as bytes in the
//! binary: plots come out the same on every machine and need no font
//! package, no fontconfig and no fixed system path. It costs the binary
//! the 740 KiB of that one file (the crate's other faces are not linked).

use std::path::Path;

use crate::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, RGBAColor};

/// The family plots ask for, and under which DejaVu Sans is registered.
pub const FONT_FAMILY: &str = "sans-serif";

/// Registers DejaVu Sans (embedded, see the module documentation) as
/// plotters' sans-serif font. Call it before drawing any text; calling it
/// again is harmless.
pub fn register_font() -> Result<()> {
    plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| Error::input("the embedded DejaVu Sans is not a usable font"))
}

/// What a chart file is drawn as, by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    Svg,
    Png,
}

impl ImageKind {
    /// `.svg` or `.png` (any case); anything else is a usage error.
    pub fn of(path: &Path) -> Result<ImageKind> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("svg") => Ok(ImageKind::Svg),
            Some("png") => Ok(ImageKind::Png),
            _ => Err(Error::usage(format!(
                "{}: unknown plot type (expected .svg or .png)",
                outcome::display_path(path)
            ))),
        }
    }
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Its legend entry.
    pub label: String,
    /// (x, y) in drawing order.
    pub points: Vec<(f64, f64)>,
    pub color: RGBAColor,
    /// Line width in pixels.
    pub width: u32,
    /// A dot on every point.
    pub markers: bool,
}

impl Series {
    /// A line of width 2 in the `i`-th colour of plotters' palette.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>, i: usize) -> Series {
        Series {
            label: label.into(),
            points,
            color: Palette99::pick(i).to_rgba(),
            width: 2,
            markers: false,
        }
    }
}

/// Formats an x value as an axis label.
pub type LabelFormatter<'a> = &'a dyn Fn(&f64) -> String;

/// A chart of lines over linear axes, 1024 x 640 pixels, with a legend.
pub struct LineChart<'a> {
    pub title: String,
    pub x: std::ops::Range<f64>,
    pub y: std::ops::Range<f64>,
    pub x_desc: Option<&'a str>,
    pub y_desc: Option<&'a str>,
    /// How many x labels (plotters' choice if `None`), and how to write them.
    pub x_labels: Option<usize>,
    pub x_label_formatter: Option<LabelFormatter<'a>>,
    /// Pixels left of the plot for the y labels.
    pub y_label_area: u32,
    pub series: Vec<Series>,
}

/// The size of every chart.
const SIZE: (u32, u32) = (1024, 640);

/// A chart that can be drawn on any plotters backend, and so to a file or
/// to an SVG string.
pub trait Chart {
    /// Its size in pixels.
    fn size(&self) -> (u32, u32);

    /// Draws it on `root`.
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), String>;

    /// Draws the chart to `path`, SVG or PNG by its extension; the font
    /// is registered first.
    fn draw_file(&self, path: &Path) -> Result<()> {
        let kind = ImageKind::of(path)?;
        register_font()?;
        let fail = |e: String| Error::writing(path, std::io::Error::other(e));
        match kind {
            ImageKind::Svg => self
                .draw_on(SVGBackend::new(path, self.size()).into_drawing_area())
                .map_err(fail),
            ImageKind::Png => self
                .draw_on(BitMapBackend::new(path, self.size()).into_drawing_area())
                .map_err(fail),
        }
    }

    /// The chart as an SVG document (for a page to inline).
    fn to_svg(&self) -> Result<String> {
        register_font()?;
        let mut svg = String::new();
        self.draw_on(SVGBackend::with_string(&mut svg, self.size()).into_drawing_area())
            .map_err(|e| Error::input(format!("drawing the chart: {e}")))?;
        Ok(svg)
    }
}

impl Chart for LineChart<'_> {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    /// Draws the chart on any plotters backend: the plot on the left, the
    /// legend in a column of its own on the right, where it covers no data.
    /// A point whose y is not a number breaks its line there (a gap).
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), String> {
        let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
        let labels = self.series.iter().map(|s| s.label.as_str());
        let (plot, side, font) = with_legend(&root, labels, 52, 3).map_err(e)?;
        let mut chart = ChartBuilder::on(&plot)
            .caption(&self.title, (FONT_FAMILY, 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(self.y_label_area)
            .build_cartesian_2d(self.x.clone(), self.y.clone())
            .map_err(e)?;
        let mut mesh = chart.configure_mesh();
        if let Some(d) = self.x_desc {
            mesh.x_desc(d);
        }
        if let Some(d) = self.y_desc {
            mesh.y_desc(d);
        }
        if let Some(n) = self.x_labels {
            mesh.x_labels(n);
        }
        if let Some(f) = self.x_label_formatter {
            mesh.x_label_formatter(f);
        }
        mesh.draw().map_err(e)?;
        for s in &self.series {
            let style = ShapeStyle::from(&s.color).stroke_width(s.width);
            for run in s.points.split(|p| !p.1.is_finite()) {
                chart
                    .draw_series(LineSeries::new(run.iter().copied(), style))
                    .map_err(e)?;
            }
            if s.markers {
                chart
                    .draw_series(
                        s.points
                            .iter()
                            .filter(|p| p.1.is_finite())
                            .map(|&p| Circle::new(p, 4, style.filled())),
                    )
                    .map_err(e)?;
            }
        }
        // The legend: a sample of each line and its label, top down.
        for (i, s) in self.series.iter().enumerate() {
            let y = 64 + i as i32 * LEGEND_ROW;
            let style = ShapeStyle::from(&s.color).stroke_width(s.width);
            side.draw(&PathElement::new(vec![(4, y), (30, y)], style))
                .map_err(e)?;
            side.draw(&Text::new(
                s.label.as_str(),
                (38, y - LEGEND_FONT as i32 / 2 - 1),
                font.clone(),
            ))
            .map_err(e)?;
        }
        root.present().map_err(|x| x.to_string())
    }
}

/// Clears `root` and splits it into the plot and, on its right, a column
/// wide enough for the widest of `labels` plus `pad` pixels (at most
/// 1/`max_part` of the width), and the legend's font.
#[allow(clippy::type_complexity)]
fn with_legend<'l, DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    labels: impl Iterator<Item = &'l str>,
    pad: u32,
    max_part: u32,
) -> std::result::Result<
    (
        DrawingArea<DB, Shift>,
        DrawingArea<DB, Shift>,
        TextStyle<'static>,
    ),
    DrawingAreaErrorKind<DB::ErrorType>,
> {
    root.fill(&WHITE)?;
    let font = TextStyle::from((FONT_FAMILY, LEGEND_FONT).into_font());
    let widest = labels
        .filter_map(|l| root.estimate_text_size(l, &font).ok())
        .map(|(w, _)| w)
        .max()
        .unwrap_or(0);
    let width = root.dim_in_pixel().0;
    let legend_w = (widest + pad).clamp(120, width / max_part);
    let (plot, side) = root.split_horizontally(width - legend_w);
    Ok((plot, side, font))
}

/// The legend's text size and line spacing, in pixels.
const LEGEND_FONT: u32 = 15;
const LEGEND_ROW: i32 = 22;

/// One band of a stacked chart: its legend entry and colour.
#[derive(Clone, Debug)]
pub struct Band {
    pub label: String,
    pub color: RGBAColor,
}

/// One panel of a stacked chart: its caption and each band's value per
/// bucket (NaN where nothing covers the bucket: a gap in every band).
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    /// `values[band][bucket]`.
    pub values: Vec<Vec<f64>>,
}

/// Stacked areas over time buckets, panels side by side (agurim's bytes
/// and packets), one legend for all in a column on the right. The first
/// band is drawn at the bottom.
pub struct StackedChart<'a> {
    pub title: String,
    /// Where each bucket starts, in x units; every bucket is `width` wide.
    pub starts: Vec<f64>,
    pub width: f64,
    pub bands: Vec<Band>,
    pub panels: Vec<Panel>,
    pub x_labels: Option<usize>,
    pub x_label_formatter: Option<LabelFormatter<'a>>,
}

/// The size of a stacked chart.
const STACKED_SIZE: (u32, u32) = (1400, 600);

impl Chart for StackedChart<'_> {
    fn size(&self) -> (u32, u32) {
        STACKED_SIZE
    }

    fn draw_on<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), String> {
        let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
        let labels = self.bands.iter().map(|b| b.label.as_str());
        let (area, side, font) = with_legend(&root, labels, 40, 4).map_err(e)?;
        let area = area.titled(&self.title, (FONT_FAMILY, 22)).map_err(e)?;
        let cells = area.split_evenly((1, self.panels.len().max(1)));
        let x0 = self.starts.first().copied().unwrap_or(0.0);
        let x1 = self.starts.last().map_or(1.0, |s| s + self.width);
        for (panel, cell) in self.panels.iter().zip(&cells) {
            let n = self.starts.len();
            // The top of each band per bucket, bottom band first.
            let mut tops = vec![vec![0.0f64; n]; panel.values.len()];
            let mut base = vec![0.0f64; n];
            for (band, vals) in panel.values.iter().enumerate() {
                for b in 0..n {
                    let v = vals.get(b).copied().unwrap_or(f64::NAN);
                    if v.is_finite() {
                        base[b] += v;
                    } else {
                        base[b] = f64::NAN;
                    }
                    tops[band][b] = base[b];
                }
            }
            let ymax = base
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max);
            let ymax = if ymax > 0.0 { ymax * 1.05 } else { 1.0 };
            let mut chart = ChartBuilder::on(cell)
                .caption(&panel.title, (FONT_FAMILY, 17))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(64)
                .build_cartesian_2d(x0..x1, 0.0..ymax)
                .map_err(e)?;
            let mut mesh = chart.configure_mesh();
            if let Some(k) = self.x_labels {
                mesh.x_labels(k);
            }
            if let Some(f) = self.x_label_formatter {
                mesh.x_label_formatter(f);
            }
            mesh.y_label_formatter(&|v: &f64| si(*v));
            mesh.draw().map_err(e)?;
            for (band, top) in tops.iter().enumerate() {
                let color = self.bands.get(band).map_or(BLACK.to_rgba(), |b| b.color);
                let lower = |b: usize| if band == 0 { 0.0 } else { tops[band - 1][b] };
                // One polygon per run of covered buckets, as steps.
                let mut b = 0;
                while b < n {
                    if !top[b].is_finite() {
                        b += 1;
                        continue;
                    }
                    let mut end = b;
                    while end < n && top[end].is_finite() {
                        end += 1;
                    }
                    let mut pts = Vec::with_capacity(4 * (end - b));
                    for (&x, &y) in self.starts[b..end].iter().zip(&top[b..end]) {
                        pts.push((x, y));
                        pts.push((x + self.width, y));
                    }
                    for k in (b..end).rev() {
                        pts.push((self.starts[k] + self.width, lower(k)));
                        pts.push((self.starts[k], lower(k)));
                    }
                    chart
                        .draw_series(std::iter::once(Polygon::new(pts, color.filled())))
                        .map_err(e)?;
                    b = end;
                }
            }
        }
        // The legend, top band first as in the stack.
        for (i, band) in self.bands.iter().rev().enumerate() {
            let y = 64 + i as i32 * LEGEND_ROW;
            side.draw(&Rectangle::new(
                [(4, y - 6), (26, y + 6)],
                band.color.filled(),
            ))
            .map_err(e)?;
            side.draw(&Text::new(
                band.label.as_str(),
                (34, y - LEGEND_FONT as i32 / 2 - 1),
                font.clone(),
            ))
            .map_err(e)?;
        }
        root.present().map_err(|x| x.to_string())
    }
}

/// `12.5k`, `3.20M`: an axis value with an SI prefix.
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (x, p) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let t = format!("{x:.2}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    format!("{t}{p}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time series as `kansoku plot` draws one: a thick black total and
    /// a coloured aggregate.
    fn chart<'a>() -> LineChart<'a> {
        let mut total = Series::new(
            "total (100.00%)",
            vec![(0.0, 3.0), (300.0, 5.0), (600.0, 4.0)],
            0,
        );
        total.color = BLACK.to_rgba();
        total.width = 3;
        let mut part = Series::new(
            "10.0.0.0/8 (62.50%)",
            vec![(0.0, 2.0), (300.0, 3.0), (600.0, 2.5)],
            1,
        );
        part.markers = true;
        LineChart {
            title: "src address (Mbps)".into(),
            x: 0.0..600.0,
            y: 0.0..5.5,
            x_desc: Some("time"),
            y_desc: None,
            x_labels: Some(6),
            x_label_formatter: None,
            y_label_area: 70,
            series: vec![total, part],
        }
    }

    #[test]
    fn svg_and_png_are_drawn_with_the_embedded_font() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("c.svg");
        chart().draw_file(&svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("total (100.00%)"));
        assert!(text.contains("10.0.0.0/8 (62.50%)") && text.contains("src address (Mbps)"));
        let png = dir.path().join("c.PNG");
        chart().draw_file(&png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(chart().to_svg().unwrap(), text);
    }

    #[test]
    fn only_svg_and_png_are_known() {
        assert_eq!(ImageKind::of(Path::new("a.svg")).unwrap(), ImageKind::Svg);
        let e = ImageKind::of(Path::new("x.gif")).unwrap_err();
        assert_eq!(e.kind, outcome::ErrorKind::Usage, "{e}");
        assert!(e.to_string().contains("expected .svg or .png"), "{e}");
        assert!(ImageKind::of(Path::new("noext")).is_err());
    }

    #[test]
    fn a_label_formatter_writes_the_x_labels() {
        let f = |x: &f64| format!("t{x:.0}");
        let mut c = chart();
        c.x_labels = Some(3);
        c.x_label_formatter = Some(&f);
        let svg = c.to_svg().unwrap();
        let labels = svg
            .lines()
            .filter(|l| {
                l.strip_prefix('t')
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count();
        assert!(svg.contains("\nt0\n") && labels >= 2, "{svg}");
    }
}
