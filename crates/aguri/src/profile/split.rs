//! Where the counting work splits between the reading thread and the
//! trees' thread ([`WorkSplit`]), and the measurements over a window of
//! batches that move the split to whichever thread has room for the work
//! ([`SplitTuner`]).

use std::sync::atomic::Ordering;

use super::counter::Shared;

/// How far along the chain of work the reading thread goes: it always
/// reads and slices; then the flow table, then the port trees, can be
/// counted there or on the counting thread; the address trees and the 2-D
/// view are always counted on the counting thread. Each part takes what
/// the one before it gives, so the work splits at one place in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum WorkSplit {
    /// The reading thread sends packets.
    Reading,
    /// It counts the table and sends the flows that leave.
    Table,
    /// It also counts them in the port trees.
    Ports,
}

impl WorkSplit {
    /// One part more on the reading thread, or one fewer.
    pub(super) fn later(self) -> Option<WorkSplit> {
        match self {
            WorkSplit::Reading => Some(WorkSplit::Table),
            WorkSplit::Table => Some(WorkSplit::Ports),
            WorkSplit::Ports => None,
        }
    }

    pub(super) fn earlier(self) -> Option<WorkSplit> {
        match self {
            WorkSplit::Reading => None,
            WorkSplit::Table => Some(WorkSplit::Reading),
            WorkSplit::Ports => Some(WorkSplit::Table),
        }
    }
}

/// Where the work splits ([`WorkSplit`]). Over a window of batches, each
/// thread's busy time is measured (the reading thread's wall time less its
/// waits on the queue, the counting thread's time on its jobs), and with
/// it the time of the parts that can move, where they run: the table (on
/// this thread timed each batch; on the counting thread its jobs less the
/// trees' time) and the port trees. The split moves by one part if the
/// busier thread, with that part's time moved to the other side, would
/// take a tenth less than the busier thread now does. A part that comes to
/// the reading thread costs it a wait (for what was sent to go through the
/// part first), so a window starts at [`FIRST_WINDOW`] batches and
/// doubles, up to [`MAX_WINDOW`], each time the split moves back soon
/// after it moved.
pub(super) struct SplitTuner {
    pub(super) cut: WorkSplit,
    /// The latest the split may be: `Table` while a summary is made on the
    /// counting thread (which reads the port trees then).
    pub(super) ceiling: WorkSplit,
    /// The table is past its start (see `FlowTableStage::warm`): until then its
    /// cost and the trees' say nothing of what follows, and nothing is
    /// judged.
    pub(super) warm: bool,
    /// Batches and packets in the current window.
    pub(super) batches: u32,
    pub(super) packets: u64,
    /// Just after a move: where the split was, and the time a packet took
    /// in the window before the move.
    pub(super) trial: Option<(WorkSplit, f64)>,
    pub(super) window: u32,
    /// Batches since the split last moved.
    pub(super) since_move: u32,
    /// The window's start, and what was measured since.
    pub(super) start: std::time::Instant,
    /// This thread's waits for the queue.
    pub(super) waited_ns: u64,
    /// This thread's time in the table and in the port trees.
    pub(super) table_ns: u64,
    pub(super) ports_ns: u64,
    /// The counting thread's counters at the window's start.
    pub(super) busy0: u64,
    pub(super) trees0: u64,
    pub(super) ports0: u64,
    pub(super) jobs0: u64,
    /// Which way the split moves next under `always_switch` (tests).
    #[cfg(test)]
    pub(super) forward: bool,
}

/// The first window: 16 batches of 4096 packets.
const FIRST_WINDOW: u32 = 16;
/// The longest window: 16 million packets.
const MAX_WINDOW: u32 = 4096;
/// The fewest jobs of the counting thread a window needs to be judged.
const MIN_JOBS: u64 = 4;

impl SplitTuner {
    /// The table starts on the counting thread: while it fills, no flow
    /// leaves it and the trees get nothing, so the counting thread would
    /// have nothing else to do, and the reading thread only reads (with the
    /// table here from the start, the counting thread waited idle for the
    /// first sixth of a 100 s trace of 16,384 active flows). Once it is
    /// warm (full, or passed by under a flood) it comes here, where the
    /// split is judged from (judged from the start on the counting thread,
    /// a flood took two moves and their trial windows to reach the split it
    /// needs, and a flood of 2,000,000 frames took a third longer).
    pub(super) fn new() -> SplitTuner {
        SplitTuner {
            cut: WorkSplit::Reading,
            ceiling: WorkSplit::Ports,
            warm: false,
            batches: 0,
            packets: 0,
            trial: None,
            window: FIRST_WINDOW,
            since_move: 0,
            start: std::time::Instant::now(),
            waited_ns: 0,
            table_ns: 0,
            ports_ns: 0,
            busy0: 0,
            trees0: 0,
            ports0: 0,
            jobs0: 0,
            #[cfg(test)]
            forward: true,
        }
    }

    /// One batch counted; `cut` may change.
    pub(super) fn judge(&mut self, shared: &Shared, packets: usize) {
        #[cfg(test)]
        if ALWAYS_SWITCH.load(Ordering::Relaxed) {
            let next = if self.forward {
                self.later()
            } else {
                self.cut.earlier()
            };
            match next {
                Some(c) => self.cut = c,
                None => {
                    self.forward = !self.forward;
                    self.judge(shared, packets);
                }
            }
            return;
        }
        self.packets += packets as u64;
        self.batches += 1;
        self.since_move = self.since_move.saturating_add(1);
        if !self.warm {
            return;
        }
        // A window ends once the counting thread has done a few jobs in it
        // (while the table holds most flows, the flows it lets go come
        // seldom, and a window without them would not show the trees).
        let jobs = shared.jobs_done.load(Ordering::Relaxed) - self.jobs0;
        if self.batches < self.window || jobs < MIN_JOBS {
            return;
        }
        let wall = self.start.elapsed().as_nanos() as u64;
        let busy = shared.busy_ns.load(Ordering::Relaxed) - self.busy0;
        let trees = shared.trees_ns.load(Ordering::Relaxed) - self.trees0;
        let ports = shared.ports_ns.load(Ordering::Relaxed) - self.ports0;
        let reading = wall.saturating_sub(self.waited_ns);
        // The time of the part that would come here, and of the one that
        // would go there.
        let coming = match self.cut {
            WorkSplit::Reading => busy.saturating_sub(trees + ports),
            WorkSplit::Table => ports.min(busy),
            WorkSplit::Ports => 0,
        };
        let going = match self.cut {
            WorkSplit::Reading => 0,
            WorkSplit::Table => self.table_ns.min(reading),
            WorkSplit::Ports => self.ports_ns.min(reading),
        };
        let now = reading.max(busy);
        let later = (reading + coming).max(busy - coming);
        let earlier = (reading - going).max(busy + going);
        let per_packet = wall as f64 / self.packets.max(1) as f64;
        match self.trial.take() {
            // The first window after a move: if the run went slower than
            // in the window before it (the reading thread's own work can
            // change with the split, which the estimate does not see), the
            // split goes back.
            Some((before, t)) if per_packet > t => self.moved(before),
            Some(_) => {}
            None => {
                let to = match (self.later(), self.cut.earlier()) {
                    (Some(l), _) if later * 10 < now * 9 && later <= earlier => Some(l),
                    (_, Some(e)) if earlier * 10 < now * 9 => Some(e),
                    _ => None,
                };
                if let Some(to) = to {
                    let from = self.cut;
                    self.moved(to);
                    self.trial = Some((from, per_packet));
                }
            }
        }
        self.restart(shared);
    }

    /// One part more on the reading thread, if the ceiling allows it.
    pub(super) fn later(&self) -> Option<WorkSplit> {
        self.cut.later().filter(|&c| c <= self.ceiling)
    }

    /// The split moves.
    pub(super) fn moved(&mut self, to: WorkSplit) {
        self.cut = to;
        if self.since_move <= 2 * self.window {
            self.window = (self.window * 2).min(MAX_WINDOW);
        }
        self.since_move = 0;
    }

    /// Whether the table is past its start now; the first window starts
    /// when it first is.
    pub(super) fn warmed(&mut self, shared: &Shared, warm: bool) {
        if warm && !self.warm {
            self.warm = true;
            self.restart(shared);
        }
    }

    /// A new window starts.
    pub(super) fn restart(&mut self, shared: &Shared) {
        self.batches = 0;
        self.packets = 0;
        self.start = std::time::Instant::now();
        self.waited_ns = 0;
        self.table_ns = 0;
        self.ports_ns = 0;
        self.busy0 = shared.busy_ns.load(Ordering::Relaxed);
        self.trees0 = shared.trees_ns.load(Ordering::Relaxed);
        self.ports0 = shared.ports_ns.load(Ordering::Relaxed);
        self.jobs0 = shared.jobs_done.load(Ordering::Relaxed);
    }
}

/// Tests set this to move the split by one part at every batch, back and
/// forth between its ends, whatever the load.
#[cfg(test)]
pub(super) static ALWAYS_SWITCH: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);
