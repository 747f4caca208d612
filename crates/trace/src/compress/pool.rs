//! Compression threads: chunks are encoded in parallel and handed back in
//! the order they were given.
//!
//! The writer's thread submits each chunk with a sequence number; a fixed
//! set of worker threads, each with its own [`ChunkEncoder`], takes jobs
//! from one shared queue and returns the encoded bytes on another. Results
//! can finish out of order, so [`EncoderPool::next`] keeps them in a small
//! reorder buffer until the oldest one is there: the file is written in
//! submission order, as if one thread had done everything.
//!
//! The number of jobs in flight is bounded by the caller (it waits for the
//! oldest result when [`EncoderPool::is_full`]), so memory stays at a few
//! chunks per thread however fast records arrive.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};

use super::{ChunkEncoder, ChunkReport};

/// What a job asks of its encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// Encode `input` as one chunk.
    Chunk,
    /// Store `input` as one chunk without compressing it (where the codec
    /// can; see `ChunkEncoder::store_chunk`).
    Store,
    /// End the stream (LZ4 EndMark, the zstd frame's last block).
    End,
}

/// One unit of work, with buffers the pool recycles and the caller's
/// description of the chunk (`meta`), returned untouched.
pub(crate) struct Job<M> {
    pub work: Work,
    /// The chunk's plain bytes (empty for [`Work::End`]).
    pub input: Vec<u8>,
    /// Encoded bytes are appended here, after whatever the caller put first
    /// (the LZ4 frame header before the first chunk).
    pub out: Vec<u8>,
    pub meta: M,
}

/// A finished job.
pub(crate) struct Done<M> {
    pub job: Job<M>,
    pub result: Result<ChunkReport>,
}

/// Worker threads with their encoders, and the reorder buffer.
pub(crate) struct EncoderPool<M> {
    /// Closing this channel is what stops the workers.
    jobs: Option<Sender<(u64, Job<M>)>>,
    done: Receiver<(u64, Done<M>)>,
    workers: Vec<JoinHandle<()>>,
    /// Sequence number of the next job submitted.
    next_seq: u64,
    /// Sequence number of the next result handed back.
    next_out: u64,
    /// Results that finished before an older one.
    reorder: BTreeMap<u64, Done<M>>,
    max_in_flight: usize,
    /// Buffers of finished jobs, reused for the next ones.
    spare: Vec<Vec<u8>>,
    codec: &'static str,
}

impl<M: Send + 'static> EncoderPool<M> {
    /// Starts one thread per encoder; at most `max_in_flight` jobs (at
    /// least one) are meant to be outstanding, see [`is_full`](Self::is_full).
    pub fn new(encoders: Vec<ChunkEncoder>, max_in_flight: usize) -> Result<Self> {
        let codec = encoders.first().map_or("none", ChunkEncoder::name);
        let (job_tx, job_rx) = mpsc::channel::<(u64, Job<M>)>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done_rx) = mpsc::channel();
        let mut workers = Vec::with_capacity(encoders.len());
        for (i, enc) in encoders.into_iter().enumerate() {
            let jobs = Arc::clone(&job_rx);
            let done = done_tx.clone();
            // A failed spawn returns here; dropping `job_tx` then stops the
            // threads already started.
            let handle = std::thread::Builder::new()
                .name(format!("trace-compress-{i}"))
                .spawn(move || worker(enc, &jobs, &done))
                .map_err(|e| Error::io("starting a compression thread", e))?;
            workers.push(handle);
        }
        Ok(EncoderPool {
            jobs: Some(job_tx),
            done: done_rx,
            workers,
            next_seq: 0,
            next_out: 0,
            reorder: BTreeMap::new(),
            max_in_flight: max_in_flight.max(1),
            spare: Vec::new(),
            codec,
        })
    }

    /// Jobs submitted whose results have not been handed back.
    pub fn in_flight(&self) -> usize {
        usize::try_from(self.next_seq - self.next_out).unwrap_or(usize::MAX)
    }

    /// Whether the caller should wait for a result before submitting more.
    pub fn is_full(&self) -> bool {
        self.in_flight() >= self.max_in_flight
    }

    /// An empty buffer, recycled when one is free.
    pub fn buffer(&mut self, capacity: usize) -> Vec<u8> {
        self.spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(capacity))
    }

    /// Keeps `buf` for a later job.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        // Two buffers per job in flight, plus the caller's block.
        if self.spare.len() < 2 * self.max_in_flight + 1 {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Queues a job; its result comes back from [`next`](Self::next) after
    /// the results of every job submitted before it.
    pub fn submit(&mut self, job: Job<M>) -> Result<()> {
        let tx = self.jobs.as_ref().ok_or_else(|| self.stopped())?;
        tx.send((self.next_seq, job)).map_err(|_| self.stopped())?;
        self.next_seq += 1;
        Ok(())
    }

    /// The oldest outstanding result, if it is there; with `wait`, blocks
    /// until it is. `None` when nothing is outstanding (or, without `wait`,
    /// the oldest job is still being encoded).
    pub fn next(&mut self, wait: bool) -> Result<Option<Done<M>>> {
        if self.in_flight() == 0 {
            return Ok(None);
        }
        loop {
            if let Some(done) = self.reorder.remove(&self.next_out) {
                self.next_out += 1;
                return Ok(Some(done));
            }
            // Every worker holds a sender: a closed channel means they all
            // ended, and the result waited for will never come.
            let (seq, done) = if wait {
                self.done.recv().map_err(|_| self.stopped())?
            } else {
                match self.done.try_recv() {
                    Ok(x) => x,
                    Err(TryRecvError::Empty) => return Ok(None),
                    Err(TryRecvError::Disconnected) => return Err(self.stopped()),
                }
            };
            self.reorder.insert(seq, done);
        }
    }

    /// The error for a pool whose threads are gone.
    fn stopped(&self) -> Error {
        Error::Compression {
            codec: self.codec,
            what: "the compression threads stopped".into(),
        }
    }
}

impl<M> Drop for EncoderPool<M> {
    /// Closes the job queue and joins the threads; each finishes at most
    /// the jobs already queued (a bounded number), so this never hangs.
    fn drop(&mut self) {
        self.jobs = None;
        for h in self.workers.drain(..) {
            // A panicked worker already reported its job as failed.
            let _ = h.join();
        }
    }
}

/// A worker's loop: take a job, encode it, send it back; end when the job
/// queue closes or the caller has gone.
fn worker<M>(
    mut enc: ChunkEncoder,
    jobs: &Mutex<Receiver<(u64, Job<M>)>>,
    done: &Sender<(u64, Done<M>)>,
) {
    loop {
        // The lock is held only while waiting for the next job; encoding
        // runs unlocked so that the workers overlap.
        let next = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((seq, mut job)) = next else { return };
        let codec = enc.name();
        let result = catch_unwind(AssertUnwindSafe(|| match job.work {
            Work::Chunk => enc.encode_chunk(&job.input, &mut job.out),
            Work::Store => enc.store_chunk(&job.input, &mut job.out),
            Work::End => enc.finish(&mut job.out).map(|()| ChunkReport::default()),
        }));
        // A panic would leave the encoder's state unknown: report the job
        // as failed (so the caller does not wait for it forever) and stop.
        let (result, panicked) = match result {
            Ok(r) => (r, false),
            Err(_) => (
                Err(Error::Compression {
                    codec,
                    what: "a compression thread panicked".into(),
                }),
                true,
            ),
        };
        if done.send((seq, Done { job, result })).is_err() || panicked {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Codec;

    #[test]
    fn results_come_back_in_submission_order() {
        let encs = (0..3)
            .map(|_| ChunkEncoder::new(Codec::Gzip, Some(1), false).unwrap())
            .collect();
        let mut pool = EncoderPool::<usize>::new(encs, 64).unwrap();
        // Chunks of very different sizes finish out of order.
        for i in 0..40usize {
            let input = vec![(i % 251) as u8; if i % 3 == 0 { 60_000 } else { 10 }];
            pool.submit(Job {
                work: Work::Chunk,
                input,
                out: Vec::new(),
                meta: i,
            })
            .unwrap();
        }
        assert_eq!(pool.in_flight(), 40);
        for i in 0..40usize {
            let d = pool.next(true).unwrap().unwrap();
            assert_eq!(d.job.meta, i);
            let rep = d.result.unwrap();
            assert_eq!(rep.blocks, 1);
            // Each result is the encoding of its own input (a gzip member).
            let mut plain = Vec::new();
            std::io::Read::read_to_end(
                &mut flate2::read::GzDecoder::new(&d.job.out[..]),
                &mut plain,
            )
            .unwrap();
            assert_eq!(plain, d.job.input);
        }
        assert!(pool.next(true).unwrap().is_none());
    }
}
