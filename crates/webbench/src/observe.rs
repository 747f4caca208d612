//! The server side, seen from its packets only, as the paper's ENMA saw it
//! on a mirror port: every TCP connection to the server from its first SYN
//! to its end, each ended by a normal close (both FINs acknowledged) or a
//! reset; connections in progress over time; arrivals; SYN retransmissions;
//! the handshake round trip per client (the server's SYN-ACK to the
//! client's ACK: ENMA's "(3) − (2)", MAWI WG 2001 Fig. 3.2); and TIME_WAIT,
//! reported apart: a server that closes first holds the connection's
//! socket for 60 s more (Linux's TCP_TIMEWAIT_LEN), which is not work in
//! progress and is not counted as such.
//!
//! [`Observer`] takes packets (pure: no sockets; [`crate::tap`] feeds it
//! from a live ring) and keeps, per interval of time, what it needs to
//! answer for any window afterwards: the time integral of connections in
//! progress (whose quotient by the window is the mean, the `L` of Little's
//! law), their maximum, arrivals, ends by kind, lifetimes by arrival.
//! Memory: the connections open at once, one bin per interval, and at most
//! [`MAX_RTT_SAMPLES`] round trips per client. A connection whose end is
//! never seen is given up on after [`HALF_OPEN_LIMIT`] or [`IDLE_LIMIT`]
//! of silence, and counted as abandoned.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;
use wire::tcp::{Answered, SynAckCopies, TcpFlags};
use wire::LinkType;

/// How long Linux keeps a connection in TIME_WAIT (TCP_TIMEWAIT_LEN).
pub const TIME_WAIT: Duration = Duration::from_secs(60);

/// A connection whose handshake has not completed and that has sent
/// nothing for this long is given up on (abandoned): Linux's client has
/// sent its last SYN by 63 s (tcp_syn_retries 6: 1 + 2 + ... + 32 s), and
/// a client that gave up earlier (a connect timeout) sends nothing at all.
pub const HALF_OPEN_LIMIT: Duration = Duration::from_secs(75);

/// An established connection silent this long is given up on too (its
/// end was not seen: the tap missed it, or the hosts vanished).
pub const IDLE_LIMIT: Duration = Duration::from_secs(600);

/// Connections tracked at once at most: past it, new SYNs are counted in
/// [`Observer::untracked`] and not followed (a SYN flood must not grow
/// memory without bound).
pub const MAX_TRACKED: usize = 1 << 21;

/// Handshake round trips kept per client address.
pub const MAX_RTT_SAMPLES: usize = 1 << 14;

/// Bins an observer keeps at most (a day of 100 ms bins); packets past the
/// last bin are counted in [`Observer::late`] and not in any bin.
pub const MAX_BINS: u64 = 864_000;

/// Which packets are the server's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerAddr {
    /// The server's address; `None`: any address on the port.
    pub ip: Option<IpAddr>,
    pub port: u16,
}

impl ServerAddr {
    fn is(&self, a: SocketAddr) -> bool {
        a.port() == self.port && self.ip.is_none_or(|ip| ip == a.ip())
    }
}

/// One TCP segment as the observer needs it.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub flags: TcpFlags,
    pub seq: u32,
    pub ack: u32,
    /// Bytes of data it carries.
    pub len: u32,
    /// The timestamps option, (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
}

/// How a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// Both FINs sent and acknowledged.
    Close,
    /// The server sent a reset (to the SYN: refused).
    ResetByServer,
    /// The client sent a reset.
    ResetByClient,
    /// Nothing more was seen of it ([`HALF_OPEN_LIMIT`], [`IDLE_LIMIT`]),
    /// or a new connection took its ports before its end was seen.
    Abandoned,
}

/// Counts of one interval (or, summed, of a window).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Bin {
    /// Connection-nanoseconds in progress within the bin.
    in_progress_ns: u128,
    /// The most connections in progress at once within the bin.
    max_in_progress: u32,
    arrivals: u64,
    closes: u64,
    resets_by_server: u64,
    resets_by_client: u64,
    /// Resets answering a SYN (the connection was never made).
    refused: u64,
    abandoned: u64,
    syn_retransmits: u64,
    /// Lifetimes (SYN to end) of connections that arrived in this bin and
    /// ended by a close or a reset, and how many.
    lifetime_ns: u128,
    lifetimes: u64,
}

/// One connection's state while it is open.
#[derive(Clone, Copy, Debug)]
struct Flow {
    syn_ns: u64,
    /// The connection's last packet.
    last_ns: u64,
    isn: u32,
    /// The server's SYN-ACK copies, until the handshake's ACK comes.
    synacks: SynAckCopies,
    established: bool,
    /// Sequence numbers just past each side's FIN, once sent.
    server_fin: Option<u32>,
    client_fin: Option<u32>,
    server_fin_acked: bool,
    client_fin_acked: bool,
    /// The server sent the first FIN (it will hold TIME_WAIT).
    server_closed_first: bool,
}

/// What a window of time saw at the server. The window is widened to whole
/// bins (100 ms by default); `seconds` is its length so widened.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Window {
    pub seconds: f64,
    /// Connections whose SYN came in the window.
    pub arrivals: u64,
    pub arrival_rate: f64,
    /// Time-averaged connections in progress (SYN to close or reset).
    pub mean_in_progress: f64,
    pub max_in_progress: u32,
    /// Time-averaged connections in TIME_WAIT at the server.
    pub mean_time_wait: f64,
    pub closes: u64,
    pub resets_by_server: u64,
    pub resets_by_client: u64,
    /// Of the server's resets, those answering a SYN.
    pub refused: u64,
    /// Connections given up on ([`End::Abandoned`]).
    pub abandoned: u64,
    /// Resets of either side per connection arrived.
    pub reset_rate: f64,
    pub syn_retransmits: u64,
    /// Mean lifetime (first SYN to end) of the connections that arrived in
    /// the window and ended by a close or a reset, in ms.
    pub mean_lifetime_ms: f64,
    /// Little's law at the server: arrival rate × mean lifetime.
    pub littles_law: f64,
}

/// A round trip the server saw, against the one the client was given.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RttCheck {
    /// Handshakes from clients that had a round trip assigned.
    pub handshakes: u64,
    /// |seen − given| over those handshakes, in ms.
    pub error_p50_ms: f64,
    pub error_p99_ms: f64,
    pub error_max_ms: f64,
    /// Per client: (address, given ms, median seen ms, handshakes).
    pub clients: Vec<(IpAddr, f64, f64, u64)>,
    /// Handshakes whose ACK could not be matched to one of several SYN-ACK
    /// copies (no timestamps to tell): no sample (Karn's rule).
    pub ambiguous: u64,
}

/// Follows every connection to one server from the packets it exchanges.
#[derive(Debug)]
pub struct Observer {
    server: ServerAddr,
    /// Time of bin 0, ns since the epoch.
    origin_ns: u64,
    bin_ns: u64,
    bins: Vec<Bin>,
    /// Connection-nanoseconds in TIME_WAIT per bin (apart from `bins`: it
    /// reaches 60 s past the last packet).
    time_wait_ns: Vec<u128>,
    flows: HashMap<(SocketAddr, SocketAddr), Flow>,
    rtts: HashMap<IpAddr, Vec<u32>>,
    /// The latest packet time seen.
    last_ns: u64,
    /// The last time idle connections were looked for.
    swept_ns: u64,
    /// Packets of the server's looked at.
    pub segments: u64,
    /// SYNs not followed for want of room ([`MAX_TRACKED`]).
    pub untracked: u64,
    /// Packets dated before the origin (not counted in any bin).
    pub early: u64,
    /// Packets dated past the last bin ([`MAX_BINS`]).
    pub late: u64,
    /// Handshakes without a round-trip sample (see [`RttCheck::ambiguous`]).
    pub ambiguous_rtts: u64,
}

impl Observer {
    /// Observes `server` in bins of `bin` (1 ms at the least) from
    /// `origin_ns` (ns since the epoch) on.
    pub fn new(server: ServerAddr, origin_ns: u64, bin: Duration) -> Observer {
        Observer {
            server,
            origin_ns,
            bin_ns: (bin.as_nanos() as u64).max(1_000_000),
            bins: Vec::new(),
            time_wait_ns: Vec::new(),
            flows: HashMap::new(),
            rtts: HashMap::new(),
            last_ns: origin_ns,
            swept_ns: origin_ns,
            segments: 0,
            untracked: 0,
            early: 0,
            late: 0,
            ambiguous_rtts: 0,
        }
    }

    /// The bin width.
    pub fn bin(&self) -> Duration {
        Duration::from_nanos(self.bin_ns)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.flows.len()
    }

    /// The bin of `ts_ns`, made (with those before it) if new. A bin is
    /// born with the connections open at the time as its maximum, so a bin
    /// without arrivals still shows what it held.
    fn bin_mut(&mut self, ts_ns: u64) -> Option<&mut Bin> {
        let i = ts_ns.checked_sub(self.origin_ns)? / self.bin_ns;
        if i >= MAX_BINS {
            return None;
        }
        let i = i as usize;
        if i >= self.bins.len() {
            let open = self.flows.len() as u32;
            self.bins.resize(
                i + 1,
                Bin {
                    max_in_progress: open,
                    ..Bin::default()
                },
            );
        }
        Some(&mut self.bins[i])
    }

    /// Adds one connection present over `[from, to)` to the bins' integral
    /// of connections in progress, or of connections in TIME_WAIT.
    fn spread(&mut self, from: u64, to: u64, time_wait: bool) {
        let from = from.max(self.origin_ns);
        let to = to.min(self.origin_ns + MAX_BINS * self.bin_ns);
        let mut t = from;
        while t < to {
            let i = (t - self.origin_ns) / self.bin_ns;
            let upto = (self.origin_ns + (i + 1) * self.bin_ns).min(to);
            let ns = u128::from(upto - t);
            if time_wait {
                let i = i as usize;
                if i >= self.time_wait_ns.len() {
                    self.time_wait_ns.resize(i + 1, 0);
                }
                self.time_wait_ns[i] += ns;
            } else if let Some(b) = self.bin_mut(t) {
                b.in_progress_ns += ns;
            }
            t = upto;
        }
    }

    /// One captured frame of `link` at `ts_ns`.
    pub fn frame(&mut self, link: LinkType, ts_ns: u64, data: &[u8]) {
        let s = wire::slice(link, data);
        let (Some(t), Some(tcp), Some(off)) = (s.five_tuple(), s.tcp(), s.transport_offset())
        else {
            return;
        };
        // The payload as the IP header sizes it (the frame may be cut by
        // the snap length): what the segment's sequence space covers.
        let payload = s
            .network_offset()
            .and_then(|l3| ip_end(data, l3))
            .map_or(0, |end| end.saturating_sub(off + tcp.header_len()));
        self.segment(
            ts_ns,
            Segment {
                src: SocketAddr::new(t.src, t.src_port),
                dst: SocketAddr::new(t.dst, t.dst_port),
                flags: tcp.flags(),
                seq: tcp.seq_number(),
                ack: tcp.ack_number(),
                len: payload.min(u32::MAX as usize) as u32,
                timestamps: tcp.timestamps(),
            },
        );
    }

    /// Gives up on connections silent past their limit, once a second.
    fn sweep(&mut self, now: u64) {
        if now < self.swept_ns + 1_000_000_000 {
            return;
        }
        self.swept_ns = now;
        let (half, idle) = (
            HALF_OPEN_LIMIT.as_nanos() as u64,
            IDLE_LIMIT.as_nanos() as u64,
        );
        let gone: Vec<((SocketAddr, SocketAddr), u64)> = self
            .flows
            .iter()
            .filter(|(_, f)| {
                let limit = if f.established { idle } else { half };
                now.saturating_sub(f.last_ns) > limit
            })
            .map(|(k, f)| (*k, f.last_ns))
            .collect();
        for (key, last) in gone {
            self.finish(key, last, End::Abandoned);
        }
    }

    /// One TCP segment.
    pub fn segment(&mut self, ts_ns: u64, seg: Segment) {
        let Segment {
            src,
            dst,
            flags,
            seq,
            ack,
            len,
            timestamps,
        } = seg;
        let (from_server, client) = if self.server.is(dst) {
            (false, src)
        } else if self.server.is(src) {
            (true, dst)
        } else {
            return;
        };
        let server = if from_server { src } else { dst };
        self.segments += 1;
        if ts_ns < self.origin_ns {
            self.early += 1;
            return;
        }
        if ts_ns >= self.origin_ns + MAX_BINS * self.bin_ns {
            self.late += 1;
            return;
        }
        self.last_ns = self.last_ns.max(ts_ns);
        // Bins up to this packet first, born with the connections open
        // before any is given up on below.
        let _ = self.bin_mut(ts_ns);
        self.sweep(ts_ns);
        let has = |f: TcpFlags| flags.0 & f.0 != 0;
        let key = (server, client);
        if has(TcpFlags::SYN) && !has(TcpFlags::ACK) && !from_server {
            if let Some(f) = self.flows.get_mut(&key) {
                if f.isn == seq && !f.established {
                    f.last_ns = f.last_ns.max(ts_ns);
                    if let Some(b) = self.bin_mut(ts_ns) {
                        b.syn_retransmits += 1;
                    }
                    return;
                }
                // A new connection on the same ports: the old one is
                // gone without its end seen.
                let last = f.last_ns;
                self.finish(key, last, End::Abandoned);
            }
            if self.flows.len() >= MAX_TRACKED {
                self.untracked += 1;
                return;
            }
            self.flows.insert(
                key,
                Flow {
                    syn_ns: ts_ns,
                    last_ns: ts_ns,
                    isn: seq,
                    synacks: SynAckCopies::default(),
                    established: false,
                    server_fin: None,
                    client_fin: None,
                    server_fin_acked: false,
                    client_fin_acked: false,
                    server_closed_first: false,
                },
            );
            let open = self.flows.len() as u32;
            if let Some(b) = self.bin_mut(ts_ns) {
                b.arrivals += 1;
                b.max_in_progress = b.max_in_progress.max(open);
            }
            return;
        }
        let Some(f) = self.flows.get_mut(&key) else {
            return;
        };
        // Packets from two CPUs may come a little out of order: time never
        // runs backwards within a connection.
        let ts_ns = ts_ns.max(f.last_ns);
        f.last_ns = ts_ns;
        if has(TcpFlags::RST) {
            let refused = from_server && !f.established;
            let end = if from_server {
                End::ResetByServer
            } else {
                End::ResetByClient
            };
            if let Some(b) = self.bin_mut(ts_ns) {
                match end {
                    End::ResetByServer => b.resets_by_server += 1,
                    _ => b.resets_by_client += 1,
                }
                if refused {
                    b.refused += 1;
                }
            }
            self.finish(key, ts_ns, end);
            return;
        }
        if from_server && has(TcpFlags::SYN) && has(TcpFlags::ACK) {
            f.synacks.sent(ts_ns, seq, timestamps);
            return;
        }
        let answered = if !from_server && has(TcpFlags::ACK) && !f.established {
            f.synacks.answered(ack, timestamps)
        } else {
            Answered::No
        };
        if answered != Answered::No {
            f.established = true;
            match answered {
                Answered::Copy(t0) => {
                    let rtt = ts_ns.saturating_sub(t0);
                    let v = self.rtts.entry(client.ip()).or_default();
                    if v.len() < MAX_RTT_SAMPLES {
                        v.push((rtt / 1000).min(u64::from(u32::MAX)) as u32);
                    }
                }
                _ => self.ambiguous_rtts += 1,
            }
        }
        let Some(f) = self.flows.get_mut(&key) else {
            return;
        };
        if has(TcpFlags::FIN) {
            let past = seq.wrapping_add(len).wrapping_add(1);
            if from_server {
                if f.server_fin.is_none() && f.client_fin.is_none() {
                    f.server_closed_first = true;
                }
                f.server_fin = Some(past);
            } else {
                f.client_fin = Some(past);
            }
        }
        if has(TcpFlags::ACK) {
            // An ACK at or beyond the other side's FIN acknowledges it
            // (sequence numbers compared modulo 2^32).
            let covers = |fin: Option<u32>| fin.is_some_and(|p| (ack.wrapping_sub(p) as i32) >= 0);
            if from_server {
                f.client_fin_acked |= covers(f.client_fin);
            } else {
                f.server_fin_acked |= covers(f.server_fin);
            }
        }
        if f.server_fin_acked && f.client_fin_acked {
            if let Some(b) = self.bin_mut(ts_ns) {
                b.closes += 1;
            }
            self.finish(key, ts_ns, End::Close);
        }
    }

    /// Ends connection `key` at `ts_ns`.
    fn finish(&mut self, key: (SocketAddr, SocketAddr), ts_ns: u64, how: End) {
        let Some(f) = self.flows.remove(&key) else {
            return;
        };
        let end = ts_ns.max(f.syn_ns);
        self.spread(f.syn_ns, end, false);
        if let Some(b) = self.bin_mut(f.syn_ns) {
            if how == End::Abandoned {
                b.abandoned += 1;
            } else {
                b.lifetime_ns += u128::from(end - f.syn_ns);
                b.lifetimes += 1;
            }
        }
        if how == End::Close && f.server_closed_first {
            self.spread(end, end + TIME_WAIT.as_nanos() as u64, true);
        }
    }

    /// `[from_ns, to_ns)` widened to whole bins: (first bin, bins).
    fn bins_of(&self, from_ns: u64, to_ns: u64) -> (u64, u64) {
        let from = from_ns.max(self.origin_ns) - self.origin_ns;
        let to = to_ns.max(from_ns).max(self.origin_ns) - self.origin_ns;
        let first = from / self.bin_ns;
        let end = to.div_ceil(self.bin_ns).max(first + 1);
        (first, end - first)
    }

    /// The bins' sums over `[from_ns, to_ns)` widened to whole bins, with
    /// the connections still open counted up to the window's end or the
    /// last packet, whichever is first.
    pub fn window(&self, from_ns: u64, to_ns: u64) -> Window {
        let (first, n) = self.bins_of(from_ns, to_ns);
        let from = self.origin_ns + first * self.bin_ns;
        let to = from + n * self.bin_ns;
        let mut sum = Bin::default();
        let mut time_wait: u128 = 0;
        for i in first..first + n {
            let i = i as usize;
            if let Some(b) = self.bins.get(i) {
                sum.in_progress_ns += b.in_progress_ns;
                sum.max_in_progress = sum.max_in_progress.max(b.max_in_progress);
                sum.arrivals += b.arrivals;
                sum.closes += b.closes;
                sum.resets_by_server += b.resets_by_server;
                sum.resets_by_client += b.resets_by_client;
                sum.refused += b.refused;
                sum.abandoned += b.abandoned;
                sum.syn_retransmits += b.syn_retransmits;
                sum.lifetime_ns += b.lifetime_ns;
                sum.lifetimes += b.lifetimes;
            }
            time_wait += self.time_wait_ns.get(i).copied().unwrap_or(0);
        }
        // Connections still open: in progress from their SYN (or the
        // window's start) to the window's end or the last packet.
        // They are all open together just before `until`, whether or not
        // a bin was made there (bins are made by events, and a quiet
        // stretch has none): the maximum is at least their number.
        let until = to.min(self.last_ns.max(from));
        let mut open_here = 0u32;
        for f in self.flows.values() {
            let s = f.syn_ns.max(from);
            if s < until {
                sum.in_progress_ns += u128::from(until - s);
                open_here += 1;
            }
        }
        sum.max_in_progress = sum.max_in_progress.max(open_here);
        let span = (to - from) as f64 / 1e9;
        let per = |x: u128| x as f64 / 1e9 / span;
        let mean_in_progress = per(sum.in_progress_ns);
        let arrival_rate = sum.arrivals as f64 / span;
        let mean_lifetime = if sum.lifetimes > 0 {
            sum.lifetime_ns as f64 / sum.lifetimes as f64 / 1e9
        } else {
            0.0
        };
        let resets = sum.resets_by_server + sum.resets_by_client;
        Window {
            seconds: span,
            arrivals: sum.arrivals,
            arrival_rate,
            mean_in_progress,
            // The bins' maxima are counts taken at events, a lower bound;
            // with time running backwards between connections (two CPUs'
            // packets) a bin made before a connection's packets came in
            // misses it. The mean is a lower bound too: the maximum is
            // the larger (found by the observe fuzz target).
            max_in_progress: sum
                .max_in_progress
                .max((mean_in_progress - 1e-9).ceil().max(0.0) as u32),
            mean_time_wait: per(time_wait),
            closes: sum.closes,
            resets_by_server: sum.resets_by_server,
            resets_by_client: sum.resets_by_client,
            refused: sum.refused,
            abandoned: sum.abandoned,
            reset_rate: if sum.arrivals > 0 {
                resets as f64 / sum.arrivals as f64
            } else {
                0.0
            },
            syn_retransmits: sum.syn_retransmits,
            mean_lifetime_ms: mean_lifetime * 1e3,
            littles_law: arrival_rate * mean_lifetime,
        }
    }

    /// The steady part of `[from_ns, to_ns)`: the span less its first
    /// tenth, where connections build up.
    pub fn steady(&self, from_ns: u64, to_ns: u64) -> Window {
        let to = to_ns.max(from_ns);
        self.window(from_ns + (to - from_ns) / 10, to)
    }

    /// The time series: one [`Window`] per `step` (a whole number of bins)
    /// from the origin to the last packet, with its start in seconds.
    pub fn series(&self, step: Duration) -> Vec<(f64, Window)> {
        let bins = ((step.as_nanos() as u64 + self.bin_ns / 2) / self.bin_ns).max(1);
        let step = bins * self.bin_ns;
        let mut out = Vec::new();
        let mut t = self.origin_ns;
        while t < self.last_ns && out.len() < MAX_BINS as usize {
            out.push(((t - self.origin_ns) as f64 / 1e9, self.window(t, t + step)));
            t += step;
        }
        out
    }

    /// The last packet's time, ns since the epoch.
    pub fn last_ns(&self) -> u64 {
        self.last_ns
    }

    /// The origin, ns since the epoch.
    pub fn origin_ns(&self) -> u64 {
        self.origin_ns
    }

    /// The handshake round trips seen per client, against `given` (each
    /// client address with the round trip it was given).
    pub fn rtt_check(&self, given: &[(IpAddr, Duration)]) -> RttCheck {
        let mut errors: Vec<u64> = Vec::new();
        let mut clients = Vec::new();
        for &(ip, rtt) in given {
            let Some(seen) = self.rtts.get(&ip) else {
                continue;
            };
            let given_us = rtt.as_micros() as u64;
            errors.extend(seen.iter().map(|&s| u64::from(s).abs_diff(given_us)));
            let mut v = seen.clone();
            v.sort_unstable();
            clients.push((
                ip,
                given_us as f64 / 1e3,
                f64::from(v[v.len() / 2]) / 1e3,
                v.len() as u64,
            ));
        }
        errors.sort_unstable();
        let q = |p: f64| {
            if errors.is_empty() {
                0.0
            } else {
                let i = ((errors.len() as f64 * p).ceil() as usize).clamp(1, errors.len()) - 1;
                errors[i] as f64 / 1e3
            }
        };
        RttCheck {
            ambiguous: self.ambiguous_rtts,
            handshakes: errors.len() as u64,
            error_p50_ms: q(0.5),
            error_p99_ms: q(0.99),
            error_max_ms: errors.last().map_or(0.0, |&e| e as f64 / 1e3),
            clients,
        }
    }

    /// Every handshake round trip seen, in µs (for a CDF of what the
    /// server saw).
    pub fn all_rtts_us(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.rtts.values().flatten().copied().collect();
        v.sort_unstable();
        v
    }
}

/// Where the IP packet at `l3` ends, by its own length field (IPv4 total
/// length, IPv6 payload length), whatever of it was captured.
fn ip_end(data: &[u8], l3: usize) -> Option<usize> {
    let h = data.get(l3..l3 + 6)?;
    match h[0] >> 4 {
        4 => Some(l3 + usize::from(u16::from_be_bytes([h[2], h[3]]))),
        6 => Some(l3 + 40 + usize::from(u16::from_be_bytes([h[4], h[5]]))),
        _ => None,
    }
}

#[doc(hidden)]
/// The `observe` fuzz target's check, which the test suite replays: `data`
/// is a run of frames, each a 2-byte length, a signed 2-byte step of time
/// in units of 100 µs (packets may come out of order) and the Ethernet
/// frame's bytes, fed to an observer of port 80. Whatever the frames, no
/// panic, and the counts stay consistent: every connection that arrived
/// is still open or ended exactly once, means are finite, not negative,
/// and never above the maximum.
pub fn fuzz_check(data: &[u8]) {
    let origin = 1_000_000_000_000;
    let mut o = Observer::new(
        ServerAddr { ip: None, port: 80 },
        origin,
        Duration::from_millis(100),
    );
    let mut t = origin + 10_000_000_000;
    let mut rest = data;
    while rest.len() >= 4 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let step = i64::from(i16::from_be_bytes([rest[2], rest[3]])) * 100_000;
        t = t.saturating_add_signed(step);
        rest = &rest[4..];
        let frame = &rest[..len.min(rest.len())];
        o.frame(LinkType::Ethernet, t, frame);
        rest = &rest[frame.len()..];
    }
    let end = o.last_ns() + 1;
    let w = o.window(origin, end);
    let ended = w.closes + w.resets_by_server + w.resets_by_client + w.abandoned;
    assert_eq!(ended + o.open() as u64, w.arrivals, "{w:?}");
    assert!(w.refused <= w.resets_by_server);
    for x in [
        w.mean_in_progress,
        w.mean_time_wait,
        w.mean_lifetime_ms,
        w.arrival_rate,
    ] {
        assert!(x.is_finite() && x >= 0.0, "{w:?}");
    }
    assert!(
        w.mean_in_progress <= f64::from(w.max_in_progress) + 1e-9,
        "{w:?}"
    );
    for (_, x) in o.series(Duration::from_millis(300)) {
        assert!(
            x.mean_in_progress <= f64::from(x.max_in_progress) + 1e-9,
            "{x:?}"
        );
    }
    let r = o.rtt_check(&[(IpAddr::from([127, 0, 0, 2]), Duration::from_millis(10))]);
    assert!(r.error_p50_ms <= r.error_p99_ms && r.error_p99_ms <= r.error_max_ms);
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYN: TcpFlags = TcpFlags::SYN;
    const SYNACK: TcpFlags = TcpFlags(0x012);
    const ACK: TcpFlags = TcpFlags(0x010);
    const FINACK: TcpFlags = TcpFlags(0x011);
    const RST: TcpFlags = TcpFlags(0x004);
    const MS: u64 = 1_000_000;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// `ms` after the observer's origin, in ns.
    fn at(ms: u64) -> u64 {
        1_000 * MS + ms * MS
    }

    /// A segment without timestamps.
    #[allow(clippy::too_many_arguments)]
    fn seg(
        o: &mut Observer,
        t: u64,
        src: SocketAddr,
        dst: SocketAddr,
        flags: TcpFlags,
        seq: u32,
        ack: u32,
        len: u32,
    ) {
        let s = Segment {
            src,
            dst,
            flags,
            seq,
            ack,
            len,
            timestamps: None,
        };
        o.segment(t, s);
    }

    /// A segment without data, with the timestamps option (TSval, TSecr).
    #[allow(clippy::too_many_arguments)]
    fn seg_ts(
        o: &mut Observer,
        t: u64,
        src: SocketAddr,
        dst: SocketAddr,
        flags: TcpFlags,
        seq: u32,
        ack: u32,
        ts: (u32, u32),
    ) {
        let s = Segment {
            src,
            dst,
            flags,
            seq,
            ack,
            len: 0,
            timestamps: Some(ts),
        };
        o.segment(t, s);
    }

    fn server() -> SocketAddr {
        sa("127.0.0.1:80")
    }

    fn observer() -> Observer {
        Observer::new(
            ServerAddr { ip: None, port: 80 },
            1_000 * MS,
            Duration::from_millis(100),
        )
    }

    /// An HTTP/1.0 exchange as the server sees it with round trip `rtt`
    /// (ms) from `t` (ms after the origin): SYN, SYN-ACK, ACK + request,
    /// response + FIN from the server, the client's FIN, the last ACK.
    /// Ends at t + 2 rtt.
    fn exchange(o: &mut Observer, c: SocketAddr, t: u64, rtt: u64) {
        let s = server();
        seg(o, at(t), c, s, SYN, 100, 0, 0);
        seg(o, at(t), s, c, SYNACK, 5000, 101, 0);
        seg(o, at(t + rtt), c, s, ACK, 101, 5001, 0);
        seg(o, at(t + rtt), c, s, ACK, 101, 5001, 80);
        seg(o, at(t + rtt), s, c, FINACK, 5001, 181, 1000);
        seg(o, at(t + 2 * rtt), c, s, FINACK, 181, 6002, 0);
        seg(o, at(t + 2 * rtt), s, c, ACK, 6002, 182, 0);
    }

    #[test]
    fn a_connection_is_in_progress_from_syn_to_the_last_ack_and_then_in_time_wait() {
        let mut o = observer();
        let c = sa("127.0.0.2:4000");
        exchange(&mut o, c, 0, 50);
        assert_eq!(o.open(), 0);
        let w = o.window(1_000 * MS, 1_200 * MS);
        assert_eq!((w.arrivals, w.closes), (1, 1));
        // 100 ms in progress over a 200 ms window.
        assert!((w.mean_in_progress - 0.5).abs() < 1e-9, "{w:?}");
        assert_eq!(w.max_in_progress, 1);
        assert!((w.mean_lifetime_ms - 100.0).abs() < 1e-9);
        // The server closed first: in TIME_WAIT from 100 ms on.
        assert!((w.mean_time_wait - 0.5).abs() < 1e-9, "{w:?}");
        let rtt = o.rtt_check(&[(c.ip(), Duration::from_millis(50))]);
        assert_eq!(rtt.handshakes, 1);
        assert_eq!(rtt.error_max_ms, 0.0);
    }

    #[test]
    fn littles_law_holds_for_a_steady_stream() {
        let mut o = observer();
        // 100 connections a second, each 2 x 24 ms long, from 10 clients.
        for i in 0..1000u64 {
            let c = SocketAddr::new(
                IpAddr::from([127, 0, 0, 2 + (i % 10) as u8]),
                1000 + i as u16,
            );
            exchange(&mut o, c, i * 10, 24);
        }
        let w = o.window(2_000 * MS, 10_000 * MS);
        assert!((w.mean_in_progress - 4.8).abs() < 0.01, "{w:?}");
        assert!((w.littles_law - w.mean_in_progress).abs() < 0.05, "{w:?}");
        assert!((w.arrival_rate - 100.0).abs() < 1e-6);
        assert_eq!(w.resets_by_server + w.resets_by_client, 0);
        // The series covers the run, each step with its share.
        let s = o.series(Duration::from_secs(1));
        assert_eq!(s.len(), 11);
        assert!((s[3].1.mean_in_progress - 4.8).abs() < 0.01);
    }

    #[test]
    fn resets_refusals_and_syn_retransmissions_are_counted_by_kind() {
        let mut o = observer();
        let s = server();
        // Refused: RST to the SYN.
        let c1 = sa("127.0.0.2:1");
        seg(&mut o, at(0), c1, s, SYN, 7, 0, 0);
        seg(&mut o, at(0), s, c1, TcpFlags(0x014), 0, 8, 0);
        // A SYN sent again after 1 s (the accept queue was full), then made,
        // then reset by the client.
        let c2 = sa("127.0.0.3:2");
        seg(&mut o, at(0), c2, s, SYN, 9, 0, 0);
        seg(&mut o, at(1000), c2, s, SYN, 9, 0, 0);
        seg(&mut o, at(1000), s, c2, SYNACK, 50, 10, 0);
        seg(&mut o, at(1001), c2, s, ACK, 10, 51, 0);
        seg(&mut o, at(1500), c2, s, RST, 10, 0, 0);
        // Packets of other servers are not looked at.
        seg(
            &mut o,
            at(5),
            sa("127.0.0.4:5"),
            sa("127.0.0.1:81"),
            SYN,
            1,
            0,
            0,
        );
        let w = o.window(at(0), at(2000));
        assert_eq!(w.arrivals, 2);
        assert_eq!(
            (w.resets_by_server, w.refused, w.resets_by_client),
            (1, 1, 1)
        );
        assert_eq!(w.syn_retransmits, 1);
        assert!((w.reset_rate - 1.0).abs() < 1e-9);
        assert!((w.mean_lifetime_ms - 750.0).abs() < 1e-9, "{w:?}");
        assert_eq!(w.mean_time_wait, 0.0);
        let rtt = o.rtt_check(&[(c2.ip(), Duration::from_millis(1))]);
        assert_eq!((rtt.handshakes, rtt.error_max_ms), (1, 0.0));
    }

    #[test]
    fn a_client_that_closes_first_ends_at_its_last_ack_and_leaves_no_time_wait_at_the_server() {
        let mut o = observer();
        let (s, c) = (server(), sa("127.0.0.2:9"));
        seg(&mut o, at(0), c, s, SYN, 0, 0, 0);
        seg(&mut o, at(0), s, c, SYNACK, 0, 1, 0);
        seg(&mut o, at(10), c, s, ACK, 1, 1, 0);
        seg(&mut o, at(20), c, s, FINACK, 1, 1, 0);
        seg(&mut o, at(20), s, c, ACK, 1, 2, 0);
        assert_eq!(o.open(), 1);
        seg(&mut o, at(30), s, c, FINACK, 1, 2, 0);
        assert_eq!(o.open(), 1);
        seg(&mut o, at(40), c, s, ACK, 2, 2, 0);
        assert_eq!(o.open(), 0);
        let w = o.window(at(0), at(100));
        assert_eq!(w.closes, 1);
        assert!((w.mean_lifetime_ms - 40.0).abs() < 1e-9);
        assert_eq!(w.mean_time_wait, 0.0);
    }

    #[test]
    fn connections_still_open_count_up_to_the_last_packet() {
        let mut o = observer();
        let (s, c) = (server(), sa("127.0.0.2:9"));
        seg(&mut o, at(0), c, s, SYN, 0, 0, 0);
        seg(&mut o, at(400), s, c, SYNACK, 0, 1, 0);
        let w = o.window(at(0), at(800));
        // Open from 0 to the last packet at 400 ms: half the window.
        assert!((w.mean_in_progress - 0.5).abs() < 1e-9, "{w:?}");
        assert_eq!((w.closes, w.mean_lifetime_ms), (0, 0.0));
        // Before the origin: not counted.
        seg(&mut o, 5, c, s, SYN, 3, 0, 0);
        assert_eq!(o.early, 1);
    }

    #[test]
    fn a_retransmitted_synack_is_matched_by_timestamps_or_gives_no_sample() {
        let mut o = observer();
        let (s, c) = (server(), sa("127.0.0.2:7"));
        // A 2.1 s round trip: the server sends its SYN-ACK again at 1 s;
        // the ACK that comes at 2.1 s echoes the first copy's TSval.
        seg_ts(&mut o, at(0), c, s, SYN, 1, 0, (500, 0));
        seg_ts(&mut o, at(0), s, c, SYNACK, 9, 2, (1000, 500));
        seg_ts(&mut o, at(1000), s, c, SYNACK, 9, 2, (2000, 500));
        seg_ts(&mut o, at(2100), c, s, ACK, 2, 10, (502, 1000));
        let r = o.rtt_check(&[(c.ip(), Duration::from_millis(2100))]);
        assert_eq!((r.handshakes, r.error_max_ms, r.ambiguous), (1, 0.0, 0));
        // Without timestamps the ACK could answer either copy: no sample.
        let c2 = sa("127.0.0.3:7");
        seg(&mut o, at(0), c2, s, SYN, 1, 0, 0);
        seg(&mut o, at(0), s, c2, SYNACK, 9, 2, 0);
        seg(&mut o, at(1000), s, c2, SYNACK, 9, 2, 0);
        seg(&mut o, at(2100), c2, s, ACK, 2, 10, 0);
        let r = o.rtt_check(&[(c2.ip(), Duration::from_millis(2100))]);
        assert_eq!((r.handshakes, r.ambiguous), (0, 1));
    }

    #[test]
    fn a_client_that_gives_up_is_abandoned_and_bins_without_arrivals_keep_their_maximum() {
        let mut o = observer();
        let (s, c) = (server(), sa("127.0.0.2:7"));
        // A SYN and its retransmission at 1 s, then nothing from it;
        // another client's SYN between.
        let c2 = sa("127.0.0.3:8");
        seg(&mut o, at(0), c, s, SYN, 1, 0, 0);
        seg(&mut o, at(500), c2, s, SYN, 5, 0, 0);
        seg(&mut o, at(1000), c, s, SYN, 1, 0, 0);
        // A bin with no arrival still shows the two connections it held.
        let w = o.window(at(700), at(800));
        assert_eq!((w.arrivals, w.max_in_progress), (0, 2), "{w:?}");
        assert!((w.mean_in_progress - 2.0).abs() < 1e-9, "{w:?}");
        seg(&mut o, at(60_000), c2, s, SYN, 5, 0, 0);
        seg(&mut o, at(80_000), c2, s, SYN, 5, 0, 0);
        // Past HALF_OPEN_LIMIT of silence the first is given up on, in
        // progress up to its last packet; the second lives on.
        assert_eq!(o.open(), 1);
        let w = o.window(at(0), at(80_000));
        assert_eq!(
            (w.arrivals, w.abandoned, w.syn_retransmits),
            (2, 1, 2),
            "{w:?}"
        );
        assert_eq!(w.closes + w.resets_by_client + w.resets_by_server, 0);
        // Windows are whole bins: one starting mid-bin covers all of it.
        assert_eq!(o.window(at(50), at(60)).seconds, 0.1);
    }
}
