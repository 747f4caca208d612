//! Round trips from a capture taken at a server, as ENMA measured them for
//! the paper (its Fig. 3.2, (3) − (2)): per TCP connection, from the
//! server's SYN-ACK to the client's ACK that completes the handshake. At
//! the server that is one whole round trip to the client and back, whatever
//! the client's own processing, and no data is needed.
//!
//! When the server sent its SYN-ACK more than once, the ACK is matched to
//! the copy whose TSval it echoes (the timestamps option, RFC 7323); with
//! no timestamps to tell the copies apart, the handshake gives no sample
//! (Karn's rule) and is counted as ambiguous: restarting the clock at the
//! last copy would turn an ACK that crossed the retransmission into a
//! round trip of a few microseconds. A handshake whose ACK never comes is
//! not counted. The result is written as a CDF file ([`crate::profile`]'s
//! format), so `--profile cdf:FILE` replays the server's own clients.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use wire::tcp::{Answered, SynAckCopies, TcpFlags};
use wire::LinkType;

/// Points a CDF file gets at most.
pub const MAX_POINTS: usize = 1000;

/// Half-open handshakes held at most (a SYN flood must not grow memory).
pub const MAX_PENDING: usize = 1 << 20;

/// Which side is the server.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerFilter {
    pub addr: Option<IpAddr>,
    pub port: Option<u16>,
}

impl ServerFilter {
    /// `ADDR`, `ADDR:PORT` or `[V6]:PORT`.
    pub fn parse(s: &str) -> Result<ServerFilter, String> {
        if let Ok(a) = s.parse::<SocketAddr>() {
            return Ok(ServerFilter {
                addr: Some(a.ip()),
                port: Some(a.port()),
            });
        }
        s.parse::<IpAddr>()
            .map(|a| ServerFilter {
                addr: Some(a),
                port: None,
            })
            .map_err(|_| format!("{s:?}: expected ADDR or ADDR:PORT"))
    }

    fn matches(&self, a: SocketAddr) -> bool {
        self.addr.is_none_or(|x| x == a.ip()) && self.port.is_none_or(|p| p == a.port())
    }
}

/// Collects handshake round trips from packets.
#[derive(Debug, Default)]
pub struct Tracker {
    server: ServerFilter,
    /// (server, client) → the SYN-ACK copies sent.
    pending: HashMap<(SocketAddr, SocketAddr), SynAckCopies>,
    rtts: Vec<(IpAddr, Duration)>,
    /// TCP segments looked at.
    pub segments: u64,
    /// SYN-ACKs given up on for want of room ([`MAX_PENDING`]).
    pub dropped: u64,
    /// Handshakes completed after several SYN-ACK copies that the ACK
    /// could not be matched to (no timestamps): no sample.
    pub ambiguous: u64,
}

impl Tracker {
    pub fn new(server: ServerFilter) -> Tracker {
        Tracker {
            server,
            ..Tracker::default()
        }
    }

    /// One captured frame of `link` at `ts_ns`.
    pub fn frame(&mut self, link: LinkType, ts_ns: u64, data: &[u8]) {
        let s = wire::slice(link, data);
        let (Some(t), Some(tcp)) = (s.five_tuple(), s.tcp()) else {
            return;
        };
        let flags = tcp.flags();
        self.segment(
            ts_ns,
            SocketAddr::new(t.src, t.src_port),
            SocketAddr::new(t.dst, t.dst_port),
            flags,
            tcp.seq_number(),
            tcp.ack_number(),
            tcp.timestamps(),
        );
    }

    /// One TCP segment from `src` to `dst`, with its timestamps option
    /// (TSval, TSecr) if it has one.
    #[allow(clippy::too_many_arguments)]
    pub fn segment(
        &mut self,
        ts_ns: u64,
        src: SocketAddr,
        dst: SocketAddr,
        flags: TcpFlags,
        seq: u32,
        ack: u32,
        timestamps: Option<(u32, u32)>,
    ) {
        self.segments += 1;
        let has = |f: TcpFlags| flags.0 & f.0 != 0;
        if has(TcpFlags::SYN) && has(TcpFlags::ACK) {
            if !self.server.matches(src) {
                return;
            }
            if self.pending.len() >= MAX_PENDING && !self.pending.contains_key(&(src, dst)) {
                self.dropped += 1;
                return;
            }
            self.pending
                .entry((src, dst))
                .or_default()
                .sent(ts_ns, seq, timestamps);
        } else if has(TcpFlags::ACK) && !has(TcpFlags::SYN) && !has(TcpFlags::RST) {
            let Some(copies) = self.pending.get(&(dst, src)) else {
                return;
            };
            match copies.answered(ack, timestamps) {
                Answered::No => return,
                Answered::Copy(t0) => {
                    // A capture's clock that steps back gives no sample.
                    if let Some(rtt) = ts_ns.checked_sub(t0) {
                        self.rtts.push((src.ip(), Duration::from_nanos(rtt)));
                    }
                }
                Answered::Ambiguous => self.ambiguous += 1,
            }
            self.pending.remove(&(dst, src));
        } else if has(TcpFlags::RST) {
            self.pending.remove(&(dst, src));
            self.pending.remove(&(src, dst));
        }
    }

    /// The round trips found, per client address, in capture order.
    pub fn rtts(&self) -> &[(IpAddr, Duration)] {
        &self.rtts
    }
}

/// The CDF file text of `rtts` (at most [`MAX_POINTS`] points), with a
/// comment header naming `source`; `None` when there are none.
pub fn cdf_text(rtts: &[Duration], source: &str) -> Option<String> {
    if rtts.is_empty() {
        return None;
    }
    let mut v: Vec<Duration> = rtts.to_vec();
    v.sort();
    let n = v.len();
    let mean = v.iter().map(Duration::as_secs_f64).sum::<f64>() / n as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# RTT_MS FRACTION: SYN-ACK to ACK at the server, {n} handshakes in {source}\n\
         # median {:.3} ms, mean {:.3} ms, mean/median {:.2}",
        ms(v[n / 2]),
        mean * 1e3,
        mean / v[n / 2].as_secs_f64().max(1e-9)
    );
    let m = n.min(MAX_POINTS);
    for j in 1..=m {
        let idx = (j * n).div_ceil(m) - 1;
        let _ = writeln!(s, "{:.3} {}", ms(v[idx]), j as f64 / m as f64);
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::parse_cdf;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const SYNACK: TcpFlags = TcpFlags(0x012);
    const ACK: TcpFlags = TcpFlags(0x010);

    #[test]
    fn a_handshake_gives_the_synack_to_ack_time() {
        let mut t = Tracker::new(ServerFilter::default());
        let (s, c) = (sa("10.0.0.1:80"), sa("10.0.0.9:5555"));
        t.segment(0, c, s, TcpFlags::SYN, 100, 0, None);
        t.segment(1_000, s, c, SYNACK, 7000, 101, None);
        // A stray ACK that does not acknowledge the SYN-ACK.
        t.segment(20_000, c, s, ACK, 101, 6000, None);
        t.segment(31_000, c, s, ACK, 101, 7001, None);
        // Data afterwards changes nothing.
        t.segment(40_000, c, s, ACK, 101, 7001, None);
        assert_eq!(t.rtts(), &[(c.ip(), Duration::from_nanos(30_000))]);
    }

    #[test]
    fn a_retransmitted_synack_is_matched_by_timestamps_and_resets_forget() {
        let mut t = Tracker::new(ServerFilter::parse("10.0.0.1:80").unwrap());
        let (s, c) = (sa("10.0.0.1:80"), sa("10.0.0.9:5555"));
        // The ACK of the first copy crosses the retransmission: it echoes
        // the first copy's TSval, and the round trip is from there.
        t.segment(1_000, s, c, SYNACK, 7000, 101, Some((500, 9)));
        t.segment(3_001_000, s, c, SYNACK, 7000, 101, Some((3500, 9)));
        t.segment(3_003_000, c, s, ACK, 101, 7001, Some((10, 500)));
        assert_eq!(t.rtts()[0].1, Duration::from_micros(3_002));
        // Without timestamps, two copies cannot be told apart: no sample.
        let c4 = sa("10.0.0.6:9");
        t.segment(1_000, s, c4, SYNACK, 1, 1, None);
        t.segment(3_001_000, s, c4, SYNACK, 1, 1, None);
        t.segment(3_001_010, c4, s, ACK, 1, 2, None);
        assert_eq!((t.rtts().len(), t.ambiguous), (1, 1));
        // Another server's handshakes are not counted.
        let (o, c2) = (sa("10.0.0.2:80"), sa("10.0.0.8:1"));
        t.segment(0, o, c2, SYNACK, 1, 1, None);
        t.segment(5, c2, o, ACK, 1, 2, None);
        // A reset ends a handshake.
        let c3 = sa("10.0.0.7:2");
        t.segment(0, s, c3, SYNACK, 1, 1, None);
        t.segment(1, c3, s, TcpFlags::RST, 1, 0, None);
        t.segment(2, c3, s, ACK, 1, 2, None);
        assert_eq!(t.rtts().len(), 1);
    }

    #[test]
    fn the_cdf_written_reads_back_as_a_profile() {
        let rtts: Vec<Duration> = (1..=2500).map(|i| Duration::from_micros(i * 20)).collect();
        let text = cdf_text(&rtts, "x.pcap").unwrap();
        let pts = parse_cdf(&text).unwrap();
        assert_eq!(pts.len(), MAX_POINTS);
        assert_eq!(pts[pts.len() - 1].rtt, Duration::from_millis(50));
        assert!((pts[499].rtt.as_secs_f64() * 1e3 - 25.0).abs() < 0.03);
        assert!(text.starts_with("# RTT_MS FRACTION"));
        assert_eq!(cdf_text(&[], "x"), None);
        let few = cdf_text(&[Duration::from_millis(3), Duration::from_millis(1)], "y").unwrap();
        let pts = parse_cdf(&few).unwrap();
        assert_eq!((pts.len(), pts[0].rtt), (2, Duration::from_millis(1)));
    }
}
