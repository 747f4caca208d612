//! A plain pcap file read as runs of whole chunks, each of which can be
//! read, checked and walked on its own, on any thread: what lets two
//! threads share the reading of one file (the profiler's
//! `pipeline::SplitSource`).
//!
//! Only a file whose index covers it whole is planned: uncompressed pcap,
//! an index that [`check_index`](crate::window) bears out, closed (an end
//! entry), nothing past it. Anything else is read by [`TraceReader`] as
//! before (`Runs::plan` returns `None`).
//!
//! Nothing here is trusted that the ordinary reader would check: a run's
//! chunks are compared with their checksums (when reads verify), and a
//! run's bytes count only if they are whole pcap records that end exactly
//! at the run's end. The first run starts after the file header, at a
//! record boundary; a run that ends exactly where the next begins hands
//! that boundary on, so every run starts at one however the chunks were
//! cut. A run that fails either test is not walked: its caller goes on
//! from that run's start with the ordinary reader, which reports the
//! corrupt chunk, the bad record or the cut exactly as it would have.
//!
//! [`TraceReader`]: crate::TraceReader

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::format::pcap::{self, FileHeader, FileHeaderRepr, RecordHeader, RecordRepr};
use crate::format::Codec;
use crate::index::{index_path, read_index, IndexEntry};
use crate::record::TsResolution;
use crate::window::{check_index, Checked};

/// The runs of a file, and what reading one needs.
pub struct Runs {
    file: File,
    header: FileHeaderRepr,
    /// The file's chunks, in order.
    entries: Vec<IndexEntry>,
    /// Each run's chunks.
    runs: Vec<Range<usize>>,
    verify: bool,
    len: u64,
}

/// One packet of a run.
#[derive(Clone, Copy, Debug)]
pub struct RunPacket<'a> {
    pub ts_ns: u64,
    pub orig_len: u32,
    pub data: &'a [u8],
}

impl Runs {
    /// The runs of `path`, each whole chunks of at least `run_bytes` (the
    /// last may be shorter), or `None` when the file is not one this
    /// applies to (see the module's text). `verify`: each chunk is compared
    /// with its checksum as it is read.
    pub fn plan(path: &Path, verify: bool, run_bytes: u64) -> Option<Runs> {
        let index = read_index(&index_path(path)).ok()?;
        if index.codec != Codec::None || index.pcapng {
            return None;
        }
        let mut file = File::open(path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        let len = meta.len();
        let mut head = [0u8; pcap::FILE_HEADER_LEN];
        file.read_exact(&mut head).ok()?;
        // (A compressed file's magic is no pcap magic: the parse refuses it.)
        let header = FileHeaderRepr::parse(&FileHeader::new_unchecked(&head[..])).ok()?;
        let Checked {
            entries,
            end,
            closed,
            past_end,
        } = check_index(&index, &file, len, false).ok()?;
        // An end entry that holds bytes would leave them to no run (a
        // stream read, unchecked, reads them).
        let empty_end = index
            .entries
            .last()
            .is_some_and(|e| e.is_end() && e.comp_len == 0);
        let whole = closed && empty_end && !past_end && end == len;
        let plain = entries
            .iter()
            .all(|e| e.comp_offset == e.decomp_offset && e.comp_len == e.decomp_len);
        let first = entries.first()?;
        if !whole || !plain || first.comp_offset != 0 || first.comp_len < head.len() as u64 {
            return None;
        }
        let mut runs = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (i, e) in entries.iter().enumerate() {
            bytes += e.comp_len;
            if bytes >= run_bytes {
                runs.push(start..i + 1);
                (start, bytes) = (i + 1, 0);
            }
        }
        if start < entries.len() {
            runs.push(start..entries.len());
        }
        Some(Runs {
            file,
            header,
            entries,
            runs,
            verify,
            len,
        })
    }

    /// The file's header.
    pub fn header(&self) -> &FileHeaderRepr {
        &self.header
    }

    /// How many runs.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The longest run, in bytes.
    pub fn longest(&self) -> u64 {
        (0..self.runs.len())
            .map(|i| {
                let s = self.span(i);
                s.end - s.start
            })
            .max()
            .unwrap_or(0)
    }

    /// The file's length.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The packets in the file, as its index counts them.
    pub fn packet_count(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.packets)).sum()
    }

    /// Where run `i` starts in the file, and where it ends.
    pub fn span(&self, i: usize) -> Range<u64> {
        let r = &self.runs[i];
        let first = &self.entries[r.start];
        let last = &self.entries[r.end - 1];
        first.comp_offset..last.comp_offset + last.comp_len
    }

    /// Reads run `i` into `buf` and checks its chunks against their
    /// checksums; false if the read failed or a chunk does not match (the
    /// ordinary reader, going on from here, says which and why).
    pub fn read(&self, i: usize, buf: &mut Vec<u8>) -> bool {
        let span = self.span(i);
        // A run is whole chunks, each at most 64 MiB (checked with the index).
        buf.resize((span.end - span.start) as usize, 0);
        if self.file.read_exact_at(buf, span.start).is_err() {
            return false;
        }
        if !self.verify {
            return true;
        }
        let mut at = 0;
        for e in &self.entries[self.runs[i].clone()] {
            let n = e.comp_len as usize;
            if let Some(want) = e.crc {
                if crate::index::chunk_checksum(&buf[at..at + n]) != want {
                    return false;
                }
            }
            at += n;
        }
        true
    }

    /// Gives each packet of run `i`, read into `bytes`, to `each`; false
    /// (and possibly some packets given) if the bytes are not whole records
    /// ending at the run's end or a record header does not parse: the
    /// caller drops what it was given and goes on with the ordinary reader.
    #[inline]
    pub fn packets(&self, i: usize, bytes: &[u8], mut each: impl FnMut(RunPacket<'_>)) -> bool {
        const HDR: usize = pcap::RECORD_HEADER_LEN;
        let start = self.span(i).start;
        let h = &self.header;
        let res = if h.nanos {
            TsResolution::NANO
        } else {
            TsResolution::MICRO
        };
        let mut o = if start == 0 { pcap::FILE_HEADER_LEN } else { 0 };
        while o < bytes.len() {
            if bytes.len() - o < HDR {
                return false;
            }
            let hdr = RecordHeader::new_unchecked(&bytes[o..o + HDR]);
            let Ok(r) = RecordRepr::parse(&hdr, h.big_endian, start + o as u64) else {
                return false;
            };
            let end = o + HDR + r.caplen as usize;
            if end > bytes.len() {
                return false;
            }
            each(RunPacket {
                ts_ns: res.ticks_to_nanos(r.ticks(h.nanos)),
                orig_len: r.orig_len,
                data: &bytes[o + HDR..end],
            });
            o = end;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkType, OutputFormat, TraceWriter, WriterConfig};

    /// A plain indexed pcap of `n` packets of 100-1100 bytes, 4 KiB chunks.
    fn trace(path: &Path, n: u64) {
        let cfg = WriterConfig {
            codec: Codec::None,
            format: OutputFormat::Pcap,
            block_size: crate::write::MIN_BLOCK_SIZE.max(4096),
            ..WriterConfig::default()
        };
        let mut w = TraceWriter::create(path, cfg).unwrap();
        for i in 0..n {
            let len = 100 + (i * 7919 % 1000) as usize;
            w.write_packet(
                LinkType::Ethernet,
                1_000 + i * 10,
                len as u32,
                &vec![i as u8; len],
            )
            .unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn runs_tile_the_file_and_give_every_packet_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        trace(&path, 3_000);
        let runs = Runs::plan(&path, true, 16 << 10).unwrap();
        assert!(runs.len() > 20, "{} runs", runs.len());
        let (mut at, mut seen, mut buf) = (0, 0u64, Vec::new());
        for i in 0..runs.len() {
            let span = runs.span(i);
            assert_eq!(span.start, at);
            at = span.end;
            assert!(runs.read(i, &mut buf));
            assert!(runs.packets(i, &buf, |p| {
                assert_eq!(p.ts_ns, 1_000 + seen * 10);
                assert_eq!(p.data.len(), p.orig_len as usize);
                assert!(p.data.iter().all(|&b| b == seen as u8));
                seen += 1;
            }));
        }
        assert_eq!((at, seen), (runs.file_len(), 3_000));
    }

    #[test]
    fn a_run_that_is_not_whole_records_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap");
        trace(&path, 500);
        let runs = Runs::plan(&path, true, 16 << 10).unwrap();
        let mut buf = Vec::new();
        assert!(runs.read(1, &mut buf));
        let n = buf.len();
        // The last record cut, a piece of a header after it, a bad header.
        assert!(!runs.packets(1, &buf[..n - 1], |_| {}));
        buf.extend_from_slice(&[0; 5]);
        assert!(!runs.packets(1, &buf, |_| {}));
        buf.truncate(n);
        buf[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(!runs.packets(1, &buf, |_| {}));
        // A byte changed: the chunk's checksum no longer matches.
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = (runs.span(2).start + runs.span(2).end) / 2;
        bytes[mid as usize] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let runs = Runs::plan(&path, true, 16 << 10).unwrap();
        assert!(runs.read(1, &mut buf));
        assert!(!runs.read(2, &mut buf));
        let unchecked = Runs::plan(&path, false, 16 << 10).unwrap();
        assert!(unchecked.read(2, &mut buf));
    }

    #[test]
    fn compressed_or_unindexed_files_are_not_planned() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.pcap.lz4");
        let mut w = TraceWriter::create(&path, WriterConfig::default()).unwrap();
        w.write_packet(LinkType::Ethernet, 1, 60, &[0; 60]).unwrap();
        w.finish().unwrap();
        assert!(Runs::plan(&path, true, 4096).is_none());
        let plain = tmp.path().join("p.pcap");
        trace(&plain, 100);
        assert!(Runs::plan(&plain, true, 4096).is_some());
        std::fs::remove_file(index_path(&plain)).unwrap();
        assert!(Runs::plan(&plain, true, 4096).is_none());
    }
}
