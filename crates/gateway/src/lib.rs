//! `gateway`: the IPsec gateway behind `kansoku ipsec gateway`: IP packets between a TUN device and the wire,
//! through kansoku's ESP/AH, so that unmodified programs (ping, curl,
//! iperf3) talk over it.
//!
//! ```text
//! apps ─► route via TUN ─► Tun::read ─► offload::segment ─► Engine::outbound ─► RawIpSender (bound to --dev) ─► wire
//! apps ◄─ kernel ◄──────── Tun::write ◄─ offload::Coalescer ◄─ Engine::inbound ◄─ RawIpReceiver ESP/AH, UdpEncap ◄─ wire
//! ```
//!
//! One thread waits on the TUN and the receivers (one epoll set, registered
//! once) and drains each ready one up
//! to [`BATCH`] packets with nonblocking reads; packets go through
//! preallocated buffers (nothing is allocated per packet). Each direction
//! has an [`ipsec::Engine`] of its own, built from the same SAs. A file
//! without SAs or policies passes every packet through unprotected by the
//! same TUN-to-raw-socket path (the "clear" baseline); what arrives in the
//! clear is then the kernel's own, since a raw socket receives a copy and
//! cannot take a packet away from the kernel.
//!
//! Sizes:
//! - The TUN MTU, unless given, is the smallest path MTU towards the SAs'
//!   addresses (out of the outer device) less the most the SAs can add
//!   ([`ipsec::Engine::max_overhead`]), so that no protected packet is
//!   larger than the path; at least 1280 when IPv6 is protected (its
//!   minimum), 1500 without SAs.
//! - Fragments the kernel makes before the TUN (a datagram over the TUN
//!   MTU with DF clear, or IPv6 fragmented at its source) are reassembled
//!   first when there are SAs ([`ipsec::frag`], the engine's own
//!   reassembler, room for 16 datagrams): ESP and AH protect whole
//!   packets (transport mode carries no fragments), and the outer packet is
//!   fragmented instead. Without SAs they pass as they are.
//! - A packet the sender refuses as too big (`EMSGSIZE`: larger than the
//!   device, or than the path with DF set or over IPv6; see
//!   [`capture::rawip`]) is answered, when its sender can send smaller, with
//!   ICMP "fragmentation needed" (IPv4 with DF) or ICMPv6 "packet too big"
//!   (IPv6 over 1280 bytes), giving the path MTU less the overhead, written
//!   into the TUN as if from the packet's destination, so that the sender's
//!   path MTU discovery adapts. Otherwise (IPv4 without DF, IPv6 of 1280
//!   bytes or less, a datagram reassembled here) the gateway, the outer
//!   packet's source, fragments it itself; the peer's kernel reassembles
//!   before its raw socket. IPv4 without DF within the device MTU is
//!   fragmented by the kernel and never reaches this.
//!
//! Offloads ([`offload`], unless [`GatewayConfig::offload`] is off): the
//! TUN is opened with the virtio-net header and checksum and TCP
//! segmentation offloads, so a TCP sender's segments of up to 64 KiB come
//! in one read and are cut here before protection, and decapsulated
//! in-order TCP segments are joined into one write, as a card's GRO would.
//!
//! Queues: the TUN's is set to [`TUN_QUEUE`] packets and the raw receivers'
//! buffers to 4 MiB, and the kernel's drops at both are in the report.
//!
//! The raw sender is bound to the outer device (`SO_BINDTODEVICE`): in
//! host-to-host transport mode the applications reach the peer's address
//! through a route into the TUN, and the gateway reaches the same address
//! out of the device; the binding makes the kernel pass over the TUN's
//! route. Without it, protected packets would come back into the TUN: they
//! are dropped and counted as `looped`.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::os::fd::AsFd;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use capture::poll::{Poller, MAX_FDS};
use capture::rawip::{path_mtu_via, SendFault};
use capture::{RawIpReceiver, RawIpSender, Tun, UdpEncap};
use ipsec::{Engine, Inbound, Keying, Mode, Options, Outbound, Protocol};
use serde::Serialize;
use wire::IpProtocol;

#[cfg(feature = "cli")]
pub mod cli;
pub mod offload;
mod packet;
mod report;

/// Why a gateway could not be opened: a configuration that asks for what
/// cannot be had (more sockets than one gateway watches) is a usage error;
/// an SA that could not be keyed, or a device or socket that could not be
/// set up (a missing capability, an address not on this host), an input
/// error.
pub use outcome::{Error, Result};

use ipsec::frag::{is_fragment, Reassembler, Step};
use packet::{
    dont_fragment, dst_addr, fragment_v4, fragment_v6, icmp4_too_big, icmp6_too_big, ip_protocol,
    link_local, udp_headers, version, IPV4_MIN_MTU, IPV6_MIN_MTU, UDP_HEAD,
};

/// Packets read from one descriptor before the others get a turn.
pub const BATCH: usize = 64;

/// Where an inbound packet comes from: raw receiver `i` (ESP, AH), or
/// ESP-in-UDP socket `i`.
#[derive(Clone, Copy, Debug)]
enum Receiver {
    Raw(usize),
    Udp(usize),
}

/// The raw receivers' buffer: a burst waits there while the loop works on
/// the other direction (the default, 208 KiB, dropped about one packet in
/// ten of a TCP stream here, unoptimized).
const RECV_BUFFER: usize = 4 << 20;

/// Datagrams from the TUN whose fragments wait at once.
pub(crate) const REASSEMBLY_SLOTS: usize = 16;

/// Packets the kernel queues for the TUN's reader: at 500 (a TUN's
/// default) a TCP stream's bursts overflowed it here, one packet in 30.
pub const TUN_QUEUE: u32 = 4096;

/// How long the loop waits for packets before it looks at the stop flag.
const IDLE: Duration = Duration::from_millis(100);

/// What [`Gateway::open`] needs.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// The TUN device (`%d` is numbered by the kernel); a persistent one of
    /// that name is attached to.
    pub tun_name: String,
    /// The TUN MTU; `None` computes it (see the module docs).
    pub tun_mtu: Option<u32>,
    /// The outer device: protected packets leave only through it, and ESP/AH
    /// are received only from it.
    pub outer_device: Option<String>,
    /// SAs and policies (a file with none: every packet in the clear).
    pub sa: ipsec::Config,
    pub keying: Keying,
    /// Open the TUN with the checksum and TCP segmentation offloads
    /// ([`offload`]): TCP segments of up to 64 KiB are read whole and cut
    /// here, and in-order segments are joined before they are written.
    pub offload: bool,
}

/// What the TUN offloads did ([`offload`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct OffloadReport {
    /// Whether the TUN has them.
    pub on: bool,
    /// TUN reads that were TCP segments larger than the MTU, and the
    /// packets they were cut into.
    pub tso_reads: u64,
    pub tso_segments: u64,
    /// TUN reads whose virtio-net header did not fit the packet, by
    /// [`offload::OffloadError::name`]; dropped.
    pub refused: BTreeMap<&'static str, u64>,
    /// Inbound TCP segments joined to the one before them, and the joined
    /// packets written.
    pub gro_joined: u64,
    pub gro_writes: u64,
    /// Inbound TCP segments with a wrong checksum, written alone for the
    /// kernel to drop and count.
    pub bad_checksum: u64,
}

/// One direction's counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Direction {
    /// Packets and bytes taken in (TUN reads outbound, receives inbound).
    pub packets_in: u64,
    pub bytes_in: u64,
    /// Packets and bytes handed on (sent to the wire, written to the TUN).
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Protected (outbound) or decapsulated (inbound).
    pub ipsec: u64,
    /// Outbound: sent unprotected (no SA or policy covers it). Inbound:
    /// dropped for carrying no ESP (IKE, NAT keepalives on the UDP port).
    pub clear: u64,
    /// Fragments kept until the rest of their datagram arrives (outbound:
    /// made by the kernel before the TUN; inbound: left by the kernel's own
    /// reassembly, which comes first).
    pub held: u64,
    /// Datagrams put back together from fragments.
    pub reassembled: u64,
    /// Datagrams whose fragments never all came (timed out or evicted).
    pub fragments_timed_out: u64,
    /// Refusals by reason (every reason listed; outbound `fragment` also
    /// counts fragments the gateway could not reassemble).
    pub rejects: BTreeMap<&'static str, u64>,
}

/// Failed sends, by [`SendFault`].
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SendFaults {
    pub too_big: u64,
    pub no_route: u64,
    pub queue_full: u64,
    pub bad_packet: u64,
    pub other: u64,
}

impl SendFaults {
    fn count(&mut self, f: SendFault) {
        match f {
            SendFault::TooBig => self.too_big += 1,
            SendFault::NoRoute => self.no_route += 1,
            SendFault::QueueFull => self.queue_full += 1,
            SendFault::BadPacket => self.bad_packet += 1,
            SendFault::Other => self.other += 1,
        }
    }
}

/// One SA, as configured (no key) and as counted in both directions.
#[derive(Clone, Debug, Serialize)]
pub struct SaReport {
    pub protocol: String,
    pub spi: u32,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub mode: &'static str,
    pub enc: Option<&'static str>,
    pub auth: Option<&'static str>,
    pub encap_udp: Option<(u16, u16)>,
    pub packets: u64,
    pub bytes: u64,
    pub replay: u64,
    pub replay_window: u64,
    pub integrity_failed: u64,
    pub padding_failed: u64,
    pub malformed: u64,
    pub expired: u64,
    pub seq_overflow: u64,
}

/// What a run did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GatewayReport {
    pub tun: String,
    pub tun_mtu: u32,
    /// TUN to wire.
    pub outbound: Direction,
    /// Wire to TUN.
    pub inbound: Direction,
    pub sas: Vec<SaReport>,
    pub send_faults: SendFaults,
    /// ICMP "fragmentation needed" and ICMPv6 "packet too big" written into
    /// the TUN.
    pub icmp_too_big: u64,
    /// Outer packets the gateway fragmented itself, and their fragments.
    pub fragmented: u64,
    pub fragments: u64,
    /// TUN packets of the TUN's own link (IPv6 link-local, router
    /// solicitations, MLD; IPv4 link-local multicast): not forwarded.
    pub link_local: u64,
    /// ESP/AH read from the TUN: the gateway's own output routed back into
    /// it (no outer device given); dropped.
    pub looped: u64,
    /// TUN reads longer than the buffer, cut by the kernel.
    pub tun_cut: u64,
    pub tun_write_errors: u64,
    pub receive_errors: u64,
    /// Packets the kernel dropped at the raw receivers, their buffers full.
    pub receive_drops: u64,
    /// Packets the kernel dropped at the TUN, its queue full (its
    /// `tx_dropped` since the start, read from /sys/class/net, which is this
    /// namespace's when run by `ip netns exec`); `None` if unreadable.
    pub tun_drops: Option<u64>,
    pub offload: OffloadReport,
    /// What ended the loop other than the stop flag.
    pub error: Option<String>,
}

/// The buffers every packet goes through, allocated once.
struct Bufs {
    /// A TUN read.
    tun: Vec<u8>,
    /// A receive, with [`UDP_HEAD`] bytes of room in front.
    rx: Vec<u8>,
    /// An engine's result.
    out: Vec<u8>,
    /// An ICMP error or a fragment.
    scratch: Vec<u8>,
    /// A datagram reassembled from TUN fragments.
    whole: Vec<u8>,
    /// A segment cut from a TUN read.
    segment: Vec<u8>,
}

/// A TUN device, raw sockets and two engines; [`Gateway::run`] moves the
/// packets.
pub struct Gateway {
    tun: Tun,
    tx: RawIpSender,
    rx: Vec<RawIpReceiver>,
    udp: Vec<UdpEncap>,
    out_engine: Engine,
    in_engine: Engine,
    device: Option<String>,
    has_sas: bool,
    /// [`Engine::max_overhead`] for IPv4 and IPv6 SAs.
    overhead: [usize; 2],
    tun_mtu: u32,
    notes: Vec<String>,
    bufs: Bufs,
    /// Fragments read from the TUN, while SAs need whole packets.
    reassembly: Reassembler,
    /// Seconds since the epoch, read once a loop.
    now: u64,
    /// Identification of fragments of an IPv4 packet that had none, and of
    /// IPv6 fragments.
    frag_id: u32,
    tun_dropped_at_start: Option<u64>,
    /// The TUN, then the raw receivers, then the UDP sockets, registered
    /// once.
    poller: Poller,
    /// Inbound TCP segments waiting to be joined (offloads on).
    gro: offload::Coalescer,
    report: GatewayReport,
}

fn setup(what: impl std::fmt::Display, e: io::Error) -> Error {
    Error::input(format!("{what}: {e}"))
}

impl Gateway {
    /// Keys the SAs, opens the TUN (MTU set, up), the sender and the
    /// receivers the SAs need, in the calling thread's network namespace.
    /// Needs CAP_NET_ADMIN and CAP_NET_RAW. Addresses and routes are the
    /// caller's.
    pub fn open(cfg: GatewayConfig) -> Result<Gateway> {
        let opts = Options { keying: cfg.keying };
        let key_error = |e: ipsec::KeyError| Error::input(format!("SA file: {}", e.0));
        let out_engine = Engine::new(&cfg.sa, opts).map_err(key_error)?;
        let in_engine = Engine::new(&cfg.sa, opts).map_err(key_error)?;
        let overhead = [
            out_engine.max_overhead(false),
            out_engine.max_overhead(true),
        ];
        let device = cfg.outer_device.clone();
        let dev = device.as_deref();
        let mut notes = Vec::new();

        let tx = RawIpSender::open().map_err(|e| setup("raw IP sender", e))?;
        if let Some(d) = dev {
            tx.bind_device(d).map_err(|e| setup("raw IP sender", e))?;
        }
        let mut rx = Vec::new();
        for v6 in [false, true] {
            for p in [Protocol::Esp, Protocol::Ah] {
                if !cfg
                    .sa
                    .sas
                    .iter()
                    .any(|s| s.protocol == p && s.dst.is_ipv6() == v6)
                {
                    continue;
                }
                let proto = IpProtocol::from(p.number());
                let r = if v6 {
                    RawIpReceiver::open_v6(proto)
                } else {
                    RawIpReceiver::open_v4(proto)
                }
                .map_err(|e| setup(format!("{p} receiver"), e))?;
                if let Some(d) = dev {
                    r.bind_device(d)
                        .map_err(|e| setup(format!("{p} receiver"), e))?;
                }
                r.set_nonblocking(true)
                    .map_err(|e| setup(format!("{p} receiver"), e))?;
                if let Err(e) = r.set_recv_buffer(RECV_BUFFER) {
                    notes.push(format!("{p} receiver: {e}"));
                }
                rx.push(r);
            }
        }
        // ESP in UDP: a socket on each SA destination that is ours (binding
        // to the peer's address fails, and is passed over).
        let mut udp: Vec<UdpEncap> = Vec::new();
        for s in &cfg.sa.sas {
            let Some((_, dport)) = s.encap_udp else {
                continue;
            };
            let at = SocketAddr::new(s.dst, dport);
            if udp.iter().any(|u| u.local_addr() == at) {
                continue;
            }
            match UdpEncap::bind(at) {
                Ok(u) => {
                    u.set_nonblocking(true)
                        .map_err(|e| setup(format!("UDP {at}"), e))?;
                    udp.push(u);
                }
                Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable => {}
                Err(e) => return Err(setup(format!("ESP in UDP on {at}"), e)),
            }
        }
        if 1 + rx.len() + udp.len() > MAX_FDS {
            return Err(Error::usage(format!(
                "ESP in UDP on {} addresses: at most {} sockets",
                udp.len(),
                MAX_FDS - 1 - rx.len()
            )));
        }

        let tun_mtu = match cfg.tun_mtu {
            Some(m) => m,
            None => {
                let (m, why) = default_mtu(&cfg.sa, dev, overhead);
                notes.push(why);
                m
            }
        };
        let tun = if cfg.offload {
            Tun::open_offload(&cfg.tun_name)
        } else {
            Tun::open(&cfg.tun_name)
        }
        .map_err(|e| setup("TUN", e))?;
        tun.set_mtu(tun_mtu).map_err(|e| setup("TUN", e))?;
        if let Err(e) = tun.set_tx_queue_len(TUN_QUEUE) {
            notes.push(format!("TUN: {e}"));
        }
        tun.set_up().map_err(|e| setup("TUN", e))?;
        tun.set_nonblocking(true).map_err(|e| setup("TUN", e))?;

        let has_sas = !cfg.sa.sas.is_empty();
        match dev {
            None => notes.push(
                "no outer device (--dev): a route to a peer through the TUN sends the \
                 gateway's packets back into it"
                    .into(),
            ),
            Some(d) if rp_filter_strict(d) => notes.push(format!(
                "warning: strict reverse-path filtering on {d} drops packets from a peer \
                 whose address is routed into the TUN; net.ipv4.conf.{{all,{d}}}.rp_filter=2 \
                 makes it loose"
            )),
            Some(_) => {}
        }
        let tun_dropped_at_start = tun_dropped(tun.name());
        let fds: Vec<_> = std::iter::once(tun.as_fd())
            .chain(rx.iter().map(|r| r.as_fd()))
            .chain(udp.iter().map(|u| u.as_fd()))
            .collect();
        if fds.len() > MAX_FDS {
            return Err(Error::input(format!(
                "ipsec gateway: {} sockets to watch, at most {MAX_FDS}",
                fds.len()
            )));
        }
        let poller = Poller::new(&fds).map_err(|e| Error::input(format!("epoll: {e}")))?;
        let report = GatewayReport {
            tun: tun.name().to_string(),
            tun_mtu,
            offload: OffloadReport {
                on: cfg.offload,
                ..OffloadReport::default()
            },
            ..GatewayReport::default()
        };
        Ok(Gateway {
            tun,
            tx,
            rx,
            udp,
            out_engine,
            in_engine,
            device,
            has_sas,
            overhead,
            tun_mtu,
            notes,
            bufs: Bufs {
                tun: vec![0; offload::VNET_HDR_LEN + 65_536],
                rx: vec![0; UDP_HEAD + 65_575],
                out: Vec::with_capacity(65_536 + 256),
                scratch: Vec::with_capacity(65_536),
                whole: Vec::with_capacity(65_536),
                segment: Vec::with_capacity(65_536),
            },
            reassembly: Reassembler::new(REASSEMBLY_SLOTS),
            now: 0,
            frag_id: 1,
            tun_dropped_at_start,
            poller,
            gro: offload::Coalescer::new(),
            report,
        })
    }

    /// The TUN device's name.
    pub fn tun_name(&self) -> &str {
        self.tun.name()
    }

    pub fn tun_mtu(&self) -> u32 {
        self.tun_mtu
    }

    /// [`Engine::max_overhead`] of the SAs, IPv4 then IPv6.
    pub fn overhead(&self) -> [usize; 2] {
        self.overhead
    }

    /// How the MTU was chosen, and warnings about the setup.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Moves packets until `stop` is set or the TUN fails; the report
    /// covers everything since [`Gateway::open`].
    pub fn run(&mut self, stop: &AtomicBool) -> GatewayReport {
        let mut timeout = IDLE;
        while !stop.load(Ordering::Relaxed) && self.report.error.is_none() {
            self.now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            self.out_engine.set_now(self.now);
            self.in_engine.set_now(self.now);
            let ready = match self.poller.wait(timeout) {
                Ok(r) => r,
                Err(e) => {
                    self.report.error = Some(format!("epoll: {e}"));
                    break;
                }
            };
            let mut more = false;
            if ready.is_ready(0) {
                more |= self.drain_tun();
            }
            for i in 0..self.rx.len() {
                if ready.is_ready(1 + i) {
                    more |= self.drain_rx(Receiver::Raw(i));
                }
            }
            for i in 0..self.udp.len() {
                if ready.is_ready(1 + self.rx.len() + i) {
                    more |= self.drain_rx(Receiver::Udp(i));
                }
            }
            // A full batch may have left packets behind: look again at once.
            timeout = if more { Duration::ZERO } else { IDLE };
        }
        self.report()
    }

    /// The counts so far.
    pub fn report(&self) -> GatewayReport {
        let mut r = self.report.clone();
        r.receive_drops = self.rx.iter().filter_map(|x| x.drops().ok()).sum();
        r.offload.gro_joined = self.gro.joined;
        r.offload.bad_checksum = self.gro.bad_checksum;
        r.tun_drops = self
            .tun_dropped_at_start
            .zip(tun_dropped(self.tun.name()))
            .map(|(a, b)| b.saturating_sub(a));
        let (o, i) = (self.out_engine.totals(), self.in_engine.totals());
        r.outbound.ipsec = o.protected;
        r.outbound.clear = o.bypassed;
        r.inbound.ipsec = i.decapsulated;
        r.inbound.clear = i.clear;
        r.inbound.held = i.held;
        r.inbound.reassembled = i.reassembled;
        r.inbound.fragments_timed_out = i.fragments_timed_out;
        r.outbound.reassembled = self.reassembly.reassembled;
        r.outbound.fragments_timed_out = self.reassembly.timed_out;
        r.outbound.rejects = self
            .out_engine
            .rejects()
            .map(|(k, n)| (k.name(), n))
            .collect();
        if let Some(n) = r.outbound.rejects.get_mut(ipsec::Reject::Fragment.name()) {
            *n += self.reassembly.refused;
        }
        r.inbound.rejects = self
            .in_engine
            .rejects()
            .map(|(k, n)| (k.name(), n))
            .collect();
        r.sas = self
            .out_engine
            .sas()
            .iter()
            .zip(self.in_engine.sas())
            .map(|(a, b)| {
                let (s, x, y) = (a.sa(), a.counters(), b.counters());
                SaReport {
                    protocol: s.protocol.to_string(),
                    spi: s.spi,
                    src: s.src,
                    dst: s.dst,
                    mode: match s.mode {
                        Mode::Transport => "transport",
                        Mode::Tunnel => "tunnel",
                    },
                    enc: s.enc.as_ref().map(|(alg, _)| alg.name()),
                    auth: s.auth.as_ref().map(|(alg, _)| alg.name()),
                    encap_udp: s.encap_udp,
                    packets: x.packets + y.packets,
                    bytes: x.bytes + y.bytes,
                    replay: x.replay + y.replay,
                    replay_window: x.replay_window + y.replay_window,
                    integrity_failed: x.integrity_failed + y.integrity_failed,
                    padding_failed: x.padding_failed + y.padding_failed,
                    malformed: x.malformed + y.malformed,
                    expired: x.expired + y.expired,
                    seq_overflow: x.seq_overflow + y.seq_overflow,
                }
            })
            .collect();
        r
    }

    /// Reads the TUN until it is empty or a batch is done; whether it may
    /// hold more.
    fn drain_tun(&mut self) -> bool {
        let mut buf = std::mem::take(&mut self.bufs.tun);
        let mut seg = std::mem::take(&mut self.bufs.segment);
        let vnet = self.tun.has_vnet_hdr();
        let mut more = true;
        for _ in 0..BATCH {
            match self.tun.read(&mut buf) {
                Ok(n) if vnet => {
                    let mut k = 0u64;
                    match offload::segment(&buf[..n], &mut seg, |p| {
                        k += 1;
                        self.outbound(p);
                    }) {
                        Ok(_) if k > 1 => {
                            self.report.offload.tso_reads += 1;
                            self.report.offload.tso_segments += k;
                        }
                        Ok(_) => {}
                        Err(e) => *self.report.offload.refused.entry(e.name()).or_default() += 1,
                    }
                }
                Ok(n) => self.outbound(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    more = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::InvalidData => self.report.tun_cut += 1,
                Err(e) => {
                    self.report.error = Some(format!("{}: {e}", self.tun.name()));
                    more = false;
                    break;
                }
            }
        }
        self.bufs.tun = buf;
        self.bufs.segment = seg;
        more
    }

    /// Receives from `from` (a raw receiver, or an ESP-in-UDP socket)
    /// until it is empty or a batch is done; whether it may hold more.
    fn drain_rx(&mut self, from: Receiver) -> bool {
        let mut buf = std::mem::take(&mut self.bufs.rx);
        let mut more = true;
        for _ in 0..BATCH {
            match self.receive(from, &mut buf) {
                Ok(Some(packet)) => self.inbound(&buf[packet]),
                // A datagram whose IP and UDP headers cannot be put back.
                Ok(None) => self.report.receive_errors += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    more = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A packet longer than the buffer, bad ancillary data, or an
                // error the socket reports once (ICMP): counted, go on.
                Err(_) => self.report.receive_errors += 1,
            }
        }
        self.bufs.rx = buf;
        self.flush_gro();
        more
    }

    /// Receives one packet from `from` into `buf`; where the IP packet the
    /// engine reads lies in it. ESP in UDP arrives without its IP and UDP
    /// headers, which are put back in front of it (`None` if they cannot
    /// be).
    fn receive(&mut self, from: Receiver, buf: &mut [u8]) -> io::Result<Option<Range<usize>>> {
        match from {
            Receiver::Raw(i) => self.rx[i].recv(buf).map(|n| Some(0..n)),
            Receiver::Udp(i) => {
                let d = self.udp[i].recv(&mut buf[UDP_HEAD..])?;
                let dport = self.udp[i].local_addr().port();
                Ok(udp_headers(buf, d.len, d.src, d.dst, dport).map(|at| at..UDP_HEAD + d.len))
            }
        }
    }

    /// One packet from the TUN.
    fn outbound(&mut self, pkt: &[u8]) {
        let d = &mut self.report.outbound;
        d.packets_in += 1;
        d.bytes_in += pkt.len() as u64;
        if link_local(pkt) {
            self.report.link_local += 1;
            return;
        }
        if self.has_sas
            && matches!(
                ip_protocol(pkt),
                Some(wire::IpProtocol::Esp | wire::IpProtocol::Ah)
            )
        {
            self.report.looped += 1;
            return;
        }
        if self.has_sas && is_fragment(pkt) {
            let mut whole = std::mem::take(&mut self.bufs.whole);
            match self.reassembly.add(pkt, self.now, &mut whole) {
                Step::Done => self.protect(&whole, true),
                Step::Held => self.report.outbound.held += 1,
                Step::Refused => {}
            }
            self.bufs.whole = whole;
            return;
        }
        self.protect(pkt, false);
    }

    /// Protects (or passes) a whole packet from the TUN and sends it;
    /// `reassembled` if the kernel had fragmented it.
    fn protect(&mut self, pkt: &[u8], reassembled: bool) {
        let mut out = std::mem::take(&mut self.bufs.out);
        match self.out_engine.outbound(pkt, &mut out) {
            Ok(Outbound::Protected) => self.send(&out, pkt, true, reassembled),
            Ok(Outbound::Bypass) => self.send(pkt, pkt, false, reassembled),
            // Counted by the engine.
            Err(_) => {}
        }
        self.bufs.out = out;
    }

    /// Sends `wire`: protected from `inner`, or `inner` itself.
    fn send(&mut self, wire: &[u8], inner: &[u8], protected: bool, reassembled: bool) {
        match self.tx.send(wire) {
            Ok(()) => {
                self.report.outbound.packets_out += 1;
                self.report.outbound.bytes_out += wire.len() as u64;
            }
            Err(e) => {
                let f = SendFault::of(&e);
                self.report.send_faults.count(f);
                if f == SendFault::TooBig {
                    self.too_big(wire, inner, protected, reassembled);
                }
            }
        }
    }

    /// `wire` was refused as too big: tell the inner sender the size that
    /// fits, or fragment the outer packet (see the module docs). A packet
    /// reassembled here is fragmented again: its sender had already made it
    /// fit.
    fn too_big(&mut self, wire: &[u8], inner: &[u8], protected: bool, reassembled: bool) {
        let outer_v6 = version(wire) == wire::ipv6::VERSION;
        let Some(dst) = dst_addr(wire) else { return };
        let pmtu = path_mtu_via(dst, self.device.as_deref()).unwrap_or(if outer_v6 {
            IPV6_MIN_MTU
        } else {
            576
        });
        let overhead = if protected {
            self.overhead[usize::from(outer_v6)] as u32
        } else {
            0
        };
        let room = pmtu.saturating_sub(overhead);
        let mut scratch = std::mem::take(&mut self.bufs.scratch);
        let icmp = match version(inner) {
            _ if reassembled => None,
            wire::ipv4::VERSION if dont_fragment(inner) => {
                icmp4_too_big(inner, room.max(IPV4_MIN_MTU), &mut scratch)
            }
            wire::ipv6::VERSION if inner.len() > IPV6_MIN_MTU as usize => {
                icmp6_too_big(inner, room.max(IPV6_MIN_MTU), &mut scratch)
            }
            _ => None,
        };
        match icmp {
            Some(true) => match self.tun.write(&scratch) {
                Ok(()) => self.report.icmp_too_big += 1,
                Err(_) => self.report.tun_write_errors += 1,
            },
            // An ICMP error is not answered with another.
            Some(false) => {}
            None => {
                self.frag_id = self.frag_id.wrapping_add(1);
                let id = self.frag_id;
                let tx = &self.tx;
                let report = &mut self.report;
                let mut sent = 0u64;
                let mut emit = |f: &[u8]| match tx.send(f) {
                    Ok(()) => sent += 1,
                    Err(e) => report.send_faults.count(SendFault::of(&e)),
                };
                let ok = if outer_v6 {
                    fragment_v6(wire, pmtu as usize, id, &mut scratch, &mut emit)
                } else {
                    fragment_v4(wire, pmtu as usize, id as u16, &mut scratch, &mut emit)
                };
                if ok {
                    report.fragmented += 1;
                    report.fragments += sent;
                    report.outbound.packets_out += 1;
                    report.outbound.bytes_out += wire.len() as u64;
                }
            }
        }
        self.bufs.scratch = scratch;
    }

    /// One packet from the wire.
    fn inbound(&mut self, pkt: &[u8]) {
        let d = &mut self.report.inbound;
        d.packets_in += 1;
        d.bytes_in += pkt.len() as u64;
        let mut out = std::mem::take(&mut self.bufs.out);
        if let Ok(Inbound::Decapsulated) = self.in_engine.inbound(pkt, &mut out) {
            if self.tun.has_vnet_hdr() {
                // Handed on when joined or flushed; counted here.
                self.report.inbound.packets_out += 1;
                self.report.inbound.bytes_out += out.len() as u64;
                let (tun, report) = (&self.tun, &mut self.report);
                self.gro.push(&out, |w| write_tun(tun, report, w));
            } else {
                match self.tun.write(&out) {
                    Ok(()) => {
                        self.report.inbound.packets_out += 1;
                        self.report.inbound.bytes_out += out.len() as u64;
                    }
                    Err(_) => self.report.tun_write_errors += 1,
                }
            }
        }
        // Clear (IKE, keepalives) is dropped, Held waits, refusals are
        // counted by the engine.
        self.bufs.out = out;
    }
}

impl Gateway {
    /// Writes the inbound TCP run waiting to be joined, if any.
    fn flush_gro(&mut self) {
        let (tun, report) = (&self.tun, &mut self.report);
        self.gro.flush(|w| write_tun(tun, report, w));
    }
}

/// One write of the [`offload::Coalescer`]'s into the TUN.
fn write_tun(tun: &Tun, report: &mut GatewayReport, (h, p): offload::Write<'_>) {
    if h.gso_type != offload::GSO_NONE {
        report.offload.gro_writes += 1;
    }
    if tun.write_vnet(&h.bytes(), p).is_err() {
        report.tun_write_errors += 1;
    }
}

/// The TUN MTU for `sa` and why: the path MTU towards the SAs' addresses
/// less the overhead, per family, the smaller of the two.
fn default_mtu(sa: &ipsec::Config, dev: Option<&str>, overhead: [usize; 2]) -> (u32, String) {
    let mut best: Option<(u32, u32, usize)> = None;
    let mut v6 = false;
    for fam in [false, true] {
        let mut addrs: Vec<IpAddr> = sa
            .sas
            .iter()
            .flat_map(|s| [s.src, s.dst])
            .filter(|a| a.is_ipv6() == fam)
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        if addrs.is_empty() {
            continue;
        }
        v6 |= fam;
        // This host's own addresses give the loopback MTU: the minimum is
        // the peers'.
        let Some(pmtu) = addrs
            .iter()
            .filter_map(|a| path_mtu_via(*a, dev).ok())
            .min()
        else {
            continue;
        };
        let o = overhead[usize::from(fam)];
        let m = pmtu.saturating_sub(o as u32);
        if best.is_none_or(|(b, _, _)| m < b) {
            best = Some((m, pmtu, o));
        }
    }
    match best {
        None if sa.sas.is_empty() => (1500, "TUN MTU 1500: no SAs".into()),
        None => (
            1500,
            "TUN MTU 1500: no route to the SAs' addresses to take a path MTU from".into(),
        ),
        Some((m, pmtu, o)) if v6 && m < IPV6_MIN_MTU => (
            IPV6_MIN_MTU,
            format!(
                "TUN MTU 1280, IPv6's minimum: path MTU {pmtu} less {o} bytes of ESP/AH is \
                 {m}; larger outer packets are fragmented"
            ),
        ),
        Some((m, pmtu, o)) => (
            m.clamp(68, 65_535),
            format!("TUN MTU {m}: path MTU {pmtu} less {o} bytes of ESP/AH at most"),
        ),
    }
}

/// The TUN's `tx_dropped` counter.
fn tun_dropped(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/statistics/tx_dropped"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the effective `rp_filter` of `dev` (the larger of `all`'s and
/// the device's) is strict.
fn rp_filter_strict(dev: &str) -> bool {
    let read = |n: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/conf/{n}/rp_filter"))
            .ok()
            .and_then(|s| s.trim().parse::<u8>().ok())
            .unwrap_or(0)
    };
    read("all").max(read(dev)) == 1
}

#[cfg(test)]
mod tests {
    use super::packet::tests::{v4, v6};
    use super::*;

    const K20: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";
    const K24: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718";
    const K32: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
    const K36: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324";

    /// The largest growth `text`'s SAs give packets of every payload size
    /// from 0 to 63 bytes, IPv4 (10.0.0.1 to .2) and IPv6 (fd00::1 to ::2),
    /// next to what the engine says it can be.
    fn growth(text: &str) -> [(usize, usize); 2] {
        let cfg = ipsec::parse_setkey(text).unwrap();
        let mut e = Engine::new(&cfg, Options::default()).unwrap();
        let mut out = Vec::new();
        [false, true].map(|six| {
            let most = (0..64)
                .map(|n| {
                    let p = if six {
                        v6(17, &[], n)
                    } else {
                        v4(17, true, &[], n)
                    };
                    match e.outbound(&p, &mut out) {
                        Ok(Outbound::Protected) => out.len() - p.len(),
                        _ => 0,
                    }
                })
                .max()
                .unwrap_or(0);
            (most, e.max_overhead(six))
        })
    }

    #[test]
    fn max_overhead_is_what_protection_adds_at_most() {
        let pair = |proto: &str, algs: &str| {
            format!(
                "add 10.0.0.1 10.0.0.2 {proto} 0x1001 {algs};\n\
                 add fd00::1 fd00::2 {proto} 0x1002 {algs};\n"
            )
        };
        for (algs, want) in [
            ("-E null".to_string(), [13, 13]),
            (format!("-E 3des-cbc {K24} -A hmac-sha1 {K20}"), [37, 37]),
            (format!("-E aes-cbc {K32} -A hmac-sha256 {K32}"), [57, 57]),
            (format!("-E aes-gcm-16 {K20}"), [37, 37]),
            (format!("-E chacha20-poly1305 {K36}"), [37, 37]),
            (format!("-m tunnel -E aes-gcm-16 {K20}"), [57, 77]),
        ] {
            let g = growth(&pair("esp", &algs));
            assert_eq!(g.map(|x| x.1), want, "{algs}");
            assert_eq!(g.map(|x| x.0), want, "{algs}");
        }
        // AH pads its ICV to 8 bytes over IPv6 (12 + 12 -> 24).
        let g = growth(&pair("ah", &format!("-A hmac-sha1 {K20}")));
        assert_eq!(g, [(24, 24), (24, 24)]);
        // ESP in UDP: 8 more.
        let mut cfg = ipsec::parse_setkey(&pair("esp", &format!("-E aes-gcm-16 {K20}"))).unwrap();
        cfg.sas[0].encap_udp = Some((4500, 4500));
        let e = Engine::new(&cfg, Options::default()).unwrap();
        assert_eq!((e.max_overhead(false), e.max_overhead(true)), (45, 37));
        // Bundles: ESP then AH by the add lines, or as a policy says.
        let bundle = format!(
            "{}{}",
            pair("esp", &format!("-E 3des-cbc {K24} -A hmac-sha1 {K20}")),
            pair("ah", &format!("-A hmac-sha256 {K32}")).replace("0x100", "0x200")
        );
        assert_eq!(growth(&bundle), [(65, 65), (69, 69)]);
        let policy = format!(
            "{bundle}spdadd 10.0.0.1 10.0.0.2 any -P out ipsec esp/transport//require ah/transport//require;\n"
        );
        // IPv6 is not covered by the policy; its SAs still bound it.
        let g = growth(&policy);
        assert_eq!((g[0], g[1]), ((65, 65), (0, 69)));
        // No SAs: nothing added.
        assert_eq!(growth(""), [(0, 0), (0, 0)]);
    }
}
