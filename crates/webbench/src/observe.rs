//! The server side, seen from its packets only, as the paper's ENMA saw it
//! on a mirror port: every TCP connection to the server from its first SYN
//! to its end, each ended by a normal close (both FINs acknowledged) or a
//! reset; connections in progress over time; arrivals; SYN retransmissions;
//! the handshake round trip per client (the server's SYN-ACK to the
//! client's ACK: ENMA's "(3) − (2)", paper 004 Fig. 3.2); and TIME_WAIT,
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
//! [`MAX_RTT_SAMPLES`] round trips per client.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;
use wire::tcp::{TcpFlags, TcpPacket};
use wire::{IpProtocol, LinkType};

/// How long Linux keeps a connection in TIME_WAIT (TCP_TIMEWAIT_LEN).
pub const TIME_WAIT: Duration = Duration::from_secs(60);

/// Connections tracked at once at most: past it, new SYNs are counted in
/// [`Observer::untracked`] and not followed (a SYN flood must not grow
/// memory without bound).
pub const MAX_TRACKED: usize = 1 << 21;

/// Handshake round trips kept per client address.
pub const MAX_RTT_SAMPLES: usize = 1 << 14;

/// Bins a run may have at most (a day of 100 ms bins): past it the window
/// is refused at construction.
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
}

/// Counts of one interval (or, summed, of a window).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Bin {
    /// Connection-nanoseconds in progress within the bin.
    in_progress_ns: u128,
    /// Connection-nanoseconds in TIME_WAIT at the server within the bin.
    time_wait_ns: u128,
    max_in_progress: u32,
    arrivals: u64,
    closes: u64,
    resets_by_server: u64,
    resets_by_client: u64,
    /// Resets answering a SYN (the connection was never made).
    refused: u64,
    syn_retransmits: u64,
    /// Lifetimes (SYN to end) of connections that arrived in this bin and
    /// ended, and how many.
    lifetime_ns: u128,
    lifetimes: u64,
}

/// One connection's state while it is open.
#[derive(Clone, Copy, Debug)]
struct Flow {
    syn_ns: u64,
    isn: u32,
    /// The server's SYN-ACK (time, sequence number), until the handshake's
    /// ACK comes.
    synack: Option<(u64, u32)>,
    established: bool,
    /// Sequence numbers just past each side's FIN, once sent.
    server_fin: Option<u32>,
    client_fin: Option<u32>,
    server_fin_acked: bool,
    client_fin_acked: bool,
    /// The server sent the first FIN (it will hold TIME_WAIT).
    server_closed_first: bool,
}

/// What a window of time saw at the server.
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
    /// Resets of either side per connection arrived.
    pub reset_rate: f64,
    pub syn_retransmits: u64,
    /// Mean lifetime (first SYN to end) of the connections that arrived in
    /// the window and ended, in ms.
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
}

/// Follows every connection to one server from the packets it exchanges.
#[derive(Debug)]
pub struct Observer {
    server: ServerAddr,
    /// Time of bin 0, ns since the epoch.
    origin_ns: u64,
    bin_ns: u64,
    bins: Vec<Bin>,
    flows: HashMap<(SocketAddr, SocketAddr), Flow>,
    /// Connections ended in TIME_WAIT at the server: when each began it.
    time_wait_since: Vec<u64>,
    rtts: HashMap<IpAddr, Vec<u32>>,
    /// The latest packet time seen.
    last_ns: u64,
    /// Packets of the server's looked at.
    pub segments: u64,
    /// SYNs not followed for want of room ([`MAX_TRACKED`]).
    pub untracked: u64,
    /// Packets dated before the origin (not counted in any bin).
    pub early: u64,
}

impl Observer {
    /// Observes `server` in bins of `bin` from `origin_ns` (ns since the
    /// epoch) on.
    pub fn new(server: ServerAddr, origin_ns: u64, bin: Duration) -> Observer {
        Observer {
            server,
            origin_ns,
            bin_ns: (bin.as_nanos() as u64).max(1_000_000),
            bins: Vec::new(),
            flows: HashMap::new(),
            time_wait_since: Vec::new(),
            rtts: HashMap::new(),
            last_ns: origin_ns,
            segments: 0,
            untracked: 0,
            early: 0,
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

    fn bin_mut(&mut self, ts_ns: u64) -> Option<&mut Bin> {
        let i = ts_ns.checked_sub(self.origin_ns)? / self.bin_ns;
        if i >= MAX_BINS {
            return None;
        }
        let i = i as usize;
        if i >= self.bins.len() {
            self.bins.resize(i + 1, Bin::default());
        }
        Some(&mut self.bins[i])
    }

    /// Adds `count` connections present over `[from, to)` to the bins'
    /// integral (`time_wait` chooses which one).
    fn spread(&mut self, from: u64, to: u64, time_wait: bool) {
        let from = from.max(self.origin_ns);
        if to <= from {
            return;
        }
        let mut t = from;
        while t < to {
            let i = (t - self.origin_ns) / self.bin_ns;
            let bin_end = self.origin_ns + (i + 1) * self.bin_ns;
            let upto = bin_end.min(to);
            let Some(b) = self.bin_mut(t) else {
                return;
            };
            if time_wait {
                b.time_wait_ns += u128::from(upto - t);
            } else {
                b.in_progress_ns += u128::from(upto - t);
            }
            t = upto;
        }
    }

    /// One captured frame of `link` at `ts_ns`.
    pub fn frame(&mut self, link: LinkType, ts_ns: u64, data: &[u8]) {
        let s = wire::slice(link, data);
        let (Some(t), Some(off)) = (s.five_tuple(), s.transport_offset()) else {
            return;
        };
        if t.protocol != IpProtocol::Tcp {
            return;
        }
        let Some(l4) = data.get(off..) else {
            return;
        };
        let Ok(tcp) = TcpPacket::new_checked(l4) else {
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
            SocketAddr::new(t.src, t.src_port),
            SocketAddr::new(t.dst, t.dst_port),
            tcp.flags(),
            tcp.seq_number(),
            tcp.ack_number(),
            payload as u32,
        );
    }

    /// One TCP segment from `src` to `dst` carrying `len` bytes of data.
    #[allow(clippy::too_many_arguments)]
    pub fn segment(
        &mut self,
        ts_ns: u64,
        src: SocketAddr,
        dst: SocketAddr,
        flags: TcpFlags,
        seq: u32,
        ack: u32,
        len: u32,
    ) {
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
        self.last_ns = self.last_ns.max(ts_ns);
        let has = |f: TcpFlags| flags.0 & f.0 != 0;
        let key = (server, client);
        if has(TcpFlags::SYN) && !has(TcpFlags::ACK) && !from_server {
            if let Some(f) = self.flows.get(&key) {
                if f.isn == seq && !f.established {
                    if let Some(b) = self.bin_mut(ts_ns) {
                        b.syn_retransmits += 1;
                    }
                    return;
                }
                // A new connection on the same ports: the old one is
                // gone without a word (its end was not seen).
                self.finish(key, ts_ns, None);
            }
            if self.flows.len() >= MAX_TRACKED {
                self.untracked += 1;
                return;
            }
            self.flows.insert(
                key,
                Flow {
                    syn_ns: ts_ns,
                    isn: seq,
                    synack: None,
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
            self.finish(key, ts_ns, Some(end));
            return;
        }
        if from_server && has(TcpFlags::SYN) && has(TcpFlags::ACK) {
            // A retransmitted SYN-ACK restarts the clock (Karn).
            f.synack = Some((ts_ns, seq));
            return;
        }
        if !from_server && has(TcpFlags::ACK) && !f.established {
            if let Some((t0, s)) = f.synack {
                if ack == s.wrapping_add(1) {
                    f.established = true;
                    f.synack = None;
                    let rtt = ts_ns.saturating_sub(t0);
                    let v = self.rtts.entry(client.ip()).or_default();
                    if v.len() < MAX_RTT_SAMPLES {
                        v.push((rtt / 1000).min(u64::from(u32::MAX)) as u32);
                    }
                }
            }
        }
        let f = self.flows.get_mut(&key).expect("looked up above");
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
            // An ACK at or beyond the other side's FIN acknowledges it.
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
            self.finish(key, ts_ns, Some(End::Close));
        }
    }

    /// Ends connection `key` at `ts_ns` (`None`: it vanished unseen).
    fn finish(&mut self, key: (SocketAddr, SocketAddr), ts_ns: u64, how: Option<End>) {
        let Some(f) = self.flows.remove(&key) else {
            return;
        };
        self.spread(f.syn_ns, ts_ns, false);
        if how.is_some() {
            if let Some(b) = self.bin_mut(f.syn_ns) {
                b.lifetime_ns += u128::from(ts_ns - f.syn_ns);
                b.lifetimes += 1;
            }
        }
        if how == Some(End::Close) && f.server_closed_first {
            self.time_wait_since.push(ts_ns);
        }
    }

    /// The bins' sums over `[from_ns, to_ns)`, with the connections still
    /// open counted up to `to_ns` (or the last packet, if earlier).
    pub fn window(&self, from_ns: u64, to_ns: u64) -> Window {
        let from = from_ns.max(self.origin_ns);
        let to = to_ns.max(from);
        let (first, last) = (
            ((from - self.origin_ns) / self.bin_ns) as usize,
            (to.saturating_sub(1).max(from) - self.origin_ns) / self.bin_ns,
        );
        let mut sum = Bin::default();
        let mut in_progress: u128 = 0;
        let mut time_wait: u128 = 0;
        for i in first..=(last as usize) {
            let Some(b) = self.bins.get(i) else {
                break;
            };
            let b0 = self.origin_ns + i as u64 * self.bin_ns;
            let (lo, hi) = (b0.max(from), (b0 + self.bin_ns).min(to));
            // A bin partly inside the window counts in proportion.
            let part = |x: u128| x * u128::from(hi.saturating_sub(lo)) / u128::from(self.bin_ns);
            in_progress += part(b.in_progress_ns);
            time_wait += part(b.time_wait_ns);
            sum.max_in_progress = sum.max_in_progress.max(b.max_in_progress);
            sum.arrivals += b.arrivals;
            sum.closes += b.closes;
            sum.resets_by_server += b.resets_by_server;
            sum.resets_by_client += b.resets_by_client;
            sum.refused += b.refused;
            sum.syn_retransmits += b.syn_retransmits;
            sum.lifetime_ns += b.lifetime_ns;
            sum.lifetimes += b.lifetimes;
        }
        // Connections still open: in progress from their SYN (or the
        // window's start) to the window's end or the last packet.
        let until = to.min(self.last_ns.max(from));
        for f in self.flows.values() {
            let s = f.syn_ns.max(from);
            if s < until {
                in_progress += u128::from(until - s);
            }
        }
        for &t in &self.time_wait_since {
            let (s, e) = (t.max(from), (t + TIME_WAIT.as_nanos() as u64).min(to));
            if s < e {
                time_wait += u128::from(e - s);
            }
        }
        let span = (to - from) as f64 / 1e9;
        let per = |x: u128| {
            if span > 0.0 {
                x as f64 / 1e9 / span
            } else {
                0.0
            }
        };
        let arrival_rate = if span > 0.0 {
            sum.arrivals as f64 / span
        } else {
            0.0
        };
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
            mean_in_progress: per(in_progress),
            max_in_progress: sum.max_in_progress,
            mean_time_wait: per(time_wait),
            closes: sum.closes,
            resets_by_server: sum.resets_by_server,
            resets_by_client: sum.resets_by_client,
            refused: sum.refused,
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

    /// The time series: one [`Window`] per `step` from the origin to the
    /// last packet.
    pub fn series(&self, step: Duration) -> Vec<(f64, Window)> {
        let step = (step.as_nanos() as u64).max(self.bin_ns);
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
        let at = |ms: u64| 1_000 * MS + ms * MS;
        o.segment(at(t), c, s, SYN, 100, 0, 0);
        o.segment(at(t), s, c, SYNACK, 5000, 101, 0);
        o.segment(at(t + rtt), c, s, ACK, 101, 5001, 0);
        o.segment(at(t + rtt), c, s, ACK, 101, 5001, 80);
        o.segment(at(t + rtt), s, c, FINACK, 5001, 181, 1000);
        o.segment(at(t + 2 * rtt), c, s, FINACK, 181, 6002, 0);
        o.segment(at(t + 2 * rtt), s, c, ACK, 6002, 182, 0);
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
        let at = |ms: u64| 1_000 * MS + ms * MS;
        // Refused: RST to the SYN.
        let c1 = sa("127.0.0.2:1");
        o.segment(at(0), c1, s, SYN, 7, 0, 0);
        o.segment(at(0), s, c1, TcpFlags(0x014), 0, 8, 0);
        // A SYN sent again after 1 s (the accept queue was full), then made,
        // then reset by the client.
        let c2 = sa("127.0.0.3:2");
        o.segment(at(0), c2, s, SYN, 9, 0, 0);
        o.segment(at(1000), c2, s, SYN, 9, 0, 0);
        o.segment(at(1000), s, c2, SYNACK, 50, 10, 0);
        o.segment(at(1001), c2, s, ACK, 10, 51, 0);
        o.segment(at(1500), c2, s, RST, 10, 0, 0);
        // Packets of other servers are not looked at.
        o.segment(at(5), sa("127.0.0.4:5"), sa("127.0.0.1:81"), SYN, 1, 0, 0);
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
        let at = |ms: u64| 1_000 * MS + ms * MS;
        o.segment(at(0), c, s, SYN, 0, 0, 0);
        o.segment(at(0), s, c, SYNACK, 0, 1, 0);
        o.segment(at(10), c, s, ACK, 1, 1, 0);
        o.segment(at(20), c, s, FINACK, 1, 1, 0);
        o.segment(at(20), s, c, ACK, 1, 2, 0);
        assert_eq!(o.open(), 1);
        o.segment(at(30), s, c, FINACK, 1, 2, 0);
        assert_eq!(o.open(), 1);
        o.segment(at(40), c, s, ACK, 2, 2, 0);
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
        let at = |ms: u64| 1_000 * MS + ms * MS;
        o.segment(at(0), c, s, SYN, 0, 0, 0);
        o.segment(at(400), s, c, SYNACK, 0, 1, 0);
        let w = o.window(at(0), at(800));
        // Open from 0 to the last packet at 400 ms: half the window.
        assert!((w.mean_in_progress - 0.5).abs() < 1e-9, "{w:?}");
        assert_eq!((w.closes, w.mean_lifetime_ms), (0, 0.0));
        // Before the origin: not counted.
        o.segment(5, c, s, SYN, 3, 0, 0);
        assert_eq!(o.early, 1);
    }
}

/// The `observe` fuzz target's check, which the test suite replays: `data`
/// is a run of frames, each a 2-byte length, a 2-byte gap in units of
/// 100 µs and the Ethernet frame's bytes, fed to an observer of port 80.
/// Whatever the frames, no panic, and the counts stay consistent: no
/// connection ends that did not arrive, means are finite and not negative,
/// and the steady window equals the sum of its halves' arrivals.
pub fn fuzz_check(data: &[u8]) {
    let origin = 1_000_000_000_000;
    let mut o = Observer::new(
        ServerAddr { ip: None, port: 80 },
        origin,
        Duration::from_millis(100),
    );
    let mut t = origin;
    let mut rest = data;
    while rest.len() >= 4 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        t += u64::from(u16::from_be_bytes([rest[2], rest[3]])) * 100_000;
        rest = &rest[4..];
        let frame = &rest[..len.min(rest.len())];
        o.frame(LinkType::Ethernet, t, frame);
        rest = &rest[frame.len()..];
    }
    let end = o.last_ns() + 1;
    let w = o.window(origin, end);
    assert!(w.closes + w.resets_by_server + w.resets_by_client <= w.arrivals + o.untracked);
    assert!(w.refused <= w.resets_by_server);
    for x in [
        w.mean_in_progress,
        w.mean_time_wait,
        w.mean_lifetime_ms,
        w.arrival_rate,
    ] {
        assert!(x.is_finite() && x >= 0.0, "{w:?}");
    }
    let mid = origin + (end - origin) / 2;
    let (a, b) = (o.window(origin, mid), o.window(mid, end));
    // Arrivals fall in whole bins: the halves cover the same bins, the
    // middle one twice when the cut falls inside it.
    assert!(a.arrivals + b.arrivals >= w.arrivals);
    let _ = o.series(Duration::from_secs(1));
    let _ = o.rtt_check(&[(IpAddr::from([10, 0, 0, 2]), Duration::from_millis(10))]);
}
