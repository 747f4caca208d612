//! `kansoku store`: the fleet store in ClickHouse (the store crate; the
//! glue the other commands share is `fleet`).

use pipeline::{display_path, Error, Report, SummaryFormat, SummaryWriter};

use crate::args::{StoreAction, StoreArgs, SummaryFormatArg};
use pipeline::sink::fleet::{client, error};

pub fn run(args: &StoreArgs) -> pipeline::Result<Report> {
    let Some(url) = args.store.as_deref() else {
        return Err(Error::usage(
            "give the store with --store http://HOST:PORT/DATABASE",
        ));
    };
    let c = client(url, args.store_credentials.as_deref())?;
    match &args.action {
        StoreAction::Init {
            distributed: Some(cluster),
            local: Some(local),
        } => {
            store::schema::init_distributed(&c, cluster, local).map_err(error)?;
            eprintln!(
                "kansoku: {} holds Distributed tables over {local} on cluster {cluster}",
                c.url
            );
        }
        StoreAction::Init { .. } => {
            store::init(&c).map_err(error)?;
            eprintln!(
                "kansoku: {} has kansoku's schema version {}",
                c.url,
                store::SCHEMA_VERSION
            );
        }
        StoreAction::Status => {
            store::schema::check(&c).map_err(error)?;
            println!("| probe | summaries | first | last |");
            println!("|---|---:|---|---|");
            for (name, n, first, last, _) in store::schema::probes(&c).map_err(error)? {
                println!(
                    "| {name} | {n} | {} | {} |",
                    aguri::summary::format_time(first),
                    aguri::summary::format_time(last)
                );
            }
        }
        StoreAction::Merge {
            range,
            interval,
            threshold,
            metric,
            coarsen,
            write,
            json,
            format,
        } => {
            store::schema::check(&c).map_err(error)?;
            let interval_ns = match interval {
                None => 0,
                Some(s) => pipeline::stage::profile::interval_ns(*s, "-i")?,
            };
            let (from_ns, to_ns) = range.ns();
            let spec = store::MergeSpec {
                probes: range.probes.clone(),
                from_ns,
                to_ns,
                interval_ns,
                metric: *metric,
                threshold: *threshold,
                coarsen: *coarsen,
                budget: aguri::DEFAULT_BUDGET,
            };
            let t0 = std::time::Instant::now();
            let (merged, stats) = store::merge(&c, &spec).map_err(error)?;
            let format = match (json, format) {
                (true, _) => SummaryFormat::Json,
                (_, SummaryFormatArg::Kansoku) => SummaryFormat::Kansoku,
                (_, SummaryFormatArg::Aguri2) => SummaryFormat::Aguri2,
                (_, SummaryFormatArg::Aguri3) => SummaryFormat::Aguri3,
            };
            let mut w = SummaryWriter::new(write.as_deref(), format)?;
            for s in &merged {
                w.write(s)?;
            }
            w.finish()?;
            eprintln!(
                "kansoku: {} summaries ({} repeated in the store) re-aggregated into {} at the server in {:.2} s: \
                 {} keys summed, {} rows after folding",
                stats.summaries,
                stats.repeated,
                merged.len(),
                t0.elapsed().as_secs_f64(),
                stats.keys,
                stats.reduced
            );
        }
        StoreAction::Send { spool, wait } => {
            let dir = pipeline::sink::fleet::spool_dir(spool.as_deref());
            let sp = std::sync::Arc::new(
                store::Spool::open(&dir).map_err(|e| Error::output(display_path(&dir), &e))?,
            );
            let waiting = sp
                .pending()
                .map_err(|e| Error::input(format!("{}: {e}", display_path(&dir))))?
                .len();
            let sender = store::Sender::start(sp.clone(), c);
            let stats = sender.stats.clone();
            let left = sender.finish(&sp, std::time::Duration::from_secs(*wait));
            let sent = stats.sent.load(std::sync::atomic::Ordering::Relaxed);
            eprintln!(
                "kansoku: {waiting} summaries waited in the spool {}: {sent} sent, {left} still wait",
                display_path(&dir)
            );
            let mut report = Report::default();
            if left > 0 {
                report.problems.push(format!(
                    "{left} summaries still wait in the spool {}",
                    display_path(&dir)
                ));
            }
            return Ok(report);
        }
        StoreAction::Export { write, range } => {
            store::schema::check(&c).map_err(error)?;
            let (from_ns, to_ns) = range.ns();
            // A day at a time: what the server groups and what kansoku
            // holds stay a day's, however long the range.
            let known = store::schema::probes(&c).map_err(error)?;
            let first = known.iter().map(|p| p.2).min().unwrap_or(0).max(from_ns);
            let last = known.iter().map(|p| p.3).max().unwrap_or(0).min(to_ns);
            const DAY: u64 = 86_400_000_000_000;
            let mut written = std::collections::HashSet::new();
            let mut day = first - first % DAY;
            while day <= last && !known.is_empty() {
                let (a, b) = (day.max(from_ns), day.saturating_add(DAY).min(to_ns));
                day = day.saturating_add(DAY);
                if a >= b {
                    continue;
                }
                let v = store::read(&c, &range.probes, a, b).map_err(error)?;
                pipeline::sink::summary::export_by_probe(write, &v, &mut written)?;
                if day == u64::MAX {
                    break;
                }
            }
            eprintln!(
                "kansoku: exported {} summaries to {}",
                written.len(),
                display_path(write)
            );
        }
    }
    Ok(Report::default())
}
