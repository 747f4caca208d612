//! Summaries to the fleet store (the `store` crate), for every command that
//! sends them (`profile --store`, `capture --profile --store`) or reads the
//! store (`store`, `web --store`): the client from a URL and credentials,
//! error mapping, the probe name and spool directory, and [`Fleet`], a
//! run's spool and sender.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::capture::StoreCounts;
use crate::error::{display_path, Error, Result};
use crate::report::Report;
use crate::sink::summary::{SummarySink, SummaryTee};
use store::{Client, Credentials, Sender, Spool, StoreError, StoreUrl};

/// How long a run waits at its end for the spool to drain into the store.
const STORE_GRACE: Duration = Duration::from_secs(10);

/// Where a run's summaries go besides the store: its credentials, its name
/// as a probe, its spool (each `None` for the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct FleetOptions<'a> {
    /// A file whose first line is USER:PASSWORD (else the environment).
    pub credentials: Option<&'a Path>,
    /// The probe's name (else this host's).
    pub probe: Option<&'a str>,
    /// The spool directory (else ~/.local/state/kansoku/spool).
    pub spool: Option<&'a Path>,
}

/// A run's link to the fleet store: every summary goes to the spool, which
/// a thread sends on; whatever the store cannot take waits there.
pub struct Fleet {
    spool: Arc<Spool>,
    sender: Sender,
    dir: PathBuf,
    /// Summaries the spool could not take.
    not_spooled: Arc<AtomicU64>,
}

impl Fleet {
    /// Wraps `sink` so that its summaries also go to the store at `url`.
    pub fn start(
        url: &str,
        o: &FleetOptions<'_>,
        sink: SummarySink,
    ) -> Result<(Fleet, SummarySink)> {
        let c = client(url, o.credentials)?;
        let probe = o.probe.map_or_else(default_probe, str::to_string);
        if !store::valid_name(&probe) {
            return Err(Error::usage(format!(
                "--probe {probe:?}: letters, digits, _, - and ., at most 64"
            )));
        }
        let down = store::schema::check(&c).err();
        if let Some(e) = &down {
            eprintln!("kansoku: {e}; summaries wait in the spool until it answers");
        }
        let dir = spool_dir(o.spool);
        let spool = Arc::new(Spool::open(&dir).map_err(|e| Error::output(display_path(&dir), &e))?);
        let sender = Sender::start_with(spool.clone(), c, down.is_some());
        let (sp, shown) = (spool.clone(), display_path(&dir));
        let not_spooled = Arc::new(AtomicU64::new(0));
        let lost = not_spooled.clone();
        // A spool that cannot take a summary (its disk full) is said once,
        // and once when it takes them again; the run's own outputs go on,
        // and the run ends with the count and exit 3.
        let failing = AtomicBool::new(false);
        let tee: SummaryTee = Box::new(move |s| {
            match sp.push(&probe, s) {
                Ok(_) => {
                    if failing.swap(false, Ordering::Relaxed) {
                        eprintln!("kansoku: the spool {shown} takes summaries again");
                    }
                }
                Err(e) => {
                    lost.fetch_add(1, Ordering::Relaxed);
                    if !failing.swap(true, Ordering::Relaxed) {
                        eprintln!(
                            "kansoku: the spool {shown}: {e}; summaries it cannot hold are not sent to the store \
                             (the run's own outputs go on)"
                        );
                    }
                }
            }
            Ok(())
        });
        Ok((
            Fleet {
                spool,
                sender,
                dir,
                not_spooled,
            },
            SummarySink::Tee(Box::new(sink), tee),
        ))
    }

    /// The sender's counters (for a progress line).
    pub fn stats(&self) -> Arc<store::SendStats> {
        self.sender.stats.clone()
    }

    /// Waits a little for the spool to drain; what was sent and what waits.
    pub fn finish(self) -> StoreCounts {
        let stats = self.sender.stats.clone();
        let waiting = self.sender.finish(&self.spool, STORE_GRACE);
        StoreCounts {
            sent: stats.sent.load(Ordering::Relaxed),
            waiting,
            spool: display_path(&self.dir),
            not_spooled: self.not_spooled.load(Ordering::Relaxed),
        }
    }

    /// [`finish`](Self::finish), said on standard error; a failure if the
    /// spool could not hold some summaries.
    pub fn finish_and_say(self, report: &mut Report) {
        let c = self.finish();
        not_spooled(&c, report);
        if c.waiting > 0 {
            eprintln!(
                "kansoku: {} summaries wait in the spool {}; a later run with --store sends them",
                c.waiting, c.spool
            );
        } else {
            eprintln!("kansoku: sent {} summaries to the store", c.sent);
        }
    }
}

/// Marks `report` failed (exit 3) when the spool could not hold summaries.
pub fn not_spooled(c: &StoreCounts, report: &mut Report) {
    if c.not_spooled > 0 {
        report.failed(Error::output(
            format!("the spool {}", c.spool),
            &std::io::Error::other(format!(
                "{} summaries could not be spooled (they are in the run's own outputs, not in the store)",
                c.not_spooled
            )),
        ));
    }
}

/// A store error as the CLI reports it: usage and schema errors are
/// usage errors (exit 2), the rest input errors.
pub fn error(e: StoreError) -> Error {
    match e {
        StoreError::Usage(m) => Error::usage(m),
        e => Error::input(e.to_string()),
    }
}

/// The client for `url`, with credentials from the file or the environment.
pub fn client(url: &str, credentials: Option<&Path>) -> Result<Client> {
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
