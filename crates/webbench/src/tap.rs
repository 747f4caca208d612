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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use capture::{KernelStats, RingConfig, TpacketRing};

use crate::observe::{Observer, ServerAddr};

/// Bytes of each packet kept: Ethernet, IPv6 and a TCP header with all its
/// options fit.
pub const SNAPLEN: u32 = 128;

/// What a tap saw.
pub struct Observed {
    pub observer: Observer,
    /// The ring's kernel counters: packets, and those it dropped.
    pub kernel: KernelStats,
    /// The tap stopped on an error.
    pub error: Option<String>,
}

/// A running tap.
pub struct Tap {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Observed>,
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
            fanout_group: None,
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("webbench-tap".into())
            .spawn(move || {
                let mut observer = Observer::new(server, origin_ns, bin);
                let link = ring.link_type();
                let mut error = None;
                // After the stop flag, read until the kernel hands over no
                // more: the last partly filled block comes after its
                // 10 ms timeout.
                let mut idle_after_stop = 0;
                loop {
                    let stopping = flag.load(Ordering::Relaxed);
                    match ring.acquire_block(Duration::from_millis(20)) {
                        Ok(Some(block)) => {
                            for p in block.packets() {
                                observer.frame(link, p.ts_ns, p.data);
                            }
                        }
                        Ok(None) if stopping => {
                            idle_after_stop += 1;
                            if idle_after_stop >= 2 {
                                break;
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
        Ok(Tap { stop, thread })
    }

    /// Stops reading (after what the kernel still holds) and gives what
    /// was seen.
    pub fn stop(self) -> io::Result<Observed> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| io::Error::other("the tap's thread panicked"))
    }
}
