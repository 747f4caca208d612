//! When compression pays: Shimizu et al. 2006's condition, applied chunk by chunk.
//!
//! Writing a chunk of `S` bytes raw costs the writer `S / T_d` (the time its
//! writes take, at throughput `T_d`); compressing it first costs
//! `S / T_c + r·S / T_d` (the compressor at `T_c`, then `r·S` bytes to
//! write, `r` the compressed size over the original). Compressing saves
//! time exactly when `T_c > T_d / (1 - r)` (Shimizu et al. 2006, §4). On random
//! payload `r` is about 1, so compression never pays: every byte costs the
//! compressor's time and saves nothing. On a disk that keeps up and traffic
//! that shrinks by half it pays only when the compressor runs at twice the
//! writer's speed.
//!
//! [`Economy`] measures the three figures as it goes (the least time spent
//! compressing a byte and writing one over the last few chunks, and a
//! moving average of the ratio of the chunks it compressed) and says, before each chunk, whether
//! to compress it. When compression does not pay, the next chunks are
//! stored raw without trying (the LZ4 frame's uncompressed blocks, so the
//! file stays one frame every reader takes), and a chunk is compressed
//! again now and then to measure anew: after 1 chunk, then 2, 4 ... up to
//! [`MAX_SKIP`] while it keeps not paying.
//!
//! A write costs a fixed time per call besides its time per byte, and the
//! fixed part is the same whether the chunk was compressed or not, so the
//! condition needs the time per byte only. That is measured on writes of
//! at least [`MEASURED_WRITE`] bytes, where the fixed part is small: the
//! first chunk is stored raw to have one, and while compression shrinks
//! every write below that size, one chunk in [`WRITE_PROBE`] is stored raw
//! to keep the figure current (on the worm-like traffic of Shimizu et al. 2006, whose
//! chunks shrink to a twelfth, that adds 0.4% of the raw size to the file).

/// The most chunks stored raw in a row before the next trial.
pub const MAX_SKIP: u32 = 64;
/// Chunks that compress to this share of their size or less are always
/// compressed. The condition weighs time only, and the time a write takes
/// is what the page cache takes, at memory speed, until the disk behind it
/// fills it up: measured in a quick capture into the page cache, `T_d` was
/// 5 GB/s, and the worm pattern (ratio 0.08) was stored raw whenever LZ4
/// ran below that. A chunk that halves is worth its CPU in the space and
/// in the disk time it saves once the cache is full; the condition decides
/// the rest, which is where compression spends CPU for little.
pub const ALWAYS_WORTH: f64 = 0.5;
/// Writes at least this long measure the writer's time per byte.
pub const MEASURED_WRITE: usize = 16 * 1024;
/// While no write is that long, one chunk in this many is stored raw.
pub const WRITE_PROBE: u32 = 256;

/// Weight of a new measurement in the moving averages.
const ALPHA: f64 = 0.125;

/// The smallest of the last [`WINDOW`] samples: what a thread can do when
/// it is not interrupted. A time measured on the clock includes the time
/// the thread was preempted (on a loaded machine one chunk's compression
/// measured 40 times its usual time, and a moving average of such samples
/// called compressible traffic not worth compressing); the least of a few
/// recent samples filters that out and still follows a lasting change, as
/// a disk that slows down slows every write.
#[derive(Clone, Copy, Debug, Default)]
struct Fastest {
    samples: [f64; WINDOW],
    len: usize,
    next: usize,
}

/// Samples the speeds are the best of.
const WINDOW: usize = 8;

impl Fastest {
    fn add(&mut self, x: f64) {
        self.samples[self.next] = x;
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
    }

    fn get(&self) -> Option<f64> {
        self.samples[..self.len].iter().copied().reduce(f64::min)
    }
}

/// A moving average that starts at its first sample.
#[derive(Clone, Copy, Debug, Default)]
struct Ewma(Option<f64>);

impl Ewma {
    fn add(&mut self, x: f64) {
        self.0 = Some(match self.0 {
            None => x,
            Some(m) => m + ALPHA * (x - m),
        });
    }
}

/// The measured figures and the decision they give.
#[derive(Clone, Copy, Debug, Default)]
pub struct Economy {
    /// Nanoseconds the compressor spends on an input byte.
    compress_ns: Fastest,
    /// Nanoseconds the writer's writes take per byte written.
    write_ns: Fastest,
    /// Compressed over original size, of the chunks compressed.
    ratio: Ewma,
    /// Chunks to store raw before the next trial.
    skip: u32,
    /// The current run of raw chunks between trials.
    run: u32,
    /// Chunks since the last write long enough to measure.
    since_measured: u32,
}

impl Economy {
    /// Whether to compress the next chunk (a trial when the last ones were
    /// stored raw).
    pub fn compress_next(&mut self) -> bool {
        if self.write_ns.get().is_none() || self.since_measured >= WRITE_PROBE {
            // A raw chunk, to measure the writer.
            return false;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        true
    }

    /// A chunk of `input` bytes was compressed into `output` in `ns`
    /// nanoseconds.
    pub fn compressed(&mut self, input: usize, output: usize, ns: u64) {
        if input == 0 {
            return;
        }
        self.compress_ns.add(ns as f64 / input as f64);
        self.ratio.add(output as f64 / input as f64);
        if self.pays() {
            self.run = 0;
        } else {
            self.run = (self.run * 2).clamp(1, MAX_SKIP);
            self.skip = self.run;
        }
    }

    /// Whether a write has been measured yet.
    pub fn write_measured(&self) -> bool {
        self.write_ns.get().is_some()
    }

    /// The writer wrote `bytes` in `ns` nanoseconds.
    pub fn wrote(&mut self, bytes: usize, ns: u64) {
        if bytes >= MEASURED_WRITE {
            self.write_ns.add(ns as f64 / bytes as f64);
            self.since_measured = 0;
        } else {
            self.since_measured += 1;
        }
    }

    /// Shimizu et al. 2006's condition, `T_c > T_d / (1 - r)`, on the figures so far,
    /// or a ratio of at most [`ALWAYS_WORTH`]; true until both speeds have
    /// been measured.
    pub fn pays(&self) -> bool {
        match (self.compress_ns.get(), self.write_ns.get(), self.ratio.0) {
            (Some(c), Some(w), Some(r)) => r <= ALWAYS_WORTH || c < (1.0 - r) * w,
            _ => true,
        }
    }

    /// The figures, for the statistics: compressor and writer throughput in
    /// MB/s (of input and of written bytes) and the ratio.
    pub fn figures(&self) -> Option<(f64, f64, f64)> {
        let mb_s = |ns_per_byte: f64| 1e3 / ns_per_byte.max(1e-6);
        match (self.compress_ns.get(), self.write_ns.get(), self.ratio.0) {
            (Some(c), Some(w), Some(r)) => Some((mb_s(c), mb_s(w), r)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incompressible_chunks_are_skipped_with_trials_further_and_further_apart() {
        let mut e = Economy::default();
        assert!(!e.compress_next(), "the first chunk measures the writer");
        // The writer at 1 GB/s (1 ns a byte); LZ4 at 4 GB/s that saves 0.5%.
        e.wrote(100_000, 100_000);
        assert!(e.compress_next(), "then a trial");
        e.compressed(100_000, 99_500, 25_000);
        assert!(!e.pays());
        let mut trials = Vec::new();
        for i in 0..300 {
            if e.compress_next() {
                trials.push(i);
                e.compressed(100_000, 99_500, 25_000);
            }
            e.wrote(100_000, 100_000);
        }
        // 1, 2, 4 ... 64 raw chunks between trials, then every 65th.
        let gaps: Vec<usize> = trials.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(&gaps[..6], &[3, 5, 9, 17, 33, 65]);
        assert!(gaps[6..].iter().all(|&g| g == 65), "{gaps:?}");
    }

    #[test]
    fn a_preempted_measurement_does_not_decide() {
        // LZ4 at 10 GB/s to 5%, the writer at 2 GB/s; one trial in eight
        // measured 40 times slower (the thread was preempted).
        let mut e = Economy::default();
        e.wrote(100_000, 50_000);
        for i in 0..64 {
            if e.compress_next() {
                let ns = if i % 8 == 3 { 400_000 } else { 10_000 };
                e.compressed(100_000, 5_000, ns);
            }
            e.wrote(100_000, 50_000);
            assert!(e.pays(), "chunk {i}");
        }
    }

    #[test]
    fn compression_pays_on_traffic_that_shrinks_or_on_a_slow_writer() {
        // Fixed payload: LZ4 at 10 GB/s to 5% of the size; writer at 2 GB/s,
        // its small writes costing a fixed 2 us each besides.
        let mut e = Economy::default();
        assert!(!e.compress_next());
        e.wrote(100_000, 50_000);
        let mut raw = 0;
        for _ in 0..1000 {
            if e.compress_next() {
                e.compressed(100_000, 5_000, 10_000);
                e.wrote(5_000, 2_000 + 2_500);
            } else {
                raw += 1;
                e.wrote(100_000, 50_000);
            }
        }
        assert!(e.pays());
        // One chunk in 257 stored raw, to keep measuring the writer.
        assert_eq!(raw, 1000 / (WRITE_PROBE as usize + 1));
        let (c, w, r) = e.figures().unwrap();
        assert!((c - 10_000.0).abs() < 1.0 && (w - 2_000.0).abs() < 1.0 && (r - 0.05).abs() < 1e-9);
        assert!((c, w, r) != (0.0, 0.0, 0.0));
        // Two thirds of the size at 1 GB/s does not pay against a 2 GB/s
        // writer ...
        let mut e = Economy::default();
        e.wrote(100_000, 50_000);
        e.compressed(100_000, 66_000, 100_000);
        assert!(!e.pays());
        // ... and pays once the writes slow to 200 MB/s (a disk that is full
        // of dirty pages): the figure follows once the window holds only slow
        // writes.
        for _ in 0..40 {
            e.wrote(100_000, 500_000);
        }
        let _ = (0..64).any(|_| e.compress_next());
        e.compressed(100_000, 66_000, 100_000);
        assert!(e.pays());
        assert!(e.compress_next());
        // A chunk that halves is compressed even when the writer is faster
        // than the compressor (the page cache at memory speed).
        let mut e = Economy::default();
        e.wrote(100_000, 20_000);
        e.compressed(100_000, 8_000, 70_000);
        assert!(e.pays());
    }
}
