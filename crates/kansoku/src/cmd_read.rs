//! `kansoku read`: print packets, or convert/recompress a trace with -w.

use std::io::{self, BufWriter, IsTerminal, Write};

use trace::Record;

use crate::cli::ReadArgs;
use crate::error::{display_path, CliError, CliResult, EXIT_PROBLEMS};
use crate::progress::Progress;
use crate::sink::Sink;
use crate::{input, output, signals, time};

pub fn run(args: &ReadArgs) -> CliResult<i32> {
    let since = args
        .since
        .as_deref()
        .map(time::parse_time)
        .transpose()
        .map_err(CliError::input)?;
    let until = args
        .until
        .as_deref()
        .map(time::parse_time)
        .transpose()
        .map_err(CliError::input)?;
    if let (Some(s), Some(u)) = (since, until) {
        if u <= s {
            return Err(CliError::input("--until must be later than --since"));
        }
    }
    let mut sink = args
        .out
        .write
        .as_deref()
        .map(|p| Sink::new(&args.out, p))
        .transpose()?;
    let (mut reader, window) = input::open(&args.read, since, until)?;
    let name = display_path(&args.read);

    let stdout = io::stdout();
    let printing = sink.is_none();
    // Keep the terminal for the packet lines when they go to it.
    let progress = Progress::new(
        input::file_size(&args.read),
        !printing || !stdout.is_terminal(),
    );
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut packets = 0u64;
    let mut read_error = None;
    loop {
        if signals::stop_requested() {
            break;
        }
        // Read before the next record borrows the reader.
        let position = reader.compressed_offset();
        let rec = match reader.next_record() {
            Ok(Some(rec)) => rec,
            Ok(None) => break,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        };
        if let Record::Packet(p) = &rec {
            let ts = p.ts_nanos();
            if since.is_some_and(|s| ts < s) || until.is_some_and(|u| ts >= u) {
                continue;
            }
            if args.count.is_some_and(|c| packets >= c) {
                break;
            }
            packets += 1;
            progress.tick(packets, position);
        }
        match (&mut sink, &rec) {
            (Some(sink), _) => sink.write(&rec)?,
            (None, Record::Packet(p)) if args.json => output::write_json(&mut out, p)?,
            (None, Record::Packet(p)) => output::write_text(&mut out, p, args.time)?,
            (None, _) => {}
        }
    }
    progress.finish();
    out.flush()?;
    drop(out);

    // Close the output before reporting a read error: nothing written is lost.
    let mut code = 0;
    if let Some(sink) = sink {
        sink.finish()?.report(args.json)?;
    }
    match window {
        Some(w) if w.indexed => eprintln!(
            "kansoku: {name}: index: decompressed {} of {} blocks for the time window",
            w.chunks_decoded, w.chunks_total
        ),
        Some(_) => {
            eprintln!("kansoku: {name}: no seek index; read the whole trace for the time window")
        }
        None => {}
    }
    if let Some(e) = read_error {
        return Err(CliError::input(format!("{name}: {e}")));
    }
    if let Some(t) = reader.truncation() {
        eprintln!("kansoku: {name}: warning: {t}");
        code = EXIT_PROBLEMS;
    }
    Ok(code)
}
