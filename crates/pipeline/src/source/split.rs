//! An uncompressed pcap or pcapng file read on two threads, for the
//! profiler.
//!
//! Reading a trace from the page cache is a copy, and on one thread that
//! copy was the bound of `kansoku profile -r FILE` (bench/profile-throughput.md,
//! rounds 16-18: the whole command within 1.5x of `cat` of the file). Two
//! threads copying halves of the file go faster than one, but bytes one
//! core read cost the other as much to take over as to read them itself
//! (rounds 7, 8, 16, 17). So the file is cut into runs
//! ([`trace::runs::Runs`], [`RUN_BYTES`]: whole chunks of the index, or
//! without one the records that start in 2 MiB of the file), and a helper
//! thread here reads the runs it claims, checks their chunks against the
//! index's checksums when there is one, walks their records and hands over
//! only what the profiler needs of each packet ([`Sliced`]: its time, length
//! and flow), while this thread gives the packets to the run's consumer in
//! file order and reads a run itself whenever the one it needs next is
//! not the helper's or not ready (`Claims`).
//!
//! Nothing changes in what is counted or reported: a run either thread
//! cannot take whole (a chunk that fails its checksum, a record header that
//! does not parse, records cut by the file's end, a failed read) or that
//! does not start exactly where the run before it ended (a run of a file
//! without an index whose start was found inside a packet) ends the split
//! there, and the ordinary reader ([`TraceSource`]) takes over from the end
//! of the last run taken, passing over what was counted and reporting the
//! corruption, the bad record or the cut as it always does. Only pcap files
//! whose index covers them whole, and pcap and pcapng files that have none,
//! are split (see [`trace::runs`]); the rest, and standard input, go through
//! [`TraceSource`].

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use trace::runs::Runs;
use trace::Record;
use wire::FlowBits;

use crate::error::{display_path, Result};
use crate::report::Report;
use crate::run::Source;
use crate::source::trace::{verifying, TraceSource};

/// A run's bytes at least: 2 MiB, 64 of the writer's chunks. The two
/// threads hand over a run each time, and on a virtual machine a hand-off
/// that finds the other thread asleep waits for its virtual CPU to be woken:
/// with runs of 256 KiB (50 us of reading each) the two reading threads and
/// the counting thread used 1.5 of the two CPUs, and the whole run took 15%
/// longer (bench/profile-throughput.md). An indexed run is read
/// and checked a piece at a time, in the cache (`trace::runs`).
pub const RUN_BYTES: u64 = 2 << 20;

/// Files smaller than this are read on one thread: the helper's start
/// would cost more than it saves.
pub const MIN_SPLIT_BYTES: u64 = 16 << 20;

/// Files whose records are shorter than this on average are read on one
/// thread: a full-frame trace (about 800 bytes a record) is read 20% faster
/// on two, one cut to 400 bytes 4%, to 200 bytes no faster, to 96 bytes 5%
/// slower (bench/profile-throughput.md).
pub const MIN_SPLIT_RECORD: u64 = 256;

/// Files with a run longer than this are read on one thread (see
/// `SplitSource::start`): a run is about an eighth of it in `profile -r`'s
/// runs of whole 32 KiB chunks.
pub const MAX_RUN_BYTES: u64 = 16 << 20;

/// Runs the helper may have ready before it waits, and that this thread
/// may read ahead while it waits for the helper's.
const AHEAD: usize = 8;

/// What the profiler needs of a packet.
#[derive(Clone, Copy, Debug)]
pub struct Sliced {
    pub ts_ns: u64,
    /// Length on the wire.
    pub orig_len: u32,
    /// The packet's flow; `None` for non-IP traffic.
    pub bits: Option<FlowBits>,
}

/// An item of a split read: a packet, or after the ordinary reader has
/// taken over, its records.
pub enum SplitItem<'a> {
    Packet(Sliced),
    Record(Record<'a>),
}

/// Reads run `i` into `buf` and slices its packets into `out`: the bytes
/// of the file its records cover, or `None` (and `out` empty) when the run
/// cannot be taken whole.
fn slice_run(runs: &Runs, i: usize, buf: &mut Vec<u8>, out: &mut Vec<Sliced>) -> Option<Span> {
    out.clear();
    let whole = runs.walk(i, buf, |p| {
        out.push(Sliced {
            ts_ns: p.ts_ns,
            orig_len: p.orig_len,
            bits: wire::flow_bits(p.link, p.data),
        })
    });
    if whole.is_none() {
        out.clear();
    }
    whole
}

/// The bytes of the file a run's records cover.
type Span = std::ops::Range<u64>;

/// A run's packets and the bytes they cover; `None` when it cannot be
/// taken whole.
type Taken = Option<(Span, Vec<Sliced>)>;

/// Which thread reads which run.
///
/// Runs are claimed in file order from one counter. The helper claims the
/// next each time it is ready for one; this thread, which also gives every
/// packet to the chain (and counts them, in `profile -r`), claims the run it
/// must give out next if the helper has not, and while the helper's run is
/// not ready yet it claims and reads the next unclaimed one instead of
/// waiting. So whichever thread has time reads: with a fixed share (two runs
/// of three to the helper) the helper ran out of runs at 105 ms of a 134 ms
/// run of the active-flows trace and this thread went on alone, 128 ms on a
/// CPU against the helper's 90 (bench/profile-throughput.md).
struct Claims {
    /// The first run nobody has claimed.
    next: AtomicUsize,
    /// Tests: the helper reads two runs of every three ([`helpers`]) and
    /// this thread the rest, whatever their speeds, so that a test can put a
    /// bad run in either thread's hands.
    fixed: bool,
    /// Tests: the helper waits this long after each claim.
    #[cfg(test)]
    pause: std::time::Duration,
}

impl Claims {
    /// Run 0 is read before the helper starts.
    fn new(fixed: bool) -> Claims {
        Claims {
            next: AtomicUsize::new(1),
            fixed,
            #[cfg(test)]
            pause: std::time::Duration::ZERO,
        }
    }

    /// The helper's next run after `last`, of `len`.
    fn helper(&self, last: usize, len: usize) -> Option<usize> {
        if self.fixed {
            return (last + 1..len).find(|&i| helpers(i));
        }
        self.unclaimed(len)
    }

    /// Claims run `i`, the next to give out, for this thread; false when the
    /// helper has it.
    fn claim(&self, i: usize) -> bool {
        if self.fixed {
            return !helpers(i);
        }
        self.next
            .compare_exchange(i, i + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// A run for this thread to read while it waits for the helper's, of
    /// `len`.
    fn ahead(&self, len: usize) -> Option<usize> {
        if self.fixed {
            return None;
        }
        self.unclaimed(len)
    }

    /// Claims the first run nobody has, of `len`.
    fn unclaimed(&self, len: usize) -> Option<usize> {
        let i = self.next.fetch_add(1, Ordering::AcqRel);
        (i < len).then_some(i)
    }
}

/// Whether the helper reads run `i` when the share is fixed (tests).
fn helpers(i: usize) -> bool {
    !i.is_multiple_of(3)
}

/// The helper thread: it reads the runs it claims, in order, at most
/// [`AHEAD`] ahead of this thread's taking them.
struct Helper {
    rx: Option<Receiver<(usize, Taken)>>,
    /// Vectors handed back to be filled again.
    back: SyncSender<Vec<Sliced>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Helper {
    fn start(runs: Arc<Runs>, claims: Arc<Claims>) -> std::io::Result<Helper> {
        let (tx, rx) = sync_channel(AHEAD);
        let (back, spare) = sync_channel::<Vec<Sliced>>(AHEAD + 2);
        let stop = Arc::new(AtomicBool::new(false));
        let halt = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("kansoku-read".into())
            .spawn(move || {
                let mut buf = Vec::new();
                let mut last = 0;
                while let Some(i) = claims.helper(last, runs.len()) {
                    last = i;
                    #[cfg(test)]
                    std::thread::sleep(claims.pause);
                    if halt.load(Ordering::Relaxed) {
                        break;
                    }
                    let mut out = spare.try_recv().unwrap_or_default();
                    let got = slice_run(&runs, i, &mut buf, &mut out).map(|s| (s, out));
                    let whole = got.is_some();
                    if tx.send((i, got)).is_err() || !whole {
                        break;
                    }
                }
            })?;
        Ok(Helper {
            rx: Some(rx),
            back,
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // A helper waiting to send finds no receiver and ends.
        self.rx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// An uncompressed pcap or pcapng file's packets, read on two threads (see the
/// module's text). For a chain of the profiler alone: its items are
/// packets sliced to their flows, not frames.
pub struct SplitSource {
    runs: Arc<Runs>,
    path: PathBuf,
    name: String,
    /// This thread's run buffer.
    buf: Vec<u8>,
    /// The packets of the run being given out, and how many were.
    cur: Vec<Sliced>,
    at: usize,
    next_run: usize,
    helper: Option<Helper>,
    claims: Arc<Claims>,
    /// Runs this thread read ahead while it waited for the helper's, in
    /// order.
    mine: VecDeque<(usize, Taken)>,
    /// Runs this thread read.
    read_here: usize,
    /// Whether chunks are checked against the index.
    verify: bool,
    /// Whether `cur` came from the helper (it goes back to it).
    cur_helpers: bool,
    /// This thread's vectors.
    spare: Vec<Vec<Sliced>>,
    /// The ordinary reader, once a run could not be taken whole.
    fallback: Option<TraceSource>,
    position: u64,
    packets: u64,
    bytes: u64,
}

impl SplitSource {
    /// `path` read on two threads, or `None` when it is not a file this
    /// applies to (standard input, compressed, a pcapng file with an index,
    /// an index the file does not bear out or not closed, under [`MIN_SPLIT_BYTES`], records
    /// under [`MIN_SPLIT_RECORD`] on average) or there is one CPU or the
    /// thread cannot start: read it with [`TraceSource`].
    pub fn open(path: &Path) -> Option<SplitSource> {
        if path.as_os_str() == "-"
            || std::thread::available_parallelism().map_or(true, |n| n.get() < 2)
        {
            return None;
        }
        let verify = verifying();
        let runs = Runs::plan(path, verify, RUN_BYTES)?;
        if runs.file_len() < MIN_SPLIT_BYTES {
            return None;
        }
        SplitSource::start(path, runs, verify, MIN_SPLIT_RECORD, Claims::new(false))
    }

    /// [`open`](Self::open) with runs of `run_bytes`, whatever the file's
    /// size and records and the CPUs; its chunks checked against the index
    /// (`verify`) or not, whatever `--no-verify` said.
    pub fn with_runs(path: &Path, run_bytes: u64, verify: bool) -> Option<SplitSource> {
        SplitSource::with_claims(path, run_bytes, verify, Claims::new(false))
    }

    /// [`with_runs`](Self::with_runs) with the helper reading two runs of
    /// every three and this thread the rest ([`Claims::fixed`]).
    #[cfg(test)]
    fn with_fixed_runs(path: &Path, run_bytes: u64, verify: bool) -> Option<SplitSource> {
        SplitSource::with_claims(path, run_bytes, verify, Claims::new(true))
    }

    fn with_claims(path: &Path, run_bytes: u64, verify: bool, c: Claims) -> Option<SplitSource> {
        SplitSource::start(path, Runs::plan(path, verify, run_bytes)?, verify, 0, c)
    }

    /// Starts the split read, unless the file's records (as the index
    /// counts them, or as the first run has them) are shorter than
    /// `min_record` on average: a capture cut to its headers is not bound by
    /// its reading, and the helper would only take the core the profiler's
    /// counting thread has when the file is read on one.
    fn start(
        path: &Path,
        runs: Runs,
        verify: bool,
        min_record: u64,
        claims: Claims,
    ) -> Option<SplitSource> {
        // A run of a chunk far longer than the runs asked for (the index
        // allows 64 MiB) would hold millions of packets in each of the
        // vectors in flight.
        if runs.len() < 2 || runs.longest() > MAX_RUN_BYTES {
            return None;
        }
        // An index says how long the records are before any is read: then
        // the helper starts at once, and reads run 1 while this thread reads
        // run 0 (about a millisecond of a 100 ms read of 1.6 GB).
        let indexed = runs.packet_count().map(|n| runs.file_len() / n.max(1));
        if indexed.is_some_and(|record| record < min_record) {
            return None;
        }
        let runs = Arc::new(runs);
        let claims = Arc::new(claims);
        let start = || Helper::start(Arc::clone(&runs), Arc::clone(&claims)).ok();
        let early = match indexed {
            Some(_) => Some(start()?),
            None => None,
        };
        // The first run, with the file's header, is read here: if it cannot
        // be taken whole, the ordinary reader reads the file from its start
        // (and may not open it at all: a corrupt first chunk is a bad header
        // to it), and a helper already started is stopped (`Helper::drop`).
        let (mut buf, mut cur) = (Vec::new(), Vec::new());
        let first = slice_run(&runs, 0, &mut buf, &mut cur)?;
        let helper = match early {
            Some(h) => h,
            None => {
                if first.end / (cur.len() as u64).max(1) < min_record {
                    return None;
                }
                start()?
            }
        };
        Some(SplitSource {
            runs,
            path: path.to_path_buf(),
            name: display_path(path),
            buf,
            cur,
            at: 0,
            next_run: 1,
            helper: Some(helper),
            claims,
            mine: VecDeque::new(),
            read_here: 0,
            verify,
            cur_helpers: false,
            spare: Vec::new(),
            fallback: None,
            position: first.end,
            packets: 0,
            bytes: 0,
        })
    }

    /// The file's size in bytes.
    pub fn size(&self) -> Option<u64> {
        Some(self.runs.file_len())
    }

    /// Whether the ordinary reader has taken over (a run could not be
    /// taken whole).
    pub fn fell_back(&self) -> bool {
        self.fallback.is_some()
    }

    /// Takes the next run's packets; false at the end.
    fn advance(&mut self) -> Result<bool> {
        let i = self.next_run;
        if i == self.runs.len() {
            self.helper = None;
            // A file that grew while it was read (a capture still writing
            // it) is read on to its new end by the ordinary reader.
            if !self.runs.grew() {
                return Ok(false);
            }
            self.take_over()?;
            return Ok(true);
        }
        // The vector just given out goes back where it came from.
        let done = std::mem::take(&mut self.cur);
        match (&self.helper, self.cur_helpers) {
            (Some(h), true) => {
                let _ = h.back.try_send(done);
            }
            _ => self.spare.push(done),
        }
        let (got, helpers) = self.take_run(i);
        self.cur_helpers = helpers;
        match got {
            // A run is taken only where the one before ended: so every run
            // taken starts at a record, as the first does (trace::runs).
            Some((span, packets)) if span.start == self.position => {
                self.cur = packets;
                self.at = 0;
                self.next_run += 1;
                self.position = span.end;
            }
            // The ordinary reader from the last run's end: it reports what
            // is wrong here as it would have.
            _ => self.take_over()?,
        }
        Ok(true)
    }
}

impl SplitSource {
    /// Hands the rest of the file, from the end of the last run taken, to
    /// the ordinary reader.
    fn take_over(&mut self) -> Result<()> {
        self.helper = None;
        self.mine.clear();
        let mut rest = TraceSource::open_verify(&self.path, self.verify)?;
        rest.skip_to(self.position)?;
        self.fallback = Some(rest);
        Ok(())
    }

    /// Run `i`'s packets (`None`: it cannot be taken whole), and whether
    /// the helper read it.
    fn take_run(&mut self, i: usize) -> (Taken, bool) {
        if self.mine.front().is_some_and(|(j, _)| *j == i) {
            return (self.mine.pop_front().and_then(|(_, got)| got), false);
        }
        loop {
            let Some(rx) = self.helper.as_ref().and_then(|h| h.rx.as_ref()) else {
                return (self.slice(i), false);
            };
            if self.claims.claim(i) {
                return (self.slice(i), false);
            }
            // The helper's: the next it gives, as it claims in order and
            // every run before this one has been taken.
            let got = match rx.try_recv() {
                Ok(got) => Some(got),
                Err(TryRecvError::Disconnected) => None,
                Err(TryRecvError::Empty) => {
                    // Not ready: read one ahead meanwhile, unless one that
                    // cannot be taken whole is already waiting (the split
                    // ends there) or enough are.
                    let room = self.mine.len() < AHEAD
                        && self.mine.back().is_none_or(|(_, got)| got.is_some());
                    match room.then(|| self.claims.ahead(self.runs.len())).flatten() {
                        Some(j) => {
                            let got = self.slice(j);
                            self.mine.push_back((j, got));
                            continue;
                        }
                        None => rx.recv().ok(),
                    }
                }
            };
            return match got {
                Some((j, got)) => (got.filter(|_| j == i), true),
                None => (None, true),
            };
        }
    }

    /// Reads run `i` on this thread.
    fn slice(&mut self, i: usize) -> Taken {
        self.read_here += 1;
        let mut out = self.spare.pop().unwrap_or_default();
        match slice_run(&self.runs, i, &mut self.buf, &mut out) {
            Some(span) => Some((span, out)),
            None => {
                self.spare.push(out);
                None
            }
        }
    }
}

impl Source for SplitSource {
    type Item<'a> = SplitItem<'a>;

    fn name(&self) -> &str {
        &self.name
    }

    #[inline(always)]
    fn next(&mut self) -> Result<Option<SplitItem<'_>>> {
        while self.at == self.cur.len() && self.fallback.is_none() {
            if !self.advance()? {
                return Ok(None);
            }
        }
        if let Some(rest) = self.fallback.as_mut() {
            return Ok(rest.next()?.map(SplitItem::Record));
        }
        let s = self.cur[self.at];
        self.at += 1;
        self.packets += 1;
        self.bytes += u64::from(s.orig_len);
        Ok(Some(SplitItem::Packet(s)))
    }

    fn position(&self) -> u64 {
        match &self.fallback {
            Some(rest) => rest.position(),
            None => self.position,
        }
    }

    fn close(&mut self, report: &mut Report) {
        self.helper = None;
        report.packets += self.packets;
        report.bytes += self.bytes;
        if let Some(rest) = self.fallback.as_mut() {
            rest.close(report);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::Chain;
    use crate::run::{run, Consumer, Control};
    use crate::sink::summary::{SummaryFormat, SummarySink, SummaryWriter};
    use crate::sink::Discard;
    use crate::stage::profile::ProfileStage;
    use crate::stage::Stages;
    use aguri::ProfilerConfig;
    use trace::{Codec, LinkType, OutputFormat, TraceWriter, WriterConfig};

    const S: u64 = 1_000_000_000;

    /// A writer of a plain pcap at `path`, indexed, in 32 KiB chunks.
    fn plain_writer(path: &Path) -> TraceWriter<std::fs::File> {
        writer_as(path, OutputFormat::Pcap)
    }

    /// A writer of an uncompressed `format` file at `path`, indexed, in 32
    /// KiB chunks.
    fn writer_as(path: &Path, format: OutputFormat) -> TraceWriter<std::fs::File> {
        let cfg = WriterConfig {
            codec: Codec::None,
            format,
            block_size: 32 << 10,
            ..WriterConfig::default()
        };
        TraceWriter::create(path, cfg).unwrap()
    }

    /// An indexed plain pcap of `n` packets: IPv4 UDP/TCP between random
    /// hosts, 60-1514 bytes, some ARP, 500 a second.
    fn write_trace(path: &Path, n: u64) {
        write_trace_as(path, n, OutputFormat::Pcap);
    }

    /// [`write_trace`] in `format`.
    fn write_trace_as(path: &Path, n: u64, format: OutputFormat) {
        let mut w = writer_as(path, format);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let t0 = 1_700_000_000 * S;
        for i in 0..n {
            let r = rnd();
            let len = 60 + (r % 1455) as usize;
            let mut f = vec![0u8; len];
            if r % 97 == 0 {
                f[12..14].copy_from_slice(&[0x08, 0x06]);
            } else {
                f[12..14].copy_from_slice(&[0x08, 0x00]);
                f[14] = 0x45;
                f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
                f[23] = if r & 1 == 0 { 17 } else { 6 };
                // A few hundred hosts, heavy and light.
                let src = 0x0a00_0000 | ((r >> 8) % (1 + (r >> 40) % 300)) as u32;
                let dst = 0xc0a8_0000 | ((r >> 20) % 64) as u32;
                f[26..30].copy_from_slice(&src.to_be_bytes());
                f[30..34].copy_from_slice(&dst.to_be_bytes());
                f[34..36].copy_from_slice(&((r >> 32) as u16 | 1024).to_be_bytes());
                f[36..38].copy_from_slice(&[0, 80]);
            }
            w.write_packet(LinkType::Ethernet, t0 + i * 2_000_000, len as u32, &f)
                .unwrap();
        }
        w.finish().unwrap();
    }

    /// Profiles `source` into summaries in `dir` (5 s intervals); the
    /// report, and the summaries' files with their contents.
    fn profile<Src>(source: &mut Src, dir: &Path) -> (String, Vec<(String, String)>)
    where
        Src: Source,
        Chain<Discard>: Consumer<Src>,
    {
        let cfg = ProfilerConfig {
            interval_ns: 5 * S,
            table_seed: Some(7),
            flow_slots: 1024,
            ..ProfilerConfig::default()
        };
        let sink = SummarySink::Plain(SummaryWriter::dir(dir, SummaryFormat::Kansoku).unwrap());
        let stages = Stages {
            filter: None,
            profile: Some(ProfileStage::new(cfg, sink).unwrap()),
            reload: None,
        };
        let mut chain: Chain<Discard> = Chain::new(stages, None);
        let stop = AtomicBool::new(false);
        let report = run(source, &mut chain, Control::new(&stop));
        chain.stages.profile.unwrap().finish().unwrap();
        let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let text = std::fs::read_to_string(e.path()).unwrap();
                (e.file_name().to_string_lossy().into_owned(), text)
            })
            .collect();
        files.sort();
        (format!("{report:?}"), files)
    }

    /// The split read and the ordinary one of `path`: the same report and
    /// the same summaries; whether the split fell back.
    fn same_as_ordinary(path: &Path) -> bool {
        same_as_ordinary_with(path, false)
    }

    /// [`same_as_ordinary`], the runs claimed as they come or with the
    /// helper's share `fixed`.
    fn same_as_ordinary_with(path: &Path, fixed: bool) -> bool {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("split"), tmp.path().join("one"));
        let mut split = match fixed {
            true => SplitSource::with_fixed_runs(path, 64 << 10, true),
            false => SplitSource::with_runs(path, 64 << 10, true),
        }
        .expect("a split read");
        let got = profile(&mut split, &a);
        let fell_back = split.fell_back();
        let want = profile(&mut TraceSource::open_verify(path, true).unwrap(), &b);
        assert_eq!(got.0, want.0, "the reports");
        assert_eq!(got.1.len(), want.1.len(), "the summaries");
        for (g, w) in got.1.iter().zip(&want.1) {
            assert_eq!(g, w);
        }
        assert!(got.1.len() >= 3, "{} summaries", got.1.len());
        fell_back
    }

    #[test]
    fn a_split_read_counts_what_one_reader_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        write_trace(&path, 400_000 / 50);
        // 8,000 packets, 6 MB: about 90 runs of 64 KiB, read by both threads.
        assert!(!same_as_ordinary(&path));
        let runs = Runs::plan(&path, true, 64 << 10).unwrap();
        assert!(runs.len() > 50, "{} runs", runs.len());
    }

    #[test]
    fn a_corrupt_chunk_in_either_threads_run_is_reported_as_one_reader_reports_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        write_trace(&path, 8_000);
        let runs = Runs::plan(&path, true, 64 << 10).unwrap();
        let clean = std::fs::read(&path).unwrap();
        // A byte inside one of this thread's runs, then one of the
        // helper's (with the share fixed), then the last run; and each with
        // the runs claimed as they come.
        let mine = (10..).find(|&r| !helpers(r)).unwrap();
        let its = (20..).find(|&r| helpers(r)).unwrap();
        for r in [mine, its, runs.len() - 1] {
            let span = runs.span(r);
            let mut bytes = clean.clone();
            bytes[(span.start + span.end) as usize / 2] ^= 0x40;
            std::fs::write(&path, &bytes).unwrap();
            for fixed in [true, false] {
                assert!(
                    same_as_ordinary_with(&path, fixed),
                    "run {r} ({fixed}): the split did not fall back"
                );
            }
            let (report, _) = profile(
                &mut SplitSource::with_runs(&path, 64 << 10, true).unwrap(),
                &tmp.path().join(format!("r{r}")),
            );
            assert!(report.contains("checksum"), "run {r}: {report}");
        }
    }

    #[test]
    fn runs_are_claimed_in_order_by_whichever_thread_is_ready() {
        let c = Claims::new(false);
        // The helper takes runs 1 and 2; this thread, wanting run 1, finds
        // it taken, reads run 3 while it waits, and takes run 4 itself when
        // it wants it before the helper does.
        assert_eq!(c.helper(0, 10), Some(1));
        assert_eq!(c.helper(1, 10), Some(2));
        assert!(!c.claim(1));
        assert_eq!(c.ahead(10), Some(3));
        assert!(!c.claim(2));
        assert!(c.claim(4));
        assert_eq!(c.helper(2, 10), Some(5));
        // Past the last run neither gets one, however often they ask.
        for _ in 0..10 {
            c.helper(0, 10);
        }
        assert_eq!(c.helper(0, 10), None);
        assert_eq!(c.ahead(10), None);
        // Fixed: the helper two of three in order, this thread the rest,
        // and never ahead.
        let f = Claims::new(true);
        assert_eq!(f.helper(0, 10), Some(1));
        assert_eq!(f.helper(2, 10), Some(4));
        assert!(f.claim(3) && !f.claim(4));
        assert_eq!(f.ahead(10), None);
        assert_eq!(f.helper(8, 9), None);
    }

    #[test]
    fn a_slow_helper_leaves_its_runs_to_this_thread() {
        // A helper that takes 20 ms over each run: this thread reads the
        // runs between while it waits for the helper's, and the read is the
        // one reader's. With the share fixed, this thread reads its third.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        write_trace(&path, 8_000);
        let mut claims = Claims::new(false);
        claims.pause = std::time::Duration::from_millis(20);
        let runs = Runs::plan(&path, true, 64 << 10).unwrap();
        let n = runs.len();
        let mut split = SplitSource::start(&path, runs, true, 0, claims).unwrap();
        let got = profile(&mut split, &tmp.path().join("a"));
        assert!(!split.fell_back());
        assert!(
            split.read_here > n / 2,
            "{} of {n} runs here",
            split.read_here
        );
        let want = profile(
            &mut TraceSource::open_verify(&path, true).unwrap(),
            &tmp.path().join("b"),
        );
        assert_eq!(got, want);
        let mut split = SplitSource::with_fixed_runs(&path, 64 << 10, true).unwrap();
        assert_eq!(profile(&mut split, &tmp.path().join("c")), want);
        assert_eq!(
            split.read_here,
            n.div_ceil(3) - 1,
            "run 0 is read at the start"
        );
    }

    #[test]
    fn files_the_split_does_not_apply_to_are_left_to_one_reader() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        write_trace(&path, 2_000);
        assert!(SplitSource::with_runs(&path, 64 << 10, true).is_some());
        // Under the least size.
        assert!(SplitSource::open(&path).is_none());
        // A corrupt first chunk: the ordinary reader from the start.
        let bytes = std::fs::read(&path).unwrap();
        let mut bad = bytes.clone();
        bad[200] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert!(SplitSource::with_runs(&path, 64 << 10, true).is_none());
        assert!(SplitSource::with_runs(&path, 64 << 10, false).is_some());
        // Cut short: the index describes chunks the file lacks.
        std::fs::write(&path, &bytes[..bytes.len() - 1000]).unwrap();
        assert!(SplitSource::with_runs(&path, 64 << 10, true).is_none());
        // Compressed.
        let lz4 = tmp.path().join("t.pcap.lz4");
        let mut w = TraceWriter::create(&lz4, WriterConfig::default()).unwrap();
        for i in 0..2_000u64 {
            w.write_packet(LinkType::Ethernet, i, 1000, &[7; 1000])
                .unwrap();
        }
        w.finish().unwrap();
        assert!(SplitSource::with_runs(&lz4, 64 << 10, true).is_none());
        assert!(SplitSource::open(Path::new("-")).is_none());
    }

    /// A trace of `n` packets at `path` ([`write_trace`]) without its
    /// index; the file's bytes.
    fn unindexed(path: &Path, n: u64) -> Vec<u8> {
        write_trace(path, n);
        std::fs::remove_file(trace::index::index_path(path)).unwrap();
        std::fs::read(path).unwrap()
    }

    /// The offsets of `bytes`' records (a little-endian pcap file).
    fn records(bytes: &[u8]) -> Vec<usize> {
        let (mut o, mut at) = (24, Vec::new());
        while o + 16 <= bytes.len() {
            at.push(o);
            o += 16 + u32::from_le_bytes(bytes[o + 8..o + 12].try_into().unwrap()) as usize;
        }
        at
    }

    #[test]
    fn a_file_without_an_index_is_split_where_its_records_start() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        unindexed(&path, 8_000);
        assert!(!same_as_ordinary(&path));
        let runs = Runs::plan(&path, true, 64 << 10).unwrap();
        assert!(!runs.indexed() && runs.len() > 50, "{} runs", runs.len());
    }

    #[test]
    fn a_bad_record_or_a_cut_in_a_file_without_an_index_is_reported_as_one_reader_reports_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        let clean = unindexed(&path, 8_000);
        let at = records(&clean);
        // An absurd captured length in one of this thread's runs (of 64
        // KiB), in one of the helper's, in the last record; then the file
        // cut inside its last record.
        let late = |helper| {
            (at.len() * 3 / 4..at.len())
                .find(|&r| helpers(at[r] >> 16) == helper)
                .unwrap()
        };
        for r in [late(false), late(true), at.len() - 1] {
            let mut bytes = clean.clone();
            bytes[at[r] + 8..at[r] + 12].copy_from_slice(&u32::MAX.to_le_bytes());
            std::fs::write(&path, &bytes).unwrap();
            for fixed in [true, false] {
                assert!(
                    same_as_ordinary_with(&path, fixed),
                    "record {r} ({fixed}): no fall back"
                );
            }
            let (report, _) = profile(
                &mut SplitSource::with_runs(&path, 64 << 10, true).unwrap(),
                &tmp.path().join(format!("r{r}")),
            );
            assert!(report.contains("captured length"), "record {r}: {report}");
        }
        std::fs::write(&path, &clean[..clean.len() - 10]).unwrap();
        assert!(same_as_ordinary(&path));
    }

    #[test]
    fn a_pcapng_file_without_an_index_is_split_and_read_as_one_reader_reads_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcapng");
        write_trace_as(&path, 8_000, OutputFormat::Pcapng);
        // Indexed, the ordinary reader reads it (and checks its chunks).
        assert!(SplitSource::with_runs(&path, 64 << 10, true).is_none());
        std::fs::remove_file(trace::index::index_path(&path)).unwrap();
        assert!(Runs::plan(&path, true, 64 << 10).unwrap().pcapng());
        assert!(!same_as_ordinary(&path));
        // The blocks' offsets: the section's header, its interface, then
        // one packet a block.
        let clean = std::fs::read(&path).unwrap();
        let mut at = vec![0];
        while let Some(&o) = at.last().filter(|&&o| o < clean.len()) {
            at.push(o + u32::from_le_bytes(clean[o + 4..o + 8].try_into().unwrap()) as usize);
        }
        // Statistics blocks between packets, as dumpcap writes one at the
        // end: passed over, as the reader does. A second section: the split
        // falls back where it is. Then one packet's trailing length
        // changed. Each time the report and summaries are the one reader's.
        let isb = trace::RawBlock {
            block_type: trace::format::pcapng::BT_ISB,
            body: &[0; 12],
            little_endian: true,
        };
        let section = trace::Section {
            major: 1,
            minor: 0,
            options: Vec::new(),
        };
        let late = at[at.len() * 3 / 4];
        let mut with_isb = Vec::new();
        for w in at.windows(2) {
            with_isb.extend_from_slice(&clean[w[0]..w[1]]);
            // (After the section's header and interface, which come first.)
            if w[0] >= at[2] && (w[1] % 7 == 0 || w[1] == clean.len()) {
                trace::format::pcapng::emit_raw_block(&mut with_isb, &isb).unwrap();
            }
        }
        std::fs::write(&path, &with_isb).unwrap();
        for fixed in [true, false] {
            assert!(!same_as_ordinary_with(&path, fixed), "{fixed}: fell back");
        }
        let mut with_shb = clean[..late].to_vec();
        trace::format::pcapng::emit_section(&mut with_shb, &section);
        with_shb.extend_from_slice(&clean[at[1]..]);
        std::fs::write(&path, &with_shb).unwrap();
        for fixed in [true, false] {
            assert!(same_as_ordinary_with(&path, fixed), "{fixed}: no fall back");
        }
        let next = at[at.len() * 3 / 4 + 1];
        let mut bad = clean.clone();
        bad[next - 4] ^= 4;
        std::fs::write(&path, &bad).unwrap();
        assert!(same_as_ordinary(&path), "no fall back");
        let (report, _) = profile(
            &mut SplitSource::with_runs(&path, 64 << 10, true).unwrap(),
            &tmp.path().join("r"),
        );
        assert!(report.contains("trailing length"), "{report}");
    }

    #[test]
    fn a_file_that_grows_while_it_is_read_is_read_to_its_new_end() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        let more = unindexed(&tmp.path().join("more.pcap"), 2_000);
        let before = unindexed(&path, 8_000);
        let mut split = SplitSource::with_runs(&path, 64 << 10, true).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, &more[24..]).unwrap();
        let got = profile(&mut split, &tmp.path().join("a"));
        assert!(split.fell_back());
        let want = profile(
            &mut TraceSource::open_verify(&path, true).unwrap(),
            &tmp.path().join("b"),
        );
        assert_eq!(got, want);
        assert!(got.0.contains("packets: 10000"), "{}", got.0);
        assert!(before.len() < std::fs::metadata(&path).unwrap().len() as usize);
    }

    #[test]
    fn a_capture_of_a_pcap_file_is_read_as_one_reader_reads_it() {
        // Packets whose payloads are pcap records (a capture of a pcap
        // file's download): the runs found inside them are refused, and
        // the ordinary reader reads on from the last run taken.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        let mut w = plain_writer(&path);
        // 25 records of 40 bytes, filling the packet to its end: a walk
        // from the first goes on into the packets after it.
        let mut arp = [0u8; 40];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut payload = Vec::new();
        for k in 0..25 {
            trace::format::pcap::emit_record(&mut payload, 1_700_000_000 * S + k, false, 40, &arp);
        }
        for i in 0..8_000 {
            let mut f = vec![0u8; 42];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
            f[23] = 6;
            f[26..30].copy_from_slice(&[10, 0, 0, (i % 7) as u8]);
            f[30..34].copy_from_slice(&[192, 168, 0, 1]);
            f.extend_from_slice(&payload);
            let t = 1_700_000_000 * S + i as u64 * 2_000_000;
            w.write_packet(LinkType::Ethernet, t, f.len() as u32, &f)
                .unwrap();
        }
        w.finish().unwrap();
        std::fs::remove_file(trace::index::index_path(&path)).unwrap();
        assert!(same_as_ordinary(&path), "no run was found inside a packet");
    }
}
