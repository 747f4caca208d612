//! kansoku's ESP and AH against an independent stack, scapy's IPsec module:
//! for every algorithm both support, IPv4 and IPv6, transport and tunnel
//! mode, scapy decrypts and verifies every packet `kansoku ipsec encap`
//! writes, and `kansoku ipsec decap` takes back every packet scapy protects.
//! AH+ESP bundles are checked by an independent computation of the AH ICV
//! in the script (RFC 4302 §3.3.3, mutable fields zeroed), because scapy
//! gets AH over ESP wrong. scapy comes from scripts/install-deps.sh; without
//! it the test fails under CI and is skipped with a note elsewhere.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{p, read_all, run_ok, Owned};
use serde_json::{json, Value};

const K20: &str = "0102030405060708090a0b0c0d0e0f1011121314";
const K24: &str = "0102030405060708090a0b0c0d0e0f101112131415161718";
const K32: &str = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
const K36: &str = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324";

/// Whether `tool` is here; under CI a missing one is a failure, elsewhere
/// the test is skipped with a note.
fn have(tool: &str, ok: bool) -> bool {
    testkit::require(tool, ok)
}

fn have_scapy() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import scapy.layers.ipsec"])
        .output()
        .is_ok_and(|o| o.status.success());
    have("scapy", ok)
}

/// The two hosts the SAs join.
fn hosts(v6: bool) -> (&'static str, &'static str) {
    if v6 {
        ("2001:db8::1", "2001:db8::2")
    } else {
        ("10.1.0.1", "10.2.0.1")
    }
}

/// `count` packets from host 1 to host 2 (`hosts`), of `size` bytes and
/// protocol `proto` as `kansoku synth` takes them, into `plain`.
fn synth(v6: bool, count: u32, size: &str, proto: &str, plain: &Path) {
    let (ip, s, d) = if v6 {
        ("6", "2001:db8::1/128", "2001:db8::2/128")
    } else {
        ("4", "10.1.0.1/32", "10.2.0.1/32")
    };
    let count = count.to_string();
    run_ok(&[
        "synth",
        "-c",
        &count,
        "--size",
        size,
        "--proto",
        proto,
        "--ip",
        ip,
        "--src-net",
        s,
        "--dst-net",
        d,
        "--compress",
        "none",
        "-w",
        p(plain),
    ]);
}

/// `kansoku ipsec encap|decap` of `input` with the SAs of `conf` into an
/// uncompressed `output`, and `extra` flags; its standard output.
fn ipsec(way: &str, input: &Path, conf: &Path, output: &Path, extra: &[&str]) -> Vec<u8> {
    let mut args = vec![
        "ipsec",
        way,
        "-r",
        p(input),
        "--sa",
        p(conf),
        "--compress",
        "none",
        "-w",
        p(output),
    ];
    args.extend_from_slice(extra);
    run_ok(&args).stdout
}

/// One SA: its setkey algorithms, and scapy's names for them.
struct Suite {
    proto: &'static str,
    setkey: String,
    crypt: Option<(&'static str, &'static str)>,
    auth: Option<(&'static str, &'static str)>,
}

fn esp(
    setkey: String,
    crypt: (&'static str, &'static str),
    auth: Option<(&'static str, &'static str)>,
) -> Suite {
    Suite {
        proto: "esp",
        setkey,
        crypt: Some(crypt),
        auth,
    }
}

fn suites() -> Vec<Suite> {
    vec![
        esp("-E null".into(), ("NULL", ""), None),
        esp(format!("-E 3des-cbc 0x{K24}"), ("3DES", K24), None),
        esp(
            format!("-E 3des-cbc 0x{K24} -A hmac-sha1 0x{K20}"),
            ("3DES", K24),
            Some(("HMAC-SHA1-96", K20)),
        ),
        esp(
            format!("-E blowfish-cbc 0x{} -A hmac-sha256 0x{K32}", &K32[..32]),
            ("Blowfish", &K32[..32]),
            Some(("SHA2-256-128", K32)),
        ),
        esp(
            format!("-E aes-cbc 0x{} -A hmac-sha1 0x{K20}", &K32[..32]),
            ("AES-CBC", &K32[..32]),
            Some(("HMAC-SHA1-96", K20)),
        ),
        esp(
            format!("-E aes-cbc 0x{K32} -A hmac-sha256 0x{K32}"),
            ("AES-CBC", K32),
            Some(("SHA2-256-128", K32)),
        ),
        esp(format!("-E aes-gcm-16 0x{K20}"), ("AES-GCM", K20), None),
        esp(format!("-E aes-gcm-16 0x{K36}"), ("AES-GCM", K36), None),
        esp(
            format!("-E chacha20-poly1305 0x{K36}"),
            ("CHACHA20-POLY1305", K36),
            None,
        ),
        Suite {
            proto: "ah",
            setkey: format!("-A hmac-sha1 0x{K20}"),
            crypt: None,
            auth: Some(("HMAC-SHA1-96", K20)),
        },
        Suite {
            proto: "ah",
            setkey: format!("-A hmac-sha256 0x{K32}"),
            crypt: None,
            auth: Some(("SHA2-256-128", K32)),
        },
    ]
}

struct Case {
    dir: PathBuf,
    sas: Vec<Value>,
    conf: String,
    v6: bool,
    /// scapy cannot make AH over ESP.
    scapy_makes: bool,
}

fn sa_json(s: &Suite, spi: u32, mode: &str, src: &str, dst: &str) -> Value {
    json!({
        "proto": s.proto,
        "spi": spi,
        "mode": mode,
        "src": src,
        "dst": dst,
        "crypt": s.crypt.map(|c| c.0),
        "crypt_key": s.crypt.map(|c| c.1).filter(|k| !k.is_empty()),
        "auth": s.auth.map(|a| a.0),
        "auth_key": s.auth.map(|a| a.1),
    })
}

fn packets(path: &Path) -> Vec<Vec<u8>> {
    let (recs, cut) = read_all(path);
    assert!(!cut, "{} cut short", path.display());
    recs.into_iter()
        .filter_map(|r| match r {
            Owned::Packet { data, .. } => Some(data),
            _ => None,
        })
        .collect()
}

/// An Ethernet frame's IP packet, without link padding.
fn ip_part(f: &[u8]) -> &[u8] {
    let ip = &f[14..];
    let len = if ip[0] >> 4 == 4 {
        usize::from(u16::from_be_bytes([ip[2], ip[3]]))
    } else {
        40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]))
    };
    &ip[..len.min(ip.len())]
}

#[test]
fn scapy_and_kansoku_agree_both_ways() {
    if !have_scapy() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for (i, s) in suites().into_iter().enumerate() {
        for v6 in [false, true] {
            for mode in ["transport", "tunnel"] {
                let (src, dst) = hosts(v6);
                let dir =
                    tmp.path()
                        .join(format!("{i}-{}-{mode}-{}", s.proto, if v6 { 6 } else { 4 }));
                std::fs::create_dir(&dir).unwrap();
                cases.push(Case {
                    conf: format!(
                        "add {src} {dst} {} 0x1001 -m {mode} {};\n",
                        s.proto, s.setkey
                    ),
                    sas: vec![sa_json(&s, 0x1001, mode, src, dst)],
                    dir,
                    v6,
                    scapy_makes: true,
                });
            }
        }
    }
    // ESP in UDP (RFC 3948), transport and tunnel.
    for (i, s) in suites()
        .into_iter()
        .enumerate()
        .filter(|(_, s)| s.proto == "esp" && s.crypt.is_some_and(|c| c.0 != "NULL"))
    {
        for v6 in [false, true] {
            for mode in ["transport", "tunnel"] {
                let (src, dst) = hosts(v6);
                let dir = tmp
                    .path()
                    .join(format!("udp-{i}-{mode}-{}", if v6 { 6 } else { 4 }));
                std::fs::create_dir(&dir).unwrap();
                let mut sa = sa_json(&s, 0x1001, mode, src, dst);
                sa["natt"] = json!(true);
                cases.push(Case {
                    conf: format!(
                        "add {src} {dst} esp 0x1001 -m {mode} -udp-encap 4500 4500 {};\n",
                        s.setkey
                    ),
                    sas: vec![sa],
                    dir,
                    v6,
                    scapy_makes: true,
                });
            }
        }
    }
    // AH+ESP bundles: ESP first, AH around it.
    for v6 in [false, true] {
        let (src, dst) = hosts(v6);
        let all = suites();
        let (e, a) = (&all[1], &all[9]);
        let dir = tmp
            .path()
            .join(format!("bundle-{}", if v6 { 6 } else { 4 }));
        std::fs::create_dir(&dir).unwrap();
        cases.push(Case {
            conf: format!(
                "add {src} {dst} esp 0x1001 {};\nadd {src} {dst} ah 0x2001 {};\n",
                e.setkey, a.setkey
            ),
            sas: vec![
                sa_json(e, 0x1001, "transport", src, dst),
                sa_json(a, 0x2001, "transport", src, dst),
            ],
            dir,
            v6,
            scapy_makes: false,
        });
    }

    let mut jobs = Vec::new();
    for c in &cases {
        let (plain, conf, sas) = (
            c.dir.join("plain.pcap"),
            c.dir.join("sa.conf"),
            c.dir.join("sa.json"),
        );
        std::fs::write(&conf, &c.conf).unwrap();
        std::fs::write(&sas, serde_json::to_string(&c.sas).unwrap()).unwrap();
        synth(c.v6, 24, "64-1400", "mix", &plain);
        let k = c.dir.join("kansoku.pcap");
        let out = ipsec("encap", &plain, &conf, &k, &["--json"]);
        let r: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(r["transformed"], 24, "{}: {r}", c.conf);
        jobs.push(json!({"op": "check", "sas": c.sas, "plain": p(&plain), "other": p(&k)}));
        if c.scapy_makes {
            jobs.push(json!({"op": "make", "sas": c.sas, "plain": p(&plain), "other": p(&c.dir.join("scapy.pcap"))}));
        }
    }
    let manifest = tmp.path().join("jobs.json");
    std::fs::write(&manifest, serde_json::to_string(&jobs).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/scapy_ipsec.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg("batch")
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scapy disagrees:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // kansoku takes back what scapy made: the same IP packets as the plain trace.
    for c in cases.iter().filter(|c| c.scapy_makes) {
        let back = c.dir.join("back.pcap");
        let out = ipsec(
            "decap",
            &c.dir.join("scapy.pcap"),
            &c.dir.join("sa.conf"),
            &back,
            &["--json"],
        );
        let r: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (r["transformed"].as_u64(), r["rejected"].as_u64()),
            (Some(24), Some(0)),
            "{}: {r}",
            c.conf
        );
        let want = packets(&c.dir.join("plain.pcap"));
        let got = packets(&back);
        assert_eq!(want.len(), got.len());
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(ip_part(w), ip_part(g), "{}", c.conf);
        }
    }
}

/// The ESP suites Wireshark 4.0 decrypts (Blowfish with 16-byte keys only;
/// no ChaCha20-Poly1305 before 4.2), with whether they carry an ICV.
fn tshark_suites() -> Vec<(String, bool)> {
    vec![
        ("-E null".into(), false),
        (format!("-E 3des-cbc 0x{K24}"), false),
        (format!("-E 3des-cbc 0x{K24} -A hmac-sha1 0x{K20}"), true),
        (
            format!("-E blowfish-cbc 0x{} -A hmac-sha256 0x{K32}", &K32[..32]),
            true,
        ),
        (
            format!("-E aes-cbc 0x{} -A hmac-sha1 0x{K20}", &K32[..32]),
            true,
        ),
        (format!("-E aes-cbc 0x{K32} -A hmac-sha256 0x{K32}"), true),
        (format!("-E aes-gcm-16 0x{K20}"), true),
        (format!("-E aes-gcm-16 0x{K36}"), true),
    ]
}

fn have_tshark() -> bool {
    have("tshark", common::tshark_available())
}

/// tshark over `pcap` with the esp_sa table `table` in a profile of its
/// own: per packet, `SPI\tnext header\ticv_good\ticv_bad`.
fn tshark_esp(pcap: &Path, table: &Path, home: &Path) -> Vec<String> {
    let profile = home.join(".config/wireshark");
    std::fs::create_dir_all(&profile).unwrap();
    std::fs::copy(table, profile.join("esp_sa")).unwrap();
    let out = Command::new("tshark")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .args(["-n", "-r", p(pcap)])
        .args([
            "-o",
            "esp.enable_encryption_decode:TRUE",
            "-o",
            "esp.enable_authentication_check:TRUE",
        ])
        .args([
            "-T",
            "fields",
            "-e",
            "esp.spi",
            "-e",
            "esp.protocol",
            "-e",
            "esp.icv_good",
            "-e",
            "esp.icv_bad",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for bad in ["esp_sa", "ESP SAs", "UAT", "rror", "nvalid"] {
        assert!(!stderr.contains(bad), "tshark complained: {stderr}");
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn tshark_decrypts_every_esp_packet_kansoku_writes() {
    if !have_tshark() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut n = 0;
    for (i, (algs, icv)) in tshark_suites().into_iter().enumerate() {
        for v6 in [false, true] {
            for mode in ["transport", "tunnel"] {
                for udp in [false, true] {
                    let (src, dst) = hosts(v6);
                    let dir = tmp.path().join(format!("t{i}-{v6}-{mode}-{udp}"));
                    std::fs::create_dir(&dir).unwrap();
                    let encap = if udp { " -udp-encap 4500 4500" } else { "" };
                    let conf = format!("add {src} {dst} esp 0x1001 -m {mode}{encap} {algs};\n");
                    std::fs::write(dir.join("sa.conf"), &conf).unwrap();
                    let (plain, k, table) = (
                        dir.join("plain.pcap"),
                        dir.join("esp.pcap"),
                        dir.join("esp_sa"),
                    );
                    synth(v6, 12, "64-1400", "mix", &plain);
                    ipsec(
                        "encap",
                        &plain,
                        &dir.join("sa.conf"),
                        &k,
                        &["--write-esp-sa", p(&table)],
                    );
                    // The protocols synth sends, as ESP's next header.
                    let inner: &[&str] = match (mode, v6) {
                        ("tunnel", false) => &["4"],
                        ("tunnel", true) => &["41"],
                        (_, false) => &["1", "6", "17"],
                        (_, true) => &["6", "17", "58"],
                    };
                    let lines = tshark_esp(&k, &table, &dir.join("home"));
                    assert_eq!(lines.len(), 12, "{conf}");
                    for l in &lines {
                        let f: Vec<&str> = l.split('\t').collect();
                        assert_eq!(f[0], "0x00001001", "{conf}: {l}");
                        // tshark prints the next header in hex.
                        let nh = u8::from_str_radix(f[1].trim_start_matches("0x"), 16)
                            .map(|n| n.to_string());
                        assert!(
                            nh.is_ok_and(|n| inner.contains(&n.as_str())),
                            "{conf}: not decrypted: {l}"
                        );
                        let want = if icv { ("1", "0") } else { ("", "") };
                        assert_eq!((f[2], f.get(3).copied().unwrap_or("")), want, "{conf}: {l}");
                    }
                    n += 1;
                }
            }
        }
    }
    assert_eq!(n, 64);
}

#[test]
fn one_flipped_byte_kansoku_refuses_and_tshark_marks_bad() {
    if !have_tshark() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for (i, algs) in [
        format!("-E aes-cbc 0x{} -A hmac-sha1 0x{K20}", &K32[..32]),
        format!("-E aes-gcm-16 0x{K20}"),
    ]
    .iter()
    .enumerate()
    {
        let conf = dir.join(format!("sa{i}.conf"));
        std::fs::write(&conf, format!("add 10.1.0.1 10.2.0.1 esp 0x1001 {algs};\n")).unwrap();
        let (plain, k, table) = (
            dir.join("plain.pcap"),
            dir.join(format!("esp{i}.pcap")),
            dir.join(format!("esp_sa{i}")),
        );
        synth(false, 5, "200", "udp", &plain);
        ipsec("encap", &plain, &conf, &k, &["--write-esp-sa", p(&table)]);
        // The file ends with the last packet's ICV: flip a byte of it.
        let mut bytes = std::fs::read(&k).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0x20;
        std::fs::write(&k, &bytes).unwrap();
        // The trace's index would catch the flip first and skip its chunk:
        // --no-verify hands the packet to ESP, whose ICV must catch it.
        let out = run_ok(&[
            "ipsec",
            "decap",
            "-r",
            p(&k),
            "--sa",
            p(&conf),
            "--json",
            "--no-verify",
        ]);
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (
                r["transformed"].as_u64(),
                r["reasons"]["integrity"].as_u64()
            ),
            (Some(4), Some(1)),
            "{r}"
        );
        let lines = tshark_esp(&k, &table, &dir.join(format!("home{i}")));
        assert_eq!(lines.len(), 5);
        for l in &lines[..4] {
            assert!(l.ends_with("\t1\t0"), "{algs}: good ICV: {l}");
        }
        assert!(
            lines[4].ends_with("\t0\t1"),
            "{algs}: bad ICV marked: {}",
            lines[4]
        );
    }
}
