//! `kansoku store`: the fleet store in ClickHouse (the store crate; the
//! glue the other commands share is `fleet`).

use pipeline::{display_path, Error, Report};

use crate::args::{StoreAction, StoreArgs};
use crate::fleet::{client, error};

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
        StoreAction::Export {
            write,
            probes,
            from,
            to,
        } => {
            store::schema::check(&c).map_err(error)?;
            let to_ns = to.map_or(u64::MAX, |t| t.saturating_mul(1_000_000_000));
            let v = store::read(&c, probes, from.saturating_mul(1_000_000_000), to_ns)
                .map_err(error)?;
            let mut written = std::collections::HashSet::new();
            for st in &v {
                // Probe names were checked when read: never a path of their own.
                let dir = write.join(&st.probe);
                std::fs::create_dir_all(&dir).map_err(|e| Error::output(display_path(&dir), &e))?;
                // Two summaries starting in the same second get two files
                // (a file from an earlier export is replaced).
                let stamp = aguri::summary::file_stamp(st.summary.start_ns);
                let mut f = dir.join(format!("{stamp}.agr"));
                let mut k = 1;
                while written.contains(&f) {
                    f = dir.join(format!("{stamp}.{k}.agr"));
                    k += 1;
                }
                written.insert(f.clone());
                std::fs::write(&f, st.summary.to_string())
                    .map_err(|e| Error::output(display_path(&f), &e))?;
            }
            eprintln!(
                "kansoku: exported {} summaries to {}",
                v.len(),
                display_path(write)
            );
        }
    }
    Ok(Report::default())
}
