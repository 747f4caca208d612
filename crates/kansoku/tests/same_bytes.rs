//! The files kansoku writes are byte for byte those it wrote before the
//! pipeline refactoring, for every format and codec: the traces
//! and their seek indexes, from synthetic traffic and from converted real
//! captures. The expected lengths and xxh64 hashes in
//! `tests/data/golden-writes.txt` were made by the kansoku of commit
//! fa660aa (the indexes' since the end entry carries the digest of the
//! chunks' checksums); a change that is meant to change a format remakes
//! them, on purpose, with
//! `KANSOKU_GOLDEN_WRITE=1 KANSOKU_GOLDEN_BIN=path/to/kansoku cargo test -p kansoku --test same_bytes`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{data, p};

const FORMATS: [&str; 2] = ["pcap", "pcapng"];
const CODECS: [&str; 4] = ["lz4", "zstd", "gzip", "none"];

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/golden-writes.txt")
}

/// Every (name, argv) whose output is compared; `OUT` stands for the output file.
fn cases() -> Vec<(String, Vec<String>)> {
    let mut v = Vec::new();
    for format in FORMATS {
        for codec in CODECS {
            let w = |extra: &[&str]| -> Vec<String> {
                let mut a: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
                a.extend(
                    ["-w", "OUT", "--format", format, "--compress", codec]
                        .iter()
                        .map(|s| s.to_string()),
                );
                a
            };
            v.push((
                format!("synth-{format}-{codec}"),
                w(&[
                    "synth",
                    "-c",
                    "3000",
                    "--size",
                    "64-1518",
                    "--payload",
                    "random",
                    "--ip",
                    "mix",
                    "--vlan",
                    "5",
                    "--seed",
                    "7",
                ]),
            ));
            v.push((
                format!("synth-fixed-{format}-{codec}"),
                w(&["synth", "-c", "3000", "--size", "200", "--payload", "fixed"]),
            ));
            for sample in [
                "veth-vlan-2if.pcapng",
                "any-sll2-nano.pcap",
                "lo-http-icmp.pcap",
            ] {
                v.push((
                    format!("read-{sample}-{format}-{codec}"),
                    w(&["read", "-r", p(&data(sample))]),
                ));
            }
        }
    }
    v
}

/// Runs `bin` on each case; returns "name file length xxh64" lines for the
/// trace and its index.
fn outputs(bin: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for (name, argv) in cases() {
        let out = dir.path().join(format!("{name}.out"));
        let argv: Vec<String> = argv
            .into_iter()
            .map(|a| if a == "OUT" { p(&out).to_string() } else { a })
            .collect();
        let o = Command::new(bin).args(&argv).output().unwrap();
        assert!(
            o.status.success(),
            "{argv:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let index = PathBuf::from(format!("{}.kidx", p(&out)));
        for (what, f) in [("trace", &out), ("index", &index)] {
            let bytes = std::fs::read(f).unwrap();
            let h = xxhash_rust::xxh64::xxh64(&bytes, 0);
            lines.push(format!("{name} {what} {} {h:016x}", bytes.len()));
        }
    }
    lines
}

#[test]
fn written_files_are_byte_identical_to_the_golden_ones() {
    if std::env::var_os("KANSOKU_GOLDEN_WRITE").is_some() {
        let bin = std::env::var_os("KANSOKU_GOLDEN_BIN").expect("KANSOKU_GOLDEN_BIN");
        let mut text = outputs(Path::new(&bin)).join("\n");
        text.push('\n');
        std::fs::write(golden_path(), text).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(golden_path()).unwrap();
    let want: Vec<&str> = golden.lines().collect();
    let got = outputs(Path::new(env!("CARGO_BIN_EXE_kansoku")));
    assert_eq!(
        got.len(),
        want.len(),
        "cases and golden lines differ in number"
    );
    let differ: Vec<String> = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| g != w)
        .map(|(g, w)| format!("got  {g}\nwant {w}"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
