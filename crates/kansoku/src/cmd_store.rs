//! `kansoku store`: the fleet store in ClickHouse (the store crate), and
//! the glue `profile --store` and `web --store` share.

use std::path::{Path, PathBuf};

use pipeline::{display_path, Error, Report};
use store::{Client, Credentials, StoreError, StoreUrl};

use crate::args::{StoreAction, StoreArgs};

/// A store error as the CLI reports it: usage and schema errors are
/// usage errors (exit 2), the rest input errors.
pub fn error(e: StoreError) -> Error {
    match e {
        StoreError::Usage(m) => Error::usage(m),
        e => Error::input(e.to_string()),
    }
}

/// The client for `url`, with credentials from the file or the environment.
pub fn client(url: &str, credentials: Option<&Path>) -> pipeline::Result<Client> {
    let url = StoreUrl::parse(url).map_err(error)?;
    let creds = Credentials::from_env_or_file(credentials).map_err(error)?;
    Ok(Client::new(url, creds))
}

/// This host's name as a probe name (or `probe`).
pub fn default_probe() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let h = h.trim();
    if store::valid_name(h) {
        h.to_string()
    } else {
        "probe".to_string()
    }
}

/// The spool directory: the one given, or ~/.local/state/kansoku/spool.
pub fn spool_dir(given: Option<&Path>) -> PathBuf {
    given.map(Path::to_path_buf).unwrap_or_else(|| {
        let base = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("kansoku/spool")
    })
}

pub fn run(args: &StoreArgs) -> pipeline::Result<Report> {
    let Some(url) = args.store.as_deref() else {
        return Err(Error::usage(
            "give the store with --store http://HOST:PORT/DATABASE",
        ));
    };
    let c = client(url, args.store_credentials.as_deref())?;
    match &args.action {
        StoreAction::Init => {
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
            for st in &v {
                let dir = write.join(&st.probe);
                std::fs::create_dir_all(&dir).map_err(|e| Error::output(display_path(&dir), &e))?;
                let f = dir.join(format!(
                    "{}.agr",
                    aguri::summary::file_stamp(st.summary.start_ns)
                ));
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
