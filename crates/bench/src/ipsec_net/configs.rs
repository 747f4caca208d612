//! What `kansoku bench ipsec` compares: the carriers between the two
//! namespaces (the bare veth pair, kansoku's gateways with their SAs and
//! keys, boringtun), the configurations of `--part link` and `--part dv`
//! in the paper's order, the netperf tests in the paper's sizes, and the
//! paper's own figures to set beside ours.

use pipeline::{Error, Result};

use crate::ipsec_net::netperf::{Outcome, Test};

const K20A: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";
const K20B: &str = "0x1112131415161718191a1b1c1d1e1f2021222324";
const K24A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718";
const K24B: &str = "0x2122232425262728292a2b2c2d2e2f303132333435363738";
const K32A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
const K32B: &str = "0x3132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f50";
const K36A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324";
const K36B: &str = "0x3132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f5051525354";
/// What carries a test between the namespaces.
#[derive(Clone, Debug, PartialEq)]
pub enum Carrier {
    Veth,
    /// kansoku's gateways with these SAs (empty: in the clear), keyed per
    /// packet if set.
    Kansoku {
        esp: Option<[String; 2]>,
        ah: Option<[String; 2]>,
        legacy: bool,
    },
    Boringtun,
}

/// A configuration of `--part link` (or `--part dv`).
#[derive(Clone, Debug)]
pub struct Config {
    pub name: String,
    /// The paper's label for it, when it has one.
    pub paper: Option<&'static str>,
    pub carrier: Carrier,
}

fn kansoku(esp: Option<(&str, &str)>, ah: Option<(&str, &str)>, legacy: bool) -> Carrier {
    Carrier::Kansoku {
        esp: esp.map(|(a, b)| [a.to_string(), b.to_string()]),
        ah: ah.map(|(a, b)| [a.to_string(), b.to_string()]),
        legacy,
    }
}

/// Every configuration `--part link` knows, in the order it reports them.
pub fn link_configs() -> Vec<Config> {
    let c = |name: &str, paper, carrier| Config {
        name: name.to_string(),
        paper,
        carrier,
    };
    let ah1 = format!("-A hmac-sha1 {K20A}");
    let ah2 = format!("-A hmac-sha1 {K20B}");
    let des1 = format!("-E 3des-cbc {K24A}");
    let des2 = format!("-E 3des-cbc {K24B}");
    let ah = Some((ah1.as_str(), ah2.as_str()));
    let des = Some((des1.as_str(), des2.as_str()));
    vec![
        c("veth", None, Carrier::Veth),
        c("none", Some("NONE"), kansoku(None, None, false)),
        c("ah", Some("AH"), kansoku(None, ah, false)),
        c("esp", Some("ESP"), kansoku(des, None, false)),
        c("ah-esp", Some("AH/ESP"), kansoku(des, ah, false)),
        c(
            "esp-aes-gcm-16",
            None,
            kansoku(
                Some((
                    &format!("-E aes-gcm-16 {K20A}"),
                    &format!("-E aes-gcm-16 {K20B}"),
                )),
                None,
                false,
            ),
        ),
        c(
            "esp-chacha20-poly1305",
            None,
            kansoku(
                Some((
                    &format!("-E chacha20-poly1305 {K36A}"),
                    &format!("-E chacha20-poly1305 {K36B}"),
                )),
                None,
                false,
            ),
        ),
        c(
            "esp-aes-cbc+hmac-sha256",
            None,
            kansoku(
                Some((
                    &format!("-E aes-cbc 0x{} -A hmac-sha256 {K32A}", &K32A[2..34]),
                    &format!("-E aes-cbc 0x{} -A hmac-sha256 {K32B}", &K32B[2..34]),
                )),
                None,
                false,
            ),
        ),
        c("boringtun", None, Carrier::Boringtun),
    ]
}

/// `--part dv`'s configurations: the clear, and ESP with 3DES and with
/// Blowfish (192-bit keys, as the paper's Table 8), keyed per SA and per
/// packet.
pub fn dv_configs() -> Vec<Config> {
    let bf = |k: &str| format!("-E blowfish-cbc {}", &k[..50]);
    let mut v = vec![Config {
        name: "none".into(),
        paper: Some("NONE"),
        carrier: kansoku(None, None, false),
    }];
    for legacy in [false, true] {
        let suffix = if legacy { "-per-packet-keys" } else { "" };
        v.push(Config {
            name: format!("esp-3des-cbc{suffix}"),
            paper: (!legacy).then_some("ESP 1"),
            carrier: kansoku(
                Some((
                    &format!("-E 3des-cbc {K24A}"),
                    &format!("-E 3des-cbc {K24B}"),
                )),
                None,
                legacy,
            ),
        });
        v.push(Config {
            name: format!("esp-blowfish-cbc{suffix}"),
            paper: (!legacy).then_some("ESP 2"),
            carrier: kansoku(Some((&bf(K24A), &bf(K24B))), None, legacy),
        });
    }
    v
}

/// The paper's tests (§2.2, Tables 3-5), by `--tests` name.
pub fn link_tests(names: &[String]) -> Result<Vec<(&'static str, Test)>> {
    let all: [(&str, Test); 7] = [
        (
            "tcp-stream",
            Test::TcpStream {
                msg: 4096,
                buf: 57344,
            },
        ),
        (
            "tcp-stream",
            Test::TcpStream {
                msg: 4096,
                buf: 32768,
            },
        ),
        (
            "udp-stream",
            Test::UdpStream {
                msg: 4096,
                buf: 32768,
            },
        ),
        (
            "udp-stream",
            Test::UdpStream {
                msg: 1024,
                buf: 32768,
            },
        ),
        ("tcp-rr", Test::TcpRr { req: 1, resp: 1 }),
        ("udp-rr", Test::UdpRr { req: 1, resp: 1 }),
        ("udp-rr", Test::UdpRr { req: 516, resp: 4 }),
    ];
    for n in names {
        if !all.iter().any(|(k, _)| k == n) {
            return Err(Error::usage(format!(
                "--tests: unknown test {n:?} (tcp-stream, udp-stream, tcp-rr, udp-rr)"
            )));
        }
    }
    Ok(all
        .into_iter()
        .filter(|(k, _)| names.iter().any(|n| n == k))
        .collect())
}

/// The paper's figure for a test, configuration and IP version: Mbit/s
/// for streams, transactions/s for request/response (Tables 3, 4 and 5).
pub fn paper_figure(test: &Test, paper: &str, v6: bool) -> Option<f64> {
    let i = ["NONE", "AH", "ESP", "AH/ESP"]
        .iter()
        .position(|p| *p == paper)?;
    let row: [[f64; 4]; 2] = match *test {
        Test::TcpStream { buf: 57344, .. } => {
            [[60.86, 23.10, 10.87, 7.74], [58.21, 24.20, 10.88, 7.65]]
        }
        Test::TcpStream { buf: 32768, .. } => {
            [[60.57, 23.01, 10.90, 7.75], [58.21, 24.43, 10.90, 7.68]]
        }
        // Table 4 prints AH.1 over IPv4 as "30.73.24"; 30.73 is read.
        Test::UdpStream { msg: 4096, .. } => {
            [[93.98, 30.73, 11.96, 8.98], [93.16, 34.03, 11.94, 9.01]]
        }
        Test::UdpStream { msg: 1024, .. } => {
            [[93.74, 23.83, 11.32, 8.09], [92.37, 25.83, 11.32, 8.12]]
        }
        Test::TcpRr { .. } => [
            [3454.84, 1404.26, 1940.77, 1164.21],
            [3586.17, 1550.57, 2048.07, 1144.48],
        ],
        Test::UdpRr { req: 1, .. } => [
            [3929.57, 1650.64, 2498.62, 1358.40],
            [3955.94, 1657.83, 2446.02, 1339.44],
        ],
        Test::UdpRr { req: 516, .. } => [
            [2559.89, 988.27, 839.26, 575.49],
            [2551.06, 1047.74, 832.67, 576.00],
        ],
        _ => return None,
    };
    Some(row[usize::from(v6)][i])
}

/// The figure a test is judged by: received Mbit/s for streams,
/// transactions/s for request/response.
pub fn figure(o: &Outcome) -> f64 {
    o.transactions_per_s.unwrap_or(o.mbit_s)
}

/// Checks a `--link-rate` value as tc takes it: a number and a unit.
pub fn parse_rate(s: &str) -> std::result::Result<String, String> {
    let s = s.trim().to_ascii_lowercase();
    let unit = ["gbit", "mbit", "kbit", "bit"]
        .into_iter()
        .find(|u| s.ends_with(u))
        .ok_or_else(|| format!("{s:?}: give a rate in bit, kbit, mbit or gbit (e.g. 100mbit)"))?;
    let n = &s[..s.len() - unit.len()];
    match n.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && n.chars().all(|c| c.is_ascii_digit() || c == '.') => {
            Ok(s)
        }
        _ => Err(format!(
            "{s:?}: give a rate in bit, kbit, mbit or gbit (e.g. 100mbit)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_figures_are_its_tables() {
        let t = Test::UdpStream {
            msg: 4096,
            buf: 32768,
        };
        assert_eq!(paper_figure(&t, "NONE", false), Some(93.98));
        assert_eq!(paper_figure(&t, "AH/ESP", false), Some(8.98));
        assert_eq!(
            paper_figure(&Test::TcpRr { req: 1, resp: 1 }, "ESP", true),
            Some(2048.07)
        );
        assert_eq!(paper_figure(&t, "boringtun", false), None);
        assert_eq!(
            link_tests(&["tcp-rr".into(), "udp-stream".into()])
                .unwrap()
                .len(),
            3
        );
        assert!(link_tests(&["tcp-maerts".into()]).is_err());
    }

    #[test]
    fn rates_are_checked_before_they_reach_tc() {
        assert_eq!(parse_rate("100mbit").unwrap(), "100mbit");
        assert_eq!(parse_rate("1.5Gbit").unwrap(), "1.5gbit");
        for bad in [
            "",
            "mbit",
            "100",
            "-1mbit",
            "1e3mbit",
            "100mbit; rm",
            "0mbit",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }
}
