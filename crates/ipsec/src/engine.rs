//! The SA and policy tables, and the two directions a packet takes through
//! them.
//!
//! Outbound, a packet is protected by the SAs its policy names (the first
//! `spdadd ... -P out` whose selectors match, its transforms applied in the
//! order listed, so `esp/transport//require ah/transport//require` gives
//! IP|AH|ESP), or, in a file without policy lines, by the ESP and then the AH
//! SA whose `add` addresses are the packet's own. Tunnel mode is an outer IP
//! header (DSCP/ECN and DF copied from the inner packet, TTL 64) around the
//! packet, then the transform as in transport mode. ESP in UDP (RFC 3948)
//! puts a UDP header (checksum 0 over IPv4, computed over IPv6) before ESP.
//!
//! Inbound, fragments of ESP/AH (and of UDP when an SA uses ESP in UDP) are
//! reassembled first, then each ESP/AH header is removed in turn (SA by SPI
//! and destination), a tunnel's inner packet taken out, and the result
//! checked against the first `-P in` policy that covers it. Every refusal is
//! counted by its [`Reject`] reason, and per SA as `ip -s xfrm state` shows.

use std::net::IpAddr;

use crate::ah;
use crate::config::{Config, Level, Mode, Policy, PolicyAction, PolicyDir, Protocol, Upper};
use crate::crypto::{KeyError, Keying};
use crate::esp;
use crate::frag::{fragment_protocol, Reassembler, Step};
use crate::ip::{self, proto, Layout};
use crate::reject::Reject;
use crate::sa::SaState;
use wire::ipv4::{self, Ipv4Packet};
use wire::ipv6::{self, Ipv6Packet};
use wire::udp::{self, UdpPacket};
use wire::IpProtocol;

mod in_place;
pub use in_place::{PacketBuf, HEADROOM};

/// How the engine keys its SAs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub keying: Keying,
}

/// What happened to an outbound packet that was not refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outbound {
    /// Protected: the result is in `out`.
    Protected,
    /// No policy or SA covers it: it goes as it is (`out` untouched).
    Bypass,
}

/// What happened to an inbound packet that was not refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inbound {
    /// ESP/AH removed: the packet is in `out`.
    Decapsulated,
    /// Not IPsec (and no policy asks it to be): it goes as it is.
    Clear,
    /// A fragment kept until the rest arrives.
    Held,
}

/// Totals over everything the engine saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub protected: u64,
    pub bypassed: u64,
    pub decapsulated: u64,
    pub clear: u64,
    pub held: u64,
    pub reassembled: u64,
    /// Datagrams whose fragments never all came (timed out or evicted).
    pub fragments_timed_out: u64,
    /// UDP 4500 datagrams that were not ESP: IKE (non-ESP marker) and
    /// NAT keepalives.
    pub udp_not_esp: u64,
}

/// A policy's selectors, resolved for one packet.
struct Selectors {
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    ports: Option<(u16, u16)>,
}

/// At most this many transforms apply to one packet (an AH+ESP bundle is 2).
const MAX_BUNDLE: usize = 4;

/// Datagrams whose fragments the engine waits for at once.
const MAX_FRAGMENTED: usize = 64;

pub struct Engine {
    sas: Vec<SaState>,
    policies: Vec<Policy>,
    has_in_policies: bool,
    has_out_policies: bool,
    /// (protocol, SPI, SA index), sorted: the inbound lookup.
    by_spi: Vec<(u8, u32, usize)>,
    /// The UDP ports SAs receive ESP in UDP on.
    natt_ports: Vec<u16>,
    /// The in-place path's last outbound choice without policies (source,
    /// destination, and what [`Engine::select_out`] gave) and last inbound
    /// lookup ((protocol, SPI, destination) and the SA): see
    /// [`Engine::select_out_again`] and [`Engine::lookup_again`].
    last_out: Option<(IpAddr, IpAddr, usize, [usize; MAX_BUNDLE])>,
    last_in: Option<(u8, u32, IpAddr, usize)>,
    frag: Reassembler,
    now: u64,
    ip_id: u16,
    rejects: [u64; Reject::ALL.len()],
    totals: Totals,
    bufs: [Vec<u8>; 2],
    tunnel: Vec<u8>,
    zeroed: Vec<u8>,
    scratch: Vec<u8>,
    /// The copying path's result, when the in-place one hands over.
    scratch_out: Vec<u8>,
}

impl Engine {
    /// Keys every SA of `cfg`.
    pub fn new(cfg: &Config, opts: Options) -> Result<Engine, KeyError> {
        let sas = cfg
            .sas
            .iter()
            .map(|sa| {
                SaState::new(sa, opts.keying)
                    .map_err(|e| KeyError(format!("line {}: {}", sa.line, e.0)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut by_spi: Vec<(u8, u32, usize)> = sas
            .iter()
            .enumerate()
            .map(|(i, s)| (s.sa.protocol.number(), s.sa.spi, i))
            .collect();
        by_spi.sort_unstable();
        let mut natt_ports: Vec<u16> = sas
            .iter()
            .filter_map(|s| s.sa.encap_udp.map(|(_, d)| d))
            .collect();
        natt_ports.sort_unstable();
        natt_ports.dedup();
        Ok(Engine {
            has_in_policies: cfg.policies.iter().any(|p| p.dir == PolicyDir::In),
            has_out_policies: cfg.policies.iter().any(|p| p.dir == PolicyDir::Out),
            policies: cfg.policies.clone(),
            sas,
            by_spi,
            natt_ports,
            last_out: None,
            last_in: None,
            frag: Reassembler::new(MAX_FRAGMENTED),
            now: 0,
            ip_id: 1,
            rejects: [0; Reject::ALL.len()],
            totals: Totals::default(),
            bufs: [Vec::with_capacity(2048), Vec::with_capacity(2048)],
            tunnel: Vec::with_capacity(2048),
            zeroed: Vec::with_capacity(64),
            scratch: Vec::with_capacity(64),
            scratch_out: Vec::with_capacity(2048),
        })
    }

    /// Sets the engine's clock (seconds; a trace's packet time, or the
    /// wall clock): lifetimes and fragment timeouts run on it.
    pub fn set_now(&mut self, secs: u64) {
        self.now = secs;
    }

    /// The IPv4 identification the next tunnel-mode outer header gets (it
    /// counts up from there): how the RFCs' sample tunnel packets are
    /// reproduced.
    pub fn set_next_ip_id(&mut self, id: u16) {
        self.ip_id = id.wrapping_sub(1);
    }

    pub fn sas(&self) -> &[SaState] {
        &self.sas
    }

    /// The SA with this protocol and SPI (to set a test vector's IV).
    pub fn sa_mut(&mut self, protocol: Protocol, spi: u32) -> Option<&mut SaState> {
        self.sas
            .iter_mut()
            .find(|s| s.sa.protocol == protocol && s.sa.spi == spi)
    }

    /// Refusals by reason, every reason listed.
    pub fn rejects(&self) -> impl Iterator<Item = (Reject, u64)> + '_ {
        Reject::ALL.iter().map(|r| (*r, self.rejects[r.index()]))
    }

    pub fn totals(&self) -> Totals {
        Totals {
            reassembled: self.frag.reassembled,
            fragments_timed_out: self.frag.timed_out,
            ..self.totals
        }
    }

    /// Datagrams waiting for fragments.
    pub fn fragments_waiting(&self) -> usize {
        self.frag.waiting()
    }

    /// The most bytes [`Engine::outbound`] can add to a packet protected by
    /// SAs of one family (IPv6 when `v6`): per SA, ESP's SPI, sequence
    /// number, IV, longest padding, trailer and ICV (and UDP header), or AH
    /// with its padded ICV, and tunnel mode's outer header; summed over the
    /// bundle an outbound policy (or, without policies, an address pair's
    /// ESP and AH) applies. 0 when no SA of that family protects anything.
    pub fn max_overhead(&self, v6: bool) -> usize {
        let one = |s: &SaState| {
            let outer = match (s.sa.mode, v6) {
                (Mode::Transport, _) => 0,
                (Mode::Tunnel, false) => 20,
                (Mode::Tunnel, true) => 40,
            };
            let icv = s.integrity.as_ref().map_or(0, |i| i.icv_len());
            outer
                + match s.sa.protocol {
                    Protocol::Ah => ah::len(icv, v6),
                    Protocol::Esp => {
                        let (iv, align, tag) = s
                            .cipher
                            .as_ref()
                            .map_or((0, 4, 0), |c| (c.iv_len(), c.align(), c.tag_len()));
                        let udp = if s.sa.encap_udp.is_some() { 8 } else { 0 };
                        udp + 8 + iv + (align - 1) + 2 + tag + icv
                    }
                }
        };
        let family = self.sas.iter().filter(|s| s.sa.src.is_ipv6() == v6);
        if !self.has_out_policies {
            return family
                .clone()
                .map(|s| {
                    let other = family
                        .clone()
                        .filter(|o| {
                            o.sa.protocol != s.sa.protocol
                                && o.sa.src == s.sa.src
                                && o.sa.dst == s.sa.dst
                        })
                        .map(one)
                        .max();
                    one(s) + other.unwrap_or(0)
                })
                .max()
                .unwrap_or(0);
        }
        self.policies
            .iter()
            .filter_map(|p| match &p.action {
                PolicyAction::Ipsec(ts) if p.dir == PolicyDir::Out => Some(ts),
                _ => None,
            })
            .map(|ts| {
                ts.iter()
                    .take(MAX_BUNDLE)
                    .map(|t| {
                        family
                            .clone()
                            .filter(|s| {
                                s.sa.protocol == t.protocol
                                    && s.sa.mode == t.mode
                                    && t.tunnel.is_none_or(|(a, b)| s.sa.src == a && s.sa.dst == b)
                            })
                            .map(one)
                            .max()
                            .unwrap_or(0)
                    })
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0)
    }

    /// Protects the IP packet `pkt` as policy says, into `out`.
    pub fn outbound(&mut self, pkt: &[u8], out: &mut Vec<u8>) -> Result<Outbound, Reject> {
        let r = self.outbound_inner(pkt, out);
        match r {
            Ok(Outbound::Protected) => self.totals.protected += 1,
            Ok(Outbound::Bypass) => self.totals.bypassed += 1,
            Err(e) => self.rejects[e.index()] += 1,
        }
        r
    }

    /// Checks and removes ESP/AH from the IP packet `pkt`, into `out`.
    pub fn inbound(&mut self, pkt: &[u8], out: &mut Vec<u8>) -> Result<Inbound, Reject> {
        let r = self.inbound_inner(pkt, out, None);
        match r {
            Ok(Inbound::Decapsulated) => self.totals.decapsulated += 1,
            Ok(Inbound::Clear) => self.totals.clear += 1,
            Ok(Inbound::Held) => self.totals.held += 1,
            Err(e) => self.rejects[e.index()] += 1,
        }
        r
    }

    fn outbound_inner(&mut self, pkt: &[u8], out: &mut Vec<u8>) -> Result<Outbound, Reject> {
        let l = Layout::parse(pkt)?;
        let pkt = &pkt[..l.total_len];
        let mut chosen = [0usize; MAX_BUNDLE];
        let n = self.select_out(pkt, &l, &mut chosen)?;
        if n == 0 {
            return Ok(Outbound::Bypass);
        }
        let [mut a, mut b] = std::mem::take(&mut self.bufs);
        let mut r = Ok(());
        for (i, &idx) in chosen[..n].iter().enumerate() {
            let input: &[u8] = if i == 0 { pkt } else { &a };
            let target = if i + 1 == n { &mut *out } else { &mut b };
            target.clear();
            r = self.apply_out(idx, input, target);
            if r.is_err() {
                break;
            }
            if i + 1 < n {
                std::mem::swap(&mut a, &mut b);
            }
        }
        self.bufs = [a, b];
        r.map(|()| Outbound::Protected)
    }

    /// [`Engine::select_out`], answered from the last call's answer when
    /// there are no outbound policies (the choice then depends on the
    /// addresses alone, and the SAs never change) and the addresses are
    /// the last packet's, as they mostly are: the SA comes from a memory
    /// read the CPU can issue at once, not from comparisons of the packet's
    /// addresses (read from a header that is often not in L1 yet), so what
    /// depends on the SA (its state, ring's keys) can start loading early.
    /// Worth ~3 ns a packet beside 1400 bytes of AES-GCM (~250 ns).
    #[inline]
    fn select_out_again(
        &mut self,
        pkt: &[u8],
        l: &Layout,
        chosen: &mut [usize; MAX_BUNDLE],
    ) -> Result<usize, Reject> {
        if self.has_out_policies {
            return self.select_out(pkt, l, chosen);
        }
        let (src, dst) = (l.src(pkt), l.dst(pkt));
        if let Some((s, d, n, c)) = self.last_out {
            if s == src && d == dst {
                *chosen = c;
                return Ok(n);
            }
        }
        let n = self.select_out(pkt, l, chosen)?;
        self.last_out = Some((src, dst, n, *chosen));
        Ok(n)
    }

    /// Picks the SAs for an outbound packet, in the order to apply them.
    #[inline]
    fn select_out(
        &self,
        pkt: &[u8],
        l: &Layout,
        chosen: &mut [usize; MAX_BUNDLE],
    ) -> Result<usize, Reject> {
        if !self.has_out_policies {
            // By the `add` lines' own addresses: ESP, then AH around it.
            let mut n = 0;
            for proto in [Protocol::Esp, Protocol::Ah] {
                if let Some(i) = self.sas.iter().position(|s| {
                    s.sa.protocol == proto && s.sa.src == l.src(pkt) && s.sa.dst == l.dst(pkt)
                }) {
                    chosen[n] = i;
                    n += 1;
                }
            }
            return Ok(n);
        }
        let sel = selectors(pkt, l);
        let Some(p) = self
            .policies
            .iter()
            .find(|p| p.dir == PolicyDir::Out && covers(p, &sel))
        else {
            return Ok(0);
        };
        match &p.action {
            PolicyAction::Discard => Err(Reject::PolicyDiscard),
            PolicyAction::None => Ok(0),
            PolicyAction::Ipsec(ts) => {
                let mut n = 0;
                for t in ts.iter().take(MAX_BUNDLE) {
                    let (s, d) = t.tunnel.unwrap_or((l.src(pkt), l.dst(pkt)));
                    let found = self.sas.iter().position(|x| {
                        x.sa.protocol == t.protocol
                            && x.sa.mode == t.mode
                            && x.sa.src == s
                            && x.sa.dst == d
                    });
                    match found {
                        Some(i) => {
                            chosen[n] = i;
                            n += 1;
                        }
                        None if matches!(t.level, Level::Require | Level::Unique) => {
                            return Err(Reject::NoSaForPolicy)
                        }
                        None => {}
                    }
                }
                Ok(n)
            }
        }
    }

    /// Applies SA `idx` to the whole IP packet `input`, into `out`.
    fn apply_out(&mut self, idx: usize, input: &[u8], out: &mut Vec<u8>) -> Result<(), Reject> {
        if !self.sas[idx].alive(self.now) {
            return Err(Reject::Expired);
        }
        let mut tunnel = std::mem::take(&mut self.tunnel);
        let input = if self.sas[idx].mode() == Mode::Tunnel {
            let (src, dst) = (self.sas[idx].sa.src, self.sas[idx].sa.dst);
            self.ip_id = self.ip_id.wrapping_add(1);
            wrap(input, src, dst, self.ip_id, &mut tunnel)?;
            &tunnel[..]
        } else {
            input
        };
        let r = self.transport_out(idx, input, out);
        self.tunnel = tunnel;
        r
    }

    /// Inserts ESP or AH behind the IP header of `input`.
    fn transport_out(&mut self, idx: usize, input: &[u8], out: &mut Vec<u8>) -> Result<(), Reject> {
        let l = Layout::parse(input)?;
        if l.fragment {
            return Err(Reject::Fragment);
        }
        let header = &input[..l.header_len];
        let payload = &input[l.header_len..l.total_len];
        let sa = &mut self.sas[idx];
        out.extend_from_slice(header);
        match sa.protocol() {
            Protocol::Esp => {
                let udp = sa.sa.encap_udp;
                let udp_at = out.len();
                out[l.protocol_at] = match udp {
                    Some(ports) => {
                        out.extend_from_slice(&udp_header(ports));
                        proto::UDP
                    }
                    None => proto::ESP,
                };
                esp::seal(sa, payload, l.protocol, out)?;
                let udp = udp.map(|_| (udp_at, l.src(input), l.dst(input)));
                finish_esp_out(out, udp, l.v6)?;
            }
            Protocol::Ah => {
                out[l.protocol_at] = proto::AH;
                let ah_at = out.len();
                let seq = ah::push_header(sa, l.protocol, l.v6, out)?;
                out.extend_from_slice(payload);
                check_size(out, l.v6)?;
                ip::fix_lengths(out, l.v6);
                ah::zero_mutable(&out[..ah_at], l.v6, &mut self.zeroed)?;
                ah::fill_icv(sa, out, ah_at, &self.zeroed, seq);
            }
        }
        Ok(())
    }

    /// `pre`: an SA already applied to `pkt` (by the in-place path), which
    /// the inbound policy check counts.
    fn inbound_inner(
        &mut self,
        pkt: &[u8],
        out: &mut Vec<u8>,
        pre: Option<usize>,
    ) -> Result<Inbound, Reject> {
        let mut l = Layout::parse(pkt)?;
        // A damaged IPv4 header is dropped, as the kernel drops it.
        if !l.v6 && !ip::ipv4_checksum_ok(pkt) {
            return Err(Reject::Malformed);
        }
        let mut whole = Vec::new();
        let mut cur: &[u8] = &pkt[..l.total_len];
        if l.fragment {
            let keep = match fragment_protocol(cur) {
                Some(proto::ESP | proto::AH) => true,
                Some(proto::UDP) => !self.natt_ports.is_empty(),
                _ => false,
            };
            if !keep {
                return self.check_clear(cur, &l);
            }
            match self.frag.add(cur, self.now, &mut whole) {
                Step::Held => return Ok(Inbound::Held),
                Step::Refused => return Err(Reject::Fragment),
                Step::Done => {
                    l = Layout::parse(&whole)?;
                    cur = &whole[..];
                }
            }
        }
        let [mut a, mut b] = std::mem::take(&mut self.bufs);
        let mut applied = [0usize; MAX_BUNDLE];
        let mut n = 0;
        if let Some(i) = pre {
            applied[0] = i;
            n = 1;
        }
        let mut r = Ok(());
        // The result of each layer goes to `b`, then becomes the input.
        let mut in_a = false;
        while n < MAX_BUNDLE {
            let input: &[u8] = if in_a { &a } else { cur };
            let layer = match l.protocol {
                proto::ESP => Some((proto::ESP, l.header_len)),
                proto::AH => Some((proto::AH, l.header_len)),
                proto::UDP if !self.natt_ports.is_empty() => match self.natt(input, &l) {
                    Ok(Some(at)) => Some((proto::ESP, at)),
                    Ok(None) => None,
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                },
                _ => None,
            };
            let Some((proto, at)) = layer else { break };
            b.clear();
            let res = if proto == proto::ESP {
                self.esp_in(input, &l, at, &mut b)
            } else {
                self.ah_in(input, &l, &mut b)
            };
            match res {
                Ok(idx) => {
                    applied[n] = idx;
                    n += 1;
                }
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
            match Layout::parse(&b) {
                Ok(nl) => l = nl,
                Err(e) => {
                    r = Err(e.into());
                    break;
                }
            }
            std::mem::swap(&mut a, &mut b);
            in_a = true;
        }
        let result = match r {
            Err(e) => Err(e),
            Ok(()) if n == 0 => {
                let c = self.check_clear(cur, &l);
                self.bufs = [a, b];
                return c;
            }
            Ok(()) => {
                let res: &[u8] = if in_a { &a } else { cur };
                match self.check_in(&selectors(res, &l), &applied[..n]) {
                    Ok(()) if in_a => {
                        // The result changes hands instead of being copied:
                        // the caller's buffer becomes the engine's.
                        std::mem::swap(out, &mut a);
                        Ok(Inbound::Decapsulated)
                    }
                    Ok(()) => {
                        out.clear();
                        out.extend_from_slice(cur);
                        Ok(Inbound::Decapsulated)
                    }
                    Err(e) => Err(e),
                }
            }
        };
        self.bufs = [a, b];
        result
    }

    /// A packet that carries no ESP/AH: clear, unless a policy wants IPsec.
    fn check_clear(&self, pkt: &[u8], l: &Layout) -> Result<Inbound, Reject> {
        if self.has_in_policies {
            self.check_in(&selectors(pkt, l), &[])?;
        }
        Ok(Inbound::Clear)
    }

    /// Whether the SAs `applied` satisfy the first inbound policy covering
    /// the decapsulated packet.
    fn check_in(&self, sel: &Selectors, applied: &[usize]) -> Result<(), Reject> {
        if !self.has_in_policies {
            return Ok(());
        }
        let Some(p) = self
            .policies
            .iter()
            .find(|p| p.dir == PolicyDir::In && covers(p, sel))
        else {
            return Ok(());
        };
        match &p.action {
            PolicyAction::Discard => Err(Reject::PolicyDiscard),
            PolicyAction::None => Ok(()),
            PolicyAction::Ipsec(ts) => {
                let ok = ts.iter().all(|t| {
                    !matches!(t.level, Level::Require | Level::Unique)
                        || applied.iter().any(|&i| {
                            let s = &self.sas[i].sa;
                            s.protocol == t.protocol
                                && s.mode == t.mode
                                && t.tunnel.is_none_or(|(a, b)| s.src == a && s.dst == b)
                        })
                });
                if ok {
                    Ok(())
                } else {
                    Err(Reject::PolicyMismatch)
                }
            }
        }
    }

    /// For a UDP datagram to an ESP-in-UDP port: where ESP starts, or `None`
    /// for IKE (non-ESP marker) and NAT keepalives, which pass as they are.
    fn natt(&mut self, input: &[u8], l: &Layout) -> Result<Option<usize>, Reject> {
        let u = l.header_len;
        // The UDP length field is not read: ESP's own lengths decide.
        let Some(h) = input.get(u..u + udp::HEADER_LEN) else {
            return Err(Reject::Truncated);
        };
        let dport = UdpPacket::new_unchecked(h).dst_port();
        if self.natt_ports.binary_search(&dport).is_err() {
            return Ok(None);
        }
        let body = &input[u + udp::HEADER_LEN..l.total_len];
        if body.len() == 1 && body[0] == 0xff || body.len() >= 4 && body[..4] == [0; 4] {
            self.totals.udp_not_esp += 1;
            return Ok(None);
        }
        if body.len() < 4 {
            self.totals.udp_not_esp += 1;
            return Ok(None);
        }
        Ok(Some(u + udp::HEADER_LEN))
    }

    /// [`Engine::lookup`], answered from the last call's answer for the
    /// same protocol, SPI and destination (the SAs never change), as for
    /// most packets: as [`Engine::select_out_again`], the SA then does not
    /// wait on the packet's SPI, read from a header often not in L1 yet,
    /// and on a search that depends on it. Worth ~4 ns a packet beside 1400
    /// bytes of AES-GCM.
    #[inline]
    fn lookup_again(&mut self, proto: u8, spi: u32, dst: IpAddr) -> Option<usize> {
        if let Some((p, s, d, i)) = self.last_in {
            if p == proto && s == spi && d == dst {
                return Some(i);
            }
        }
        let i = self.lookup(proto, spi, dst)?;
        self.last_in = Some((proto, spi, dst, i));
        Some(i)
    }

    #[inline]
    fn lookup(&self, proto: u8, spi: u32, dst: IpAddr) -> Option<usize> {
        let from = self
            .by_spi
            .partition_point(|&(p, s, _)| (p, s) < (proto, spi));
        self.by_spi[from..]
            .iter()
            .take_while(|&&(p, s, _)| (p, s) == (proto, spi))
            .map(|&(_, _, i)| i)
            .find(|&i| self.sas[i].sa.dst == dst)
    }

    /// Removes the ESP at `at` from `input` into `out`; returns the SA.
    fn esp_in(
        &mut self,
        input: &[u8],
        l: &Layout,
        at: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, Reject> {
        let esp = &input[at..l.total_len];
        let spi = esp::spi(esp).ok_or(Reject::Truncated)?;
        let idx = (self.lookup(proto::ESP, spi, l.dst(input))).ok_or(Reject::NoSa)?;
        let sa = &mut self.sas[idx];
        if !sa.alive(self.now) {
            return Err(Reject::Expired);
        }
        let tunnel = sa.mode() == Mode::Tunnel;
        if !tunnel {
            out.extend_from_slice(&input[..l.header_len]);
        }
        let nh = esp::open(sa, esp, out)?;
        if nh == proto::NO_NEXT {
            return Err(Reject::Dummy);
        }
        finish_in(out, l, nh, tunnel)?;
        Ok(idx)
    }

    /// Checks and removes the AH of `input` into `out`; returns the SA.
    fn ah_in(&mut self, input: &[u8], l: &Layout, out: &mut Vec<u8>) -> Result<usize, Reject> {
        let packet = &input[..l.total_len];
        let h = ah::header(&packet[l.header_len..])?;
        let idx = (self.lookup(proto::AH, h.spi, l.dst(input))).ok_or(Reject::NoSa)?;
        if !self.sas[idx].alive(self.now) {
            return Err(Reject::Expired);
        }
        ah::zero_mutable(&packet[..l.header_len], l.v6, &mut self.zeroed)?;
        let sa = &mut self.sas[idx];
        ah::verify(
            sa,
            packet,
            l.header_len,
            &h,
            &self.zeroed,
            &mut self.scratch,
        )?;
        let tunnel = sa.mode() == Mode::Tunnel;
        if !tunnel {
            out.extend_from_slice(&packet[..l.header_len]);
        }
        out.extend_from_slice(&packet[l.header_len + h.len..]);
        finish_in(out, l, h.next_header, tunnel)?;
        Ok(idx)
    }
}

/// After ESP/AH came off: a tunnel's inner packet must be IP; transport
/// mode gets its protocol and lengths back.
#[inline]
fn finish_in(out: &mut [u8], l: &Layout, nh: u8, tunnel: bool) -> Result<(), Reject> {
    if tunnel {
        if !matches!(nh, proto::IPV4 | proto::IPV6) {
            return Err(Reject::Malformed);
        }
        Layout::parse(out)?;
        return Ok(());
    }
    check_size(out, l.v6)?;
    ip::set_protocol_and_lengths(out, l.v6, Some((l.protocol_at, nh)));
    Ok(())
}

/// A UDP header for ESP in UDP (RFC 3948): the ports; length and checksum
/// left for [`finish_esp_out`].
fn udp_header((src, dst): (u16, u16)) -> [u8; udp::HEADER_LEN] {
    let mut h = UdpPacket::new_unchecked([0u8; udp::HEADER_LEN]);
    h.set_src_port(src);
    h.set_dst_port(dst);
    h.into_inner()
}

/// Completes the outbound ESP packet `p` (a whole IP packet): with ESP in
/// UDP, `udp` gives where its UDP header is, which gets its length and,
/// over IPv6, its checksum (zero over IPv4, RFC 3948 §2.1) for the outer
/// addresses `udp` gives too; then the IP lengths (and IPv4 checksum over
/// its header length).
///
/// The addresses come only with `udp`: built for every packet and passed
/// by reference, they were read back wider than they had just been
/// written, a store-forwarding stall per packet for nothing without UDP.
#[inline]
fn finish_esp_out(
    p: &mut [u8],
    udp: Option<(usize, IpAddr, IpAddr)>,
    v6: bool,
) -> Result<(), Reject> {
    check_size(p, v6)?;
    if let Some((u, src, dst)) = udp {
        let ulen = (p.len() - u) as u16;
        UdpPacket::new_unchecked(&mut p[u..]).set_len(ulen);
        if v6 {
            let c = ip::udp_checksum(src, dst, &p[u..]);
            UdpPacket::new_unchecked(&mut p[u..]).set_checksum(c);
        }
    }
    ip::fix_lengths(p, v6);
    Ok(())
}

fn check_size(p: &[u8], v6: bool) -> Result<(), Reject> {
    let max = if v6 { 40 + 65_535 } else { 65_535 };
    if p.len() > max {
        Err(Reject::TooBig)
    } else {
        Ok(())
    }
}

/// The TTL (or hop limit) of an outer header, Linux's default.
const OUTER_TTL: u8 = 64;

/// The outer IP header from `src` to `dst` for the inner packet `inner`
/// (RFC 4301 §5.1.2: DSCP and ECN copied, DF copied from an IPv4 inner
/// packet, TTL 64), lengths left for the caller: the bytes and their count.
pub(crate) fn outer_header(
    inner: &[u8],
    v6_inner: bool,
    src: IpAddr,
    dst: IpAddr,
    id: u16,
) -> Result<([u8; 40], usize), Reject> {
    let (tos, df, nh) = if v6_inner {
        let ip = Ipv6Packet::new_unchecked(inner);
        (ip.traffic_class(), false, IpProtocol::Ipv6)
    } else {
        let ip = Ipv4Packet::new_unchecked(inner);
        (ip.tos(), ip.dont_frag(), IpProtocol::Ipv4)
    };
    let mut h = [0u8; ipv6::HEADER_LEN];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut ip = Ipv4Packet::new_unchecked(&mut h[..ipv4::HEADER_LEN]);
            ip.set_header_len(ipv4::HEADER_LEN);
            ip.set_tos(tos);
            ip.set_ident(id);
            ip.set_frag(df, false, 0);
            ip.set_ttl(OUTER_TTL);
            ip.set_protocol(nh);
            ip.set_src_addr(s);
            ip.set_dst_addr(d);
            Ok((h, ipv4::HEADER_LEN))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut ip = Ipv6Packet::new_unchecked(&mut h[..]);
            ip.set_ver_tc_flow(tos, 0);
            ip.set_next_header(nh);
            ip.set_hop_limit(OUTER_TTL);
            ip.set_src_addr(s);
            ip.set_dst_addr(d);
            Ok((h, ipv6::HEADER_LEN))
        }
        _ => Err(Reject::Malformed),
    }
}

/// Puts `inner` in an outer IP header from `src` to `dst` ([`outer_header`]).
fn wrap(inner: &[u8], src: IpAddr, dst: IpAddr, id: u16, out: &mut Vec<u8>) -> Result<(), Reject> {
    let l = Layout::parse(inner)?;
    let inner = &inner[..l.total_len];
    let (h, n) = outer_header(inner, l.v6, src, dst, id)?;
    out.clear();
    out.extend_from_slice(&h[..n]);
    out.extend_from_slice(inner);
    check_size(out, src.is_ipv6())?;
    ip::fix_lengths(out, src.is_ipv6());
    Ok(())
}

fn selectors(pkt: &[u8], l: &Layout) -> Selectors {
    // TCP, UDP and SCTP (RFC 9260 §3.1) keep both ports in their first
    // four bytes.
    let ports = match l.protocol {
        proto::TCP | proto::UDP | proto::SCTP if !l.fragment => {
            let at = l.header_len;
            pkt.get(at + wire::ip::PORTS.start..at + wire::ip::PORTS.end)
                .map(|p| {
                    let p = UdpPacket::new_unchecked(p);
                    (p.src_port(), p.dst_port())
                })
        }
        _ => None,
    };
    Selectors {
        src: l.src(pkt),
        dst: l.dst(pkt),
        protocol: l.protocol,
        ports,
    }
}

fn covers(p: &Policy, s: &Selectors) -> bool {
    if !p.src.contains(s.src) || !p.dst.contains(s.dst) {
        return false;
    }
    if let Upper::Protocol(n) = p.upper {
        if n != s.protocol {
            return false;
        }
    }
    match (p.src_port, p.dst_port) {
        (None, None) => true,
        (sp, dp) => s
            .ports
            .is_some_and(|(a, b)| sp.is_none_or(|x| x == a) && dp.is_none_or(|x| x == b)),
    }
}
