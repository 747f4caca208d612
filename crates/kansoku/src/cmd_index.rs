//! `kansoku index`: write a trace's seek index anew from the trace.

use pipeline::Report;

use crate::args::IndexArgs;

pub fn run(args: &IndexArgs) -> pipeline::Result<Report> {
    let mut report = Report::default();
    for path in &args.files {
        let name = pipeline::display_path(path);
        let r = trace::reindex::rebuild(path).map_err(|e| pipeline::Error::file(path, e))?;
        let ending = if r.closed {
            "the stream ends cleanly".to_string()
        } else {
            "no end entry: the file was not closed".to_string()
        };
        eprintln!(
            "kansoku: {name}: wrote {}: {} chunks, {} packets ({} {}); {ending}",
            pipeline::display_path(&r.path),
            r.chunks,
            r.packets,
            r.codec,
            if r.codec == trace::Codec::None {
                "plain"
            } else {
                "compressed"
            }
        );
        if r.largest_chunk > 4 << 20 {
            eprintln!(
                "kansoku: {name}: its compressed blocks seldom end where a packet does (another tool's \
                 compression), so its chunks are large (up to {} bytes) and a time window reads little less than \
                 the whole file; `kansoku read -r {name} -w NEW` writes one whose index narrows reads",
                r.largest_chunk
            );
        }
        report.packets += r.packets;
        if let Some(t) = &r.truncation {
            report.absorb(Report {
                truncation: Some(pipeline::report::truncated(&name, t)),
                ..Report::default()
            });
        }
        if let Some(why) = r.stopped {
            report.problems.push(format!(
                "{name}: the index stops where the stream does: {why}"
            ));
        }
    }
    Ok(report)
}
