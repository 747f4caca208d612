//! The reader on bad input: cuts at every offset, byte flips, absurd
//! lengths, text, empty input, a source that gives one byte at a time.

use std::io::{Cursor, Read, Write};

use proptest::prelude::*;
use trace::format::{pcap, pcapng};
use trace::{
    Error, Interface, LinkType, Packet, PacketKind, Record, Section, TraceReader, TsResolution,
};

/// A small pcapng file and the end offset of each packet block in it.
fn small_pcapng() -> (Vec<u8>, Vec<usize>) {
    let mut f = Vec::new();
    pcapng::emit_section(
        &mut f,
        &Section {
            major: 1,
            minor: 0,
            options: vec![],
        },
    );
    pcapng::emit_interface(
        &mut f,
        &Interface::new(LinkType::Ethernet, 0, TsResolution::NANO),
    );
    let mut ends = Vec::new();
    for i in 0..6u8 {
        let data = vec![i; 10 + usize::from(i) * 7];
        pcapng::emit_packet(
            &mut f,
            &Packet {
                interface: 0,
                link_type: LinkType::Ethernet,
                ts: u64::from(i) * 1000,
                tsresol: TsResolution::NANO,
                orig_len: data.len() as u32,
                data: &data,
                options: &[],
                kind: if i == 3 {
                    PacketKind::Simple
                } else {
                    PacketKind::Enhanced
                },
            },
        );
        ends.push(f.len());
    }
    (f, ends)
}

/// A small pcap file and the end offset of each record.
fn small_pcap() -> (Vec<u8>, Vec<usize>) {
    let mut f = Vec::new();
    pcap::emit_file_header(&mut f, LinkType::Ethernet, 65535, false);
    let mut ends = Vec::new();
    for i in 0..6u8 {
        pcap::emit_record(
            &mut f,
            u64::from(i) * 1000,
            false,
            100,
            &vec![i; 13 + usize::from(i)],
        );
        ends.push(f.len());
    }
    (f, ends)
}

/// Reads everything; returns the packets, whether a truncation was
/// reported, and the error if one ended the reading.
fn drain(r: Result<TraceReader, Error>) -> (Vec<Vec<u8>>, bool, Option<Error>) {
    let mut r = match r {
        Ok(r) => r,
        Err(e) => return (vec![], false, Some(e)),
    };
    let mut pkts = Vec::new();
    let mut n = 0usize;
    loop {
        n += 1;
        assert!(n < 1_000_000, "the reader does not stop");
        match r.next_record() {
            Ok(Some(Record::Packet(p))) => pkts.push(p.data.to_vec()),
            Ok(Some(_)) => {}
            Ok(None) => return (pkts, r.truncation().is_some(), None),
            Err(e) => {
                // After an error the reader stays at its end.
                assert!(matches!(r.next_record(), Ok(None)));
                return (pkts, r.truncation().is_some(), Some(e));
            }
        }
    }
}

fn plain(bytes: &[u8]) -> Result<TraceReader, Error> {
    TraceReader::from_decompressed(Box::new(Cursor::new(bytes.to_vec())))
}

fn detect(bytes: &[u8]) -> Result<TraceReader, Error> {
    TraceReader::from_read(Box::new(Cursor::new(bytes.to_vec())))
}

#[test]
fn cut_at_every_offset_keeps_the_complete_packets() {
    // Cuts between blocks before the first packet (after the pcap header;
    // after the SHB and after the IDB) are clean ends too.
    for (name, (file, ends), headers) in [
        ("pcap", small_pcap(), vec![24]),
        ("pcapng", small_pcapng(), vec![28, 60]),
    ] {
        let all = drain(plain(&file)).0;
        assert_eq!(all.len(), ends.len());
        for cut in 0..file.len() {
            let (pkts, truncated, err) = drain(plain(&file[..cut]));
            let complete = ends.iter().filter(|&&e| e <= cut).count();
            match err {
                // Only a cut inside the first four bytes may refuse the file.
                Some(e) => assert!(cut < 4, "{name} cut {cut}: {e}"),
                None => {
                    assert_eq!(pkts[..], all[..complete], "{name} cut {cut}");
                    let boundary = ends.contains(&cut) || headers.contains(&cut);
                    assert_eq!(truncated, !boundary, "{name} cut {cut}");
                }
            }
        }
    }
}

#[test]
fn cut_lz4_file_at_every_offset() {
    let (file, _) = small_pcapng();
    let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
    e.write_all(&file).unwrap();
    let enc = e.finish().unwrap();
    let all = drain(detect(&enc)).0;
    for cut in 0..enc.len() {
        let (pkts, truncated, err) = drain(detect(&enc[..cut]));
        assert!(all.starts_with(&pkts), "cut {cut}");
        assert!(
            err.is_some() || truncated || cut == 0,
            "cut {cut}: neither error nor warning"
        );
    }
}

#[test]
fn one_byte_at_a_time_source_reads_the_same() {
    struct Trickle(Cursor<Vec<u8>>);
    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(1);
            self.0.read(&mut buf[..n])
        }
    }
    for (file, _) in [small_pcap(), small_pcapng()] {
        let want = drain(plain(&file)).0;
        let got = drain(TraceReader::from_read(Box::new(Trickle(Cursor::new(
            file.clone(),
        )))))
        .0;
        assert_eq!(got, want);
    }
}

#[test]
fn text_and_empty_input_are_clear_format_errors() {
    let e = detect(b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n").unwrap_err();
    assert!(matches!(e, Error::Format { offset: 0, .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "offset 0: not a pcap or pcapng file: magic 0x47455420 at offset 0"
    );
    let e = detect(b"").unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let e = plain(b"\xd4\xc3").unwrap_err();
    assert!(e.to_string().contains("too short"), "{e}");
}

#[test]
fn absurd_lengths_are_format_errors() {
    let (file, _) = small_pcapng();
    // The first EPB starts after the SHB (28 bytes) and the IDB (32 bytes).
    let epb = 28 + 32;
    for bad in [0xffff_fff0u32, 8, 61, 0x0400_0004] {
        let mut f = file.clone();
        f[epb + 4..epb + 8].copy_from_slice(&bad.to_le_bytes());
        let (pkts, _, err) = drain(plain(&f));
        assert!(pkts.is_empty());
        let e = err.unwrap_or_else(|| panic!("length {bad} accepted"));
        assert!(
            matches!(e, Error::Format { offset, .. } if offset == epb as u64 + 4),
            "{e}"
        );
    }
    // A captured length beyond its block.
    let mut f = file.clone();
    f[epb + 20..epb + 24].copy_from_slice(&1000u32.to_le_bytes());
    assert!(matches!(drain(plain(&f)).2, Some(Error::Format { .. })));
    // A pcap captured length above 256 MiB.
    let (mut f, _) = small_pcap();
    f[24 + 8..24 + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let e = drain(plain(&f)).2.expect("absurd caplen");
    assert!(matches!(e, Error::Format { offset: 32, .. }), "{e}");
}

#[test]
fn packet_on_a_missing_interface_is_an_error_with_its_offset() {
    let mut f = Vec::new();
    pcapng::emit_section(
        &mut f,
        &Section {
            major: 1,
            minor: 0,
            options: vec![],
        },
    );
    pcapng::emit_interface(
        &mut f,
        &Interface::new(LinkType::Ethernet, 0, TsResolution::MICRO),
    );
    let at = f.len() as u64;
    let p = Packet {
        interface: 1,
        link_type: LinkType::Ethernet,
        ts: 0,
        tsresol: TsResolution::MICRO,
        orig_len: 4,
        data: b"abcd",
        options: &[],
        kind: PacketKind::Enhanced,
    };
    pcapng::emit_packet(&mut f, &p);
    let e = drain(plain(&f)).2.expect("bad interface");
    assert!(
        matches!(e, Error::Format { offset, .. } if offset == at),
        "{e}"
    );
    assert!(e.to_string().contains("interface 1"), "{e}");
}

#[test]
fn a_large_packet_grows_the_buffer() {
    let mut f = Vec::new();
    pcap::emit_file_header(&mut f, LinkType::Ethernet, 0, false);
    let big: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
    pcap::emit_record(&mut f, 1, false, 10, b"small");
    pcap::emit_record(&mut f, 2, false, big.len() as u32, &big);
    pcap::emit_record(&mut f, 3, false, 10, b"after");
    let pkts = drain(plain(&f)).0;
    assert_eq!(pkts, vec![b"small".to_vec(), big, b"after".to_vec()]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random byte flips never panic or hang, and packets come out in order
    /// from the start of the file until the damage.
    #[test]
    fn byte_flips_never_panic(
        which in 0usize..2,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let (mut f, _) = if which == 0 { small_pcap() } else { small_pcapng() };
        for (i, x) in flips {
            let at = i.index(f.len());
            f[at] ^= x | 1;
        }
        let (pkts, _, _) = drain(plain(&f));
        prop_assert!(pkts.len() <= 64);
    }

    /// Random bytes after a valid SHB or pcap header.
    #[test]
    fn garbage_after_a_header_never_panics(
        which in 0usize..2,
        tail in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut f = Vec::new();
        if which == 0 {
            pcap::emit_file_header(&mut f, LinkType::Ethernet, 0, true);
        } else {
            pcapng::emit_section(&mut f, &Section { major: 1, minor: 0, options: vec![] });
        }
        f.extend_from_slice(&tail);
        drain(plain(&f));
        drain(detect(&f));
    }
}
