//! The trace's file (or any sink), with chunks gathered into large writes,
//! made on the caller's thread or, for a file, on a thread of its own.
//!
//! Writing into the page cache is most of what a copy of a trace costs
//! where the output is large: `kansoku read -r F -w OUT EXPR` keeping 92% of
//! a 1.6 GB plain pcap spent about 60% of its time in `write(2)` (the copy
//! into the page cache and the pages' allocation) and the rest reading,
//! parsing and filtering. On its own thread the writing overlaps the
//! reading, as a second core allows (bench/expression-results.md).

use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Instant;

/// Empty buffers kept for reuse at most.
const SPARES: usize = 256;

/// Time a writer's caller spent blocked on its file: in writes, or
/// waiting for the write thread to take one.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Waits {
    pub(super) total_ns: u64,
    pub(super) longest_ns: u64,
}

impl Waits {
    pub(super) fn add(&mut self, ns: u64) {
        self.total_ns = self.total_ns.saturating_add(ns);
        self.longest_ns = self.longest_ns.max(ns);
    }

    /// Adds the time since `t`, and returns it.
    pub(super) fn since(&mut self, t: Instant) -> u64 {
        let ns = elapsed_ns(t);
        self.add(ns);
        ns
    }
}

/// The trace's file (or any sink), with chunks gathered into writes of at
/// least `cap` bytes ([`super::WriterConfig::write_bytes`]). The chunks are
/// gathered as the buffers they were encoded into, not copied: a gathered
/// write is one `writev(2)`, and the buffers come back empty for reuse.
pub(super) struct Coalesced<W: Write> {
    pub(super) inner: W,
    parts: Vec<Vec<u8>>,
    /// Bytes in `parts`.
    gathered: usize,
    cap: usize,
    /// Wait for [`super::TraceWriter::release`] up to `4 * cap`.
    on_release: bool,
    /// The last write that reached the file: bytes and nanoseconds.
    pub(super) last_write: Option<(usize, u64)>,
    /// The caller's time blocked on the file.
    pub(super) waits: Waits,
    spares: Vec<Vec<u8>>,
    /// The thread that makes the writes, when there is one: `inner` is
    /// then never written to, the thread writes through its own handle of
    /// the same open file.
    thread: Option<WriteThread>,
    /// Bytes known to be in the file (written, not only handed over).
    confirmed: u64,
}

impl<W: Write> Coalesced<W> {
    pub(super) fn new(inner: W, cap: usize, on_release: bool) -> Coalesced<W> {
        Coalesced {
            inner,
            parts: Vec::new(),
            gathered: 0,
            cap,
            on_release,
            last_write: None,
            waits: Waits::default(),
            spares: Vec::new(),
            thread: None,
            confirmed: 0,
        }
    }

    /// Adds a copy of `data` (a stream's header or end); `through` writes it
    /// and what was gathered before it to the file at once.
    pub(super) fn put(&mut self, data: &[u8], through: bool) -> io::Result<()> {
        let mut b = self.spares.pop().unwrap_or_default();
        b.extend_from_slice(data);
        let r = self.put_owned(&mut b, through);
        recycle(&mut self.spares, b);
        r
    }

    /// Adds `data`'s bytes, taking the buffer and leaving an empty one in
    /// its place; `through` writes them (and what was gathered before them)
    /// to the file at once.
    pub(super) fn put_owned(&mut self, data: &mut Vec<u8>, through: bool) -> io::Result<()> {
        if self.cap == 0 {
            let t = Instant::now();
            self.inner.write_all(data)?;
            let ns = elapsed_ns(t);
            self.last_write = Some((data.len(), ns));
            self.waits.add(ns);
            self.confirmed += data.len() as u64;
            data.clear();
            return Ok(());
        }
        let next = self.spares.pop().unwrap_or_default();
        let full = std::mem::replace(data, next);
        self.gathered += full.len();
        self.parts.push(full);
        let limit = if self.on_release {
            4 * self.cap
        } else {
            self.cap
        };
        if through || self.gathered >= limit {
            self.send()?;
        }
        Ok(())
    }

    /// Writes what is gathered if it makes a write of `cap` bytes.
    pub(super) fn release(&mut self) -> io::Result<()> {
        if self.gathered >= self.cap {
            self.send()?;
        }
        Ok(())
    }

    /// Writes what is gathered to the file: on return, every byte handed
    /// to the writer is in the file (the index relies on it).
    pub(super) fn drain(&mut self) -> io::Result<()> {
        self.send()?;
        let Some(thread) = self.thread.as_mut() else {
            return Ok(());
        };
        let t = Instant::now();
        let r = thread.settle(&mut self.spares, &mut self.last_write);
        self.waits.since(t);
        self.confirmed = thread.written;
        r
    }

    /// Whether the writes are made on a thread of their own.
    pub(super) fn threaded(&self) -> bool {
        self.thread.is_some()
    }

    /// Bytes known to be in the file, after taking back the writes the
    /// thread has made (without waiting for any).
    pub(super) fn confirmed(&mut self) -> io::Result<u64> {
        if let Some(t) = self.thread.as_mut() {
            while t.take_back(false, &mut self.spares, &mut self.last_write)? {}
            t.check()?;
            self.confirmed = t.written;
        }
        Ok(self.confirmed)
    }

    /// Makes the gathered write on the caller's thread, or hands it to the
    /// write thread (waiting only while it holds its budget of bytes): the
    /// data is then on its way to the file, and [`Coalesced::confirmed`]
    /// says when it is there.
    pub(super) fn send(&mut self) -> io::Result<()> {
        if self.parts.is_empty() {
            return Ok(());
        }
        let parts = std::mem::take(&mut self.parts);
        self.gathered = 0;
        let Some(t) = self.thread.as_mut() else {
            let t = Instant::now();
            let r = write_parts(&mut self.inner, &parts);
            let ns = elapsed_ns(t);
            self.waits.add(ns);
            if let Ok(n) = r {
                self.last_write = Some((n, ns));
                self.confirmed += n as u64;
            }
            // Written or failed, it is not written twice (a failed chunk
            // stops the writer).
            for p in parts {
                recycle(&mut self.spares, p);
            }
            return r.map(drop);
        };
        let start = Instant::now();
        let r = t.hand_over(parts, &mut self.spares, &mut self.last_write);
        self.waits.since(start);
        r
    }
}

impl Coalesced<File> {
    /// Moves the writes to a thread of their own, which writes through a
    /// duplicate of the file's descriptor (one open file, one offset: only
    /// the thread writes). Without gathering (`cap` 0, a synced writer,
    /// which must know each chunk is written) there is nothing to move.
    /// `budget` is the most bytes handed to the thread and not yet
    /// written: past it, the caller waits.
    pub(super) fn start_thread(&mut self, budget: usize) -> io::Result<()> {
        if self.cap == 0 || self.thread.is_some() {
            return Ok(());
        }
        let mut t = WriteThread::start(self.inner.try_clone()?, budget)?;
        t.written = self.confirmed;
        self.thread = Some(t);
        Ok(())
    }
}

impl<W: Write> Write for Coalesced<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.put(data, false)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain()?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for Coalesced<W> {
    /// What was gathered reaches the file, as a crash after its writes
    /// would have left it; errors cannot be reported here.
    fn drop(&mut self) {
        let _ = self.drain();
        if let Some(t) = self.thread.take() {
            t.stop();
        }
    }
}

/// Keeps an emptied buffer for reuse, up to [`SPARES`] of them.
fn recycle(spares: &mut Vec<Vec<u8>>, mut b: Vec<u8>) {
    if spares.len() < SPARES {
        b.clear();
        spares.push(b);
    }
}

/// Writes every byte of `parts` with as few `writev(2)` calls as the
/// kernel allows, and returns how many.
fn write_parts<W: Write>(w: &mut W, parts: &[Vec<u8>]) -> io::Result<usize> {
    let mut slices: Vec<IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| IoSlice::new(p))
        .collect();
    let total = parts.iter().map(Vec::len).sum();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match w.write_vectored(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// A gathered write the write thread has made, or failed to.
struct Written {
    parts: Vec<Vec<u8>>,
    ns: u64,
    result: io::Result<usize>,
}

/// The thread that makes the gathered writes to the file, in the order
/// given.
struct WriteThread {
    to_thread: Option<Sender<Vec<Vec<u8>>>>,
    from_thread: Receiver<Written>,
    handle: Option<JoinHandle<()>>,
    /// Writes handed over and not yet back, and their bytes.
    in_flight: usize,
    in_flight_bytes: usize,
    /// The most bytes in flight before the caller waits.
    budget: usize,
    /// Bytes the thread has written to the file, in all.
    written: u64,
    /// A write failed: no later one is made (that would leave a hole in
    /// the file) and the error is the answer to every later call.
    failed: Option<(io::ErrorKind, String)>,
}

impl WriteThread {
    fn start(mut file: File, budget: usize) -> io::Result<WriteThread> {
        // Unbounded: the budget in bytes bounds what is in flight.
        let (to_thread, jobs) = mpsc::channel::<Vec<Vec<u8>>>();
        let (done, from_thread) = mpsc::channel::<Written>();
        let handle = std::thread::Builder::new()
            .name("trace-write".into())
            .spawn(move || {
                let mut failed = false;
                while let Ok(parts) = jobs.recv() {
                    let t = Instant::now();
                    let result = if failed {
                        Err(io::Error::other("an earlier write failed"))
                    } else {
                        write_parts(&mut file, &parts)
                    };
                    failed |= result.is_err();
                    let w = Written {
                        parts,
                        ns: elapsed_ns(t),
                        result,
                    };
                    if done.send(w).is_err() {
                        return;
                    }
                }
            })?;
        Ok(WriteThread {
            to_thread: Some(to_thread),
            from_thread,
            handle: Some(handle),
            in_flight: 0,
            in_flight_bytes: 0,
            budget,
            written: 0,
            failed: None,
        })
    }

    fn ended() -> io::Error {
        io::Error::other("the trace's write thread ended")
    }

    /// Takes one made write back, waiting for it if `wait`; false when
    /// there was none to take. Its buffers go to `spares`.
    fn take_back(
        &mut self,
        wait: bool,
        spares: &mut Vec<Vec<u8>>,
        last: &mut Option<(usize, u64)>,
    ) -> io::Result<bool> {
        if self.in_flight == 0 {
            return Ok(false);
        }
        let w = if wait {
            self.from_thread.recv().map_err(|_| Self::ended())?
        } else {
            match self.from_thread.try_recv() {
                Ok(w) => w,
                Err(mpsc::TryRecvError::Empty) => return Ok(false),
                Err(mpsc::TryRecvError::Disconnected) => return Err(Self::ended()),
            }
        };
        self.in_flight -= 1;
        self.in_flight_bytes -= w.parts.iter().map(Vec::len).sum::<usize>();
        match w.result {
            Ok(bytes) => {
                *last = Some((bytes, w.ns));
                self.written += bytes as u64;
            }
            Err(e) => {
                if self.failed.is_none() {
                    self.failed = Some((e.kind(), e.to_string()));
                }
            }
        }
        for p in w.parts {
            recycle(spares, p);
        }
        Ok(true)
    }

    fn check(&self) -> io::Result<()> {
        match &self.failed {
            Some((kind, what)) => Err(io::Error::new(*kind, what.clone())),
            None => Ok(()),
        }
    }

    /// Hands a gathered write over, first taking back those made, and
    /// waiting for them while the bytes in flight would pass the budget
    /// (one write is always let through).
    fn hand_over(
        &mut self,
        parts: Vec<Vec<u8>>,
        spares: &mut Vec<Vec<u8>>,
        last: &mut Option<(usize, u64)>,
    ) -> io::Result<()> {
        let bytes: usize = parts.iter().map(Vec::len).sum();
        loop {
            let over = self.in_flight > 0 && self.in_flight_bytes + bytes > self.budget;
            if !self.take_back(over, spares, last)? {
                break;
            }
        }
        self.check()?;
        match self.to_thread.as_ref().map(|tx| tx.send(parts)) {
            Some(Ok(())) => {
                self.in_flight += 1;
                self.in_flight_bytes += bytes;
                Ok(())
            }
            _ => Err(Self::ended()),
        }
    }

    /// Waits until every write handed over is made.
    fn settle(
        &mut self,
        spares: &mut Vec<Vec<u8>>,
        last: &mut Option<(usize, u64)>,
    ) -> io::Result<()> {
        while self.take_back(true, spares, last)? {}
        self.check()
    }

    /// Ends the thread once it has made the writes it holds.
    fn stop(mut self) {
        self.to_thread = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

pub(super) fn elapsed_ns(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
