//! The header-trace reader on good, cut and corrupt input. (The `headers`
//! fuzz target's corpus is replayed by crates/fuzzing's replay test.)

use std::io::{Cursor, Write};

use pipeline::source::headers::BATCH;
use pipeline::{ErrorKind, HeaderSource, Report, Source};

const TRACE: &str = "167772161\t16843009\t1234\t80\t6\t0\n\
                     167772161\t3232235777\t53\t53\t17\t1\n\
                     16843009\t16843009\t0\t0\t1\t7\n";

/// Every key and expected result, and the closing report.
fn read(bytes: &[u8], n_rules: usize) -> pipeline::Result<(usize, Vec<Option<u32>>, Report)> {
    let mut src =
        HeaderSource::from_read(Box::new(Cursor::new(bytes.to_vec())), "t", n_rules, None)?;
    let mut keys = 0;
    let mut expected = Vec::new();
    loop {
        match src.next() {
            Ok(Some(h)) => {
                assert!(h.keys.len() <= BATCH);
                keys += h.keys.len();
                expected.extend_from_slice(h.expected);
            }
            Ok(None) => break,
            Err(e) => return Err(e),
        }
    }
    let mut r = Report::default();
    src.close(&mut r);
    Ok((keys, expected, r))
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    let mut z = zstd::Encoder::new(Vec::new(), 3).unwrap();
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

#[test]
fn text_and_zstd_give_the_same_headers_and_expected_rules() {
    for bytes in [TRACE.as_bytes().to_vec(), zstd(TRACE.as_bytes())] {
        let (keys, expected, r) = read(&bytes, 2).unwrap();
        assert_eq!(keys, 3);
        // FIRSTMATCH 7 names no rule of a set of 2.
        assert_eq!(expected, [Some(0), Some(1), None]);
        assert!(r.truncation.is_none());
        assert_eq!(r.packets, 3);
    }
}

#[test]
fn every_cut_reads_the_whole_lines_before_it_and_says_where() {
    let z = zstd(TRACE.as_bytes());
    for (bytes, what) in [(TRACE.as_bytes(), "text"), (&z[..], "zstd")] {
        for cut in 1..bytes.len() {
            let r = read(&bytes[..cut], 2);
            let Ok((keys, _, report)) = r else {
                // A zstd header cut short may not even open.
                assert_eq!(what, "zstd", "text cut at {cut}");
                continue;
            };
            assert!(keys <= 3, "{what} cut at {cut}");
            if what == "text" {
                let whole_lines = TRACE[..cut].matches('\n').count();
                assert_eq!(keys, whole_lines, "text cut at {cut}");
                if TRACE.as_bytes()[cut - 1] == b'\n' {
                    assert!(report.truncation.is_none(), "a cut between lines is an end");
                } else {
                    let t = report.truncation.expect("a cut inside a line is reported");
                    assert!(t.to_string().starts_with("t: warning: offset "), "{t}");
                }
            } else if keys < 3 {
                assert!(report.truncation.is_some(), "zstd cut at {cut}");
            }
        }
    }
}

#[test]
fn corrupt_lines_are_errors_that_name_the_line() {
    for (text, line) in [
        ("1 2 3 4 6 0\nx y\n", ":2:"),
        ("4294967296 1 1 1 6 0\n", ":1:"),
        ("1 1 1 99999 6 0\n", ":1:"),
    ] {
        let e = read(text.as_bytes(), 2).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Input);
        assert!(e.message.starts_with(&format!("t{line}")), "{}", e.message);
    }
    // Bytes that are neither text nor a trace.
    let e = read(b"\x00\x01garbage", 2).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Input);
}
