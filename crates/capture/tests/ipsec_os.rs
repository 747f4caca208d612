//! The IPsec gateway's OS side, end to end in network namespaces of the
//! test's own: a TUN device that answers ping, ESP and AH sent whole and
//! received with their IP header (IPv4 and IPv6), ESP in UDP, and what the
//! kernel does with packets too big for the path. Root only: skipped with a
//! note elsewhere, and required where `CI` is set.
//!
//! Namespaces are made with `ip netns add` and removed by a drop guard,
//! however a test ends. Devices and sockets are opened on a thread that
//! `setns`es into a namespace (only that thread moves) and keep that
//! namespace when the test's own thread uses them.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

use capture::netns::{Namespace, VethEnd, VethPair};
use capture::poll::wait_readable;
use capture::rawip::{path_mtu, path_mtu_via, NAT_T_PORT};
use capture::{RawIpReceiver, RawIpSender, SendFault, Tun, UdpEncap};
use testkit::require_root;
use wire::checksum;
use wire::ipv4::{Ipv4Packet, Ipv4Repr};
use wire::ipv6::Ipv6Repr;
use wire::IpProtocol;

/// A network namespace with loopback up, deleted when dropped; a failed
/// command panics with what it printed.
struct Ns(Namespace);

impl Ns {
    fn create() -> Ns {
        Ns(Namespace::create("kio").unwrap())
    }

    /// `ip -n NAME args...`.
    fn ip(&self, args: &[&str]) -> String {
        self.0.ip(args).unwrap()
    }

    /// `argv` run inside the namespace.
    fn exec(&self, argv: &[&str]) -> String {
        self.0.exec(argv).unwrap()
    }

    /// `f`'s result, run on a thread of its own inside the namespace.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        self.0.run(f).unwrap()
    }

    /// A counter from /proc/net/snmp (`Ip`, `ReasmOKs`) or /proc/net/snmp6
    /// (`Ip6ReasmOKs`) as the namespace keeps it.
    fn counter(&self, table: &str, name: &str) -> u64 {
        if table == "Ip6" {
            let text = self.exec(&["cat", "/proc/net/snmp6"]);
            return text
                .lines()
                .find_map(|l| {
                    let mut w = l.split_whitespace();
                    (w.next() == Some(name)).then(|| w.next()?.parse().ok())?
                })
                .unwrap_or_else(|| panic!("no {name} in snmp6"));
        }
        let text = self.exec(&["cat", "/proc/net/snmp"]);
        let mut rows = text.lines().filter(|l| l.starts_with(&format!("{table}:")));
        let (names, values) = (rows.next().unwrap(), rows.next().unwrap());
        let i = names.split_whitespace().position(|n| n == name).unwrap();
        values.split_whitespace().nth(i).unwrap().parse().unwrap()
    }
}

const A4: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);
const B4: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 2);
/// B's second address, behind a route with MTU 1280 in A.
const B4_NARROW: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 12);
const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x78, 0, 0, 0, 0, 0, 1);
const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x78, 0, 0, 0, 0, 0, 2);
const B6_NARROW: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x78, 0, 0, 0, 0, 0, 0x12);
const NARROW_MTU: u32 = 1280;

/// Two namespaces joined by a veth pair (MTU 1500): `a` holds `kio-a`
/// (A4, A6), `b` holds `kio-b` (B4, B6 and the narrow addresses).
struct Pair {
    a: Ns,
    b: Ns,
}

impl Pair {
    fn create() -> Pair {
        let end = |dev, v4, v6| VethEnd {
            prefix: "kio",
            dev,
            v4,
            v6,
        };
        let VethPair { a, b } = VethPair::create(
            end("kio-a", "10.78.0.1", "fd00:78::1"),
            end("kio-b", "10.78.0.2", "fd00:78::2"),
        )
        .unwrap();
        let pair = Pair { a: Ns(a), b: Ns(b) };
        let (a, b) = (&pair.a, &pair.b);
        b.ip(&["addr", "add", "10.78.0.12/24", "dev", "kio-b"]);
        b.ip(&["addr", "add", "fd00:78::12/64", "dev", "kio-b", "nodad"]);
        let mtu = NARROW_MTU.to_string();
        a.ip(&["route", "add", "10.78.0.12/32", "dev", "kio-a", "mtu", &mtu]);
        a.ip(&[
            "-6",
            "route",
            "add",
            "fd00:78::12/128",
            "dev",
            "kio-a",
            "mtu",
            &mtu,
        ]);
        pair
    }
}

/// An IPv4 packet: header (with `options`), then `payload`.
fn ipv4(
    dst: Ipv4Addr,
    protocol: IpProtocol,
    dont_frag: bool,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let repr = Ipv4Repr {
        src_addr: A4,
        dst_addr: dst,
        protocol,
        payload_len: payload.len(),
        ttl: 64,
        tos: 0x10,
        ident: 0x1234,
        dont_frag,
        more_frags: false,
        frag_offset: 0,
        options,
    };
    let mut p = vec![0u8; repr.buffer_len()];
    repr.emit(&mut p).unwrap();
    p.extend_from_slice(payload);
    p
}

/// An IPv6 packet: header, then `rest` (extension headers and payload),
/// whose first header is `next`.
fn ipv6(
    dst: Ipv6Addr,
    next: IpProtocol,
    traffic_class: u8,
    flow_label: u32,
    rest: &[u8],
) -> Vec<u8> {
    let repr = Ipv6Repr {
        src_addr: A6,
        dst_addr: dst,
        next_header: next,
        payload_len: rest.len() as u16,
        hop_limit: 63,
        traffic_class,
        flow_label,
    };
    let mut p = vec![0u8; repr.buffer_len()];
    repr.emit(&mut p).unwrap();
    p.extend_from_slice(rest);
    p
}

/// An 8-byte options header (hop-by-hop or destination) holding one PadN.
fn pad_options(next: IpProtocol) -> [u8; 8] {
    [next.number(), 0, 1, 4, 0, 0, 0, 0]
}

/// An ESP-looking payload: SPI, sequence number, then `len - 8` bytes.
fn esp_payload(spi: u32, len: usize) -> Vec<u8> {
    let mut p = spi.to_be_bytes().to_vec();
    p.extend_from_slice(&1u32.to_be_bytes());
    p.extend((0..len.saturating_sub(8)).map(|i| (i * 7) as u8));
    p
}

/// The next packet `rx` receives within three seconds that holds ESP
/// sequence number 1 of `spi` (see [`esp_payload`]); `send` is called first
/// and again every half second while none came (the first packet to a
/// neighbour may wait for address resolution, so an earlier packet may come
/// twice).
fn receive(rx: &mut RawIpReceiver, spi: u32, mut send: impl FnMut()) -> Vec<u8> {
    let mut tag = spi.to_be_bytes().to_vec();
    tag.extend_from_slice(&1u32.to_be_bytes());
    rx.set_nonblocking(true).unwrap();
    let start = Instant::now();
    let mut sent = start;
    send();
    let mut buf = vec![0u8; 65_575];
    while start.elapsed() < Duration::from_secs(3) {
        if sent.elapsed() > Duration::from_millis(500) {
            send();
            sent = Instant::now();
        }
        if !wait_readable(&[rx.as_fd()], Duration::from_millis(100))
            .unwrap()
            .any()
        {
            continue;
        }
        match rx.recv(&mut buf) {
            Ok(n) if buf[..n].windows(8).any(|w| w == tag) => return buf[..n].to_vec(),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    panic!("nothing received in 3 s");
}

/// Whether `rx` receives anything within `wait`.
fn silent(rx: &mut RawIpReceiver, wait: Duration) -> bool {
    rx.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 65_575];
    let start = Instant::now();
    while start.elapsed() < wait {
        if wait_readable(&[rx.as_fd()], Duration::from_millis(50))
            .unwrap()
            .any()
            && rx.recv(&mut buf).is_ok()
        {
            return false;
        }
    }
    true
}

#[test]
fn esp_and_ah_sent_whole_arrive_with_their_ip_header_v4_and_v6() {
    if !require_root("ipsec OS") {
        return;
    }
    let pair = Pair::create();
    let tx = pair.a.run(RawIpSender::open).unwrap();
    let (mut esp4, mut ah4, mut esp6, mut ah6) = pair.b.run(|| {
        (
            RawIpReceiver::open_v4(IpProtocol::Esp).unwrap(),
            RawIpReceiver::open_v4(IpProtocol::Ah).unwrap(),
            RawIpReceiver::open_v6(IpProtocol::Esp).unwrap(),
            RawIpReceiver::open_v6(IpProtocol::Ah).unwrap(),
        )
    });

    // IPv4: byte for byte, header first; options too.
    let p = ipv4(
        B4,
        IpProtocol::Esp,
        true,
        &[],
        &esp_payload(0x1000_0001, 72),
    );
    assert_eq!(receive(&mut esp4, 0x1000_0001, || tx.send(&p).unwrap()), p);
    let p = ipv4(
        B4,
        IpProtocol::Ah,
        true,
        &[1, 1, 1, 0],
        &esp_payload(0x2000_0001, 40),
    );
    assert_eq!(receive(&mut ah4, 0x2000_0001, || tx.send(&p).unwrap()), p);
    // The kernel fills in a 0 source, identification and checksum.
    let mut p = ipv4(
        B4,
        IpProtocol::Esp,
        false,
        &[],
        &esp_payload(0x1000_0008, 24),
    );
    let mut v = Ipv4Packet::new_unchecked(&mut p[..]);
    v.set_src_addr(Ipv4Addr::UNSPECIFIED);
    v.set_ident(0);
    v.set_checksum(0);
    let got = receive(&mut esp4, 0x1000_0008, || tx.send(&p).unwrap());
    let v = Ipv4Packet::new_checked(&got[..]).unwrap();
    assert!(
        v.src_addr() == A4 && v.ident() != 0 && v.verify_checksum(),
        "{got:?}"
    );
    assert_eq!(got[20..], p[20..]);

    // IPv6: the rebuilt header, with traffic class, flow label and hop
    // limit, and the extension headers before the protocol.
    let p = ipv6(B6, IpProtocol::Esp, 0, 0, &esp_payload(0x1000_0002, 72));
    assert_eq!(receive(&mut esp6, 0x1000_0002, || tx.send(&p).unwrap()), p);
    let mut rest = pad_options(IpProtocol::Esp).to_vec();
    rest.extend(esp_payload(0x1000_0003, 100));
    let p = ipv6(B6, IpProtocol::Ipv6Opts, 0xb8, 0x12345, &rest);
    assert_eq!(receive(&mut esp6, 0x1000_0003, || tx.send(&p).unwrap()), p);
    // Destination options on both sides of a routing header (an
    // experimental type, 253, with no segments left: RFC 8200 skips it).
    let mut rest = pad_options(IpProtocol::Ipv6Route).to_vec();
    rest.extend([IpProtocol::Ipv6Opts.number(), 0, 253, 0, 0, 0, 0, 0]);
    rest.extend(pad_options(IpProtocol::Esp));
    rest.extend(esp_payload(0x1000_0007, 33));
    let p = ipv6(B6, IpProtocol::Ipv6Opts, 0, 1, &rest);
    assert_eq!(receive(&mut esp6, 0x1000_0007, || tx.send(&p).unwrap()), p);
    let mut rest = pad_options(IpProtocol::Ipv6Opts).to_vec();
    rest.extend(pad_options(IpProtocol::Ah));
    rest.extend(esp_payload(0x2000_0002, 24));
    let p = ipv6(B6, IpProtocol::HopByHop, 0x04, 0xfffff, &rest);
    assert_eq!(receive(&mut ah6, 0x2000_0002, || tx.send(&p).unwrap()), p);

    // A larger buffer than rmem_max allows (root forces it); nothing dropped.
    esp4.set_recv_buffer(4 << 20).unwrap();
    assert_eq!(esp4.drops().unwrap(), 0);

    // A buffer too short for the packet: an error, and the next one is whole.
    assert!(silent(&mut esp4, Duration::from_millis(100)));
    assert!(silent(&mut esp6, Duration::from_millis(100)));
    let p = ipv4(
        B4,
        IpProtocol::Esp,
        true,
        &[],
        &esp_payload(0x1000_0004, 200),
    );
    tx.send(&p).unwrap();
    let mut small = [0u8; 100];
    esp4.set_nonblocking(false).unwrap();
    let e = esp4.recv(&mut small).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    let q = ipv4(
        B4,
        IpProtocol::Esp,
        true,
        &[],
        &esp_payload(0x1000_0005, 20),
    );
    assert_eq!(receive(&mut esp4, 0x1000_0005, || tx.send(&q).unwrap()), q);
    let p = ipv6(B6, IpProtocol::Esp, 0, 0, &esp_payload(0x1000_0006, 200));
    tx.send(&p).unwrap();
    esp6.set_nonblocking(false).unwrap();
    let e = esp6.recv(&mut small).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
}

#[test]
fn fragments_arrive_reassembled_and_too_big_is_emsgsize() {
    if !require_root("ipsec OS") {
        return;
    }
    let pair = Pair::create();
    let tx = pair.a.run(RawIpSender::open).unwrap();
    let (mut esp4, mut esp6) = pair.b.run(|| {
        (
            RawIpReceiver::open_v4(IpProtocol::Esp).unwrap(),
            RawIpReceiver::open_v6(IpProtocol::Esp).unwrap(),
        )
    });
    let (m4, m4_narrow, m6, m6_narrow) = pair.a.run(|| {
        (
            path_mtu(B4.into()).unwrap(),
            path_mtu(B4_NARROW.into()).unwrap(),
            path_mtu(B6.into()).unwrap(),
            path_mtu(B6_NARROW.into()).unwrap(),
        )
    });
    assert_eq!((m4, m4_narrow, m6, m6_narrow), (1500, 1280, 1500, 1280));
    // The same out of the device.
    let (via4, via6) = pair.a.run(|| {
        (
            path_mtu_via(B4_NARROW.into(), Some("kio-a")).unwrap(),
            path_mtu_via(B6.into(), Some("kio-a")).unwrap(),
        )
    });
    assert_eq!((via4, via6), (1280, 1500));

    // Longer than the device's MTU: EMSGSIZE at once, DF or not, v4 and v6.
    for p in [
        ipv4(B4, IpProtocol::Esp, false, &[], &esp_payload(1, 1600)),
        ipv4(B4, IpProtocol::Esp, true, &[], &esp_payload(1, 1600)),
        ipv6(B6, IpProtocol::Esp, 0, 0, &esp_payload(1, 1600)),
    ] {
        let e = tx.send(&p).unwrap_err();
        assert_eq!(SendFault::of(&e), SendFault::TooBig, "{e}");
    }

    // Within the device's MTU, over the route's: IPv4 without DF is
    // fragmented by the kernel and arrives reassembled.
    let before = pair.b.counter("Ip", "ReasmOKs");
    let p = ipv4(
        B4_NARROW,
        IpProtocol::Esp,
        false,
        &[],
        &esp_payload(0x3000_0001, 1400),
    );
    assert_eq!(receive(&mut esp4, 0x3000_0001, || tx.send(&p).unwrap()), p);
    assert!(pair.b.counter("Ip", "ReasmOKs") > before);
    // With DF, or IPv6: not sent, EMSGSIZE.
    let p = ipv4(
        B4_NARROW,
        IpProtocol::Esp,
        true,
        &[],
        &esp_payload(0x3000_0002, 1400),
    );
    let e = tx.send(&p).unwrap_err();
    assert_eq!(SendFault::of(&e), SendFault::TooBig, "{e}");
    let p = ipv6(
        B6_NARROW,
        IpProtocol::Esp,
        0,
        0,
        &esp_payload(0x3000_0003, 1400),
    );
    let e = tx.send(&p).unwrap_err();
    assert_eq!(SendFault::of(&e), SendFault::TooBig, "{e}");
    assert!(silent(&mut esp4, Duration::from_millis(300)));
    assert!(silent(&mut esp6, Duration::from_millis(300)));

    // Fragments sent as such: the receiver gets the whole packet.
    let payload = esp_payload(0x3000_0004, 2000);
    let whole = ipv4(B4, IpProtocol::Esp, false, &[], &payload);
    let frag = |offset: usize, more: bool, part: &[u8]| {
        let mut p = ipv4(B4, IpProtocol::Esp, false, &[], part);
        let mut v = Ipv4Packet::new_unchecked(&mut p[..]);
        v.set_frag(false, more, offset as u16);
        v.fill_checksum();
        p
    };
    let (f1, f2) = (
        frag(0, true, &payload[..1200]),
        frag(1200, false, &payload[1200..]),
    );
    let got = receive(&mut esp4, 0x3000_0004, || {
        tx.send(&f1).unwrap();
        tx.send(&f2).unwrap();
    });
    assert_eq!(got, whole);

    let whole = ipv6(B6, IpProtocol::Esp, 0, 0, &payload);
    let frag6 = |offset: usize, more: bool, part: &[u8]| {
        let mut rest = vec![IpProtocol::Esp.number(), 0];
        rest.extend_from_slice(&((offset as u16) | u16::from(more)).to_be_bytes());
        rest.extend_from_slice(&0x0bad_cafe_u32.to_be_bytes());
        rest.extend_from_slice(part);
        ipv6(B6, IpProtocol::Ipv6Frag, 0, 0, &rest)
    };
    let before = pair.b.counter("Ip6", "Ip6ReasmOKs");
    let (f1, f2) = (
        frag6(0, true, &payload[..1200]),
        frag6(1200, false, &payload[1200..]),
    );
    let got = receive(&mut esp6, 0x3000_0004, || {
        tx.send(&f1).unwrap();
        tx.send(&f2).unwrap();
    });
    assert_eq!(got, whole);
    assert!(pair.b.counter("Ip6", "Ip6ReasmOKs") > before);
}

#[test]
fn esp_in_udp_arrives_with_both_addresses_and_goes_back() {
    if !require_root("ipsec OS") {
        return;
    }
    let pair = Pair::create();
    for (a, b, any) in [
        (
            IpAddr::from(A4),
            IpAddr::from(B4),
            IpAddr::from(Ipv4Addr::UNSPECIFIED),
        ),
        (A6.into(), B6.into(), Ipv6Addr::UNSPECIFIED.into()),
    ] {
        let peer = pair
            .a
            .run(|| UdpEncap::bind(SocketAddr::new(a, NAT_T_PORT)))
            .unwrap();
        let gw = pair
            .b
            .run(|| UdpEncap::bind(SocketAddr::new(any, NAT_T_PORT)))
            .unwrap();
        assert_eq!(gw.local_addr(), SocketAddr::new(any, NAT_T_PORT));
        let esp = esp_payload(0x4000_0001, 64);
        peer.send_to(&esp, SocketAddr::new(b, NAT_T_PORT)).unwrap();
        let mut buf = [0u8; 2048];
        assert!(wait_readable(&[gw.as_fd()], Duration::from_secs(3))
            .unwrap()
            .is_ready(0));
        let d = gw.recv(&mut buf).unwrap();
        assert_eq!(&buf[..d.len], &esp[..]);
        assert_eq!((d.src, d.dst), (SocketAddr::new(a, NAT_T_PORT), b));
        assert_ne!(d.ifindex, 0);
        // A keepalive back to where it came from, from where it went (the
        // kernel would pick the last address added, B's second).
        gw.send_from(&[0xff], d.dst, d.src).unwrap();
        assert!(wait_readable(&[peer.as_fd()], Duration::from_secs(3))
            .unwrap()
            .is_ready(0));
        let d = peer.recv(&mut buf).unwrap();
        assert_eq!(
            (&buf[..d.len], d.src, d.dst),
            (&[0xff][..], SocketAddr::new(b, NAT_T_PORT), a)
        );
        // A datagram longer than the buffer is an error, not a cut payload.
        peer.send_to(&esp, SocketAddr::new(b, NAT_T_PORT)).unwrap();
        assert!(wait_readable(&[gw.as_fd()], Duration::from_secs(3))
            .unwrap()
            .is_ready(0));
        let e = gw.recv(&mut buf[..10]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}

/// The echo reply to an ICMP or ICMPv6 echo request, else `None`.
fn echo_reply(p: &[u8]) -> Option<Vec<u8>> {
    let mut r = p.to_vec();
    match p.first()? >> 4 {
        4 => {
            let hl = usize::from(p[0] & 0x0f) * 4;
            if p.get(9) != Some(&1) || p.get(hl) != Some(&8) {
                return None;
            }
            let (src, dst) = (p[12..16].to_vec(), p[16..20].to_vec());
            r[12..16].copy_from_slice(&dst);
            r[16..20].copy_from_slice(&src);
            r[hl] = 0;
            r[hl + 2..hl + 4].fill(0);
            let c = checksum::checksum(&r[hl..]);
            r[hl + 2..hl + 4].copy_from_slice(&c.to_be_bytes());
        }
        6 => {
            if p.get(6) != Some(&58) || p.get(40) != Some(&128) {
                return None;
            }
            let (src, dst) = (p[8..24].to_vec(), p[24..40].to_vec());
            r[8..24].copy_from_slice(&dst);
            r[24..40].copy_from_slice(&src);
            r[40] = 129;
            r[42..44].fill(0);
            let s: [u8; 16] = r[8..24].try_into().ok()?;
            let d: [u8; 16] = r[24..40].try_into().ok()?;
            let sum = checksum::pseudo_header(
                &IpAddr::from(s),
                &IpAddr::from(d),
                IpProtocol::Icmpv6,
                (r.len() - 40) as u32,
            ) + checksum::sum(&r[40..]);
            r[42..44].copy_from_slice(&(!checksum::fold(sum)).to_be_bytes());
        }
        _ => return None,
    }
    Some(r)
}

#[test]
fn a_tun_device_answers_ping() {
    if !require_root("ipsec OS") {
        return;
    }
    let ns = Ns::create();
    let tun = ns
        .run(|| -> io::Result<Tun> {
            let tun = Tun::open("ktun%d")?;
            tun.set_mtu(1400)?;
            tun.set_up()?;
            tun.set_nonblocking(true)?;
            Ok(tun)
        })
        .unwrap();
    assert!(tun.name().starts_with("ktun"), "{}", tun.name());
    assert!(ns.ip(&["link", "show", tun.name()]).contains("mtu 1400"));
    tun.set_tx_queue_len(4096).unwrap();
    assert!(ns.ip(&["link", "show", tun.name()]).contains("qlen 4096"));
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", tun.name()]);
    ns.ip(&["addr", "add", "fd00:77::1/64", "dev", tun.name(), "nodad"]);
    for target in ["10.77.0.2", "fd00:77::2"] {
        let mut ping =
            ns.0.command(&["ping", "-c", "1", "-W", "3", target])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
        let start = Instant::now();
        let mut answered = 0;
        let mut buf = [0u8; 2048];
        let status = loop {
            if let Some(status) = ping.try_wait().unwrap() {
                break Some(status);
            }
            if start.elapsed() > Duration::from_secs(6) {
                break None;
            }
            if !wait_readable(&[tun.as_fd()], Duration::from_millis(100))
                .unwrap()
                .is_ready(0)
            {
                continue;
            }
            loop {
                match tun.read(&mut buf) {
                    Ok(n) => {
                        if let Some(reply) = echo_reply(&buf[..n]) {
                            tun.write(&reply).unwrap();
                            answered += 1;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read {}: {e}", tun.name()),
                }
            }
        };
        let Some(status) = status else {
            let _ = ping.kill();
            let _ = ping.wait();
            panic!("ping {target} did not end in 6 s");
        };
        let out = ping.wait_with_output().unwrap();
        assert!(
            status.success() && answered == 1,
            "ping {target}: {status}, {answered} answered\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Not IP: the kernel refuses it.
    assert!(tun.write(&[0x20; 28]).is_err());

    // A packet longer than the read buffer: the kernel cuts it, read says so.
    let mut ping =
        ns.0.command(&["ping", "-c", "1", "-W", "1", "-s", "1000", "10.77.0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    let start = Instant::now();
    let mut small = [0u8; 100];
    let mut cut = None;
    while cut.is_none() && start.elapsed() < Duration::from_secs(3) {
        if !wait_readable(&[tun.as_fd()], Duration::from_millis(100))
            .unwrap()
            .any()
        {
            continue;
        }
        match tun.read(&mut small) {
            Err(e) if e.kind() == io::ErrorKind::InvalidData => cut = Some(e),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("read {}: {e}", tun.name()),
        }
    }
    let _ = ping.kill();
    let _ = ping.wait();
    let cut = cut.expect("no long packet read in 3 s");
    assert!(cut.to_string().contains("1028 bytes"), "{cut}");
}
