//! The delay line at work: an NFQUEUE queue that the [`crate::rules`] fill,
//! read by one thread that holds each packet's verdict for its delay
//! ([`crate::schedule`]) and accepts it when it is due.
//!
//! The loop: release what is due (verdicts go out in one datagram), then
//! wait on the queue's socket until a packet comes or the next one is due,
//! to the nanosecond (`ppoll`; the thread's timer slack is set to 1 ns so
//! the kernel does not defer the wake-up by its default 50 us), read what
//! waits, and hold it. A packet is counted late when it is released more
//! than [`DelayConfig::late_after`] after its due time; the lateness of
//! every packet goes into a histogram.
//!
//! A run is valid when every packet the rules sent to the queue was
//! delayed as asked: none dropped by the kernel (the queue at its maximum,
//! the socket's buffer full), none accepted undelayed (`fail_open`), no
//! verdict refused. Packets that came to the queue are compared with the
//! rules' own counters, so a packet that passed undelayed is found even
//! though the kernel counts it nowhere.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use capture::nfqueue::{Event, NfQueue, QueueConfig, QueueStats};
use hdrhistogram::Histogram;
use serde::Serialize;
use wire::{ipv4::Ipv4Packet, ipv6::Ipv6Packet};

use crate::rules::{Rules, Selection};
use crate::schedule::{Direction, Fate, Schedule, Shaping};

/// netfilter hook numbers (`enum nf_inet_hooks`).
const HOOK_INPUT: u8 = 1;
const HOOK_OUTPUT: u8 = 3;

/// The longest the loop sleeps with nothing held, to look at the stop flag.
const IDLE: Duration = Duration::from_millis(50);

/// What a delay line is asked to do.
#[derive(Clone, Debug)]
pub struct DelayConfig {
    /// Each client address and its round-trip time.
    pub clients: Vec<(IpAddr, Duration)>,
    /// Only traffic with this server (see [`Selection::server`]).
    pub server: Option<SocketAddr>,
    /// Packets the kernel holds for the queue at most.
    pub queue_len: u32,
    /// Accept packets that find the queue full, undelayed (the run is then
    /// invalid), instead of dropping them (invalid too, but TCP recovers).
    pub fail_open: bool,
    /// Loss and rate limit.
    pub shaping: Shaping,
    /// Released later than this after its due time, a packet counts late.
    pub late_after: Duration,
    /// Pin the line's thread to this CPU (a benchmark's component kept
    /// apart from the generator's and the server's cores).
    pub cpu: Option<usize>,
}

impl Default for DelayConfig {
    fn default() -> Self {
        DelayConfig {
            clients: Vec::new(),
            server: None,
            queue_len: 65_536,
            fail_open: false,
            shaping: Shaping::default(),
            late_after: Duration::from_millis(1),
            cpu: None,
        }
    }
}

/// Lateness percentiles, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Lateness {
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// What the delay line did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DelayReport {
    /// The NFQUEUE queue number.
    pub queue: u16,
    /// Packets the queue gave to this process.
    pub received: u64,
    /// Of those, held for a client's delay.
    pub held: u64,
    /// Released later than `late_after` past their due time.
    pub late: u64,
    /// Of those received, dropped by the loss setting.
    pub lost: u64,
    /// Received but neither from nor to a client (accepted at once).
    pub not_ours: u64,
    /// Received but not an IP packet this line can read (accepted at once).
    pub unreadable: u64,
    /// Packets the rules sent to the queue (their iptables counters).
    pub rule_packets: Option<u64>,
    /// Dropped by the kernel: the queue at its maximum.
    pub queue_dropped: u64,
    /// Dropped by the kernel: the socket's receive buffer full.
    pub user_dropped: u64,
    /// Sent to the queue by the rules, but neither received nor dropped:
    /// accepted undelayed (`fail_open`).
    pub undelayed: u64,
    /// Verdicts the kernel refused, and receive errors.
    pub errors: u64,
    /// The most packets held at once.
    pub max_held: u64,
    pub lateness: Lateness,
    /// CPU time the line's thread used, in seconds.
    pub cpu_seconds: f64,
    /// Whether every packet was delayed as asked (see the module docs).
    pub valid: bool,
    /// Why not, in words.
    pub problems: Vec<String>,
}

/// A running delay line: rules installed, queue bound.
pub struct DelayLine {
    queue: NfQueue,
    rules: Rules,
    schedule: Schedule,
    late_after: u64,
    epoch: Instant,
    start_stats: QueueStats,
    report: DelayReport,
    lateness: Histogram<u64>,
    /// See [`DelayLine::read_queued`].
    at_once: Vec<(u32, bool)>,
}

/// Why a delay line could not start.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

/// Reads the client address of a held packet and its direction.
fn client_of(payload: &[u8], hook: u8) -> Option<(IpAddr, Direction)> {
    let (src, dst): (IpAddr, IpAddr) = match payload.first()? >> 4 {
        4 => {
            let p = Ipv4Packet::new_checked(payload).ok()?;
            (p.src_addr().into(), p.dst_addr().into())
        }
        6 => {
            let p = Ipv6Packet::new_checked(payload).ok()?;
            (p.src_addr().into(), p.dst_addr().into())
        }
        _ => return None,
    };
    match hook {
        HOOK_OUTPUT => Some((src, Direction::Out)),
        HOOK_INPUT => Some((dst, Direction::In)),
        _ => None,
    }
}

impl DelayLine {
    /// Binds a free queue, then installs the rules (in that order: a rule
    /// without a listener would drop the packets). Needs root.
    pub fn start(cfg: &DelayConfig) -> Result<DelayLine, StartError> {
        if cfg.clients.is_empty() {
            return Err(StartError(
                "a delay line needs at least one client address".into(),
            ));
        }
        let queue = bind_free_queue(cfg.queue_len, cfg.fail_open)?;
        let start_stats = queue.stats().unwrap_or_default();
        let sel = Selection {
            clients: cfg.clients.iter().map(|c| c.0).collect(),
            server: cfg.server,
        };
        let rules = Rules::install(&sel, queue.queue())
            .map_err(|e| StartError(format!("delay line rules: {e}")))?;
        let report = DelayReport {
            queue: queue.queue(),
            ..DelayReport::default()
        };
        Ok(DelayLine {
            queue,
            rules,
            schedule: Schedule::new(&cfg.clients, cfg.shaping),
            late_after: cfg.late_after.as_nanos() as u64,
            epoch: Instant::now(),
            start_stats,
            report,
            lateness: Histogram::new_with_bounds(1, 60_000_000, 3)
                .expect("constant histogram bounds are valid"),
            at_once: Vec::new(),
        })
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Moves packets until `stop` is set (on the calling thread, whose
    /// timer slack it sets to 1 ns).
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        capture::nfqueue::precise_timers();
        while !stop.load(Ordering::Relaxed) {
            self.release_due()?;
            let timeout = match self.schedule.next_due() {
                Some(due) => Duration::from_nanos(due.saturating_sub(self.now())).min(IDLE),
                None => IDLE,
            };
            if !timeout.is_zero() && !self.queue.wait(Some(timeout))? {
                continue;
            }
            self.read_queued()?;
        }
        Ok(())
    }

    /// Accepts every packet due by now.
    fn release_due(&mut self) -> io::Result<()> {
        let now = self.now();
        while let Some((id, due)) = self.schedule.pop_due(now) {
            let late = now - due;
            if late > self.late_after {
                self.report.late += 1;
            }
            self.lateness.saturating_record((late / 1000).max(1));
            self.queue.verdict(id, true)?;
        }
        self.queue.flush()
    }

    /// Reads what waits in the socket (a bounded number of datagrams, so
    /// that due packets are not kept waiting behind a flood).
    fn read_queued(&mut self) -> io::Result<()> {
        for _ in 0..64 {
            let now = self.now();
            // Verdicts to give at once (accept, or drop for loss), in a
            // buffer kept from call to call.
            let mut at_once = std::mem::take(&mut self.at_once);
            at_once.clear();
            let (schedule, report) = (&mut self.schedule, &mut self.report);
            let got = self.queue.recv(|e| match e {
                Event::Packet(p) => {
                    report.received += 1;
                    match client_of(p.payload, p.hook) {
                        None => {
                            report.unreadable += 1;
                            at_once.push((p.id, true));
                        }
                        Some((client, dir)) => match schedule.arrive(p.id, client, dir, p.len, now)
                        {
                            Fate::Held(_) => report.held += 1,
                            Fate::Lost => {
                                report.lost += 1;
                                at_once.push((p.id, false));
                            }
                            Fate::NotOurs => {
                                report.not_ours += 1;
                                at_once.push((p.id, true));
                            }
                        },
                    }
                }
                Event::Answer(code) if code < 0 => report.errors += 1,
                _ => {}
            });
            let given = at_once
                .iter()
                .try_for_each(|&(id, accept)| self.queue.verdict(id, accept));
            self.at_once = at_once;
            given?;
            let n = match got {
                Ok(n) => n,
                // The kernel dropped packets for want of buffer room: they
                // are counted in its user_dropped.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    self.report.errors += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.report.max_held = self.report.max_held.max(self.schedule.held() as u64);
            if n == 0 {
                break;
            }
        }
        self.queue.flush()
    }

    /// Stops new packets from entering the queue, takes in those already
    /// there, lets every held packet go, reads the counters, removes the
    /// rules.
    pub fn finish(mut self) -> DelayReport {
        let mut problems = Vec::new();
        if let Err(e) = self.rules.unhook() {
            problems.push(format!("unhooking the delay line's rules: {e}"));
        }
        // Packets queued before the unhook are in the socket or on their
        // way to it: read until the kernel holds no more than this line.
        let until = Instant::now() + Duration::from_millis(200);
        loop {
            let _ = self.read_queued();
            let held = self.queue.stats().map_or(0, |s| s.held);
            if held <= self.schedule.held() as u64 || Instant::now() > until {
                break;
            }
            let _ = self.queue.wait(Some(Duration::from_millis(1)));
        }
        let held: Vec<u32> = self.schedule.drain().collect();
        for id in held {
            let _ = self.queue.verdict(id, true);
        }
        let _ = self.queue.flush();
        let mut r = std::mem::take(&mut self.report);
        r.problems = problems;
        r.rule_packets = self.rules.queued().ok();
        if let Ok(s) = self.queue.stats() {
            r.queue_dropped = s.queue_dropped - self.start_stats.queue_dropped.min(s.queue_dropped);
            r.user_dropped = s.user_dropped - self.start_stats.user_dropped.min(s.user_dropped);
        }
        if let Some(rp) = r.rule_packets {
            r.undelayed = rp.saturating_sub(r.received + r.queue_dropped + r.user_dropped);
        }
        if let Err(e) = self.rules.remove() {
            r.problems
                .push(format!("removing the delay line's rules: {e}"));
        }
        let h = &self.lateness;
        if !h.is_empty() {
            r.lateness = Lateness {
                p50_us: h.value_at_quantile(0.5),
                p99_us: h.value_at_quantile(0.99),
                p999_us: h.value_at_quantile(0.999),
                max_us: h.max(),
            };
        }
        for (n, what) in [
            (
                r.queue_dropped,
                "dropped by the kernel: the queue was full (raise --queue-len)",
            ),
            (
                r.user_dropped,
                "dropped by the kernel: the delay line fell behind reading",
            ),
            (
                r.undelayed,
                "passed undelayed (the queue was full with fail-open)",
            ),
            (r.errors, "verdict or receive errors"),
        ] {
            if n > 0 {
                r.problems.push(format!("{n} packets {what}"));
            }
        }
        if r.rule_packets.is_none() {
            r.problems
                .push("the rules' packet counters could not be read".into());
        }
        r.valid = r.problems.is_empty();
        r
    }
}

/// Binds the first free queue from a number drawn from the process id.
fn bind_free_queue(max_len: u32, fail_open: bool) -> Result<NfQueue, StartError> {
    let base = 20_000 + (std::process::id() % 20_000) as u16;
    let mut last = None;
    for i in 0..64u16 {
        let cfg = QueueConfig {
            queue: base.wrapping_add(i.wrapping_mul(97)),
            copy_range: 128,
            max_len,
            fail_open,
            recv_buffer: 16 << 20,
        };
        match NfQueue::open(&cfg) {
            Ok(q) => return Ok(q),
            Err(e) if e.kind() == io::ErrorKind::ResourceBusy => last = Some(e),
            Err(e) => {
                return Err(StartError(format!(
                    "NFQUEUE: {e} (the delay line needs root and the kernel's nfnetlink_queue)"
                )))
            }
        }
    }
    Err(StartError(format!(
        "NFQUEUE: no free queue number: {}",
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

/// A delay line on a thread of its own; dropped without [`Running::stop`],
/// it still stops and cleans up.
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(DelayLine, io::Result<()>)>>,
}

impl Running {
    /// Starts a delay line (rules, queue) and its thread.
    pub fn spawn(cfg: &DelayConfig) -> Result<Running, StartError> {
        let mut line = DelayLine::start(cfg)?;
        let cpu = cfg.cpu;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("delay-line".into())
            .spawn(move || {
                // Releases are due to the microsecond: the line's thread
                // outranks the programs whose packets it holds (CFS wakes
                // it ahead of them). Without the privilege, it runs as is.
                let _ = capture::usage::set_current_thread_nice(-20);
                if let Some(c) = cpu {
                    if let Err(e) = capture::usage::pin_current_thread(c) {
                        line.report.problems.push(format!("delay line: {e}"));
                    }
                }
                let r = line.run(&flag);
                line.report.cpu_seconds =
                    capture::usage::thread_cpu_time().map_or(0.0, |d| d.as_secs_f64());
                (line, r)
            })
            .map_err(|e| StartError(format!("delay line thread: {e}")))?;
        Ok(Running {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread, lets the held packets go, removes the rules.
    pub fn stop(mut self) -> DelayReport {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok((line, result))) => {
                let mut r = line.finish();
                if let Err(e) = result {
                    r.problems.push(format!("the delay line stopped: {e}"));
                    r.valid = false;
                }
                r
            }
            _ => DelayReport {
                problems: vec!["the delay line's thread panicked".into()],
                ..DelayReport::default()
            },
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(Ok((line, _))) = self.thread.take().map(JoinHandle::join) {
            line.finish();
        }
    }
}
