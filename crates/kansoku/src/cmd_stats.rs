//! `kansoku stats`: what is in a trace, and how well it is stored.

use std::io::{self, Write};

use pipeline::{Census, Control, Error, FileStats, Report, TraceSource};
use trace::time;

use crate::args::StatsArgs;
use crate::progress::Progress;
use crate::signals;

pub fn run(args: &StatsArgs) -> pipeline::Result<Report> {
    let mut report = Report::default();
    let mut all = Vec::new();
    for path in &args.files {
        let mut source = TraceSource::open(path)?;
        let progress = Progress::new(source.size(), true);
        let mut census = Census::default();
        let ctl = Control {
            stop: signals::stop_flag(),
            progress: Some(&progress),
        };
        let r = pipeline::run(&mut source, &mut census, ctl);
        progress.finish();
        let mut s = census.finish(&source, path, time::format_rfc3339)?;
        if r.interrupted.is_some() {
            s.warning = Some("interrupted; the figures cover the part read".into());
        }
        if let Some(t) = &r.truncation {
            s.warning = Some(t.message.clone());
        }
        let stop = r.read_error.is_some() || r.interrupted.is_some();
        report.absorb(r);
        // The figures of what was read are shown, also of a file whose
        // reading was stopped; the files after it are not read.
        if !args.json {
            print_text(&s)?;
        }
        all.push(s);
        if stop {
            break;
        }
    }
    if args.json {
        let mut o = io::stdout().lock();
        if all.len() == 1 {
            serde_json::to_writer_pretty(&mut o, &all[0]).map_err(|e| Error::stdout(e.into()))?;
        } else {
            serde_json::to_writer_pretty(&mut o, &all).map_err(|e| Error::stdout(e.into()))?;
        }
        writeln!(o).map_err(Error::stdout)?;
    }
    Ok(report)
}

fn print_text(s: &FileStats) -> pipeline::Result<()> {
    let mut o = io::stdout().lock();
    writeln!(o, "{}", s.file).map_err(Error::stdout)?;
    writeln!(o, "  format:       {}, compression: {}", s.format, s.codec).map_err(Error::stdout)?;
    if let Some(fb) = s.file_bytes {
        write!(
            o,
            "  size:         {fb} bytes on disk, {} decompressed",
            s.decompressed_bytes
        )
        .map_err(Error::stdout)?;
        if let Some(r) = s.compression_ratio {
            write!(o, " (ratio {r:.3}, {:.2}x)", 1.0 / r.max(f64::MIN_POSITIVE))
                .map_err(Error::stdout)?;
        }
        writeln!(o).map_err(Error::stdout)?;
    }
    if let Some(i) = &s.index {
        writeln!(
            o,
            "  blocks:       {} chunks, {} of {} packet chunks stored raw ({:.1}%)",
            i.chunks,
            i.raw_chunks,
            i.packet_chunks,
            i.raw_share * 100.0
        )
        .map_err(Error::stdout)?;
    }
    writeln!(
        o,
        "  packets:      {} ({} bytes captured, {} on the wire, {} cut by snaplen)",
        s.packets, s.captured_bytes, s.wire_bytes, s.snapped_packets
    )
    .map_err(Error::stdout)?;
    if let (Some(f), Some(l)) = (&s.first, &s.last) {
        writeln!(o, "  time:         {f} .. {l} ({:.3} s)", s.duration_s).map_err(Error::stdout)?;
    }
    writeln!(o, "  sections:     {}", s.sections).map_err(Error::stdout)?;
    for i in &s.interfaces {
        writeln!(
            o,
            "  interface {}.{}: {} snaplen {}: {} packets, {} bytes",
            i.section, i.id, i.link_type, i.snaplen, i.packets, i.bytes
        )
        .map_err(Error::stdout)?;
    }
    if !s.protocols.is_empty() {
        let mix: Vec<String> = s
            .protocols
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k} {v} ({:.1}%)",
                    *v as f64 * 100.0 / s.packets.max(1) as f64
                )
            })
            .collect();
        writeln!(o, "  protocols:    {}", mix.join(", ")).map_err(Error::stdout)?;
    }
    if s.other_blocks > 0 {
        writeln!(o, "  other blocks: {}", s.other_blocks).map_err(Error::stdout)?;
    }
    Ok(())
}
