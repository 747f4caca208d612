//! The profiler stage: aguri's [`aguri::Profiler`] and where its summaries go.

use aguri::{Profiler, ProfilerConfig, Summary};
use wire::Slice;

use crate::error::{Error, Result};
use crate::packet::Frame;
use crate::sink::summary::SummarySink;
use crate::source::split::Sliced;

/// The interval length given with `flag` (`-i`, `--profile-interval`), in
/// nanoseconds: at least one second.
pub fn interval_ns(seconds: u64, flag: &str) -> Result<u64> {
    if seconds == 0 {
        return Err(Error::usage(format!("{flag} must be at least 1 second")));
    }
    seconds
        .checked_mul(1_000_000_000)
        .ok_or_else(|| Error::usage(format!("{flag} {seconds} is too long")))
}

/// Most empty summaries written for one gap in the traffic: a timestamp
/// far ahead (a clock set wrong) is not a reason for millions of files.
pub const MAX_EMPTY_RUN: u64 = 100_000;

/// Counts packets into summaries, one per interval, written as they close.
/// An interval in which no packet came is written as an empty summary, so
/// that a gap stays a gap.
pub struct ProfileStage {
    profiler: Profiler,
    sink: SummarySink,
    packets: u64,
    /// Where the last summary written ended (an interval boundary), while
    /// intervals are in use.
    last_end: Option<u64>,
    /// Empty intervals not written because a gap was over [`MAX_EMPTY_RUN`].
    pub skipped_empty: u64,
}

/// What a profiler did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfileCounts {
    pub packets: u64,
    pub summaries: u64,
}

impl ProfileStage {
    /// A profiler of `cfg` writing into `sink`.
    pub fn new(cfg: ProfilerConfig, sink: SummarySink) -> Result<ProfileStage> {
        let profiler = cfg.build().map_err(|e| Error::usage(e.to_string()))?;
        Ok(ProfileStage {
            profiler,
            sink,
            packets: 0,
            last_end: None,
            skipped_empty: 0,
        })
    }

    /// Counts one packet, its flow read by the profiler's own fast path.
    #[inline(always)]
    pub fn frame(&mut self, f: &Frame<'_>) -> Result<()> {
        self.packets += 1;
        let done = self
            .profiler
            .add_frame(f.link_type, f.ts_ns, f.orig_len, f.data);
        self.write(done)
    }

    /// Counts one packet another stage has sliced: its flow from that slice.
    #[inline]
    pub fn sliced(&mut self, f: &Frame<'_>, s: &Slice<'_>) -> Result<()> {
        self.packets += 1;
        let done = self
            .profiler
            .add_bits(f.ts_ns, s.flow_bits().as_ref(), f.orig_len);
        self.write(done)
    }

    /// Counts one packet read and sliced on another thread
    /// ([`crate::source::split::SplitSource`]).
    #[inline(always)]
    pub fn split(&mut self, s: &Sliced) -> Result<()> {
        self.packets += 1;
        let done = self.profiler.add_bits(s.ts_ns, s.bits.as_ref(), s.orig_len);
        self.write(done)
    }

    #[inline(always)]
    fn write(&mut self, done: Option<Summary>) -> Result<()> {
        match done {
            Some(s) => self.write_summary(&s),
            None => Ok(()),
        }
    }

    /// Writes `s`, after an empty summary for each whole interval between
    /// the last one written and it.
    fn write_summary(&mut self, s: &Summary) -> Result<()> {
        self.fill_until(s.start_ns)?;
        self.sink.add(s)?;
        if self.profiler.config().interval_ns > 0 {
            self.last_end = Some(s.end_ns);
        }
        Ok(())
    }

    /// Empty summaries for the intervals from the end of the last summary
    /// to the one holding `t_ns`; none before the first summary.
    fn fill_until(&mut self, t_ns: u64) -> Result<()> {
        let cfg = self.profiler.config();
        let (interval, metric, threshold) = (cfg.interval_ns, cfg.metric, cfg.threshold);
        let Some(from) = self.last_end.filter(|_| interval > 0) else {
            return Ok(());
        };
        let upto = t_ns - t_ns % interval;
        if upto <= from {
            return Ok(());
        }
        let n = (upto - from) / interval;
        if n > MAX_EMPTY_RUN {
            self.skipped_empty += n;
            self.last_end = Some(upto);
            return Ok(());
        }
        for i in 0..n {
            let start = from + i * interval;
            self.sink
                .add(&Summary::empty(start, start + interval, metric, threshold))?;
        }
        self.last_end = Some(upto);
        Ok(())
    }

    /// Closes the current interval if `now_ns` lies past it, and writes an
    /// empty summary for each interval that has passed with no packet:
    /// every packet before `now_ns` has been counted.
    pub fn advance(&mut self, now_ns: u64) -> Result<()> {
        for s in self.profiler.advance(now_ns) {
            self.write_summary(&s)?;
        }
        if !self.profiler.in_interval() {
            self.fill_until(now_ns)?;
        }
        Ok(())
    }

    /// Writes the last, partial interval and closes the summary output.
    pub fn finish(mut self) -> Result<ProfileCounts> {
        for s in self.profiler.finish() {
            self.write_summary(&s)?;
        }
        if self.skipped_empty > 0 {
            eprintln!(
                "kansoku: {} empty intervals not written: a gap in the packets' times of more than {MAX_EMPTY_RUN} intervals (a clock set wrong?)",
                self.skipped_empty
            );
        }
        let summaries = self.sink.written();
        self.sink.finish()?;
        Ok(ProfileCounts {
            packets: self.packets,
            summaries,
        })
    }
}

/// The flow table's seed for a trace file: a hash of its length and its
/// first 64 KiB, so that the same file gives the same summaries on every
/// run (see [`ProfilerConfig::table_seed`]); `None` (a random seed) for
/// standard input, a pipe or device, or a file that cannot be read
/// (opening it says why).
pub fn file_seed(path: &std::path::Path) -> Option<u64> {
    use std::hash::Hasher;
    use std::io::Read;
    if path.as_os_str() == "-" {
        return None;
    }
    // Only a regular file: a pipe's first bytes, read here, would be
    // lost to the profile.
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let len = meta.len();
    let f = std::fs::File::open(path).ok()?;
    let mut head = Vec::with_capacity(64 << 10);
    f.take(64 << 10).read_to_end(&mut head).ok()?;
    // SipHash with its fixed keys: the same on every run.
    let mut h = std::hash::DefaultHasher::new();
    h.write_u64(len);
    h.write(&head);
    Some(h.finish())
}

/// Whether `profile -r` counts on a thread of its own
/// ([`ProfilerConfig::tree_thread`]), given whether the file is read on two
/// threads (`split`) and the 2-D view's size.
///
/// A split read keeps both CPUs busy reading already, and a third busy
/// thread did worse than counting on the reading thread, except with the
/// 2-D view, which doubles what is counted for each flow
/// (bench/profile-throughput.md has the figures and the `perf sched`
/// reading behind this).
pub fn tree_thread(split: bool, pairs: usize) -> bool {
    !split || pairs > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::summary::{read_summaries, SummaryWriter};
    use wire::LinkType;

    const S: u64 = 1_000_000_000;

    /// An Ethernet/IPv4/UDP frame.
    fn frame() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&28u16.to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f
    }

    fn stage(dir: &std::path::Path) -> ProfileStage {
        let cfg = ProfilerConfig {
            interval_ns: 10 * S,
            ..ProfilerConfig::default()
        };
        let sink =
            SummarySink::Plain(SummaryWriter::dir(dir, crate::SummaryFormat::Kansoku).unwrap());
        ProfileStage::new(cfg, sink).unwrap()
    }

    fn add(p: &mut ProfileStage, f: &[u8], t: u64) {
        p.frame(&Frame {
            link_type: LinkType::Ethernet,
            ts_ns: t,
            orig_len: 100,
            data: f,
        })
        .unwrap();
    }

    /// (start s, end s, packets) of each summary written.
    fn written(dir: &std::path::Path) -> Vec<(u64, u64, u64)> {
        read_summaries(&[dir.to_path_buf()])
            .unwrap()
            .iter()
            .map(|s| (s.start_ns / S, s.end_ns / S, s.total_packets()))
            .collect()
    }

    #[test]
    fn a_gap_in_a_trace_is_written_as_empty_summaries() {
        let dir = tempfile::tempdir().unwrap();
        let f = frame();
        let mut p = stage(dir.path());
        let t0 = 1_800_000_000 * S;
        for t in [t0 + 3 * S, t0 + 5 * S, t0 + 37 * S, t0 + 38 * S] {
            add(&mut p, &f, t);
        }
        let counts = p.finish().unwrap();
        assert_eq!(counts.summaries, 4);
        let b = t0 / S;
        assert_eq!(
            written(dir.path()),
            [
                (b + 3, b + 10, 2),
                (b + 10, b + 20, 0),
                (b + 20, b + 30, 0),
                (b + 30, b + 38, 2)
            ]
        );
    }

    #[test]
    fn a_quiet_live_source_gets_empty_summaries_as_time_passes() {
        let dir = tempfile::tempdir().unwrap();
        let f = frame();
        let mut p = stage(dir.path());
        let t0 = 1_800_000_000 * S;
        add(&mut p, &f, t0 + 2 * S);
        // Heartbeats: nothing after the first packet until 34 s.
        for t in [5, 12, 21, 34] {
            p.advance(t0 + t * S).unwrap();
        }
        add(&mut p, &f, t0 + 35 * S);
        p.finish().unwrap();
        let b = t0 / S;
        assert_eq!(
            written(dir.path()),
            // The interval after a quiet spell starts at its boundary.
            [
                (b + 2, b + 10, 1),
                (b + 10, b + 20, 0),
                (b + 20, b + 30, 0),
                (b + 30, b + 35, 1)
            ]
        );
    }

    #[test]
    fn a_clock_leap_is_not_millions_of_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = frame();
        let mut p = stage(dir.path());
        add(&mut p, &f, 5 * S);
        add(&mut p, &f, 5 * S + (MAX_EMPTY_RUN + 10) * 10 * S);
        let skipped = {
            let c = p.finish().unwrap();
            assert_eq!(c.summaries, 2);
            c
        };
        assert_eq!(skipped.packets, 2);
    }
}
