//! `kansoku ipsec encap|decap` over traces: each packet's IP part through an
//! [`ipsec::Engine`], its link header kept, into a trace sink.
//!
//! A packet the engine protects (or takes ESP/AH off) is written with its
//! new IP part behind the same link header (the EtherType follows the IP
//! version, should a tunnel change it); one it passes (no policy, not
//! IPsec, not IP at all) is written as it was; a fragment is held until its
//! datagram is whole, then written with the time of the last fragment; one
//! it refuses goes to the rejected sink if there is one, and is counted by
//! reason. A packet the capture cut short (captured < on the wire) cannot be
//! protected or checked, and is refused as `snapped`.

use ipsec::{Engine, Inbound, Outbound, Protocol, Reject, SaState};
use trace::Record;
use wire::{slice, LinkType};

use std::fmt;
use std::path::Path;

use crate::error::{display_path, Error, Result};
use crate::run::{Consumer, Flow};
use crate::sink::PacketSink;
use crate::source::trace::TraceSource;

/// Reads an SA file for an engine: setkey lines, Wireshark's `esp_sa` table
/// or `ip xfrm state` output ([`ipsec::read_sa_file`]); errors as
/// `FILE:LINE:COLUMN: what`.
pub fn load_sa(path: &Path) -> Result<ipsec::Config> {
    let text = crate::error::read_text(path)?;
    ipsec::read_sa_file(&text).map_err(|e| Error::input(format!("{}:{e}", display_path(path))))
}

/// Which way packets go through the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Encap,
    Decap,
}

/// What happened to the packets of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpsecCounts {
    pub packets: u64,
    /// Protected (encap) or taken out of ESP/AH (decap), written.
    pub transformed: u64,
    /// Written as they were: no policy or SA (encap), not IPsec (decap).
    pub passed: u64,
    /// Not IP: written as they were.
    pub not_ip: u64,
    /// Fragments held for their datagram.
    pub held: u64,
    /// Refused by the engine (by reason in [`Engine::rejects`]).
    pub rejected: u64,
    /// Cut short by the capture's snap length: refused.
    pub snapped: u64,
    /// A tunnel changed the IP version and the link header cannot say so
    /// (LINKTYPE_IPV4/IPV6, BSD loopback): refused.
    pub link_refused: u64,
}

/// Packets of a trace through an engine into sinks.
pub struct IpsecRun<S> {
    pub engine: Engine,
    pub direction: Direction,
    pub out: Option<S>,
    pub rejected: Option<S>,
    pub counts: IpsecCounts,
    ip: Vec<u8>,
    frame: Vec<u8>,
}

impl<S: PacketSink> IpsecRun<S> {
    pub fn new(engine: Engine, direction: Direction, out: Option<S>) -> IpsecRun<S> {
        IpsecRun {
            engine,
            direction,
            out,
            rejected: None,
            counts: IpsecCounts::default(),
            ip: Vec::with_capacity(2048),
            frame: Vec::with_capacity(2048),
        }
    }

    /// The engine on one IP packet; the result in `self.ip`.
    fn apply(&mut self, ip: &[u8]) -> std::result::Result<Verdict, Reject> {
        self.ip.clear();
        Ok(match self.direction {
            Direction::Encap => match self.engine.outbound(ip, &mut self.ip)? {
                Outbound::Protected => Verdict::New,
                Outbound::Bypass => Verdict::Same,
            },
            Direction::Decap => match self.engine.inbound(ip, &mut self.ip)? {
                Inbound::Decapsulated => Verdict::New,
                Inbound::Clear => Verdict::Same,
                Inbound::Held => Verdict::Held,
            },
        })
    }
}

enum Verdict {
    New,
    Same,
    Held,
}

/// Sets the field that names the IP version (Ethernet's EtherType, after
/// any VLAN tags; Linux cooked capture's protocol) to `version`'s; `false`
/// for a link that fixes the version (LINKTYPE_IPV4/IPV6, BSD loopback).
fn set_ethertype(link: LinkType, head: &mut [u8], version: u8) -> bool {
    let t: u16 = if version == 6 { 0x86dd } else { 0x0800 };
    match link {
        LinkType::Ethernet | LinkType::LinuxSll if head.len() >= 2 => {
            let n = head.len();
            head[n - 2..].copy_from_slice(&t.to_be_bytes());
            true
        }
        LinkType::LinuxSll2 if head.len() >= 2 => {
            head[..2].copy_from_slice(&t.to_be_bytes());
            true
        }
        LinkType::Raw => true,
        _ => false,
    }
}

impl<S: PacketSink> Consumer<TraceSource> for IpsecRun<S> {
    fn consume(&mut self, rec: Record<'_>) -> Result<Flow> {
        let Record::Packet(p) = &rec else {
            for s in [&mut self.out, &mut self.rejected].into_iter().flatten() {
                s.record(&rec)?;
            }
            return Ok(Flow::Continue);
        };
        self.counts.packets += 1;
        self.engine.set_now(p.ts_nanos() / 1_000_000_000);
        let Some(l3) = slice(p.link_type, p.data).network_offset() else {
            self.counts.not_ip += 1;
            if let Some(s) = &mut self.out {
                s.record(&rec)?;
            }
            return Ok(Flow::Continue);
        };
        if (p.data.len() as u64) < u64::from(p.orig_len) {
            self.counts.snapped += 1;
            if let Some(s) = &mut self.rejected {
                s.record(&rec)?;
            }
            return Ok(Flow::Continue);
        }
        match self.apply(&p.data[l3..]) {
            Ok(Verdict::Same) => {
                self.counts.passed += 1;
                if let Some(s) = &mut self.out {
                    s.record(&rec)?;
                }
            }
            Ok(Verdict::Held) => self.counts.held += 1,
            Ok(Verdict::New) => {
                self.frame.clear();
                self.frame.extend_from_slice(&p.data[..l3]);
                let old = p.data[l3] >> 4;
                let new = self.ip.first().map_or(old, |b| b >> 4);
                if new != old && !set_ethertype(p.link_type, &mut self.frame, new) {
                    // A link whose header names the IP version in a way
                    // kansoku does not rewrite: refused, not mislabelled.
                    self.counts.link_refused += 1;
                    if let Some(s) = &mut self.rejected {
                        s.record(&rec)?;
                    }
                    return Ok(Flow::Continue);
                }
                self.frame.extend_from_slice(&self.ip);
                self.counts.transformed += 1;
                if let Some(s) = &mut self.out {
                    let mut q = *p;
                    q.data = &self.frame;
                    q.orig_len = self.frame.len() as u32;
                    s.record(&Record::Packet(q))?;
                }
            }
            Err(_) => {
                self.counts.rejected += 1;
                if let Some(s) = &mut self.rejected {
                    s.record(&rec)?;
                }
            }
        }
        Ok(Flow::Continue)
    }
}

/// What a run did, as `kansoku ipsec encap|decap` prints it: text through
/// `Display`, one JSON object through [`RunReport::json`]. Keys never
/// appear in either.
pub struct RunReport<'a> {
    engine: &'a Engine,
    direction: Direction,
    counts: IpsecCounts,
}

impl<S> IpsecRun<S> {
    /// The run's report so far.
    pub fn report(&self) -> RunReport<'_> {
        RunReport {
            engine: &self.engine,
            direction: self.direction,
            counts: self.counts,
        }
    }
}

/// An SA as one line: protocol, SPI, addresses, mode and algorithms.
fn sa_label(s: &SaState) -> String {
    let sa = s.sa();
    let algs: Vec<&str> = sa
        .enc
        .iter()
        .map(|(e, _)| e.name())
        .chain(sa.auth.iter().map(|(a, _)| a.name()))
        .collect();
    format!(
        "{} {:#010x} {} > {} {} {}",
        sa.protocol,
        sa.spi,
        sa.src,
        sa.dst,
        mode_name(sa.mode),
        algs.join("+")
    )
}

fn mode_name(mode: ipsec::Mode) -> &'static str {
    match mode {
        ipsec::Mode::Transport => "transport",
        ipsec::Mode::Tunnel => "tunnel",
    }
}

fn sa_json(s: &SaState) -> serde_json::Value {
    let sa = s.sa();
    let c = s.counters();
    let (sent, seen) = s.sequence();
    serde_json::json!({
        "protocol": match sa.protocol { Protocol::Esp => "esp", Protocol::Ah => "ah" },
        "spi": format!("{:#010x}", sa.spi),
        "src": sa.src.to_string(),
        "dst": sa.dst.to_string(),
        "mode": mode_name(sa.mode),
        "enc": sa.enc.as_ref().map(|(e, _)| e.name()),
        "auth": sa.auth.as_ref().map(|(a, _)| a.name()),
        "line": sa.line,
        "packets": c.packets,
        "bytes": c.bytes,
        "replay_window": c.replay_window,
        "replay": c.replay,
        "integrity_failed": c.integrity_failed,
        "padding_failed": c.padding_failed,
        "malformed": c.malformed,
        "expired": c.expired,
        "seq_overflow": c.seq_overflow,
        "seq_sent": sent,
        "seq_highest_accepted": seen,
        "soft_lifetime_passed": s.soft_expired(),
    })
}

impl RunReport<'_> {
    /// The engine's refusals by reason, those that happened.
    fn reasons(&self) -> Vec<(Reject, u64)> {
        self.engine.rejects().filter(|(_, n)| *n > 0).collect()
    }

    /// The report as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        let c = self.counts;
        let t = self.engine.totals();
        let mut r = serde_json::Map::new();
        for (k, n) in self.reasons() {
            r.insert(k.name().into(), n.into());
        }
        if c.snapped > 0 {
            r.insert("snapped".into(), c.snapped.into());
        }
        if c.link_refused > 0 {
            r.insert("link".into(), c.link_refused.into());
        }
        serde_json::json!({
            "direction": match self.direction {
                Direction::Encap => "encap",
                Direction::Decap => "decap",
            },
            "packets": c.packets,
            "transformed": c.transformed,
            "passed": c.passed,
            "not_ip": c.not_ip,
            "held": c.held,
            "reassembled": t.reassembled,
            "fragments_timed_out": t.fragments_timed_out,
            "fragments_waiting": self.engine.fragments_waiting(),
            "udp_not_esp": t.udp_not_esp,
            "rejected": c.rejected + c.snapped + c.link_refused,
            "reasons": r,
            "sas": self.engine.sas().iter().map(sa_json).collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for RunReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.counts;
        let t = self.engine.totals();
        let (verb, passed) = match self.direction {
            Direction::Encap => (
                "protected",
                "not covered by a policy or SA, written as they were",
            ),
            Direction::Decap => ("decapsulated", "not IPsec, written as they were"),
        };
        writeln!(
            f,
            "{} packets: {} {verb}, {} {passed}",
            c.packets, c.transformed, c.passed
        )?;
        if c.not_ip > 0 {
            writeln!(f, "{} not IP, written as they were", c.not_ip)?;
        }
        if c.held > 0 || t.reassembled > 0 {
            writeln!(
                f,
                "{} fragments held, {} datagrams reassembled, {} timed out, {} still waiting",
                c.held,
                t.reassembled,
                t.fragments_timed_out,
                self.engine.fragments_waiting()
            )?;
        }
        let refused = c.rejected + c.snapped + c.link_refused;
        if refused > 0 {
            let mut parts: Vec<String> = self
                .reasons()
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            if c.snapped > 0 {
                parts.push(format!("snapped {}", c.snapped));
            }
            if c.link_refused > 0 {
                parts.push(format!("link {}", c.link_refused));
            }
            writeln!(f, "{refused} refused: {}", parts.join(", "))?;
        }
        for s in self.engine.sas() {
            let k = s.counters();
            writeln!(
                f,
                "  {}: {} packets, {} bytes; replay {}, too old {}, integrity {}, padding {}, expired {}",
                sa_label(s),
                k.packets,
                k.bytes,
                k.replay,
                k.replay_window,
                k.integrity_failed,
                k.padding_failed,
                k.expired
            )?;
        }
        Ok(())
    }
}

/// Writes Wireshark's `esp_sa` table for the file's SAs (copy it into a
/// Wireshark profile, or point `-o uat:esp_sa:...` at its rows); an SA
/// Wireshark 4.0 cannot decrypt is named in a comment and on stderr.
pub fn write_esp_sa(path: &Path, cfg: &ipsec::Config) -> Result<()> {
    for sa in &cfg.sas {
        if let Some(why) = ipsec::esp_sa_unwritable(sa) {
            eprintln!(
                "kansoku: {}: SA {} {:#x} (line {}) not in the table: {why}",
                display_path(path),
                sa.protocol,
                sa.spi,
                sa.line
            );
        }
    }
    std::fs::write(path, ipsec::write_esp_sa(&cfg.sas)).map_err(|e| Error::writing(path, e))
}
