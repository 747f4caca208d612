//! The fuzz targets' bodies: one function per cargo-fuzz target in `fuzz/`,
//! named as the target is. Each `fuzz/fuzz_targets/<target>.rs` only hands
//! libFuzzer's input to its function here, so the same code runs under the
//! fuzzer (nightly, `scripts/fuzz.sh`) and in the test suite, which replays
//! every committed corpus file and regression through it
//! (`tests/replay.rs`).
//!
//! A body must not panic on any input (a panic is what the fuzzer reports:
//! a bug, or a property that does not hold), and must end in bounded time
//! and memory whatever the input.
//!
//! Adding a target: write its function here, add it to [`TARGETS`], add a
//! `[[bin]]` to fuzz/Cargo.toml and its one-line fuzz_targets/ file, and
//! commit a seed corpus in `fuzz/corpus/<target>/`; the replay test fails
//! until all of them are there.

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io::Cursor;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use filter::{Engine, EngineKind, PacketKey, Rule, RuleSet};
use pipeline::source::headers::BATCH;
use pipeline::{HeaderSource, Report, Source};
use trace::index::{IndexEntry, ENTRY_LEN, ENTRY_LEN_V1, HEADER_LEN};
use trace::{Record, TraceReader};
use wire::{FlowBits, LinkType};

/// A target's body: it takes libFuzzer's input.
pub type Body = fn(&[u8]);

/// Every target, by name, with its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("slice", slice),
    ("pcap", pcap),
    ("pcapng", pcapng),
    ("compressed", compressed),
    ("rules", rules),
    ("filter_engines", filter_engines),
    ("summary", summary),
    ("headers", headers),
    ("setkey", setkey),
    ("ipsec_inbound", ipsec_inbound),
    ("esp_sa", esp_sa),
    ("xfrm", xfrm),
    ("offload", offload),
    ("delay_profile", delay_profile),
    ("nfqueue", nfqueue),
    ("http_response", http_response),
    ("observe", observe),
    ("index", index),
    ("key_index", key_index),
    ("window", window),
    ("split", split),
    ("web_request", web_request),
    ("store_answer", store_answer),
    ("bpf_program", bpf_program),
    ("bpf_expression", bpf_expression),
    ("anon", anon),
];

/// Shared by the reader targets: drain every record and look at it. The
/// reader must end (Ok(None) or an error) without panicking, hanging or
/// allocating without bound.
fn drain(mut r: TraceReader) {
    let mut sum = 0usize;
    while let Ok(Some(rec)) = r.next_record() {
        sum += match rec {
            Record::Packet(p) => p.data.len() + p.options.len() + p.ts_nanos() as usize % 2,
            Record::Block(b) => b.body.len(),
            Record::Interface(i) => i.options.len(),
            Record::Section(s) => s.options.len(),
        };
    }
    std::hint::black_box((sum, r.truncation(), r.offset()));
}

const LINKS: [LinkType; 8] = [
    LinkType::Null,
    LinkType::Ethernet,
    LinkType::Raw,
    LinkType::LinuxSll,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::LinuxSll2,
    LinkType::Unknown(147),
];

/// Fuzzes `wire::slice`: the first byte picks a link type, the rest is the
/// frame. Every accessor and every Display is exercised, since the CLI prints
/// them; the flow as integers (`flow_bits`, through `slice` and through its
/// fast path) must be the flow that `network()` and `five_tuple()` give.
pub fn slice(data: &[u8]) {
    let Some((&pick, frame)) = data.split_first() else {
        return;
    };
    let s = wire::slice(LINKS[usize::from(pick) % LINKS.len()], frame);
    let mut out = String::new();
    let _ = write!(out, "{s}");
    let _ = s.vlans();
    if let Some(n) = s.network() {
        let _ = write!(out, "{n} {}", n.protocol);
    }
    if let Some(t) = s.five_tuple() {
        let _ = write!(out, "{t}");
    }
    // The integer form of the flow agrees with the typed one, field by field.
    let bits = |a: IpAddr| match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let typed = s.network().map(|n| {
        // ICMP's type and code are its flow's port, as aguri keys it.
        let (src_port, dst_port) = match s.icmp() {
            Some((t, c)) => (wire::icmp_port(t, c), wire::icmp_port(t, c)),
            None => s.five_tuple().map_or((0, 0), |t| (t.src_port, t.dst_port)),
        };
        FlowBits {
            version: n.version,
            protocol: n.protocol.into(),
            src: bits(n.src),
            dst: bits(n.dst),
            src_port,
            dst_port,
        }
    });
    assert_eq!(s.flow_bits(), typed);
    // The fast path for the usual frame gives the same answer as `slice`.
    assert_eq!(
        wire::flow_bits(LINKS[usize::from(pick) % LINKS.len()], frame),
        s.flow_bits()
    );
    if let Some(f) = s.tcp_flags() {
        let _ = write!(out, "{f}");
    }
    let _ = (
        s.icmp(),
        s.ipsec_spi(),
        s.network_offset(),
        s.transport_offset(),
    );
    if let Some(p) = s.payload_offset() {
        assert!(p <= frame.len());
    }
    if let Some(e) = s.error() {
        let _ = write!(out, "{e} {}", e.layer);
        assert!(e.offset <= frame.len());
    }
    assert_eq!(s.frame_len(), frame.len());
}

/// Fuzzes the pcap path of `TraceReader`: plain bytes, no codec detection.
pub fn pcap(data: &[u8]) {
    if let Ok(r) = TraceReader::from_decompressed(Box::new(Cursor::new(data.to_vec()))) {
        drain(r);
    }
}

/// Fuzzes the pcapng path of `TraceReader`: plain bytes, no codec detection.
pub fn pcapng(data: &[u8]) {
    if let Ok(r) = TraceReader::from_decompressed(Box::new(Cursor::new(data.to_vec()))) {
        drain(r);
    }
}

/// Fuzzes `TraceReader::from_read`: codec detection, the gzip/zstd/LZ4 decoders
/// (kansoku's own LZ4 frame reader above all) and the formats inside.
pub fn compressed(data: &[u8]) {
    if let Ok(r) = TraceReader::from_read(Box::new(Cursor::new(data.to_vec()))) {
        drain(r);
    }
}

/// The rule parser on arbitrary text: it must return rules or a located
/// error, never panic; parsed rules print back to text that parses to the
/// same rules (paper syntax).
pub fn rules(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match RuleSet::parse(text) {
        Ok(set) => {
            if set.syntax() == filter::Syntax::Paper {
                let printed: String = set.rules().iter().map(|r| format!("{r}\n")).collect();
                let again = RuleSet::parse(&printed).expect("printed rules parse");
                assert_eq!(again.len(), set.len());
                for (a, b) in again.rules().iter().zip(set.rules()) {
                    assert_eq!(
                        (a.id, a.action, a.src, a.dst, a.proto, a.src_port, a.dst_port),
                        (b.id, b.action, b.src, b.dst, b.proto, b.src_port, b.dst_port)
                    );
                }
            }
            // A set's IPv6 image (`filter::v6map`), when it has one, parses
            // back to as many rules, in ClassBench syntax.
            if let Ok(image) = filter::v6map::rules_text(&set) {
                let v6 = RuleSet::parse(&image).expect("the IPv6 image parses");
                assert_eq!(v6.len(), set.len());
                assert!(v6.is_empty() || v6.syntax() == filter::Syntax::ClassBench);
            }
        }
        Err(e) => assert!(e.line >= 1 && e.column >= 1),
    }
    let _ = PacketKey::parse(text);
}

/// Fast against linear: the input's first part is a rule file, the rest are
/// 16-byte packets; both engines must pick the same rule for every packet,
/// before and after each of the live updates the packets also describe.
pub fn filter_engines(data: &[u8]) {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(text) = std::str::from_utf8(&data[..split]) else {
        return;
    };
    let Ok(rules) = RuleSet::parse(text) else {
        return;
    };
    if rules.len() > 200 {
        return;
    }
    let linear = Engine::build(EngineKind::Linear, &rules);
    let fast = Engine::build(EngineKind::Fast, &rules);
    let packets = data.get(split + 1..).unwrap_or(&[]);
    let mut keys = Vec::new();
    for p in packets.chunks_exact(16) {
        let w = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let (src, dst) = if p[15] & 1 == 0 {
            (
                IpAddr::V4(Ipv4Addr::from(w(0))),
                IpAddr::V4(Ipv4Addr::from(w(4))),
            )
        } else {
            // IPv6 addresses built from the same bytes, under 2001:db8::/32.
            let v6 = |x: u32| IpAddr::V6(Ipv6Addr::from((0x2001_0db8u128 << 96) | u128::from(x)));
            (v6(w(0)), v6(w(4)))
        };
        keys.push(PacketKey {
            src,
            dst,
            protocol: p[8],
            src_port: u16::from_be_bytes([p[9], p[10]]),
            dst_port: u16::from_be_bytes([p[11], p[12]]),
            tcp_flags: u16::from(p[13]),
        });
    }
    let check = |linear: &Engine, fast: &Engine| {
        let mut batch = vec![None; keys.len()];
        fast.classify_batch(&keys, &mut batch);
        for (k, b) in keys.iter().zip(&batch) {
            let want = linear.classify(k);
            assert_eq!(fast.classify(k), want, "{k}");
            assert_eq!(*b, want, "{k}");
        }
    };
    check(&linear, &fast);
    // The same bytes drive live updates: byte 14 of a packet picks a delete
    // or an insert (a copy of one rule, at some position), bytes 9-11 where;
    // after each, both engines answer every packet alike.
    let (mut linear, mut fast) = (linear, fast);
    let mut current: Vec<Rule> = rules.rules().to_vec();
    for p in packets.chunks_exact(16) {
        let n = current.len();
        match p[14] % 4 {
            1 if n > 0 => {
                let at = usize::from(p[9]) % n;
                let gone = linear.delete(at);
                assert_eq!(fast.delete(at), gone);
                current.remove(at);
            }
            2 if n > 0 => {
                let rule = current[usize::from(p[10]) % n];
                let at = usize::from(p[11]) % (n + 1);
                assert!(linear.insert(at, rule) && fast.insert(at, rule));
                current.insert(at, rule);
            }
            _ => continue,
        }
        check(&linear, &fast);
    }
}

/// The summary reader on arbitrary bytes: it must return summaries or an
/// error, never panic; what it accepts must write back to text that reads
/// back to the same summaries.
pub fn summary(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(summaries) = aguri::parse_summaries(text) {
        let written: String = summaries.iter().map(|s| s.to_string()).collect();
        let back = aguri::parse_summaries(&written).expect("written summaries read back");
        assert_eq!(back, summaries);
    }
}

/// The header-trace reader (`filter match`, `bench filter`) on arbitrary
/// bytes: ClassBench text, zstd-compressed or not, or a packet trace. It
/// must give batches of keys, a located error, or a cut, never panic; every
/// batch is at most `BATCH` keys with one expected result per key (text).
pub fn headers(data: &[u8]) {
    let Ok(mut src) =
        HeaderSource::from_read(Box::new(Cursor::new(data.to_vec())), "fuzz", 4, None)
    else {
        return;
    };
    let text = src.has_expected();
    while let Ok(Some(h)) = src.next() {
        assert!(!h.keys.is_empty() && h.keys.len() <= BATCH);
        if text {
            assert_eq!(h.expected.len(), h.keys.len());
            assert!(h.expected.iter().flatten().all(|&m| m < 4));
        }
    }
    let mut report = Report::default();
    src.close(&mut report);
}

/// What every SA reader must give: keys of the lengths their algorithms
/// take, and an SPI outside the reserved 1-255.
fn keys_fit(sa: &ipsec::Sa) {
    if let Some((alg, key)) = &sa.enc {
        assert!(alg.key_len_ok(key.len()), "{sa:?}");
    }
    if let Some((alg, key)) = &sa.auth {
        assert_eq!(key.len(), alg.key_len(), "{sa:?}");
    }
    assert!(sa.spi >= 256, "{sa:?}");
}

/// The setkey parser on arbitrary text: a configuration or a located error,
/// never a panic; every key it accepts has a length its algorithm takes.
pub fn setkey(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ipsec::parse_setkey(text) {
        Ok(c) => {
            for sa in &c.sas {
                keys_fit(sa);
            }
        }
        Err(e) => assert!(e.line >= 1 && e.column >= 1),
    }
}

/// Inbound IPsec on arbitrary bytes: the engine holds one SA of every kind
/// (`ipsec::fuzzing::SAS`), so inputs may match an SA or not. A packet is
/// refused with a reason, held as a fragment, passed clear, or decapsulated
/// into a packet that parses as IP; never a panic. The first byte picks
/// inbound or outbound (bit 0) and the copying or in-place path (bit 1).
pub fn ipsec_inbound(data: &[u8]) {
    let Some((&dir, pkt)) = data.split_first() else {
        return;
    };
    let mut e = ipsec::fuzzing::engine();
    let mut out = Vec::new();
    if dir & 2 != 0 {
        // The in-place path: the same refusals, or a packet that parses.
        let mut pb = ipsec::PacketBuf::new();
        pb.set(pkt);
        if dir & 1 == 0 {
            if let Ok(ipsec::Inbound::Decapsulated) = e.inbound_buf(&mut pb) {
                assert!(matches!(pb.as_slice().first().map(|b| b >> 4), Some(4 | 6)));
            }
        } else if let Ok(ipsec::Outbound::Protected) = e.outbound_buf(&mut pb) {
            let r = ipsec::fuzzing::engine().inbound_buf(&mut pb);
            assert!(taken_back(pkt, &r), "{r:?}");
        }
        return;
    }
    if dir & 1 == 0 {
        if let Ok(ipsec::Inbound::Decapsulated) = e.inbound(pkt, &mut out) {
            assert!(matches!(out.first().map(|b| b >> 4), Some(4 | 6)));
        }
    } else if let Ok(ipsec::Outbound::Protected) = e.outbound(pkt, &mut out) {
        // What the engine protects, it takes back.
        let mut back = Vec::new();
        let mut rx = ipsec::fuzzing::engine();
        let r = rx.inbound(&out, &mut back);
        assert!(taken_back(pkt, &r), "{r:?}");
    }
}

/// Whether a fresh engine's answer `r` to what the engine made of `pkt`
/// outbound is the packet taken back: decapsulated, or a dummy (protocol 59
/// inside ESP, RFC 4303 §2.6). When `pkt` was itself ESP or AH, the
/// receiver takes the outer layer off and goes on to the inner one, which
/// this engine did not make: it may be refused for anything (a replay of
/// sequence numbers the outer layers used, padding or an ICV that does not
/// hold in bytes the fuzzer chose), rightly.
fn taken_back(pkt: &[u8], r: &Result<ipsec::Inbound, ipsec::Reject>) -> bool {
    let ipsec_inside = wire::slice(LinkType::Raw, pkt)
        .network()
        .is_some_and(|n| matches!(u8::from(n.protocol), 50 | 51));
    matches!(
        r,
        Ok(ipsec::Inbound::Decapsulated) | Err(ipsec::Reject::Dummy)
    ) || ipsec_inside && r.is_err()
}

/// The esp_sa reader on arbitrary text: SAs or a located error, never a
/// panic; every SA it reads has a key its algorithm takes, and what the
/// writer makes of them reads back as the same SAs.
pub fn esp_sa(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ipsec::parse_esp_sa(text) {
        Ok(sas) => {
            for sa in &sas {
                keys_fit(sa);
            }
            let written = ipsec::write_esp_sa(&sas);
            let again = ipsec::parse_esp_sa(&written).expect("what write_esp_sa writes reads back");
            let kept: Vec<_> = sas
                .iter()
                .filter(|sa| ipsec::esp_sa_unwritable(sa).is_none())
                .collect();
            assert_eq!(again.len(), kept.len());
            for (a, b) in again.iter().zip(kept) {
                assert_eq!((a.src, a.dst, a.spi), (b.src, b.dst, b.spi));
                assert_eq!((&a.enc, &a.auth), (&b.enc, &b.auth));
            }
        }
        Err(e) => assert!(e.line >= 1 && e.column >= 1),
    }
}

/// The `ip xfrm state` reader on arbitrary text: SAs or a located error,
/// never a panic; every SA it reads has keys its algorithms take, a cipher
/// if it is ESP and none if it is AH. read_sa_file, which picks the format,
/// never panics either.
pub fn xfrm(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ipsec::parse_xfrm_state(text) {
        Ok(sas) => {
            for sa in &sas {
                match (&sa.protocol, &sa.enc) {
                    (ipsec::Protocol::Esp, Some((alg, key))) => assert!(alg.key_len_ok(key.len())),
                    (ipsec::Protocol::Ah, None) => assert!(sa.auth.is_some()),
                    _ => panic!("{sa:?}"),
                }
                keys_fit(sa);
            }
        }
        Err(e) => assert!(e.line >= 1 && e.column >= 1),
    }
    if let Err(e) = ipsec::read_sa_file(text) {
        assert!(e.line >= 1 && e.column >= 1);
    }
}

/// The gateway's TUN offloads on arbitrary bytes: a TUN read cut into
/// packets, or packets joined for a TUN write (the first byte picks);
/// the properties are `gateway::offload::replay`'s.
pub fn offload(data: &[u8]) {
    gateway::offload::replay(data);
}

/// The delay line's CDF file parser on arbitrary bytes: points that rise
/// and end at 1, or an error at a line and column that exist; never a
/// panic (`delay::profile::fuzz_check`).
pub fn delay_profile(data: &[u8]) {
    delay::profile::fuzz_check(data);
}

/// NFQUEUE netlink messages on arbitrary bytes: packets whose payloads lie
/// inside the datagram, or an error; never a panic
/// (`capture::nfqueue::fuzz_check`).
pub fn nfqueue(data: &[u8]) {
    capture::nfqueue::fuzz_check(data);
}

/// The web benchmark's HTTP/1.x response parser on arbitrary bytes: fed
/// whole or a byte at a time it gives the same answer, and a complete
/// response never claims more bytes than it was given; never a panic
/// (`webbench::http1::fuzz_check`).
pub fn http_response(data: &[u8]) {
    webbench::http1::fuzz_check(data);
}

/// The web benchmark's server-side observer (ENMA's connection tracking) on
/// arbitrary frames: no panic, and its counts stay consistent
/// (`webbench::observe::fuzz_check`).
pub fn observe(data: &[u8]) {
    webbench::observe::fuzz_check(data);
}

/// The trace index reader on arbitrary bytes: `trace::index::parse_index`
/// gives an index or an error, never a panic. An index it accepts has one
/// entry per whole entry-sized piece after the header, is torn exactly when
/// a piece is left over, and its entries encode back to the bytes they were
/// read from (version 2: checksum included; version 1: the first 56 bytes,
/// with no chunk checksum). The entry decoders on their own
/// (`IndexEntry::from_bytes`, `from_v1`) take any piece of the input: a
/// version 2 entry is kept only when its checksum holds, and then encodes
/// back to itself; what `to_bytes` writes always decodes.
pub fn index(data: &[u8]) {
    use trace::index::{header, parse_index};
    match parse_index(data, "fuzz.kidx") {
        Ok(ix) => {
            let version = u16::from_le_bytes([data[4], data[5]]);
            let entry_len = if version == 1 {
                ENTRY_LEN_V1
            } else {
                ENTRY_LEN
            };
            let body = &data[HEADER_LEN..];
            assert_eq!(ix.entries.len(), body.len() / entry_len);
            assert_eq!(ix.torn, !body.len().is_multiple_of(entry_len));
            // The header's codec, format flag and entry size are what it says.
            let h = header(ix.codec, ix.pcapng);
            assert_eq!(h[..4], data[..4]);
            assert_eq!(h[6], data[6]);
            assert_eq!(ix.pcapng, data[7] != 0);
            assert_eq!(data[8..12], (entry_len as u32).to_le_bytes());
            for (e, b) in ix.entries.iter().zip(body.chunks_exact(entry_len)) {
                if version == 1 {
                    assert!(e.crc.is_none());
                    assert_eq!(e.to_bytes()[..ENTRY_LEN_V1], *b);
                } else {
                    assert!(e.crc.is_some());
                    assert_eq!(e.to_bytes()[..], *b);
                }
                let _ = (e.is_metadata(), e.is_end(), e.is_raw());
            }
        }
        Err(e) => {
            std::hint::black_box(e.to_string());
        }
    }
    for b in data.chunks_exact(ENTRY_LEN) {
        let b: &[u8; ENTRY_LEN] = b.try_into().expect("a whole entry");
        if let Some(e) = IndexEntry::from_bytes(b) {
            assert_eq!(e.to_bytes(), *b);
        }
    }
    for b in data.chunks_exact(ENTRY_LEN_V1) {
        let b: &[u8; ENTRY_LEN_V1] = b.try_into().expect("a whole entry");
        let e = IndexEntry::from_v1(b);
        let again = e.to_bytes();
        assert_eq!(again[..ENTRY_LEN_V1], *b);
        let back = IndexEntry::from_bytes(&again).expect("to_bytes writes a valid checksum");
        assert_eq!(back, IndexEntry { crc: Some(0), ..e });
    }
}

/// Fuzzes the key index (`trace::keys`). The input is read twice: as a
/// key sidecar, whose records are taken as far as they can be trusted (a
/// damaged or torn one ends them, and says so, never a panic), and whose
/// file filter is probed block by block as a query probes it; and as a
/// frame (the first byte picks the link type), whose chunk filter must hold
/// every key the frame's flow has (a filter never says "absent" of a key a
/// packet has: the query would lose it), fold to any stored size, and
/// encode to bytes that decode to itself.
pub fn key_index(data: &[u8]) {
    use trace::keys::{
        key_port, key_protocol, key_v4, key_v6, records, ChunkKeys, FileFilter, KeyFilter,
    };
    let mut recs = records(data);
    let mut n = 0usize;
    for r in recs.by_ref() {
        n += usize::from(r.filter.may_contain(key_port(80))) + r.chunk as usize % 2;
    }
    std::hint::black_box((n, recs.problem, recs.torn));
    // The file's filter, as a query reads it: by its footer, a block at a
    // time.
    if let Ok(Some(f)) = FileFilter::open(data, data.len() as u64) {
        let some = (0..64u16).filter(|&p| f.may_contain(key_port(p))).count();
        std::hint::black_box((some, f.damaged.get(), f.digest, f.record_at));
    }
    let Some((&l, frame)) = data.split_first() else {
        return;
    };
    let link = LINKS[usize::from(l) % LINKS.len()];
    let mut b = ChunkKeys::new(usize::from(l) << 4);
    b.add_packet(link, frame);
    let Some(mut f) = b.take() else {
        return;
    };
    f.fold(frame.len() as u64);
    if let Some(fb) = wire::flow_bits(link, frame) {
        let (src, dst) = if fb.version == 4 {
            (key_v4(fb.src as u32), key_v4(fb.dst as u32))
        } else {
            (key_v6(fb.src), key_v6(fb.dst))
        };
        assert!(f.may_contain(src) && f.may_contain(dst));
        assert!(f.may_contain(key_protocol(fb.protocol)));
        if matches!(fb.protocol, 6 | 17) {
            assert!(f.may_contain(key_port(fb.src_port)) && f.may_contain(key_port(fb.dst_port)));
        }
    }
    let mut enc = Vec::new();
    f.encode(&mut enc);
    assert_eq!(KeyFilter::decode(&enc).ok(), Some(f));
}

/// [`window`]'s first two bytes (little-endian) when the trace has no index.
pub const NO_INDEX: u16 = 0xffff;
/// A [`window`] bound byte meaning "unbounded".
pub const UNBOUNDED: u8 = 0xff;

/// Builds a [`window`] input: the trace's index (or none), where the window
/// starts and ends (0..=254 along the index's timestamps, or
/// [`UNBOUNDED`]), and the trace file.
pub fn window_input(index: Option<&[u8]>, since: u8, until: u8, trace: &[u8]) -> Vec<u8> {
    let len = index.map_or(NO_INDEX, |i| {
        u16::try_from(i.len())
            .ok()
            .filter(|&n| n != NO_INDEX)
            .expect("an index shorter than 64 KiB")
    });
    let mut v = len.to_le_bytes().to_vec();
    v.extend_from_slice(&[since, until]);
    v.extend_from_slice(index.unwrap_or_default());
    v.extend_from_slice(trace);
    v
}

/// The windowed read (`trace::window::open_window`) on an arbitrary trace
/// file and index. The input is: 2 bytes, the index's length (little-endian;
/// [`NO_INDEX`]: no index file), a byte each for the window's start and end
/// (`b` of 254 along the index's packet timestamps, or [`UNBOUNDED`]), the
/// index, then the trace (to the input's end). Both are written into a
/// temporary directory as `x.pcap.lz4` and its sidecar (whatever the codec
/// and format, which the reader detects from the bytes). `open_window` must
/// give a reader or an error, never panic, and the reader must end; what it
/// reports touching adds up (selected chunks are decoded ones, decoded ones
/// are in the index) and an index it used has no problem to report.
pub fn window(data: &[u8]) {
    let Some((head, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let len = u16::from_le_bytes([head[0], head[1]]);
    let (index, trace_bytes) = if len == NO_INDEX {
        (None, rest)
    } else {
        let (i, t) = rest.split_at(usize::from(len).min(rest.len()));
        (Some(i), t)
    };
    // The window lies along the timestamps the index gives, if it reads.
    let (lo, hi) = index
        .and_then(|b| trace::index::parse_index(b, "fuzz").ok())
        .and_then(|ix| {
            let packets = || ix.entries.iter().filter(|e| e.packets > 0);
            let lo = packets().map(|e| e.first_ts).min()?;
            let hi = packets().map(|e| e.last_ts).max()?;
            Some((lo, hi.max(lo)))
        })
        .unwrap_or((0, u64::MAX));
    let at =
        |b: u8| (b != UNBOUNDED).then(|| lo + (u128::from(hi - lo) * u128::from(b) / 254) as u64);
    let (since, until) = (at(head[2]), at(head[3]));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("x.pcap.lz4");
    std::fs::write(&path, trace_bytes).expect("writing the trace");
    if let Some(i) = index {
        std::fs::write(trace::index::index_path(&path), i).expect("writing the index");
    }
    match trace::window::open_window(&path, since, until) {
        Ok((r, ws)) => {
            assert!(
                ws.chunks_selected <= ws.chunks_decoded && ws.chunks_decoded <= ws.chunks_total,
                "{ws:?}"
            );
            assert!(!ws.indexed || ws.index_problem.is_none(), "{ws:?}");
            assert!(ws.indexed || ws.chunks_total == 0, "{ws:?}");
            if index.is_none() {
                assert!(!ws.indexed && ws.index_problem.is_none(), "{ws:?}");
            }
            drain(r);
        }
        Err(e) => {
            std::hint::black_box(e.to_string());
        }
    }
}

/// The profiler's two-thread read (`pipeline::SplitSource`) against the
/// ordinary reader, on an arbitrary trace file and index (or none,
/// [`NO_INDEX`]): the input is laid out as [`window`]'s (see
/// [`window_input`]), its third byte giving the runs' length (1 + 256 × b
/// bytes) and its fourth whether chunks are checked (even) or not (odd).
/// Where the split applies, it must give the packets the ordinary reader
/// gives, in the same order, each with the same time, length and flow, and
/// end with the same report: what it cannot take whole (a chunk that fails
/// its checksum, records that do not end where a run ends, a run found
/// inside a packet that does not start where the one before ended) it
/// leaves to the ordinary reader, which says what is wrong.
pub fn split(data: &[u8]) {
    split_read(data);
}

/// [`split`]'s body: `None` where the split does not apply, else whether
/// the ordinary reader took over.
pub fn split_read(data: &[u8]) -> Option<bool> {
    use pipeline::{Consumer, Flow, SplitItem, SplitSource, TraceSource};
    let (head, rest) = data.split_first_chunk::<4>()?;
    let len = u16::from_le_bytes([head[0], head[1]]);
    let (index, trace_bytes) = if len == NO_INDEX {
        (None, rest)
    } else {
        let (i, t) = rest.split_at(usize::from(len).min(rest.len()));
        (Some(i), t)
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("x.pcap");
    std::fs::write(&path, trace_bytes).expect("writing the trace");
    if let Some(index) = index {
        std::fs::write(trace::index::index_path(&path), index).expect("writing the index");
    }
    let verify = head[3] & 1 == 0;
    let mut split = SplitSource::with_runs(&path, 1 + u64::from(head[2]) * 256, verify)?;
    // The packets each read gives: time, length, flow.
    #[derive(Default)]
    struct Seen(Vec<(u64, u32, Option<FlowBits>)>);
    impl Consumer<SplitSource> for Seen {
        fn consume(&mut self, item: SplitItem<'_>) -> pipeline::Result<Flow> {
            match item {
                SplitItem::Packet(s) => self.0.push((s.ts_ns, s.orig_len, s.bits)),
                SplitItem::Record(r) => {
                    <Seen as Consumer<TraceSource>>::consume(self, r)?;
                }
            }
            Ok(Flow::Continue)
        }
    }
    impl Consumer<TraceSource> for Seen {
        fn consume(&mut self, r: Record<'_>) -> pipeline::Result<Flow> {
            if let Record::Packet(p) = r {
                let bits = wire::flow_bits(p.link_type, p.data);
                self.0.push((p.ts_nanos(), p.orig_len, bits));
            }
            Ok(Flow::Continue)
        }
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut got = Seen::default();
    let got_report = pipeline::run(&mut split, &mut got, pipeline::Control::new(&stop));
    let fell_back = split.fell_back();
    let mut one = TraceSource::open_verify(&path, verify).expect("the ordinary reader opens it");
    let mut want = Seen::default();
    let want_report = pipeline::run(&mut one, &mut want, pipeline::Control::new(&stop));
    assert_eq!(format!("{got_report:?}"), format!("{want_report:?}"));
    assert!(got.0 == want.0, "the packets differ");
    Some(fell_back)
}

/// `kansoku web`'s request handling on arbitrary request targets: the
/// first line of the input is the path, the rest the query string, both
/// as hyper hands them over (text). Every answer is a page, a view, an
/// aggregate's packets, or 400/404/405 with a JSON error; never a panic,
/// never a 500; an aggregate's expression always compiles.
pub fn web_request(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (path, query) = text.split_once('\n').unwrap_or((text, ""));
    let src = web_source();
    // The archive of an aggregate's packets: every expression the route
    // builds from a label it accepted must be one libpcap compiles.
    let archive: webview::Archive = std::sync::Arc::new(|x: &webview::Extraction| {
        let e = pipeline::expression::Expression::new(&x.expression);
        if let Some(e) = e {
            let compiled = e.compile(wire::LinkType::Ethernet, 65535, false);
            assert!(compiled.is_ok(), "{:?}: {compiled:?}", x.expression);
        }
        Ok(webview::Extract::default())
    });
    let a = webview::server::route(
        src,
        Some(&archive),
        &webview::server::Method::GET,
        path,
        Some(query),
    );
    let code = a.status().as_u16();
    assert!(
        matches!(code, 200 | 400 | 404),
        "{code} for {path:?} {query:?}"
    );
}

/// Two hours of 5-minute summaries of a little traffic, made once.
fn web_source() -> &'static webview::MemorySource {
    static SRC: std::sync::OnceLock<webview::MemorySource> = std::sync::OnceLock::new();
    SRC.get_or_init(|| {
        let mut p = aguri::ProfilerConfig {
            interval_ns: 300_000_000_000,
            ..Default::default()
        }
        .build()
        .expect("a valid profiler");
        let t0 = 1_795_132_800_000_000_000u64;
        let mut out = Vec::new();
        for i in 0..7200u64 {
            let k = aguri::FlowKey {
                src: IpAddr::V4(Ipv4Addr::new(10, (i % 7) as u8, (i % 251) as u8, 1)),
                dst: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, (i % 5) as u16)),
                protocol: if i % 3 == 0 { 17 } else { 6 },
                src_port: (i % 1000) as u16,
                dst_port: [80, 443, 53][(i % 3) as usize],
            };
            out.extend(p.add(t0 + i * 1_000_000_000, &k, 100 + (i % 1400) as u32));
        }
        out.extend(p.finish());
        webview::MemorySource::new(out)
    })
}

/// The fleet store client's reading of ClickHouse's HTTP answers (status,
/// headers, chunked bodies) on arbitrary bytes: an answer or `None`, never
/// a panic.
pub fn store_answer(data: &[u8]) {
    if let Some((code, body)) = store::client::parse_answer(data) {
        assert!(body.len() <= data.len() * 4 + 16, "{code}");
    }
}

/// The expression path of `kansoku read -r F EXPRESSION`: the first byte
/// picks the link type (Ethernet, raw IP, Linux cooked v1 and v2, BSD
/// loopback) and the byte order, the text up to the first NUL is the
/// expression, the rest a packet. Compiling never panics and fails with
/// libpcap's message; a program libpcap compiles always validates, and runs
/// on the packet (cut at every length) with `bpf_filter`'s answer.
pub fn bpf_expression(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let link_type = [1u16, 101, 113, 276, 0][usize::from(pick % 5)];
    let big_endian = pick & 0x80 != 0;
    let (text, packet) = match rest.iter().position(|&b| b == 0) {
        Some(n) => (&rest[..n], &rest[n + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(expr) = std::str::from_utf8(text) else {
        return;
    };
    let insns = match bpf::libpcap::compile_for_trace(expr, link_type, 262_144, big_endian) {
        Ok(insns) => insns,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let program = bpf::Program::new(&insns)
        .unwrap_or_else(|e| panic!("libpcap's program for `{expr}` does not validate: {e}"));
    let wire_len = u32::try_from(packet.len()).unwrap_or(u32::MAX);
    for cut in 0..=packet.len() {
        let answer = program.run(&packet[..cut], wire_len);
        if bpf::libpcap::defined_in_libpcap(&insns) {
            assert_eq!(
                answer,
                bpf::libpcap::bpf_filter(&program, &packet[..cut], wire_len),
                "`{expr}`"
            );
        }
    }
}

/// Classic BPF programs from arbitrary bytes: bytes 0-1 (little-endian)
/// say how many instructions follow, 8 bytes each as `struct bpf_insn`
/// lies in memory on x86 (code and k little-endian), and the bytes after
/// them are a packet. `Program::new` must accept or refuse the
/// instructions without panicking, and any of them, valid or not, list
/// as `tcpdump -d`/`-dd`/`-ddd` would. An accepted program runs on the
/// packet, with and without the kernel's data, in bounded time; and where
/// libpcap's own interpreter is defined on it (no read of scratch memory,
/// which libpcap leaves uninitialized; no backward jump, which could loop
/// for ever there; no constant shift past 31 bits, undefined in its C),
/// it returns what `bpf_filter` returns.
pub fn bpf_program(data: &[u8]) {
    let Some((count, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let n = usize::from(u16::from_le_bytes(*count)).min(rest.len() / 8);
    let (code, packet) = rest.split_at(n * 8);
    let insns: Vec<bpf::Insn> = code
        .chunks_exact(8)
        .map(|c| bpf::Insn {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    let listing = bpf::dump(&insns, 1 + (packet.len() % 3) as u8);
    assert!(insns.is_empty() || !listing.is_empty());
    let program = match bpf::Program::new(&insns) {
        Ok(p) => p,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert_eq!(program.insns(), &insns[..]);
    let wire_len = u32::try_from(packet.len()).unwrap_or(u32::MAX);
    let answer = program.run(packet, wire_len);
    let _ = program.run(packet, wire_len.saturating_add(1000));
    let aux = bpf::Aux {
        vlan_tci: packet.first().map(|&b| u16::from(b) << 4),
        vlan_tpid: Some(0x8100),
        protocol: Some(0x0800),
        pkttype: Some(0),
        ifindex: Some(2),
    };
    let _ = program.run_with_aux(packet, wire_len, &aux);
    let defined_in_libpcap = bpf::libpcap::defined_in_libpcap(&insns);
    if defined_in_libpcap {
        assert_eq!(
            answer,
            bpf::libpcap::bpf_filter(&program, packet, wire_len),
            "{listing}"
        );
    }
}

/// Fuzzes `kansoku anon`'s rewrite (`anon::Anonymizer::frame`): the first
/// byte picks a link type and the payload policy, the rest is the frame.
/// It must not panic, keep no more bytes than it was given, give the same
/// bytes for the same frame, and leave no network address that the frame's
/// slice found at the place it found it, in what it keeps.
pub fn anon(data: &[u8]) {
    use anon::{Anonymizer, CryptoPan, MacPolicy, PayloadPolicy};
    let Some((&pick, frame)) = data.split_first() else {
        return;
    };
    let link = LINKS[usize::from(pick & 7) % LINKS.len()];
    let payload = [
        PayloadPolicy::Strip,
        PayloadPolicy::Zero,
        PayloadPolicy::Keep,
    ][usize::from(pick >> 3) % 3];
    let mac = if pick & 0x80 == 0 {
        MacPolicy::Hash
    } else {
        MacPolicy::Zero
    };
    let mut a = Anonymizer::new(CryptoPan::new(&[0x5a; 32]), mac, payload);
    let mut once = frame.to_vec();
    let r = a.frame(link, &mut once);
    assert!(r.kept <= frame.len());
    let mut twice = frame.to_vec();
    assert_eq!(a.frame(link, &mut twice), r);
    assert_eq!(once, twice, "the same frame, the same rewrite");
    let out = &once[..r.kept];
    // What the slice reads back of the output does not panic either.
    let _ = wire::slice(link, out).network();
    let before = wire::slice(link, frame);
    if let (Some(n), Some(at)) = (before.network(), before.network_offset()) {
        let (src, len) = match n.src {
            std::net::IpAddr::V4(v) => (v.octets().to_vec(), 4),
            std::net::IpAddr::V6(v) => (v.octets().to_vec(), 16),
        };
        let src_at = at + if len == 4 { 12 } else { 8 };
        // An address that is its own image is a 2^-32 chance, not a leak;
        // fuzzers find them only by brute force.
        if out.len() >= src_at + len && src.iter().any(|&b| b != src[0]) {
            let image = &out[src_at..src_at + len];
            let own = CryptoPan::new(&[0x5a; 32]);
            let mapped = if len == 4 {
                own.ipv4_uncached(u32::from_be_bytes(src[..4].try_into().unwrap()))
                    .to_be_bytes()
                    .to_vec()
            } else {
                own.ipv6(u128::from_be_bytes(src[..16].try_into().unwrap()))
                    .to_be_bytes()
                    .to_vec()
            };
            assert_eq!(
                image,
                &mapped[..],
                "the source address is its Crypto-PAn image"
            );
        }
    }
}
