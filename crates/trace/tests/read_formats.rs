//! The reader against hand-built pcap and pcapng files, every codec, the
//! emit functions (round trips) and, where installed, tshark.

use std::io::{Cursor, Write};
use std::process::Command;

use proptest::prelude::*;
use trace::format::{pcap, pcapng};
use trace::{
    Codec, Error, FileFormat, Interface, LinkType, Packet, PacketKind, RawBlock, RawOption, Record,
    Section, TraceReader, Truncation, TsResolution,
};

/// A record copied out of the reader's buffer, for comparisons.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Owned {
    Section(Section),
    Interface(Interface),
    Packet {
        interface: u32,
        link_type: LinkType,
        ts: u64,
        tsresol: TsResolution,
        orig_len: u32,
        data: Vec<u8>,
        options: Vec<RawOption>,
        kind: PacketKind,
    },
    Block {
        block_type: u32,
        body: Vec<u8>,
        little_endian: bool,
    },
}

impl Owned {
    fn of(r: Record) -> Owned {
        match r {
            Record::Section(s) => Owned::Section(s.clone()),
            Record::Interface(i) => Owned::Interface(i.clone()),
            Record::Packet(p) => Owned::Packet {
                interface: p.interface,
                link_type: p.link_type,
                ts: p.ts,
                tsresol: p.tsresol,
                orig_len: p.orig_len,
                data: p.data.to_vec(),
                options: p.options.to_vec(),
                kind: p.kind,
            },
            Record::Block(b) => Owned::Block {
                block_type: b.block_type,
                body: b.body.to_vec(),
                little_endian: b.little_endian,
            },
        }
    }
}

fn drain(mut r: TraceReader) -> (Vec<Owned>, Option<Truncation>) {
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().expect("valid trace") {
        out.push(Owned::of(rec));
    }
    (out, r.truncation().cloned())
}

fn read_plain(bytes: &[u8]) -> (Vec<Owned>, Option<Truncation>) {
    drain(TraceReader::from_decompressed(Box::new(Cursor::new(bytes.to_vec()))).unwrap())
}

fn read_any(bytes: &[u8]) -> TraceReader {
    TraceReader::from_read(Box::new(Cursor::new(bytes.to_vec()))).unwrap()
}

// ---------------------------------------------------------------- pcap

/// A pcap file written field by field in either byte order.
fn pcap_file(nanos: bool, be: bool, packets: &[(u32, u32, u32, &[u8])]) -> Vec<u8> {
    let u16b = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let u32b = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut f = Vec::new();
    f.extend_from_slice(&u32b(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    f.extend_from_slice(&u16b(2));
    f.extend_from_slice(&u16b(4));
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&u32b(9000));
    f.extend_from_slice(&u32b(1));
    for &(sec, frac, orig, data) in packets {
        f.extend_from_slice(&u32b(sec));
        f.extend_from_slice(&u32b(frac));
        f.extend_from_slice(&u32b(data.len() as u32));
        f.extend_from_slice(&u32b(orig));
        f.extend_from_slice(data);
    }
    f
}

#[test]
fn pcap_micro_nano_little_big() {
    let pkts: [(u32, u32, u32, &[u8]); 3] = [
        (1_700_000_000, 1, 60, b"first packet"),
        (1_700_000_001, 999_999, 4, b"caplen above orig_len"),
        (1_700_000_002, 0, 0, b""),
    ];
    for nanos in [false, true] {
        for be in [false, true] {
            let file = pcap_file(nanos, be, &pkts);
            let r = TraceReader::from_decompressed(Box::new(Cursor::new(file.clone()))).unwrap();
            assert_eq!(
                r.format(),
                FileFormat::Pcap {
                    nanos,
                    big_endian: be
                }
            );
            assert_eq!(r.codec(), Codec::None);
            let (recs, trunc) = drain(r);
            assert_eq!(trunc, None);
            let tsresol = if nanos {
                TsResolution::NANO
            } else {
                TsResolution::MICRO
            };
            let mut want = vec![
                Owned::Section(Section {
                    major: 2,
                    minor: 4,
                    options: vec![],
                }),
                Owned::Interface(Interface::new(LinkType::Ethernet, 9000, tsresol)),
            ];
            let per_sec: u64 = if nanos { 1_000_000_000 } else { 1_000_000 };
            for &(sec, frac, orig, data) in &pkts {
                want.push(Owned::Packet {
                    interface: 0,
                    link_type: LinkType::Ethernet,
                    ts: u64::from(sec) * per_sec + u64::from(frac),
                    tsresol,
                    orig_len: orig,
                    data: data.to_vec(),
                    options: vec![],
                    kind: PacketKind::Pcap,
                });
            }
            assert_eq!(recs, want, "nanos {nanos} be {be}");
        }
    }
}

#[test]
fn pcap_emit_round_trip_and_nanos() {
    let mut f = Vec::new();
    pcap::emit_file_header(&mut f, LinkType::Raw, 65535, true);
    pcap::emit_record(&mut f, 1_600_000_000_123_456_789, true, 1500, &[0x45; 40]);
    pcap::emit_record(&mut f, 1_600_000_001_000_000_001, true, 20, &[0x60; 20]);
    let mut r = TraceReader::from_decompressed(Box::new(Cursor::new(f.clone()))).unwrap();
    let mut stamps = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Packet(p) = rec {
            assert_eq!(p.link_type, LinkType::Raw);
            stamps.push((p.ts_nanos(), p.orig_len, p.caplen()));
        }
    }
    assert_eq!(
        stamps,
        [
            (1_600_000_000_123_456_789, 1500, 40),
            (1_600_000_001_000_000_001, 20, 20)
        ]
    );
    assert_eq!(r.offset(), f.len() as u64);
    assert_eq!(r.compressed_offset(), f.len() as u64);
}

// ---------------------------------------------------------------- pcapng

/// Writes pcapng blocks field by field in either byte order.
struct Ng {
    be: bool,
    out: Vec<u8>,
}

impl Ng {
    fn u16(&self, v: u16) -> [u8; 2] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    /// Options as (code, value already in this file's byte order).
    fn opts(&self, opts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (code, v) in opts {
            b.extend_from_slice(&self.u16(*code));
            b.extend_from_slice(&self.u16(v.len() as u16));
            b.extend_from_slice(v);
            b.resize(b.len().next_multiple_of(4), 0);
        }
        if !opts.is_empty() {
            b.extend_from_slice(&[0; 4]);
        }
        b
    }
    fn block(&mut self, t: u32, body: &[u8]) {
        let total = 12 + body.len().next_multiple_of(4);
        let (t, len) = (self.u32(t), self.u32(total as u32));
        self.out.extend_from_slice(&t);
        self.out.extend_from_slice(&len);
        self.out.extend_from_slice(body);
        self.out.resize(self.out.len().next_multiple_of(4), 0);
        self.out.extend_from_slice(&len);
    }
    fn shb(&mut self, opts: &[(u16, Vec<u8>)]) {
        let mut b = self.u32(0x1a2b_3c4d).to_vec();
        b.extend_from_slice(&self.u16(1));
        b.extend_from_slice(&self.u16(0));
        b.extend_from_slice(&[0xff; 8]);
        b.extend_from_slice(&self.opts(opts));
        self.block(pcapng::BT_SHB, &b);
    }
    fn idb(&mut self, lt: u16, snaplen: u32, opts: &[(u16, Vec<u8>)]) {
        let mut b = self.u16(lt).to_vec();
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&self.u32(snaplen));
        b.extend_from_slice(&self.opts(opts));
        self.block(pcapng::BT_IDB, &b);
    }
    fn epb(
        &mut self,
        t: u32,
        iface: u32,
        ts: u64,
        orig: u32,
        data: &[u8],
        opts: &[(u16, Vec<u8>)],
    ) {
        let mut b = Vec::new();
        if t == pcapng::BT_PB {
            b.extend_from_slice(&self.u16(iface as u16));
            b.extend_from_slice(&self.u16(5)); // drops
        } else {
            b.extend_from_slice(&self.u32(iface));
        }
        b.extend_from_slice(&self.u32((ts >> 32) as u32));
        b.extend_from_slice(&self.u32(ts as u32));
        b.extend_from_slice(&self.u32(data.len() as u32));
        b.extend_from_slice(&self.u32(orig));
        b.extend_from_slice(data);
        b.resize(b.len().next_multiple_of(4), 0);
        b.extend_from_slice(&self.opts(opts));
        self.block(t, &b);
    }
    fn spb(&mut self, orig: u32, data: &[u8]) {
        let mut b = self.u32(orig).to_vec();
        b.extend_from_slice(data);
        self.block(pcapng::BT_SPB, &b);
    }
    fn isb_body(&self, iface: u32, ts: u64, ifrecv: u64) -> Vec<u8> {
        let mut b = self.u32(iface).to_vec();
        b.extend_from_slice(&self.u32((ts >> 32) as u32));
        b.extend_from_slice(&self.u32(ts as u32));
        let v = if self.be {
            ifrecv.to_be_bytes()
        } else {
            ifrecv.to_le_bytes()
        };
        b.extend_from_slice(&self.opts(&[(4, v.to_vec()), (1, b"stats".to_vec())]));
        b
    }
    fn nrb_body(&self) -> Vec<u8> {
        let mut b = self.u16(1).to_vec(); // nrb_record_ipv4
        b.extend_from_slice(&self.u16(4 + 12));
        b.extend_from_slice(&[192, 0, 2, 1]);
        b.extend_from_slice(b"example.org\0");
        b.extend_from_slice(&[0; 4]); // nrb_record_end
        b
    }
}

fn le64(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// Two sections, little- then big-endian, with the blocks the reader must
/// know. Returns the file and the records it must give.
fn two_section_file() -> (Vec<u8>, Vec<Owned>) {
    let mut want = Vec::new();
    let mut le = Ng {
        be: false,
        out: Vec::new(),
    };
    le.shb(&[(1, b"first section".to_vec()), (4, b"handmade".to_vec())]);
    want.push(Owned::Section(Section {
        major: 1,
        minor: 0,
        options: vec![
            RawOption::comment("first section"),
            RawOption {
                code: 4,
                value: b"handmade".to_vec(),
            },
        ],
    }));
    le.idb(1, 0, &[(2, b"eth0".to_vec())]);
    let eth = Interface {
        link_type: LinkType::Ethernet,
        snaplen: 0,
        tsresol: TsResolution::MICRO,
        options: vec![RawOption {
            code: 2,
            value: b"eth0".to_vec(),
        }],
    };
    want.push(Owned::Interface(eth.clone()));
    le.idb(101, 96, &[(9, vec![9]), (8, le64(10_000_000_000))]);
    let raw = Interface {
        link_type: LinkType::Raw,
        snaplen: 96,
        tsresol: TsResolution::NANO,
        options: vec![
            RawOption {
                code: 9,
                value: vec![9],
            },
            RawOption {
                code: 8,
                value: le64(10_000_000_000),
            },
        ],
    };
    want.push(Owned::Interface(raw.clone()));
    let flags = (2u16, 0x0000_0001u32.to_le_bytes().to_vec());
    le.epb(
        pcapng::BT_EPB,
        1,
        1_700_000_000_000_000_001,
        1400,
        b"ip packet",
        &[flags.clone(), (1, b"hello".to_vec())],
    );
    want.push(Owned::Packet {
        interface: 1,
        link_type: LinkType::Raw,
        ts: 1_700_000_000_000_000_001,
        tsresol: TsResolution::NANO,
        orig_len: 1400,
        data: b"ip packet".to_vec(),
        options: vec![
            RawOption {
                code: 2,
                value: flags.1.clone(),
            },
            RawOption::comment("hello"),
        ],
        kind: PacketKind::Enhanced,
    });
    le.epb(
        pcapng::BT_EPB,
        0,
        1_700_000_000_000_002,
        64,
        &[0xaa; 64],
        &[],
    );
    want.push(Owned::Packet {
        interface: 0,
        link_type: LinkType::Ethernet,
        ts: 1_700_000_000_000_002,
        tsresol: TsResolution::MICRO,
        orig_len: 64,
        data: vec![0xaa; 64],
        options: vec![],
        kind: PacketKind::Enhanced,
    });
    le.spb(7, b"simple\0\0");
    want.push(Owned::Packet {
        interface: 0,
        link_type: LinkType::Ethernet,
        ts: 0,
        tsresol: TsResolution::MICRO,
        orig_len: 7,
        data: b"simple\0".to_vec(),
        options: vec![],
        kind: PacketKind::Simple,
    });
    let nrb = le.nrb_body();
    le.block(pcapng::BT_NRB, &nrb);
    want.push(Owned::Block {
        block_type: pcapng::BT_NRB,
        body: nrb,
        little_endian: true,
    });
    let isb = le.isb_body(0, 42, 1000);
    le.block(pcapng::BT_ISB, &isb);
    want.push(Owned::Block {
        block_type: pcapng::BT_ISB,
        body: isb,
        little_endian: true,
    });

    let mut be = Ng {
        be: true,
        out: le.out,
    };
    be.shb(&[]);
    want.push(Owned::Section(Section {
        major: 1,
        minor: 0,
        options: vec![],
    }));
    be.idb(
        113,
        65535,
        &[(9, vec![0x83]), (14, 5i64.to_be_bytes().to_vec())],
    );
    let sll = Interface {
        link_type: LinkType::LinuxSll,
        snaplen: 65535,
        tsresol: TsResolution(0x83),
        options: vec![
            RawOption {
                code: 9,
                value: vec![0x83],
            },
            RawOption {
                code: 14,
                value: 5i64.to_le_bytes().to_vec(),
            },
        ],
    };
    want.push(Owned::Interface(sll.clone()));
    be.epb(
        pcapng::BT_EPB,
        0,
        80,
        100,
        b"big-endian",
        &[
            (2, 0x0000_0102u32.to_be_bytes().to_vec()),
            (4, 9u64.to_be_bytes().to_vec()),
        ],
    );
    want.push(Owned::Packet {
        interface: 0,
        link_type: LinkType::LinuxSll,
        ts: 80,
        tsresol: TsResolution(0x83),
        orig_len: 100,
        data: b"big-endian".to_vec(),
        options: vec![
            RawOption {
                code: 2,
                value: 0x0102u32.to_le_bytes().to_vec(),
            },
            RawOption {
                code: 4,
                value: le64(9),
            },
        ],
        kind: PacketKind::Enhanced,
    });
    be.epb(pcapng::BT_PB, 0, 81, 3, b"old", &[]);
    want.push(Owned::Packet {
        interface: 0,
        link_type: LinkType::LinuxSll,
        ts: 81,
        tsresol: TsResolution(0x83),
        orig_len: 3,
        data: b"old".to_vec(),
        options: vec![RawOption {
            code: 4,
            value: le64(5),
        }],
        kind: PacketKind::Obsolete,
    });
    let isb = be.isb_body(0, 0x1_0000_0002, 77);
    be.block(pcapng::BT_ISB, &isb);
    want.push(Owned::Block {
        block_type: pcapng::BT_ISB,
        body: isb,
        little_endian: false,
    });
    be.block(0x0000_1234, b"opaque!\0");
    want.push(Owned::Block {
        block_type: 0x1234,
        body: b"opaque!\0".to_vec(),
        little_endian: false,
    });
    (be.out, want)
}

#[test]
fn pcapng_two_sections_both_byte_orders() {
    let (file, want) = two_section_file();
    let mut r = TraceReader::from_decompressed(Box::new(Cursor::new(file.clone()))).unwrap();
    assert_eq!(r.format(), FileFormat::Pcapng);
    let mut got = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        got.push(Owned::of(rec));
    }
    assert_eq!(r.truncation(), None);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    // The second section's interfaces replaced the first's.
    assert_eq!(r.interfaces().len(), 1);
    assert_eq!(r.interfaces()[0].link_type, LinkType::LinuxSll);
    assert_eq!(r.offset(), file.len() as u64);
}

/// Emits owned records again with the emit functions (raw blocks converted
/// to little-endian).
fn emit_all(recs: &[Owned]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        match r {
            Owned::Section(s) => pcapng::emit_section(&mut out, s),
            Owned::Interface(i) => pcapng::emit_interface(&mut out, i),
            Owned::Packet {
                interface,
                link_type,
                ts,
                tsresol,
                orig_len,
                data,
                options,
                kind,
            } => {
                pcapng::emit_packet(
                    &mut out,
                    &Packet {
                        interface: *interface,
                        link_type: *link_type,
                        ts: *ts,
                        tsresol: *tsresol,
                        orig_len: *orig_len,
                        data,
                        options,
                        kind: *kind,
                    },
                );
            }
            Owned::Block {
                block_type,
                body,
                little_endian,
            } => {
                let b = RawBlock {
                    block_type: *block_type,
                    body,
                    little_endian: *little_endian,
                };
                if pcapng::emit_raw_block(&mut out, &b).is_err() {
                    assert!(
                        !little_endian,
                        "only big-endian unknown blocks may be refused"
                    );
                }
            }
        }
    }
    out
}

#[test]
fn pcapng_reemitted_little_endian_reads_the_same() {
    let (file, want) = two_section_file();
    let again = read_plain(&emit_all(&want)).0;
    let mut expect = Vec::new();
    for w in &want {
        match w {
            // Obsolete packets are written as EPBs; the drops count is
            // already an epb_dropcount option.
            Owned::Packet {
                kind: PacketKind::Obsolete,
                ..
            } => {
                let Owned::Packet {
                    interface,
                    link_type,
                    ts,
                    tsresol,
                    orig_len,
                    data,
                    options,
                    ..
                } = w.clone()
                else {
                    unreachable!()
                };
                expect.push(Owned::Packet {
                    interface,
                    link_type,
                    ts,
                    tsresol,
                    orig_len,
                    data,
                    options,
                    kind: PacketKind::Enhanced,
                });
            }
            // The big-endian ISB is rewritten little-endian; the unknown block is dropped.
            Owned::Block {
                block_type: pcapng::BT_ISB,
                little_endian: false,
                ..
            } => {
                let le = Ng {
                    be: false,
                    out: Vec::new(),
                };
                expect.push(Owned::Block {
                    block_type: pcapng::BT_ISB,
                    body: le.isb_body(0, 0x1_0000_0002, 77),
                    little_endian: true,
                });
            }
            Owned::Block {
                little_endian: false,
                ..
            } => {}
            other => expect.push(other.clone()),
        }
    }
    assert_eq!(again, expect);
    assert_ne!(file.len(), 0);
}

fn arb_options() -> impl Strategy<Value = Vec<RawOption>> {
    prop::collection::vec(
        (1u16..3000, prop::collection::vec(any::<u8>(), 0..20))
            .prop_map(|(code, value)| RawOption { code, value }),
        0..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// parse(emit(x)) == x for sections, interfaces and packets.
    #[test]
    fn pcapng_emit_parse_round_trip(
        shb_opts in arb_options(),
        lt in any::<u16>(),
        snaplen in any::<u32>(),
        if_opts in arb_options(),
        pkts in prop::collection::vec(
            (any::<u64>(), any::<u32>(), prop::collection::vec(any::<u8>(), 0..200), arb_options(), any::<bool>()),
            0..8),
    ) {
        // if_tsresol from the generated options would change the resolution;
        // keep the interface consistent with what the reader derives.
        let if_opts: Vec<RawOption> = if_opts.into_iter().filter(|o| o.code != 9).collect();
        let section = Section { major: 1, minor: 0, options: shb_opts };
        let iface = Interface { link_type: LinkType::from_code(lt), snaplen, tsresol: TsResolution::MICRO, options: if_opts };
        let mut want = vec![Owned::Section(section), Owned::Interface(iface.clone())];
        for (ts, orig, data, options, simple) in pkts {
            let simple = simple && (snaplen == 0 || data.len() <= snaplen as usize) && data.len() % 4 == 0 && orig as usize >= data.len();
            let (ts, options, kind) = if simple { (0, vec![], PacketKind::Simple) } else { (ts, options, PacketKind::Enhanced) };
            // An SPB's captured length is min(orig_len, body): make them agree.
            let orig = if simple { data.len() as u32 } else { orig };
            want.push(Owned::Packet { interface: 0, link_type: iface.link_type, ts, tsresol: iface.tsresol, orig_len: orig, data, options, kind });
        }
        let bytes = emit_all(&want);
        let (got, trunc) = read_plain(&bytes);
        prop_assert_eq!(trunc, None);
        prop_assert_eq!(got, want);
    }
}

// ---------------------------------------------------------------- codecs

/// A pcap of `n` packets with varied sizes, and its packets.
fn sample_pcap(n: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut f = Vec::new();
    pcap::emit_file_header(&mut f, LinkType::Ethernet, 65535, false);
    let mut pkts = Vec::new();
    for i in 0..n {
        let len = 60 + (i * 37) % 1400;
        let data: Vec<u8> = (0..len)
            .map(|j| ((i + j * 3) % 251) as u8 & if i % 3 == 0 { 0 } else { 0xff })
            .collect();
        pcap::emit_record(
            &mut f,
            1_700_000_000_000_000_000 + i as u64 * 1000,
            false,
            len as u32,
            &data,
        );
        pkts.push(data);
    }
    (f, pkts)
}

/// The packets read, or those read before an error and the error.
type Packets = Result<Vec<Vec<u8>>, (Vec<Vec<u8>>, Error)>;

fn packets_of(r: &mut TraceReader) -> Packets {
    let mut out = Vec::new();
    loop {
        match r.next_record() {
            Ok(Some(Record::Packet(p))) => out.push(p.data.to_vec()),
            Ok(Some(_)) => {}
            Ok(None) => return Ok(out),
            Err(e) => return Err((out, e)),
        }
    }
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn lz4(b: &[u8], independent: bool) -> Vec<u8> {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
    let info = FrameInfo::new()
        .block_size(BlockSize::Max64KB)
        .block_mode(if independent {
            BlockMode::Independent
        } else {
            BlockMode::Linked
        })
        .content_checksum(!independent);
    let mut e = FrameEncoder::with_frame_info(info, Vec::new());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

#[test]
fn every_codec_single_and_concatenated() {
    let (file, pkts) = sample_pcap(3000);
    let (half_a, half_b) = file.split_at(file.len() / 2 + 7);
    let cases: Vec<(Codec, Vec<u8>)> = vec![
        (Codec::None, file.clone()),
        (Codec::Gzip, gzip(&file)),
        (Codec::Gzip, [gzip(half_a), gzip(half_b)].concat()),
        (Codec::Zstd, zstd::encode_all(&file[..], 1).unwrap()),
        (
            Codec::Zstd,
            [
                zstd::encode_all(half_a, 3).unwrap(),
                zstd::encode_all(half_b, 1).unwrap(),
            ]
            .concat(),
        ),
        (Codec::Lz4, lz4(&file, true)),
        (Codec::Lz4, lz4(&file, false)),
        (Codec::Lz4, [lz4(half_a, true), lz4(half_b, false)].concat()),
    ];
    for (i, (codec, bytes)) in cases.iter().enumerate() {
        let mut r = read_any(bytes);
        assert_eq!(r.codec(), *codec, "case {i}");
        assert_eq!(packets_of(&mut r).unwrap(), pkts, "case {i}");
        assert_eq!(r.truncation(), None, "case {i}");
        assert_eq!(r.offset(), file.len() as u64, "case {i}");
        assert_eq!(r.compressed_offset(), bytes.len() as u64, "case {i}");
    }
}

#[test]
fn open_reads_a_compressed_file_by_path() {
    let (file, pkts) = sample_pcap(500);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.pcap.zst");
    std::fs::write(&path, zstd::encode_all(&file[..], 1).unwrap()).unwrap();
    let mut r = TraceReader::open(&path).unwrap();
    assert_eq!(r.codec(), Codec::Zstd);
    assert_eq!(packets_of(&mut r).unwrap(), pkts);
    let e = TraceReader::open(&dir.path().join("missing.pcap")).unwrap_err();
    assert!(
        matches!(e, Error::Io { .. }) && e.to_string().contains("missing.pcap"),
        "{e}"
    );
}

#[test]
fn lz4_frame_without_end_mark_reads_every_block() {
    // A writer killed by SIGKILL leaves its frame without the end mark.
    let (file, pkts) = sample_pcap(2000);
    let enc = lz4(&file, true);
    let mut r = read_any(&enc[..enc.len() - 4]);
    assert_eq!(packets_of(&mut r).unwrap(), pkts);
    let t = r.truncation().expect("a cut frame is reported");
    assert_eq!(t.what, "lz4 frame");
    assert_eq!(t.offset, file.len() as u64);
}

#[test]
fn cut_streams_are_truncations_with_the_packets_before() {
    let (file, pkts) = sample_pcap(2000);
    for (codec, enc) in [
        (Codec::Lz4, lz4(&file, true)),
        (Codec::Zstd, zstd::encode_all(&file[..], 1).unwrap()),
        (Codec::Gzip, gzip(&file)),
    ] {
        let cut = &enc[..enc.len() * 2 / 3];
        let mut r = read_any(cut);
        let got = packets_of(&mut r).unwrap();
        assert!(
            !got.is_empty() && got.len() < pkts.len(),
            "{codec}: {}",
            got.len()
        );
        assert_eq!(got[..], pkts[..got.len()], "{codec}");
        assert!(r.truncation().is_some(), "{codec}");
    }
}

#[test]
fn corrupt_compressed_data_is_a_compression_error_after_good_packets() {
    let (file, pkts) = sample_pcap(3000);
    // lz4: garble the middle of the stream; with independent blocks only that
    // block is lost, and the reader stops there.
    let mut enc = lz4(&file, true);
    let mid = enc.len() / 2;
    for b in &mut enc[mid..mid + 64] {
        *b = 0xff;
    }
    let mut r = read_any(&enc);
    let (got, e) = packets_of(&mut r).unwrap_err();
    assert!(matches!(e, Error::Compression { codec: "lz4", .. }), "{e}");
    assert!(!got.is_empty() && got[..] == pkts[..got.len()]);

    // gzip: a bad CRC is found at the end of the member, after all packets.
    let mut enc = gzip(&file);
    let n = enc.len();
    enc[n - 8] ^= 0xff;
    let (got, e) = packets_of(&mut read_any(&enc)).unwrap_err();
    assert!(matches!(e, Error::Compression { codec: "gzip", .. }), "{e}");
    assert_eq!(got[..], pkts[..got.len()]);

    // zstd: garbage in the middle of the frame.
    let mut enc = zstd::encode_all(&file[..], 1).unwrap();
    let mid = enc.len() / 2;
    for b in &mut enc[mid..mid + 64] {
        *b ^= 0x5a;
    }
    let (got, e) = packets_of(&mut read_any(&enc)).unwrap_err();
    assert!(matches!(e, Error::Compression { codec: "zstd", .. }), "{e}");
    assert_eq!(got[..], pkts[..got.len()]);
}

// ---------------------------------------------------------------- tshark

#[test]
fn reads_what_tshark_converts() {
    if Command::new("tshark").arg("--version").output().is_err() {
        eprintln!("tshark not installed; interop test skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (file, pkts) = sample_pcap(200);
    let src = dir.path().join("in.pcap");
    let dst = dir.path().join("out.pcapng");
    std::fs::write(&src, &file).unwrap();
    let st = Command::new("tshark")
        .arg("-r")
        .arg(&src)
        .args(["-F", "pcapng", "-w"])
        .arg(&dst)
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let mut r = TraceReader::open(&dst).unwrap();
    assert_eq!(r.format(), FileFormat::Pcapng);
    let mut got = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Packet(p) = rec {
            assert_eq!(p.kind, PacketKind::Enhanced);
            assert_eq!(
                p.ts_nanos(),
                1_700_000_000_000_000_000 + got.len() as u64 * 1000
            );
            got.push(p.data.to_vec());
        }
    }
    assert_eq!(got, pkts);
    assert_eq!(r.interfaces()[0].link_type, LinkType::Ethernet);
}
