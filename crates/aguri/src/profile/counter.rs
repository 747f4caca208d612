//! Where packets are counted: inline on the caller's thread, or on the
//! trees' own thread, which takes jobs in the order they were sent so
//! that every tree sees its updates in order and the summaries are the
//! ones counting inline gives. The reading thread keeps as much of the
//! chain as the [`SplitTuner`] gives it, and lends a hand with the last
//! summary.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};

use crate::flows::Departed;

use super::counting::{
    ns_since, FlowTableStage, InlineCounts, Summarized, TreeWork, CHUNK, PACKET_BATCH,
};
use super::split::{SplitTuner, WorkSplit};
use super::trees::{Pending, Trees};
use super::ProfilerConfig;

/// Batches a counting thread may have waiting: enough to keep it busy
/// while the reading thread fills the next, few enough to bound the memory
/// (192 KiB a batch of packets, 224 KiB of departed flows).
const QUEUED_BATCHES: usize = 4;

pub(super) enum Job {
    /// Packets, to count through the table there.
    Packets(Vec<Pending>),
    /// Flows that left the table on the reading thread, counted in the
    /// port trees there or not.
    Departed {
        flows: Vec<Departed>,
        ported: bool,
    },
    /// The last summary (see [`Counter::begin_summary`]): the destination
    /// address tree goes to the reading thread, which counts the last
    /// flows in it and in the port trees.
    Lend,
    /// The last summary's flows, shared with the reading thread: counted
    /// here in the trees not lent.
    Last(Arc<Vec<Departed>>),
    /// The lent tree back, before the summary is made.
    Rejoin(Trees),
    /// The table set aside (`Shared::closing`) drained into the trees, and
    /// the interval's summary made from them.
    Summarize,
    Stop,
}

/// What the reading thread and the counting thread share.
pub(super) struct Shared {
    /// The table, and the port trees, each on the thread that counts it
    /// at the moment (see [`WorkSplit`]).
    pub(super) front: Mutex<FlowTableStage>,
    pub(super) ports: Mutex<Trees>,
    /// The table of the interval being summarized on the counting thread,
    /// while the next interval's counts in `front` (see
    /// [`Counter::begin_summary`]); empty between summaries.
    pub(super) closing: Mutex<FlowTableStage>,
    /// Batches sent and not yet counted: the reading thread takes a part
    /// over only when there are none, so that each part sees every update
    /// in order.
    pub(super) queued: AtomicUsize,
    /// Nanoseconds the counting thread has spent on its jobs, and of those
    /// counting in the address trees and in the port trees.
    pub(super) busy_ns: AtomicU64,
    pub(super) trees_ns: AtomicU64,
    pub(super) ports_ns: AtomicU64,
    /// Jobs the counting thread has done.
    pub(super) jobs_done: AtomicU64,
    /// The table has been warm (`FlowTableStage::warm`) on the counting thread.
    pub(super) table_warm: AtomicBool,
    /// The reading thread while it waits for `queued` to fall to 0, to be
    /// woken then (the profiler may have been built on another).
    pub(super) waiting: Mutex<Option<std::thread::Thread>>,
}

impl Shared {
    /// A job begun at `begun` is done; `back`'s times so far.
    pub(super) fn account(&self, begun: std::time::Instant, back: &TreeWork) {
        self.busy_ns.fetch_add(ns_since(begun), Ordering::Relaxed);
        self.trees_ns.store(back.trees_ns, Ordering::Relaxed);
        self.ports_ns.store(back.ports_ns, Ordering::Relaxed);
        self.jobs_done.fetch_add(1, Ordering::Relaxed);
    }
}

/// Where packets are counted: on the caller's thread, or on a thread of
/// their own that takes batches in order (so the table and each tree see
/// their updates in the order they were made, and summaries are what
/// counting inline gives) and hands the emptied batch vectors back.
///
/// On their own thread, the work splits where there is room for it (see
/// [`WorkSplit`] and [`SplitTuner`]): the reading thread sends packets, or counts
/// the table itself (once every batch sent has been through it) and sends
/// the flows that leave, or also counts those in the port trees. Where the
/// reading is the larger part (a capture file read from the page cache,
/// and traffic the table aggregates) the table goes to the counting
/// thread: `profile -r` of 2,000,000 frames from 16,384 active flows
/// 0.38-0.42 s against 0.46-0.47 with the table always on the reading
/// thread (bench/profile-throughput.md, "the flow table's slots
/// prefetched"); where the trees are (floods of new flows), the port trees
/// come to the reading thread too (the same file, "the port trees go with
/// the table").
// One a profiler, reached once a batch: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum Counter {
    Inline {
        behind: Box<InlineCounts>,
        /// The last summary made, not yet taken.
        finished: Option<Summarized>,
    },
    Thread {
        jobs: SyncSender<Job>,
        spare: Receiver<Vec<Pending>>,
        spare_departed: Receiver<Vec<Departed>>,
        done: Receiver<Summarized>,
        /// The destination address tree, lent for the last summary.
        lent: Receiver<Trees>,
        worker: Option<std::thread::JoinHandle<()>>,
        shared: Arc<Shared>,
        /// Where the work splits, and the measurements that move it.
        tuner: SplitTuner,
        /// Packets counted in the table here since the last judgement.
        here_packets: usize,
        /// A summary is being made on the counting thread: where the split
        /// was when it began (see [`Counter::begin_summary`]).
        in_flight: Option<WorkSplit>,
        /// A summary made, not yet taken.
        finished: Option<Summarized>,
    },
}

impl Counter {
    /// A thread of their own for the table and the trees; counting here if
    /// the system gives no thread.
    pub(super) fn on_thread(cfg: ProfilerConfig) -> Counter {
        use std::sync::mpsc::{channel, sync_channel};
        let (jobs, jobs_rx) = sync_channel::<Job>(QUEUED_BATCHES);
        let (spare_tx, spare) = channel();
        let (spare_departed_tx, spare_departed) = channel();
        let (done_tx, done) = channel();
        let (lent_tx, lent) = channel();
        let shared = Arc::new(Shared {
            front: Mutex::new(FlowTableStage::new(&cfg)),
            ports: Mutex::new(Trees::ports_for(&cfg)),
            closing: Mutex::new(FlowTableStage::new(&cfg)),
            queued: AtomicUsize::new(0),
            busy_ns: AtomicU64::new(0),
            trees_ns: AtomicU64::new(0),
            ports_ns: AtomicU64::new(0),
            jobs_done: AtomicU64::new(0),
            table_warm: AtomicBool::new(false),
            waiting: Mutex::new(None),
        });
        let theirs = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("aguri-trees".into())
            .spawn(move || {
                let shared = theirs;
                let mut back = TreeWork::new(cfg);
                for job in jobs_rx {
                    let begun = std::time::Instant::now();
                    match job {
                        Job::Packets(mut batch) => {
                            let mut front = lock(&shared.front);
                            back.count(&mut front, &mut lock(&shared.ports), &batch);
                            if front.warm() {
                                shared.table_warm.store(true, Ordering::Relaxed);
                            }
                            drop(front);
                            shared.account(begun, &back);
                            done_one(&shared);
                            batch.clear();
                            let _ = spare_tx.send(batch);
                        }
                        Job::Departed { mut flows, ported } => {
                            if !ported {
                                back.count_ports(&mut lock(&shared.ports), &flows);
                            }
                            back.count_trees(&flows);
                            shared.account(begun, &back);
                            done_one(&shared);
                            flows.clear();
                            let _ = spare_departed_tx.send(flows);
                        }
                        Job::Lend => {
                            let dst = back.counted.addresses.split_off_last();
                            let _ = lent_tx.send(dst);
                            done_one(&shared);
                        }
                        Job::Last(flows) => {
                            back.count_trees(&flows[..]);
                            drop(flows);
                            shared.account(begun, &back);
                            done_one(&shared);
                        }
                        Job::Rejoin(dst) => {
                            back.counted.addresses.rejoin(dst);
                            done_one(&shared);
                        }
                        Job::Summarize => {
                            let s = back
                                .summarize(&mut lock(&shared.closing), &mut lock(&shared.ports));
                            if done_tx.send(s).is_err() {
                                return;
                            }
                        }
                        Job::Stop => return,
                    }
                }
            });
        match spawned {
            Ok(worker) => Counter::Thread {
                jobs,
                spare,
                spare_departed,
                done,
                lent,
                worker: Some(worker),
                shared,
                tuner: SplitTuner::new(),
                here_packets: 0,
                in_flight: None,
                finished: None,
            },
            Err(_) => Counter::Inline {
                behind: Box::new(InlineCounts::new(cfg)),
                finished: None,
            },
        }
    }

    /// Counts `batch` (left empty, its capacity kept or replaced); returns
    /// how many packets to hold before the next call.
    pub(super) fn count(&mut self, batch: &mut Vec<Pending>) -> usize {
        self.land(false);
        match self {
            Counter::Inline { behind, .. } => {
                behind.count(batch);
                batch.clear();
                CHUNK
            }
            Counter::Thread {
                jobs,
                spare,
                spare_departed,
                shared,
                tuner,
                here_packets,
                worker,
                ..
            } => {
                let before = tuner.cut;
                if before == WorkSplit::Reading {
                    if batch.is_empty() {
                        return PACKET_BATCH;
                    }
                    let full = swap_out(batch, spare, PACKET_BATCH);
                    let n = full.len();
                    tuner.waited_ns += send(shared, jobs, Job::Packets(full));
                    if !tuner.warm && shared.table_warm.load(Ordering::Relaxed) {
                        // The table has filled there (or is passed by, under
                        // a flood): it comes here, and from now on the split
                        // is judged (see `SplitTuner::new`).
                        tuner.warm = true;
                        tuner.cut = WorkSplit::Table;
                        cut_moved(shared, worker, tuner, before);
                        return batch_for(tuner.cut);
                    }
                    tuner.judge(shared, n);
                } else {
                    // The table counts here, a chunk at a time while the
                    // keys are in L1; the flows that leave go over in
                    // batches, counted in the port trees here or there.
                    let t = std::time::Instant::now();
                    let (warm, left) = {
                        let mut front = lock(&shared.front);
                        for chunk in batch.chunks(CHUNK) {
                            front.flush(chunk);
                        }
                        let full = front.left.len() >= PACKET_BATCH;
                        (
                            tuner.warm || front.warm(),
                            full.then(|| take_left(&mut front, spare_departed)),
                        )
                    };
                    tuner.table_ns += ns_since(t);
                    tuner.warmed(shared, warm);
                    *here_packets += batch.len();
                    batch.clear();
                    if let Some(flows) = left {
                        tuner.waited_ns += send_left(shared, jobs, tuner, flows);
                    }
                    if *here_packets < PACKET_BATCH {
                        return CHUNK;
                    }
                    #[cfg(test)]
                    {
                        HERE.fetch_add(1, Ordering::Relaxed);
                        if before == WorkSplit::Ports {
                            PORTS_HERE.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    tuner.judge(shared, std::mem::take(here_packets));
                }
                cut_moved(shared, worker, tuner, before);
                batch_for(tuner.cut)
            }
        }
    }

    /// Begins the summary of everything counted so far (every batch
    /// given to [`count`](Self::count) before); take it with
    /// [`take_summary`](Self::take_summary). None may be in flight or
    /// waiting to be taken.
    ///
    /// On the counting thread, the interval's table is set aside (once no
    /// batch sent is still to go through it) and a fresh one takes its
    /// place; the counting thread drains the old one into the trees and
    /// makes the summary while this thread reads on, counting the next
    /// interval's packets in the fresh table and sending the flows that
    /// leave it to be counted, after the summary, in the emptied trees.
    /// Meanwhile the port trees stay on the counting thread (the summary
    /// reads them); the split comes back when the summary is taken.
    /// The `last` summary (no packet comes after it) is made by both
    /// threads instead, while this one would only wait: once every batch
    /// sent is counted, the counting thread lends this one its destination
    /// address tree, the table is drained here, and its flows (shared, not
    /// copied) are counted there in the source address tree and here in
    /// the port trees and the lent tree, which then goes back; the summary
    /// is made there from the trees (each tree sees the updates, in the
    /// order, that one thread gives it). The last summary of a 100 s trace
    /// of 16,384 active flows cut to 96 bytes (67,000 flows): the drain
    /// 3.3 ms, then the source tree 9 ms there against the port trees' 4.4
    /// and the destination tree's 6.5 here, 14-15 ms in all; 21-22 ms with
    /// both address trees there and the flows copied to send, 24 ms on the
    /// counting thread alone.
    /// Returns how many packets to hold before the next `count`.
    pub(super) fn begin_summary(&mut self, last: bool) -> usize {
        match self {
            Counter::Inline { behind, finished } => {
                debug_assert!(finished.is_none());
                *finished = Some(behind.summarize());
                CHUNK
            }
            Counter::Thread {
                jobs,
                lent,
                shared,
                tuner,
                worker,
                in_flight,
                finished,
                ..
            } => {
                debug_assert!(in_flight.is_none() && finished.is_none());
                if last {
                    wait_for_queue(shared, worker);
                    send(shared, jobs, Job::Lend);
                    let flows = {
                        let mut front = lock(&shared.front);
                        front.drain();
                        Arc::new(std::mem::take(&mut front.left))
                    };
                    send(shared, jobs, Job::Last(Arc::clone(&flows)));
                    lock(&shared.ports).count(&flows[..]);
                    let mut dst = lent.recv().unwrap_or_else(|_| worker_gone());
                    dst.count(&flows[..]);
                    send(shared, jobs, Job::Rejoin(dst));
                } else if tuner.cut == WorkSplit::Reading {
                    wait_for_queue(shared, worker);
                }
                {
                    let (mut front, mut closing) = (lock(&shared.front), lock(&shared.closing));
                    std::mem::swap(&mut *front, &mut *closing);
                    // The bypass goes on as with one table (the flows'
                    // order into the trees, and so the summaries, are
                    // what counting inline gives).
                    (front.bypass, front.window) = (closing.bypass, closing.window);
                }
                jobs.send(Job::Summarize).unwrap_or_else(|_| worker_gone());
                *in_flight = Some(tuner.cut);
                tuner.cut = WorkSplit::Table;
                tuner.ceiling = WorkSplit::Table;
                tuner.trial = None;
                tuner.restart(shared);
                batch_for(tuner.cut)
            }
        }
    }

    /// The summary begun last, if it is made (`wait`: once it is).
    pub(super) fn take_summary(&mut self, wait: bool) -> Option<Summarized> {
        self.land(wait);
        match self {
            Counter::Inline { finished, .. } | Counter::Thread { finished, .. } => finished.take(),
        }
    }

    /// A summary in flight that the counting thread has made (`wait`: once
    /// it has) is kept to be taken, and the split goes back to where it was
    /// when the summary began.
    pub(super) fn land(&mut self, wait: bool) {
        let Counter::Thread {
            done,
            in_flight,
            finished,
            tuner,
            shared,
            worker,
            ..
        } = self
        else {
            return;
        };
        let Some(resume) = *in_flight else {
            return;
        };
        let made = if wait {
            done.recv().unwrap_or_else(|_| worker_gone())
        } else {
            match done.try_recv() {
                Ok(s) => s,
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => worker_gone(),
            }
        };
        *finished = Some(made);
        *in_flight = None;
        tuner.ceiling = WorkSplit::Ports;
        let before = std::mem::replace(&mut tuner.cut, resume);
        cut_moved(shared, worker, tuner, before);
    }
}

/// The split has moved from `before` to `tuner.cut` (or stayed): a
/// part that comes to the reading thread first takes in everything sent
/// (a wait for the queue), and a new window starts. (The flows that left
/// the table here and wait go with it, to be counted before the packets
/// sent next.)
fn cut_moved(
    shared: &Shared,
    worker: &Option<std::thread::JoinHandle<()>>,
    tuner: &mut SplitTuner,
    before: WorkSplit,
) {
    if tuner.cut > before {
        wait_for_queue(shared, worker);
    }
    if tuner.cut != before {
        tuner.restart(shared);
    }
}

/// Packets to hold before the next `count` with the split at `cut`: a
/// batch to send, or a chunk to count in the table here.
pub(super) fn batch_for(cut: WorkSplit) -> usize {
    match cut {
        WorkSplit::Reading => PACKET_BATCH,
        _ => CHUNK,
    }
}

/// Waits until every batch sent has been counted.
fn wait_for_queue(shared: &Shared, worker: &Option<std::thread::JoinHandle<()>>) {
    set_waiting(shared, Some(std::thread::current()));
    while shared.queued.load(Ordering::Acquire) > 0 {
        if worker.as_ref().is_none_or(|w| w.is_finished()) {
            worker_gone();
        }
        std::thread::park_timeout(std::time::Duration::from_millis(1));
    }
    set_waiting(shared, None);
}

/// The flows waiting with the table, taken out to send, an emptied vector
/// in their place.
fn take_left(front: &mut FlowTableStage, spare: &Receiver<Vec<Departed>>) -> Vec<Departed> {
    swap_out(&mut front.left, spare, PACKET_BATCH + CHUNK)
}

/// Sends flows that left the table here to the counting thread, counted
/// in the port trees first if they are here; returns how long it waited
/// for room in the queue, in nanoseconds.
fn send_left(
    shared: &Shared,
    jobs: &SyncSender<Job>,
    tuner: &mut SplitTuner,
    flows: Vec<Departed>,
) -> u64 {
    let ported = tuner.cut == WorkSplit::Ports;
    if ported {
        let t = std::time::Instant::now();
        lock(&shared.ports).count(&flows);
        tuner.ports_ns += ns_since(t);
    }
    send(shared, jobs, Job::Departed { flows, ported })
}

/// A job is done: the reading thread, if it waits for the queue to empty,
/// is woken when it has.
fn done_one(shared: &Shared) {
    if shared.queued.fetch_sub(1, Ordering::AcqRel) == 1 {
        if let Some(t) = shared.waiting.lock().ok().and_then(|w| w.clone()) {
            t.unpark();
        }
    }
}

/// Takes the filled `v` out, leaving in its place an emptied vector the
/// counting thread handed back, or a new one of `capacity`.
fn swap_out<T>(v: &mut Vec<T>, spare: &Receiver<Vec<T>>, capacity: usize) -> Vec<T> {
    let next = spare
        .try_recv()
        .unwrap_or_else(|_| Vec::with_capacity(capacity));
    std::mem::replace(v, next)
}

/// Sends `job`, a batch counted in `shared.queued` until the counting
/// thread is done with it; returns how long it waited for room in the
/// queue, in nanoseconds (0 without a wait).
fn send(shared: &Shared, jobs: &SyncSender<Job>, job: Job) -> u64 {
    shared.queued.fetch_add(1, Ordering::AcqRel);
    match jobs.try_send(job) {
        Ok(()) => 0,
        Err(TrySendError::Full(job)) => {
            let t = std::time::Instant::now();
            jobs.send(job).unwrap_or_else(|_| worker_gone());
            ns_since(t)
        }
        Err(TrySendError::Disconnected(_)) => worker_gone(),
    }
}

/// Says which thread waits for the batches sent to be counted (`None`: no
/// thread waits).
fn set_waiting(shared: &Shared, t: Option<std::thread::Thread>) {
    if let Ok(mut w) = shared.waiting.lock() {
        *w = t;
    }
}

/// The lock of a part that moves between the threads: only the two
/// counting threads take it, one at a time by construction; a panic while
/// one held it (a bug, never input) is passed on.
fn lock<T>(part: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    part.lock().unwrap_or_else(|_| worker_gone())
}

/// Batches counted in the table on the reading thread, and of those with
/// the port trees there too (tests).
#[cfg(test)]
pub(super) static HERE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
#[cfg(test)]
pub(super) static PORTS_HERE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Drop for Counter {
    fn drop(&mut self) {
        if let Counter::Thread { jobs, worker, .. } = self {
            // After the batches before it (a worker that panicked has
            // closed its queue: nothing to send, nothing to wait for).
            let _ = jobs.send(Job::Stop);
            if let Some(w) = worker.take() {
                let _ = w.join();
            }
        }
    }
}

/// The trees' thread ended: only a panic in the counting (a bug, never
/// input) does that; it is passed on rather than summaries made short.
#[cold]
fn worker_gone() -> ! {
    panic!("the profiler's tree thread ended early (a panic on it is reported above)")
}
