//! Plain trace files mapped into memory instead of copied through `read`:
//! the whole file is mapped, and the reader is given it a window (8 MiB) at
//! a time.
//!
//! # Why
//!
//! A `read` copies every byte of the file from the page cache into the
//! reader's buffer. A profile or a count of large frames needs a few dozen
//! bytes of each, so for a trace of 800-byte frames the copy is most of the
//! reading thread's work: 1.6 GB took 0.13-0.14 s to `read` (256 KiB at a
//! time) and walk, against 0.056 s to walk it mapped with every line
//! prefetched 16 KiB ahead of the record being parsed, once the mapping's
//! page tables were filled (a C probe on this machine; without the prefetch
//! the walk waits on a miss at nearly every record and takes 0.32 s).
//! Filling the page tables (`MADV_POPULATE_READ`) and clearing them is the
//! mapping's own cost, and it depends on how the file came into the page
//! cache: for the 1.6 GB, 40 + 19 ms where its page cache was mostly small
//! folios, 2 + 0.6 ms where a fresh read had left it in 2 MiB folios (then
//! mapped a PMD at a time). It is not the reading thread's: a helper thread
//! fills the tables a few windows ahead of the reader and clears them
//! behind it, so that the reader takes no page faults and the page tables
//! stay a few windows large whatever the file's size. If the reader
//! catches the helper up it takes the faults itself; nothing depends on
//! the helper but speed. Measured (`cargo bench -p trace --bench read`,
//! 1518-byte frames): a 1 GB pcap read in 0.74-0.75 of the time `read`
//! takes, a 200 MB one in 0.81-0.98; `kansoku profile -r` of the 1.6 GB
//! trace of 16,384 flows used 0.39-0.40 CPU-seconds against 0.42, 3-8%
//! less wall time. Frames cut to 96 bytes, where every byte is used, read
//! as fast either way. pcapng is prefetched the same way and reads as fast
//! as with `read` (its per-block work is larger).
//!
//! # Safety of the mapping
//!
//! A mapped file that another process truncates raises `SIGBUS` at the next
//! touch of a page past its new end. The reader therefore maps a file only
//! while it holds a read lease on it (`F_SETLEASE`, `F_RDLCK`): the kernel
//! grants one only when no one has the file open for writing (so a capture
//! still writing it is read with `read`), and any later open for writing or
//! truncation first waits for the holder to give the lease up (up to
//! `/proc/sys/fs/lease-break-time`, 45 s by default). The reader checks the
//! lease (`F_GETLEASE`) before each new window; once a break is pending it
//! lets the mapping go, gives the lease up and reads the rest of the file
//! with `read`, from where the window ended, so the writer goes on within
//! one window's time (a few milliseconds) and nothing is lost or read
//! twice. The break's notification is set to `SIGURG`, which is ignored by
//! default, so that it cannot end the process (`SIGIO`, the default,
//! would). The one case left: a reader stalled for longer than the break
//! time inside a window (its consumer blocked on a full pipe, say) while
//! another process truncates the file; the kernel then takes the lease
//! back and the next touch past the new end raises `SIGBUS`. A writer in
//! this process would wait on its own lease: [`super::is_being_read`]
//! makes the trace writer refuse to create a file being read. Files that
//! cannot be leased (not a regular file, another owner without
//! `CAP_LEASE`, a file system without leases, a file open for writing) are
//! read with `read` as before.
//!
//! This module holds the reader's only `unsafe` code: the mapping, the
//! prefetch hint, the clearing of page tables and the lease calls.

#![allow(unsafe_code)]

use std::fs::File;
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};

use memmap2::{Advice, Mmap, MmapOptions, UncheckedAdvice};

/// The reader's bytes are made available a window at a time: the lease is
/// checked, and the helper told, once per window.
pub(crate) const WINDOW: usize = 8 << 20;
/// Windows whose page tables the helper fills ahead of the reader's.
const AHEAD: usize = 4;
/// Files shorter than this are read with `read`: the copy is small and the
/// mapping's system calls and thread are not (at 200 MB the two ways are
/// about even).
pub(crate) const MIN_MAPPED: u64 = 32 << 20;
/// How far ahead of the record being parsed mapped bytes are prefetched:
/// far enough for the misses to overlap, near enough to stay in L1/L2.
pub(crate) const PREFETCH_AHEAD: usize = 16 << 10;
/// The prefetch step: one cache line.
pub(crate) const LINE: usize = 64;
/// `fcntl`'s `F_SETSIG` (Linux, all architectures; the libc crate does
/// not export it).
const F_SETSIG: libc::c_int = 10;

/// The reader's bytes: its own buffer, filled by `read`, or a mapped file.
pub(crate) enum Buf {
    Owned(Vec<u8>),
    Mapped(Mapped),
}

impl Deref for Buf {
    type Target = [u8];

    #[inline(always)]
    fn deref(&self) -> &[u8] {
        match self {
            Buf::Owned(v) => v,
            Buf::Mapped(m) => &m.map,
        }
    }
}

/// A leased file, mapped whole, and the helper that fills its page tables.
/// The fields drop in order: the helper is told to stop, the reader's hold
/// on the mapping goes, then the file is closed (which ends the lease).
pub(crate) struct Mapped {
    helper: Helper,
    map: Arc<Mmap>,
    file: File,
    /// Bytes given to the reader at once.
    window: usize,
}

/// How far the reader has been given the file (the end of its current
/// window), and whether the helper is to stop.
#[derive(Default)]
struct Shared {
    mark: AtomicUsize,
    stop: AtomicBool,
}

/// The helper thread, told to stop when dropped but not waited for: it
/// only calls `madvise` on the mapping, which fails rather than faults on
/// pages the file no longer has, so it may outlive the lease; it holds the
/// mapping until it stops, and unmaps it then if the reader is gone, off
/// the reader's thread.
struct Helper {
    shared: Arc<Shared>,
    thread: Option<Thread>,
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.unpark();
        }
    }
}

impl Mapped {
    /// Leases `file` for reading and maps it whole; gives the file back
    /// when it is too short to be worth it or cannot be leased or mapped,
    /// for a read with `read`.
    pub(crate) fn open(file: File, window: usize, min_len: u64) -> Result<Mapped, File> {
        let len = match file.metadata() {
            Ok(m) if m.is_file() && m.len() >= min_len && m.len() > 0 => m.len(),
            _ => return Err(file),
        };
        let Ok(len) = usize::try_from(len) else {
            return Err(file);
        };
        if !lease(&file) {
            return Err(file);
        }
        // SAFETY: the mapping is read-only, and the file is leased (see the
        // module's documentation): no process can open it for writing or
        // truncate it without the break the reader checks for before each
        // window, after which it leaves the mapping alone.
        let map = match unsafe { MmapOptions::new().len(len).map(&file) } {
            Ok(map) => Arc::new(map),
            Err(_) => {
                unlease(&file);
                return Err(file);
            }
        };
        let window = window.max(LINE);
        let first = window.min(len);
        // The first window's page tables are filled here: the reader would
        // otherwise fault its way through it before the helper is running.
        let filling = map.advise_range(Advice::PopulateRead, 0, first).is_ok();
        let shared = Arc::new(Shared::default());
        shared.mark.store(first, Ordering::Relaxed);
        let thread = {
            let (map, shared) = (Arc::clone(&map), Arc::clone(&shared));
            thread::Builder::new()
                .name("trace-map".into())
                .spawn(move || fill_ahead(&map, &shared, window, first, filling))
                .ok()
                .map(|h| h.thread().clone())
        };
        Ok(Mapped {
            helper: Helper { shared, thread },
            map,
            file,
            window,
        })
    }

    /// The file's length (all of it is mapped).
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the lease is still held with no break pending.
    pub(crate) fn leased(&self) -> bool {
        // SAFETY: `fcntl` with an integer command on a descriptor this
        // value owns; no memory is passed.
        let t = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_GETLEASE) };
        t == libc::F_RDLCK
    }

    /// The end of the window after `end`, holding at least `need` bytes
    /// from `pos` as far as the file goes; the helper is told.
    pub(crate) fn extend(&self, pos: usize, end: usize, need: usize) -> usize {
        let end = end
            .saturating_add(self.window)
            .max(pos.saturating_add(need))
            .min(self.len());
        self.helper.shared.mark.store(end, Ordering::Release);
        if let Some(t) = &self.helper.thread {
            t.unpark();
        }
        end
    }

    /// Lets the mapping go (the helper unmaps it if it still holds it),
    /// stops the helper and gives the lease up, leaving the file for `read`.
    pub(crate) fn into_file(self) -> File {
        let Mapped {
            helper, map, file, ..
        } = self;
        drop(helper);
        drop(map);
        unlease(&file);
        file
    }
}

/// The helper: fills the page tables of the [`AHEAD`] windows past the
/// reader's mark and clears those more than a window behind the reader's
/// current one, then waits to be woken. An error (a kernel without
/// `MADV_POPULATE_READ`, before 5.14) ends the filling ahead; the reader
/// then takes the page faults itself.
fn fill_ahead(map: &Mmap, shared: &Shared, window: usize, filled: usize, filling: bool) {
    let len = map.len();
    let (mut filled, mut cleared, mut filling) = (filled, 0usize, filling);
    while !shared.stop.load(Ordering::Acquire) {
        let mark = shared.mark.load(Ordering::Acquire);
        let target = mark.saturating_add(AHEAD * window).min(len);
        while filling && filled < target && !shared.stop.load(Ordering::Acquire) {
            let n = window.min(target - filled);
            filling = map.advise_range(Advice::PopulateRead, filled, n).is_ok();
            filled += n;
        }
        // The reader's records lie in [its position, mark), and its position
        // is within a record of the current window's start.
        let behind = mark.saturating_sub(2 * window);
        while cleared + window <= behind && !shared.stop.load(Ordering::Acquire) {
            // SAFETY: `MADV_DONTNEED` on a read-only shared file mapping only
            // drops page table entries: a later touch maps the same page
            // cache pages again, so no byte the reader may see changes.
            let _ =
                unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, cleared, window) };
            cleared += window;
        }
        thread::park();
    }
}

/// Takes a read lease on `file`, its break signalled with `SIGURG`
/// (ignored by default) rather than `SIGIO` (which ends the process).
fn lease(file: &File) -> bool {
    let fd = file.as_raw_fd();
    // SAFETY: `fcntl` with integer arguments on a descriptor `file` owns;
    // no memory is passed.
    unsafe {
        libc::fcntl(fd, F_SETSIG, libc::SIGURG) == 0
            && libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) == 0
    }
}

/// Gives the lease up (closing the file would too).
fn unlease(file: &File) {
    // SAFETY: as in `lease`.
    unsafe {
        libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK);
    }
}

/// Asks for the cache line at `buf[i]` (in bounds) to be loaded.
#[inline(always)]
pub(crate) fn prefetch(buf: &[u8], i: usize) {
    let p = buf.as_ptr().wrapping_add(i);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and changes no
    // memory; `p` points into `buf`.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::TraceReader;
    use crate::Record;
    use std::fs::OpenOptions;
    use std::io::Write;
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// A pcap of `n` records of 40 to 1,600 bytes (a pseudo-random walk of
    /// lengths, so that records straddle every window boundary), each
    /// record's bytes derived from its number.
    fn pcap(n: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        v.extend_from_slice(&2u16.to_le_bytes());
        v.extend_from_slice(&4u16.to_le_bytes());
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&65535u32.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        let mut len = 700u32;
        for i in 0..n {
            len = 40 + len.wrapping_mul(1_103_515_245).wrapping_add(12_345 + i) % 1_561;
            v.extend_from_slice(&(i / 1000).to_le_bytes());
            v.extend_from_slice(&(i % 1000).to_le_bytes());
            v.extend_from_slice(&len.to_le_bytes());
            v.extend_from_slice(&(len + 4).to_le_bytes());
            v.extend((0..len).map(|j| (i.wrapping_mul(31) ^ j) as u8));
        }
        v
    }

    /// Every packet as (ts, orig_len, data), and the truncation if any.
    type Packets = (Vec<(u64, u32, Vec<u8>)>, Option<String>);

    fn records(r: &mut TraceReader) -> Packets {
        let mut out = Vec::new();
        while let Some(rec) = r.next_record().expect("a valid trace") {
            if let Record::Packet(p) = rec {
                out.push((p.ts, p.orig_len, p.data.to_vec()));
            }
        }
        (out, r.truncation().map(|t| t.to_string()))
    }

    fn read_copied(path: &Path) -> Packets {
        let f = File::open(path).unwrap();
        let mut r = TraceReader::from_read(Box::new(f)).unwrap();
        assert!(!r.is_mapped());
        records(&mut r)
    }

    fn open_mapped(path: &Path, window: usize) -> TraceReader {
        TraceReader::from_file(File::open(path).unwrap(), window, 0).unwrap()
    }

    #[test]
    fn a_mapped_file_reads_as_a_copied_one_across_windows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        std::fs::write(&path, pcap(3000)).unwrap();
        let want = read_copied(&path);
        assert_eq!(want.0.len(), 3000);
        // 4 KiB and 64 KiB windows: records straddle hundreds of boundaries.
        for window in [4096, 64 << 10, WINDOW] {
            let mut r = open_mapped(&path, window);
            assert!(r.is_mapped(), "window {window}");
            assert_eq!(records(&mut r), want, "window {window}");
        }
    }

    #[test]
    fn a_file_cut_inside_a_record_reports_the_same_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        let bytes = pcap(500);
        for cut in [bytes.len() - 1, bytes.len() - 300, 30] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let want = read_copied(&path);
            assert!(want.1.is_some(), "cut at {cut}");
            let mut r = open_mapped(&path, 4096);
            assert!(r.is_mapped());
            assert_eq!(records(&mut r), want, "cut at {cut}");
        }
    }

    #[test]
    fn a_file_open_for_writing_is_copied_not_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        std::fs::write(&path, pcap(200)).unwrap();
        let want = read_copied(&path);
        let writer = OpenOptions::new().append(true).open(&path).unwrap();
        let mut r = open_mapped(&path, 4096);
        assert!(
            !r.is_mapped(),
            "no lease while the file is open for writing"
        );
        assert_eq!(records(&mut r), want);
        drop(writer);
    }

    #[test]
    fn a_writer_opening_the_file_ends_the_mapping_within_a_window() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        std::fs::write(&path, pcap(3000)).unwrap();
        let want = read_copied(&path);
        let mut r = open_mapped(&path, 4096);
        assert!(r.is_mapped());
        let mut got = Vec::new();
        for _ in 0..10 {
            if let Some(Record::Packet(p)) = r.next_record().unwrap() {
                got.push((p.ts, p.orig_len, p.data.to_vec()));
            }
        }
        // Another thread opens the file for writing: its open waits on the
        // lease until the reader gives it up.
        let p2 = path.clone();
        let writer = std::thread::spawn(move || {
            let t = Instant::now();
            let mut f = OpenOptions::new().append(true).open(&p2).unwrap();
            f.write_all(&[]).unwrap();
            t.elapsed()
        });
        let Buf::Mapped(m) = &r.buf else {
            unreachable!("mapped above")
        };
        let t = Instant::now();
        while m.leased() && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!m.leased(), "the writer's open breaks the lease");
        let (rest, cut) = records(&mut r);
        got.extend(rest);
        assert!(!r.is_mapped(), "the reader went over to read()");
        let waited = writer.join().unwrap();
        // The break time is 45 s by default: the writer went on because the
        // reader gave the lease up, not because the kernel took it back.
        assert!(waited < Duration::from_secs(20), "writer waited {waited:?}");
        assert_eq!((got, cut), want);
    }

    #[test]
    fn a_writer_of_this_process_cannot_overwrite_a_trace_being_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        std::fs::write(&path, pcap(100)).unwrap();
        let r = TraceReader::open(&path).unwrap();
        let err = crate::TraceWriter::create(&path, crate::WriterConfig::default())
            .err()
            .expect("refused");
        assert!(err.to_string().contains("this process is reading"), "{err}");
        drop(r);
        assert!(crate::TraceWriter::create(&path, crate::WriterConfig::default()).is_ok());
    }
}
