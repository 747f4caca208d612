//! An emulated slow disk, for reproducing the disk-bound regime of papers
//! 000 and 003 on a fast machine: `bench capture --disk-mbps` puts one
//! behind every writer it compares (kansoku's trace writer, and the file
//! tcpdump's `-w -` output is copied into).

use std::io::{self, Write};
use std::time::{Duration, Instant};

use pipeline::{Error, Result};

/// An emulated disk: writes are serviced one after another at a fixed
/// throughput, with no cache in front. Each `write` to the wrapped writer is
/// followed by a sleep until the disk would have finished the bytes given
/// so far.
///
/// The disk's clock runs ahead of real time by the writes still in
/// service; up to [`SlowDisk::SLACK`] of idle time may be spent on
/// later writes, so that timer granularity (a sleep wakes late by tens of
/// microseconds) does not make the disk slower than its stated throughput.
/// Sleeps shorter than [`SlowDisk::MIN_SLEEP`] are deferred until the
/// owed time adds up, which keeps per-packet writes honest too.
#[derive(Debug)]
pub struct SlowDisk<W> {
    inner: W,
    bytes_per_sec: f64,
    /// When the disk finishes the writes given so far.
    free_at: Option<Instant>,
}

impl<W> SlowDisk<W> {
    /// Idle disk time that later writes may use.
    pub const SLACK: Duration = Duration::from_millis(2);
    /// Owed time below this is carried forward instead of slept.
    pub const MIN_SLEEP: Duration = Duration::from_micros(500);

    /// `inner` behind a disk of `bytes_per_sec` (at least 1).
    pub fn new(inner: W, bytes_per_sec: u64) -> SlowDisk<W> {
        SlowDisk {
            inner,
            bytes_per_sec: bytes_per_sec.max(1) as f64,
            free_at: None,
        }
    }

    /// `inner` behind a disk of `mbps` MB/s (10^6 bytes), as `--disk-mbps`
    /// gives it; anything but a positive number is a usage error.
    pub fn from_mbps(inner: W, mbps: f64) -> Result<SlowDisk<W>> {
        check_mbps(mbps)?;
        Ok(SlowDisk::new(inner, (mbps * 1e6).max(1.0) as u64))
    }

    /// The wrapped writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The wrapped writer, unwrapped.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// Accounts `n` bytes written and sleeps while the disk is behind.
    fn wrote(&mut self, n: usize) {
        let now = Instant::now();
        let earliest = now.checked_sub(Self::SLACK).unwrap_or(now);
        let start = match self.free_at {
            Some(t) if t > earliest => t,
            _ => earliest,
        };
        let end = start + Duration::from_secs_f64(n as f64 / self.bytes_per_sec);
        self.free_at = Some(end);
        if let Some(owed) = end.checked_duration_since(now) {
            if owed >= Self::MIN_SLEEP {
                std::thread::sleep(owed);
            }
        }
    }
}

/// `--disk-mbps` must be a positive number.
pub fn check_mbps(mbps: f64) -> Result<()> {
    if mbps > 0.0 && mbps.is_finite() {
        Ok(())
    } else {
        Err(Error::usage("--disk-mbps must be a positive number"))
    }
}

impl<W: Write> Write for SlowDisk<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.wrote(n);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::write::{TraceWriter, WriterConfig, MIN_BLOCK_SIZE};
    use trace::{Codec, LinkType};

    fn frame() -> Vec<u8> {
        (0..200u32).map(|i| (i % 7) as u8).collect()
    }

    #[test]
    fn emulated_disk_takes_at_least_bytes_over_throughput() {
        // 100 kB/s: 20 chunks of about 4 kB must take about 0.8 s; allow
        // the slack the disk grants, never less.
        let cfg = WriterConfig {
            codec: Codec::None,
            block_size: MIN_BLOCK_SIZE,
            index: false,
            ..WriterConfig::default()
        };
        let start = Instant::now();
        let disk = SlowDisk::new(io::sink(), 100_000);
        let mut w = TraceWriter::new(disk, cfg).unwrap();
        for i in 0..400 {
            w.write_packet(LinkType::Ethernet, i, 200, &frame())
                .unwrap();
        }
        let stats = w.finish().unwrap();
        let want = stats.bytes_out as f64 / 100_000.0 - SlowDisk::<io::Sink>::SLACK.as_secs_f64();
        assert!(start.elapsed().as_secs_f64() >= want * 0.99, "{stats:?}");
    }

    #[test]
    fn writes_pass_through_unchanged() {
        let mut d = SlowDisk::new(Vec::new(), 1_000_000_000);
        d.write_all(b"abc").unwrap();
        d.write_all(b"def").unwrap();
        d.flush().unwrap();
        assert_eq!(d.get_ref(), b"abcdef");
        assert_eq!(d.into_inner(), b"abcdef");
    }

    #[test]
    fn zero_disk_throughput_is_rejected() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = SlowDisk::from_mbps(io::sink(), bad).unwrap_err();
            assert_eq!(e.kind, pipeline::ErrorKind::Usage, "{bad}");
        }
        assert!(SlowDisk::from_mbps(io::sink(), 0.5).is_ok());
    }
}
