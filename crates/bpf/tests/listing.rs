//! The listings against tcpdump's and libpcap's own: `bpf::dump` is
//! byte-identical to `tcpdump -d`, `-dd` and `-ddd -r FILE EXPR` on pcap
//! files of every link type, both byte orders and several snap lengths
//! (and a compile error is tcpdump's error); `bpf::image` is libpcap's
//! `bpf_image` for every opcode.

mod common;

use std::path::Path;
use std::process::Command;

use bpf::libpcap::{bpf_image, compile_for_trace};
use bpf::{dump, image, Insn};
use common::*;
use proptest::prelude::*;

/// `tcpdump -<d...> -r file expr`: stdout on success, stderr's error line
/// (without "tcpdump: ") on failure.
fn tcpdump(level: u8, file: &Path, expr: &str) -> Result<String, String> {
    let flag = format!("-{}", "d".repeat(usize::from(level)));
    let out = Command::new("tcpdump")
        .arg(flag)
        .arg("-r")
        .arg(file)
        .arg(expr)
        .output()
        .expect("running tcpdump");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).expect("UTF-8 listing"))
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find_map(|l| l.strip_prefix("tcpdump: "))
            .unwrap_or_default();
        Err(line.to_string())
    }
}

/// Ours: the same thing through compile_for_trace and dump.
fn ours(level: u8, link: u16, snaplen: u32, big: bool, expr: &str) -> Result<String, String> {
    compile_for_trace(expr, link, snaplen, big)
        .map(|insns| dump(&insns, level))
        .map_err(|e| e.to_string())
}

#[test]
fn dumps_are_byte_identical_to_tcpdumps() {
    if !testkit::require_tool("tcpdump") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut compared = 0;
    let mut errors = 0;
    let mut mismatches = Vec::new();
    // (link type, byte order, snap length): every link type in the host's
    // order with no snap length; NULL (whose code depends on the file's
    // byte order) in both; Ethernet with small and odd snap lengths.
    let mut files = Vec::new();
    for link in LINK_TYPES {
        files.push((link, false, 0));
    }
    files.extend([
        (NULL, true, 0),
        (ETHERNET, true, 96),
        (ETHERNET, false, 65535),
        (RAW, true, 1),
    ]);
    for (link, big, snaplen) in files {
        let path = dir.path().join(format!("{link}-{big}-{snaplen}.pcap"));
        std::fs::write(&path, pcap_bytes(link, snaplen, big, &[])).unwrap();
        for (n, &expr) in EXPRESSIONS.iter().enumerate() {
            // Every expression with -d; -dd and -ddd for every fourth.
            let levels: &[u8] = if n % 4 == 0 { &[1, 2, 3] } else { &[1] };
            for &level in levels {
                let want = tcpdump(level, &path, expr);
                let got = ours(level, link, snaplen, big, expr);
                errors += usize::from(want.is_err());
                compared += 1;
                if got != want {
                    mismatches.push(format!(
                        "tcpdump -{} on {link}/{big}/{snaplen} `{expr}`:\n--- tcpdump\n{want:?}\n--- ours\n{got:?}",
                        "d".repeat(usize::from(level))
                    ));
                }
            }
        }
    }
    // And the sample captures themselves, as tcpdump reads them.
    for name in ["lo-http-icmp.pcap", "any-sll2-nano.pcap"] {
        let path = data_dir().join(name);
        let (link, snaplen, big, _) = read_pcap(&std::fs::read(&path).unwrap()).unwrap();
        for &expr in EXPRESSIONS {
            compared += 1;
            if tcpdump(1, &path, expr) != ours(1, link, snaplen, big, expr) {
                mismatches.push(format!("tcpdump -d -r {name} `{expr}`"));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {compared} differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // Some of the comparisons were of errors (vlan on SLL2...), most not.
    assert!(
        errors > 10 && errors < compared / 4,
        "{errors} errors of {compared}"
    );
}

/// Every opcode libpcap's `bpf_image` knows, and some it does not.
fn codes() -> Vec<u16> {
    let mut v: Vec<u16> = (0..=0xff).collect();
    v.extend([0x100, 0x115, 0xffff]);
    v
}

#[test]
fn image_is_libpcaps_bpf_image_for_every_opcode() {
    // Operands that print differently: 0, small, signed when read as int,
    // the ancillary offsets (named and not), the largest.
    let ks = [
        0u32,
        1,
        14,
        0x800,
        262_144,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_f000,
        0xffff_f02c,
        0xffff_f030,
        0xffff_f03c,
        0xffff_f03d,
        0xffff_f040,
        0xffff_fff1,
        u32::MAX,
    ];
    let mut n = 0;
    for code in codes() {
        for &k in &ks {
            for (jt, jf) in [(0, 0), (3, 200), (255, 255)] {
                for at in [0usize, 7, 999, 1000, 4095] {
                    let insn = Insn { code, jt, jf, k };
                    assert_eq!(image(&insn, at), bpf_image(&insn, at), "{insn:?} at {at}");
                    n += 1;
                }
            }
        }
    }
    assert!(n > 50_000);
}

proptest! {
    #[test]
    fn image_is_libpcaps_bpf_image_for_any_instruction(code in any::<u16>(), jt in any::<u8>(), jf in any::<u8>(), k in any::<u32>(), at in 0usize..5000) {
        let insn = Insn { code: code & 0x1ff, jt, jf, k };
        prop_assert_eq!(image(&insn, at), bpf_image(&insn, at));
    }
}

#[test]
fn the_listing_levels_follow_tcpdumps_flags() {
    let insns = compile_for_trace("tcp port 80", ETHERNET, 0, false).unwrap();
    // -d (and no -d at all, as bpf_dump treats 0) lists images.
    assert_eq!(dump(&insns, 0), dump(&insns, 1));
    assert!(dump(&insns, 1).starts_with("(000) ldh      [12]\n"));
    assert!(dump(&insns, 2).starts_with("{ 0x28, 0, 0, 0x0000000c },\n"));
    let ddd = dump(&insns, 3);
    assert_eq!(ddd.lines().next(), Some(insns.len().to_string().as_str()));
    assert_eq!(ddd.lines().nth(1), Some("40 0 0 12"));
    assert_eq!(dump(&insns, 9), ddd);
    // A Program lists its instructions.
    let p = bpf::Program::new(&insns).unwrap();
    assert_eq!(p.dump(1), dump(&insns, 1));
    assert_eq!(p.insns(), &insns[..]);
}
