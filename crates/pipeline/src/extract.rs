//! Extraction: the packets of a tcpdump expression in a time window out of
//! a trace or a directory archive, as the bytes of one pcap file held in
//! memory (the web view's "packets of this aggregate in this range"). The
//! key index decides which chunks are read ([`crate::query`]); the
//! expression is applied to every packet read, so the packets are those
//! `tcpdump -r` finds in the same window.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use trace::format::pcap::{emit_file_header, emit_record, FILE_HEADER_LEN, RECORD_HEADER_LEN};
use trace::{LinkType, Record};

use crate::error::Result;
use crate::expression::Expression;
use crate::report::Report;
use crate::run::{Consumer, Flow};
use crate::source::dir::run_path;
use crate::source::trace::{TraceSource, Window};

/// A pcap file of extracted packets, and how the extraction went.
#[derive(Debug)]
pub struct Extracted {
    /// A pcap file (nanosecond timestamps) of the packets, in time order;
    /// a header alone when none matched.
    pub pcap: Vec<u8>,
    pub packets: u64,
    /// Why the file holds fewer packets than matched: the size limit was
    /// reached, or a packet of another link type than the first's came
    /// (one pcap file has one link type).
    pub cut: Option<String>,
    /// The run's report: files read, key indexes not used, damage.
    pub report: Report,
}

/// The packets of `expression` in `window` from the trace or directory at
/// `path`, as a pcap file of at most `limit` bytes.
pub fn pcap_of(
    path: &Path,
    window: Window,
    expression: Option<&Expression>,
    limit: usize,
    stop: &AtomicBool,
) -> Result<Extracted> {
    let mut out = PcapBytes {
        pcap: Vec::new(),
        link_type: None,
        packets: 0,
        limit: limit.max(FILE_HEADER_LEN),
        cut: None,
    };
    let report = run_path(path, window, expression, &mut out, stop)?;
    if out.link_type.is_none() {
        emit_file_header(&mut out.pcap, LinkType::Ethernet, SNAPLEN, true);
    }
    Ok(Extracted {
        pcap: out.pcap,
        packets: out.packets,
        cut: out.cut,
        report,
    })
}

/// [`pcap_of`] for the window `[since_ns, until_ns)` and the expression's
/// text (empty: every packet), stopped by SIGINT or SIGTERM; the error as
/// the message the run would print.
pub fn pcap_between(
    path: &Path,
    since_ns: u64,
    until_ns: u64,
    expression: &str,
    limit: usize,
) -> std::result::Result<Extracted, String> {
    let window = Window {
        since: Some(since_ns),
        until: Some(until_ns),
    };
    let e = Expression::new(expression);
    pcap_of(path, window, e.as_ref(), limit, crate::signals::stop_flag()).map_err(|e| e.to_string())
}

/// The snapshot length the file declares: tcpdump's default.
const SNAPLEN: u32 = 262_144;

struct PcapBytes {
    pcap: Vec<u8>,
    link_type: Option<LinkType>,
    packets: u64,
    limit: usize,
    cut: Option<String>,
}

impl Consumer<TraceSource> for PcapBytes {
    fn consume(&mut self, rec: Record<'_>) -> Result<Flow> {
        let Record::Packet(p) = rec else {
            return Ok(Flow::Continue);
        };
        match self.link_type {
            None => {
                emit_file_header(&mut self.pcap, p.link_type, SNAPLEN, true);
                self.link_type = Some(p.link_type);
            }
            Some(l) if l != p.link_type => {
                self.cut = Some(format!(
                    "a packet of link type {} after those of {l}: one pcap file has one link type",
                    p.link_type
                ));
                return Ok(Flow::Stop);
            }
            Some(_) => {}
        }
        if self.pcap.len() + RECORD_HEADER_LEN + p.data.len() > self.limit {
            self.cut = Some(format!(
                "the first {} packets: the next would pass {} bytes",
                self.packets, self.limit
            ));
            return Ok(Flow::Stop);
        }
        emit_record(&mut self.pcap, p.ts_nanos(), true, p.orig_len, p.data);
        self.packets += 1;
        Ok(Flow::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::TraceReader;

    /// A pcap file of `n` Ethernet frames, one a second from second 100,
    /// UDP from 10.0.0.(i % 4 + 1) to 10.0.1.1.
    fn trace(dir: &Path, n: u64) -> std::path::PathBuf {
        let mut b = Vec::new();
        emit_file_header(&mut b, LinkType::Ethernet, 65535, true);
        for i in 0..n {
            let mut f = vec![0u8; 14];
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let mut ip = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0];
            ip.extend_from_slice(&[10, 0, 0, (i % 4 + 1) as u8, 10, 0, 1, 1]);
            f.extend_from_slice(&ip);
            f.extend_from_slice(&[0, 53, 0, 53, 0, 8, 0, 0]);
            emit_record(&mut b, (100 + i) * 1_000_000_000, true, f.len() as u32, &f);
        }
        let p = dir.join("t.pcap");
        std::fs::write(&p, b).unwrap();
        p
    }

    fn times(pcap: &[u8]) -> Vec<u64> {
        let mut r =
            TraceReader::from_decompressed(Box::new(std::io::Cursor::new(pcap.to_vec()))).unwrap();
        let mut out = Vec::new();
        while let Some(rec) = r.next_record().unwrap() {
            if let Record::Packet(p) = rec {
                out.push(p.ts_nanos() / 1_000_000_000);
            }
        }
        out
    }

    #[test]
    fn extracts_the_window_and_the_expression_and_stops_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let t = trace(dir.path(), 40);
        let stop = AtomicBool::new(false);
        let window = Window {
            since: Some(110_000_000_000),
            until: Some(130_000_000_000),
        };
        let e = Expression::new("src host 10.0.0.2");
        let x = pcap_of(&t, window, e.as_ref(), 1 << 20, &stop).unwrap();
        // Seconds 110..130 whose i % 4 == 1: 113, 117, 121, 125, 129.
        assert_eq!(times(&x.pcap), [113, 117, 121, 125, 129]);
        assert_eq!((x.packets, x.cut.as_deref()), (5, None));
        // Room for the header and two packets of 42 bytes.
        let limit = FILE_HEADER_LEN + 2 * (RECORD_HEADER_LEN + 42);
        let x = pcap_of(&t, window, e.as_ref(), limit, &stop).unwrap();
        assert_eq!(times(&x.pcap), [113, 117]);
        assert!(x.cut.unwrap().contains("the first 2 packets"));
        // Nothing matched: a file all the same, of its header.
        let none = Expression::new("src host 10.9.9.9");
        let x = pcap_of(&t, window, none.as_ref(), limit, &stop).unwrap();
        assert_eq!((x.pcap.len(), x.packets), (FILE_HEADER_LEN, 0));
    }
}
