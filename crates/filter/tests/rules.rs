//! The rule language: the paper's Fig. 1 parses and means what §3.2 says;
//! every kind of bad rule gets its own precise error.

use filter::{Action, Engine, EngineKind, PacketKey, RuleSet};

/// The paper's Fig. 1 with its X.X.X.X placeholders filled in.
const FIG1: &str = "\
ip filter 1 reject 192.0.2.0/24 * * * *
ip filter 2 pass * 198.51.100.0/24 established * *
ip filter 3 pass 203.0.113.8/29 198.51.100.25 tcp * smtp
ip filter 4 pass 203.0.113.0/24 198.51.100.26 tcp * 5000-6000
ip filter 5 pass * * udp * domain
ip filter 6 pass 203.0.113.8/29 198.51.100.110 tcp * pop3
";

fn first(rules: &RuleSet, packet: &str) -> Option<u32> {
    let key = PacketKey::parse(packet).unwrap();
    let linear = Engine::build(EngineKind::Linear, rules).classify(&key);
    let fast = Engine::build(EngineKind::Fast, rules).classify(&key);
    assert_eq!(linear, fast, "{packet}");
    linear.map(|i| rules.rules()[i as usize].id)
}

#[test]
fn figure_1_parses_and_behaves() {
    let rules = RuleSet::parse(FIG1).unwrap();
    assert_eq!(rules.len(), 6);
    assert_eq!(
        rules.rules()[2].to_string(),
        "ip filter 3 pass 203.0.113.8/29 198.51.100.25 tcp * 25"
    );
    // Rule 1 rejects a whole source network, whatever follows.
    assert_eq!(first(&rules, "udp 192.0.2.7:1 > 8.8.8.8:53"), Some(1));
    // established: TCP with ACK or RST, not a bare SYN, never UDP.
    assert_eq!(
        first(&rules, "tcp 1.1.1.1:80 > 198.51.100.9:4000 flags A"),
        Some(2)
    );
    assert_eq!(
        first(&rules, "tcp 1.1.1.1:80 > 198.51.100.9:4000 flags R"),
        Some(2)
    );
    assert_eq!(
        first(&rules, "tcp 1.1.1.1:80 > 198.51.100.9:4000 flags S"),
        None
    );
    assert_eq!(first(&rules, "udp 1.1.1.1:80 > 198.51.100.9:4000"), None);
    // Service names and the /29.
    assert_eq!(
        first(&rules, "tcp 203.0.113.15:999 > 198.51.100.25:25 flags S"),
        Some(3)
    );
    assert_eq!(
        first(&rules, "tcp 203.0.113.16:999 > 198.51.100.25:25 flags S"),
        None
    );
    assert_eq!(
        first(&rules, "tcp 203.0.113.9:999 > 198.51.100.110:110 flags S"),
        Some(6)
    );
    // Ranges are inclusive.
    for (port, want) in [(4999, None), (5000, Some(4)), (6000, Some(4)), (6001, None)] {
        assert_eq!(
            first(
                &rules,
                &format!("tcp 203.0.113.99:1 > 198.51.100.26:{port} flags S")
            ),
            want,
            "{port}"
        );
    }
    assert_eq!(first(&rules, "udp 9.9.9.9:5353 > 1.1.1.1:53"), Some(5));
    assert_eq!(rules.action(None), Action::Reject);
}

#[test]
fn rules_run_in_ascending_number_wherever_they_stand() {
    let rules = RuleSet::parse(
        "# the general rule is written first but numbered last\n\
         ip filter 20 pass * * * * *   # everything else\n\
         \n\
         ip filter 10 reject 10.0.0.0/8 * * * *\n",
    )
    .unwrap();
    assert_eq!(
        rules.rules().iter().map(|r| r.id).collect::<Vec<_>>(),
        [10, 20]
    );
    assert_eq!(first(&rules, "icmp 10.1.1.1 > 1.1.1.1"), Some(10));
    assert_eq!(first(&rules, "icmp 11.1.1.1 > 1.1.1.1"), Some(20));
}

#[test]
fn extensions_ipv6_icmp_and_numbers() {
    let rules = RuleSet::parse(
        "ip filter 1 pass 2001:db8::/32 * icmp6 * *\n\
         ip filter 2 reject * 2001:db8:1::1 tcp * www\n\
         ip filter 3 pass * * 47 * *\n\
         ip filter 4 pass 10.0.0.0/8 * icmp * *\n\
         ip filter 5 pass * * 6 * 443\n",
    )
    .unwrap();
    assert_eq!(first(&rules, "icmp6 2001:db8::5 > ::1"), Some(1));
    assert_eq!(first(&rules, "icmp6 2001:db9::5 > ::1"), None);
    assert_eq!(first(&rules, "tcp [::1]:5 > [2001:db8:1::1]:80"), Some(2));
    assert_eq!(first(&rules, "47 1.2.3.4 > 5.6.7.8"), Some(3));
    assert_eq!(first(&rules, "47 ::2 > ::3"), Some(3));
    assert_eq!(first(&rules, "icmp 10.9.9.9 > 5.6.7.8"), Some(4));
    assert_eq!(first(&rules, "icmp6 10.9.9.9 > 5.6.7.8"), None);
    assert_eq!(first(&rules, "tcp 1.2.3.4:1 > 5.6.7.8:443"), Some(5));
}

/// Each bad rule, the line:column it is reported at, and words of the message.
#[test]
fn bad_rules_get_precise_errors() {
    let cases: &[(&str, &str, &str)] = &[
        ("ip filter 1 pass * *", "1:21", "expected a protocol"),
        (
            "ip filter 1 pass * * * * * extra",
            "1:28",
            "expected the end of the line, found `extra`",
        ),
        ("ipx filter 1 pass * * * * *", "1:1", "expected `ip`"),
        ("ip filtre 1 pass * * * * *", "1:4", "expected `filter`"),
        (
            "ip filter one pass * * * * *",
            "1:11",
            "expected a rule number",
        ),
        (
            "ip filter 1 allow * * * * *",
            "1:13",
            "expected `pass` or `reject`, found `allow`",
        ),
        (
            "ip filter 1 pass 10.0.0.256 * * * *",
            "1:18",
            "expected a source address",
        ),
        (
            "ip filter 1 pass 10.0.0.0/33 * * * *",
            "1:18",
            "prefix length 0-32",
        ),
        (
            "ip filter 1 pass * 2001:db8::/129 * * *",
            "1:20",
            "prefix length 0-128",
        ),
        ("ip filter 1 pass 10.0.0.1 ::1 * * *", "1:27", "same family"),
        (
            "ip filter 1 pass * * tcpp * *",
            "1:22",
            "expected a protocol",
        ),
        (
            "ip filter 1 pass * * tcp 70000 *",
            "1:26",
            "expected a port 0-65535, found `70000`",
        ),
        ("ip filter 1 pass * * tcp * 6000-5000", "1:28", "p1 <= p2"),
        ("ip filter 1 pass * * tcp * wwww", "1:28", "service name"),
        (
            "ip filter 1 pass * * icmp * 80",
            "1:29",
            "protocol `icmp` has no ports",
        ),
        (
            "ip filter 1 pass * * * smtp *",
            "1:24",
            "protocol `*` has no ports",
        ),
        (
            "ip filter 1 pass * * * * *\n# c\nip filter 1 reject * * * * *",
            "3:11",
            "duplicate rule number 1 (first used on line 1)",
        ),
    ];
    for (text, at, words) in cases {
        let e = RuleSet::parse(text).unwrap_err();
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("{at}: ")), "{text:?}: {shown}");
        assert!(shown.contains(words), "{text:?}: {shown}");
    }
}

#[test]
fn classbench_import() {
    let rules = RuleSet::parse(
        "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n\
         @0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\t0x1000/0x1000\t\n",
    )
    .unwrap();
    assert_eq!(rules.len(), 2);
    assert!(rules.rules().iter().all(|r| r.action == Action::Pass));
    assert_eq!(
        first(&rules, "tcp 10.1.1.1:5 > 1.1.1.1:80 flags S"),
        Some(0)
    );
    assert_eq!(first(&rules, "udp 10.1.1.1:5 > 1.1.1.1:80"), Some(1));
    let e = RuleSet::parse(
        "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\n@1.2.3.4/32\n",
    )
    .unwrap_err();
    assert_eq!((e.line, e.column), (2, 12));
    assert!(e.message.contains("expected a destination prefix"), "{e}");
}
