//! The server side, live: a TPACKET_V3 ring on the interface the server's
//! packets cross (its namespace's `lo`, a veth), read on a thread of its
//! own into an [`Observer`], as ENMA read a mirror port. Only headers are
//! kept (a 128-byte snap length cut in the kernel). On loopback behind a
//! delay line the tap sits where the server is: packets to the server are
//! seen after their delay, packets from it before theirs.
//!
//! A tap that misses packets would under-count connections: the ring's own
//! drop counter is reported, and a run whose tap dropped anything says so.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use capture::{KernelStats, RingConfig, TpacketRing};

use crate::observe::{Observer, ServerAddr};

/// Bytes of each packet kept: Ethernet, IPv6 and a TCP header with all its
/// options fit.
pub const SNAPLEN: u32 = 128;

/// The observer's bin: series and windows are whole numbers of it.
pub const BIN: Duration = Duration::from_millis(100);

/// How long a stopping tap goes on reading what the kernel holds: its
/// blocks are handed over after 10 ms at the latest.
const DRAIN: Duration = Duration::from_millis(60);

/// What a tap saw.
pub struct Observed {
    pub observer: Observer,
    /// The ring's kernel counters: packets, and those it dropped.
    pub kernel: KernelStats,
    /// The tap stopped on an error.
    pub error: Option<String>,
}

impl Observed {
    /// What makes the server's figures incomplete, in words.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.kernel.drops > 0 {
            p.push(format!(
                "the tap lost {} of {} packets: the server's counts are incomplete",
                self.kernel.drops, self.kernel.packets
            ));
        }
        if self.observer.untracked > 0 {
            p.push(format!(
                "{} connections were not followed (more than {} open at once)",
                self.observer.untracked,
                crate::observe::MAX_TRACKED
            ));
        }
        if let Some(e) = &self.error {
            p.push(format!("the tap stopped: {e}"));
        }
        p
    }
}

/// A running tap; dropped without [`Tap::stop`], its thread still ends.
pub struct Tap {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Observed>>,
}

impl Tap {
    /// Opens the ring on `interface` (in the calling thread's network
    /// namespace; needs CAP_NET_RAW) and starts reading it into an
    /// observer of `server` with bins of `bin` from `origin_ns` on. The
    /// ring is bound when this returns: no packet after it is missed.
    pub fn start(
        interface: &str,
        server: ServerAddr,
        origin_ns: u64,
        bin: Duration,
    ) -> io::Result<Tap> {
        let mut ring = TpacketRing::open(&RingConfig {
            interface: interface.to_string(),
            snaplen: SNAPLEN,
            ring_bytes: 32 << 20,
            block_size: 256 << 10,
            block_timeout_ms: 10,
            ..RingConfig::default()
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("webbench-tap".into())
            .spawn(move || {
                let mut observer = Observer::new(server, origin_ns, bin);
                let link = ring.link_type();
                let mut error = None;
                // After the stop flag, read what the kernel already holds:
                // the last partly filled block comes after its 10 ms
                // timeout. On a busy interface blocks never stop coming, so
                // the reading ends at a deadline, not when they do.
                let mut deadline: Option<Instant> = None;
                loop {
                    if deadline.is_none() && flag.load(Ordering::Relaxed) {
                        deadline = Some(Instant::now() + DRAIN);
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break;
                    }
                    match ring.acquire_block(Duration::from_millis(20)) {
                        Ok(Some(block)) => {
                            for p in block.packets() {
                                observer.frame(link, p.ts_ns, p.data);
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                }
                let kernel = ring.kernel_stats().unwrap_or_default();
                Observed {
                    observer,
                    kernel,
                    error,
                }
            })?;
        Ok(Tap {
            stop,
            thread: Some(thread),
        })
    }

    /// [`Tap::start`] for the server at `server` (an unspecified address:
    /// any address on its port) in bins of [`BIN`], its errors naming the
    /// interface.
    pub fn watch(interface: &str, server: SocketAddr, origin_ns: u64) -> io::Result<Tap> {
        let addr = ServerAddr {
            ip: (!server.ip().is_unspecified()).then_some(server.ip()),
            port: server.port(),
        };
        Tap::start(interface, addr, origin_ns, BIN)
            .map_err(|e| io::Error::new(e.kind(), format!("observing on {interface}: {e}")))
    }

    /// Stops reading (after what the kernel still holds) and gives what
    /// was seen.
    pub fn stop(mut self) -> io::Result<Observed> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(JoinHandle::join)
            .transpose()
            .map_err(|_| io::Error::other("the tap's thread panicked"))?
            .ok_or_else(|| io::Error::other("the tap was stopped twice"))
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
