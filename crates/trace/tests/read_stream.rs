//! The reader streams in constant memory: a 1 GiB trace, generated on the fly
//! and never held anywhere, is read with a small, fixed peak RSS.
//! (Alone in its file so that no other test shares the process's peak RSS.)

use std::io::Read;

use trace::format::pcap;
use trace::{LinkType, Record, TraceReader};

/// A pcap stream of `records` packets of `len` bytes each, made as it is read.
struct Generated {
    header: Vec<u8>,
    record: Vec<u8>,
    records: u64,
    sent_records: u64,
    pos: usize,
}

impl Generated {
    fn new(len: usize, records: u64) -> Generated {
        let mut header = Vec::new();
        pcap::emit_file_header(&mut header, LinkType::Ethernet, 262_144, true);
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let mut record = Vec::new();
        pcap::emit_record(&mut record, 1_000_000_000, true, len as u32, &data);
        Generated {
            header,
            record,
            records,
            sent_records: 0,
            pos: 0,
        }
    }
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.header.is_empty() {
            let n = buf.len().min(self.header.len());
            buf[..n].copy_from_slice(&self.header[..n]);
            self.header.drain(..n);
            return Ok(n);
        }
        if self.sent_records == self.records {
            return Ok(0);
        }
        let n = buf.len().min(self.record.len() - self.pos);
        buf[..n].copy_from_slice(&self.record[self.pos..self.pos + n]);
        self.pos += n;
        if self.pos == self.record.len() {
            self.pos = 0;
            self.sent_records += 1;
        }
        Ok(n)
    }
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_gigabyte_stream_is_read_in_constant_memory() {
    const LEN: usize = 65_000;
    const RECORDS: u64 = 16_500; // about 1.07 GB
    let before = peak_rss_kib();
    let mut r = TraceReader::from_read(Box::new(Generated::new(LEN, RECORDS))).expect("open");
    let (mut packets, mut bytes) = (0u64, 0u64);
    while let Some(rec) = r.next_record().expect("read") {
        if let Record::Packet(p) = rec {
            packets += 1;
            bytes += p.data.len() as u64;
        }
    }
    assert_eq!(packets, RECORDS);
    assert_eq!(bytes, RECORDS * LEN as u64);
    assert!(r.truncation().is_none());
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(
        grown < 16 * 1024,
        "peak RSS grew by {grown} KiB reading 1 GB"
    );
}

/// Regression: the reader used to size its buffer from a record's length
/// field before reading, so a 40-byte file claiming a 200 MB packet made it
/// allocate (and zero) 256 MiB; the fuzzers ran at 250 inputs a second.
#[test]
fn a_short_file_claiming_a_huge_record_does_not_allocate_it() {
    let mut file = Vec::new();
    pcap::emit_file_header(&mut file, LinkType::Ethernet, 262_144, false);
    pcap::emit_record(&mut file, 0, false, 200_000_000, &[0u8; 0]);
    // Patch the captured length to 200 MB: the record's data is missing.
    let caplen_at = pcap::FILE_HEADER_LEN + 8;
    file[caplen_at..caplen_at + 4].copy_from_slice(&200_000_000u32.to_le_bytes());
    file.extend_from_slice(&[0xab; 16]);
    let before = peak_rss_kib();
    let mut r = TraceReader::from_read(Box::new(std::io::Cursor::new(file))).expect("open");
    let mut n = 0;
    while let Some(rec) = r
        .next_record()
        .expect("a cut record is a truncation, not an error")
    {
        n += usize::from(matches!(rec, Record::Packet(_)));
    }
    assert_eq!(n, 0);
    let t = r.truncation().expect("the file is cut short");
    assert_eq!(t.needed, 16 + 200_000_000);
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(
        grown < 16 * 1024,
        "peak RSS grew by {grown} KiB for a 56-byte file"
    );
}
