//! The spool: summaries waiting for the store, one file each, in order.
//!
//! A summary is written to `NNNNNNNNNNNNNNNNNNNN.agr.tmp`, synced, and
//! renamed to `NNNNNNNNNNNNNNNNNNNN.agr` (its first line `%%Probe: NAME`,
//! then the summary in kansoku's format): a file that exists whole is a
//! summary to send, whatever kills the process when. The sender sends the
//! files in name order and removes each once the store has it; sent twice
//! after a crash between the two, it is stored once (the summary's id).
//! A full disk is an error of `push`, said where the summary was made.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aguri::Summary;

use crate::client::Client;

/// The directory of waiting summaries.
pub struct Spool {
    dir: PathBuf,
    next: Mutex<u64>,
}

impl Spool {
    /// Opens (creating) `dir`.
    pub fn open(dir: &Path) -> std::io::Result<Spool> {
        fs::create_dir_all(dir)?;
        Ok(Spool {
            dir: dir.to_path_buf(),
            next: Mutex::new(0),
        })
    }

    fn files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut v: Vec<PathBuf> = fs::read_dir(dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "agr"))
            .collect();
        v.sort();
        Ok(v)
    }

    /// The files waiting, oldest first.
    pub fn pending(&self) -> std::io::Result<Vec<PathBuf>> {
        Spool::files_in(&self.dir)
    }

    /// Adds a summary of `probe`; it is on disk when this returns. Files are
    /// named by the time, the process and a counter, so that runs sharing a
    /// spool never take each other's names, and sort in the order made.
    pub fn push(&self, probe: &str, s: &Summary) -> std::io::Result<PathBuf> {
        let n = {
            let mut g = self
                .next
                .lock()
                .map_err(|_| std::io::Error::other("spool lock"))?;
            *g = g.wrapping_add(1);
            *g
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let name = format!("{now:020}.{:010}.{n:010}", std::process::id());
        let path = self.dir.join(format!("{name}.agr"));
        let tmp = self.dir.join(format!("{name}.agr.tmp"));
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(format!("%%Probe: {probe}\n{s}").as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// Reads a spooled file back: its probe and its summaries.
    pub fn read(path: &Path) -> Result<(String, Vec<Summary>), String> {
        let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
        let probe = first
            .strip_prefix("%%Probe: ")
            .ok_or_else(|| format!("{}:1:1: expected %%Probe: NAME", path.display()))?;
        let v = aguri::parse_summaries(rest)
            .map_err(|e| format!("{}:{e} (one line down)", path.display()))?;
        Ok((probe.to_string(), v))
    }
}

/// Spooled files sent in one round (one insert per table).
const BATCH: usize = 256;

/// What the sender has done and what waits.
#[derive(Debug, Default)]
pub struct SendStats {
    pub sent: AtomicU64,
    pub waiting: AtomicU64,
    /// Whether the store is down now.
    pub down: AtomicBool,
}

/// Sends the spool's files to the store on a thread of its own, in order,
/// retrying while the store is unreachable or failing; one warning when the
/// store goes away and one when it is back.
pub struct Sender {
    pub stats: Arc<SendStats>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sender {
    pub fn start(spool: Arc<Spool>, client: Client) -> Sender {
        Sender::start_with(spool, client, false)
    }

    /// [`start`](Self::start) knowing whether the store is down already
    /// (its caller has said so: no second warning).
    pub fn start_with(spool: Arc<Spool>, client: Client, down: bool) -> Sender {
        let stats = Arc::new(SendStats::default());
        stats.down.store(down, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (stats.clone(), stop.clone());
        let thread = std::thread::spawn(move || send_loop(&spool, &client, &st, &sp));
        Sender {
            stats,
            stop,
            thread: Some(thread),
        }
    }

    /// Waits up to `grace` for the spool to drain, then stops the thread;
    /// returns how many summaries still wait (kept for the next run).
    pub fn finish(mut self, spool: &Spool, grace: Duration) -> u64 {
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            match spool.pending() {
                Ok(v) if v.is_empty() => break,
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        spool.pending().map_or(0, |v| v.len() as u64)
    }
}

/// Says once that the store went away (or will not take summaries) and
/// waits `backoff` (doubling it up to 5 s; 5 s at once for what does not heal
/// by itself: a wrong password, another schema).
fn went_away(e: &crate::StoreError, st: &SendStats, stop: &AtomicBool, backoff: &mut Duration) {
    if !st.down.swap(true, Ordering::Relaxed) {
        eprintln!("kansoku: {e}; summaries wait in the spool until it answers");
    }
    if !e.transient() {
        *backoff = Duration::from_secs(5);
    }
    let t0 = Instant::now();
    while t0.elapsed() < *backoff && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    *backoff = (*backoff * 2).min(Duration::from_secs(5));
}

fn send_loop(spool: &Spool, client: &Client, st: &SendStats, stop: &AtomicBool) {
    let mut backoff = Duration::from_millis(100);
    // Summaries go only into a store with this kansoku's schema: checked
    // before the first send and again after any failure.
    let mut checked = false;
    while !stop.load(Ordering::Relaxed) {
        let files = match spool.pending() {
            Ok(v) => v,
            Err(e) => {
                eprintln!("kansoku: the spool cannot be read: {e}");
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
        };
        st.waiting.store(files.len() as u64, Ordering::Relaxed);
        if files.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        if !checked {
            if let Err(e) = crate::schema::check(client) {
                went_away(&e, st, stop, &mut backoff);
                continue;
            }
            checked = true;
        }
        // Up to BATCH files a round, in one insert per table.
        for chunk in files.chunks(BATCH) {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let mut read = Vec::with_capacity(chunk.len());
            for f in chunk {
                match Spool::read(f) {
                    Ok((probe, sums)) => read.push((f, probe, sums)),
                    Err(e) => {
                        // Not ours or damaged: set aside, said once.
                        eprintln!("kansoku: {e}; moved aside as .bad");
                        let _ = fs::rename(f, f.with_extension("bad"));
                    }
                }
            }
            let batch: Vec<(&str, &Summary)> = read
                .iter()
                .flat_map(|(_, p, sums)| sums.iter().map(move |s| (p.as_str(), s)))
                .collect();
            match crate::schema::insert_many(client, &batch) {
                Ok(_) => {
                    for (f, _, _) in &read {
                        let _ = fs::remove_file(f);
                    }
                    st.sent.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    st.waiting.fetch_sub(read.len() as u64, Ordering::Relaxed);
                    if st.down.swap(false, Ordering::Relaxed) {
                        eprintln!(
                            "kansoku: the store is back at {}; sending what waited",
                            client.url
                        );
                    }
                    backoff = Duration::from_millis(100);
                }
                Err(crate::StoreError::Usage(m)) => {
                    // A file the store can never take (a bad probe name):
                    // set aside, said, and the rest go on.
                    for (f, _, _) in &read {
                        let _ = fs::rename(f, f.with_extension("bad"));
                    }
                    eprintln!("kansoku: {m}; moved aside as .bad");
                }
                Err(e) => {
                    went_away(&e, st, stop, &mut backoff);
                    checked = false;
                    break;
                }
            }
        }
    }
}
