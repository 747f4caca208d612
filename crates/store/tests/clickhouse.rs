//! The store against a real ClickHouse (Debian's clickhouse-server, which
//! scripts/install-deps.sh installs), started here on ports of its own in a
//! directory of its own: summaries stored and read back exactly, each once
//! though sent twice, the spool surviving the server's SIGKILL, and hostile
//! probe names refused.

use std::sync::Arc;
use std::time::Duration;

use aguri::{FlowKey, ProfilerConfig, Summary};
use store::{Client, Credentials, Sender, Spool};
use testkit::ClickHouse;

/// `n` 5-minute summaries of a probe's traffic, with the 2-D view.
fn summaries(seed: u64, n: u64) -> Vec<Summary> {
    let mut p = ProfilerConfig {
        interval_ns: 300_000_000_000,
        pairs: 4096,
        ..Default::default()
    }
    .build()
    .unwrap();
    let t0 = 1_795_132_800_000_000_000u64;
    let mut out = Vec::new();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for i in 0..n * 300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = FlowKey {
            src: std::net::Ipv4Addr::from(0x0a00_0000 | (x as u32 & 0xffff)).into(),
            dst: std::net::Ipv4Addr::from(0xc000_0200 | ((x >> 20) as u32 & 0x3)).into(),
            protocol: if x.is_multiple_of(3) { 17 } else { 6 },
            src_port: (x >> 32) as u16,
            dst_port: [80, 443, 53][(x % 3) as usize],
        };
        out.extend(p.add(t0 + i * 1_000_000_000, &k, 60 + (x % 1400) as u32));
    }
    out.extend(p.finish());
    out
}

#[test]
fn summaries_go_in_once_and_come_back_exact() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut ch) = testkit::clickhouse(dir.path()) else {
        return;
    };
    let c = ch.client();
    // No schema yet: a clear error; then init, twice.
    let e = store::schema::check(&c).unwrap_err();
    assert!(e.to_string().contains("kansoku store init"), "{e}");
    store::init(&c).unwrap();
    store::init(&c).unwrap();
    // A wrong password: refused, and the password is nowhere in the error.
    let bad = Client::new(ch.url(), Some(Credentials::new("kansoku", "wrong-secret")));
    let e = store::schema::check(&bad).unwrap_err();
    assert!(matches!(e, store::StoreError::Auth(_)), "{e:?}");
    assert!(!e.to_string().contains("wrong-secret") && !format!("{e:?}").contains("wrong-secret"));

    let probes = ["tokyo-1", "osaka.2", "fukuoka_3"];
    let mut all = Vec::new();
    for (i, p) in probes.iter().enumerate() {
        for s in summaries(i as u64 + 1, 12) {
            store::insert(&c, p, &s).unwrap();
            all.push((p.to_string(), s));
        }
    }
    // Sent again: stored once.
    for (p, s) in all.iter().take(5) {
        store::insert(&c, p, s).unwrap();
    }
    let back = store::read(&c, &[], 0, u64::MAX).unwrap();
    assert_eq!(back.len(), all.len());
    for (p, s) in &all {
        let got = back
            .iter()
            .find(|b| b.probe == *p && b.summary.start_ns == s.start_ns)
            .expect("stored");
        assert_eq!(got.summary, *s, "{p} {}", s.start_ns);
    }
    // One probe, a range.
    let one = store::read(&c, &["osaka.2".into()], 0, u64::MAX).unwrap();
    assert_eq!(one.len(), 12);
    // Hostile probe names never reach a statement.
    for bad in ["x' OR 1=1 --", "a;DROP TABLE summaries", "../etc", ""] {
        assert!(store::insert(&c, bad, &all[0].1).is_err(), "{bad}");
        assert!(store::read(&c, &[bad.to_string()], 0, 1).is_err(), "{bad}");
    }
    // The web view's source: the same catalog of probes.
    let src = store::StoreSource::open(c.clone()).unwrap();
    let cat = aguri::source::DataSource::catalog(&src).unwrap();
    assert_eq!(cat.probes.len(), 3);
    assert_eq!(cat.levels[0].summaries, all.len());
    ch.kill();
}

#[test]
fn the_spool_keeps_what_the_store_cannot_take_and_sends_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut ch) = testkit::clickhouse(dir.path()) else {
        return;
    };
    let c = ch.client();
    store::init(&c).unwrap();
    let spool = Arc::new(Spool::open(&dir.path().join("spool")).unwrap());
    let sender = Sender::start(spool.clone(), c.clone());
    // 1,002 summaries of three probes.
    let sums = summaries(9, 334);
    let probes = ["a", "b", "c"];
    let mut n = 0;
    for (i, s) in sums.iter().enumerate() {
        for p in probes {
            spool.push(p, s).unwrap();
            n += 1;
        }
        if i == 110 {
            ch.kill(); // SIGKILL in the middle of the run
        }
        if i == 220 {
            assert!(
                !spool.pending().unwrap().is_empty(),
                "the spool holds what waits"
            );
            ch.run().unwrap();
        }
    }
    let left = sender.finish(&spool, Duration::from_secs(120));
    assert_eq!(left, 0, "the spool drained");
    let back = store::read(&c, &[], 0, u64::MAX).unwrap();
    assert_eq!(back.len(), n, "every summary once");
    let total: u64 = back.iter().map(|b| b.summary.total_packets()).sum();
    let want: u64 = sums.iter().map(|s| s.total_packets()).sum::<u64>() * 3;
    assert_eq!(total, want);
    // kansoku killed between sending and removing a file: sent again, stored once.
    let again = Spool::open(&dir.path().join("spool2")).unwrap();
    again.push("a", &sums[0]).unwrap();
    let again = Arc::new(again);
    let s2 = Sender::start(again.clone(), c.clone());
    assert_eq!(s2.finish(&again, Duration::from_secs(30)), 0);
    assert_eq!(store::read(&c, &[], 0, u64::MAX).unwrap().len(), n);
    ch.kill();
}

#[test]
fn a_store_answering_errors_keeps_the_summaries_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ch) = testkit::clickhouse(dir.path()) else {
        return;
    };
    let c = ch.client();
    store::init(&c).unwrap();
    let spool = Arc::new(Spool::open(&dir.path().join("spool")).unwrap());
    let sender = Sender::start(spool.clone(), c.clone());
    // The table a summary is committed to goes away: every send fails.
    c.execute("DROP TABLE summaries").unwrap();
    let sums = summaries(5, 30);
    for s in &sums {
        spool.push("x", s).unwrap();
    }
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        spool.pending().unwrap().len(),
        sums.len(),
        "nothing is lost"
    );
    assert!(sender.stats.down.load(std::sync::atomic::Ordering::Relaxed));
    // Back: the spool drains, each summary once.
    store::init(&c).unwrap();
    assert_eq!(sender.finish(&spool, Duration::from_secs(60)), 0);
    let back = store::read(&c, &[], 0, u64::MAX).unwrap();
    assert_eq!(back.len(), sums.len());
    for (b, s) in back.iter().zip(&sums) {
        assert_eq!(b.summary, *s);
    }
}

/// Two ClickHouse servers as two shards of one cluster: Distributed tables
/// on the first, sharded by summary id; every summary is read back exact
/// and once, and both shards hold some.
#[test]
fn a_two_shard_cluster_holds_the_summaries_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, b)) = testkit::clickhouse_cluster(dir.path()) else {
        return;
    };
    let on = |ch: &ClickHouse, db: &str| {
        let mut url = ch.url();
        url.database = db.to_string();
        Client::new(url, Some(Credentials::new("kansoku", testkit::PASSWORD)))
    };
    for ch in [&a, &b] {
        store::init(&on(ch, "fleet_local")).unwrap();
    }
    let entry = on(&a, "fleet");
    store::schema::init_distributed(&entry, "fleet", "fleet_local").unwrap();
    // Names are checked; the shards' database is not the entry's.
    assert!(store::schema::init_distributed(&entry, "fleet;DROP", "fleet_local").is_err());
    assert!(
        store::schema::init_distributed(&on(&a, "fleet_local"), "fleet", "fleet_local").is_err()
    );
    let mut all = Vec::new();
    for (i, p) in ["p1", "p2", "p3"].iter().enumerate() {
        for s in summaries(20 + i as u64, 10) {
            store::insert(&entry, p, &s).unwrap();
            all.push((p.to_string(), s));
        }
    }
    store::insert(&entry, &all[0].0, &all[0].1).unwrap(); // twice
    let back = store::read(&entry, &[], 0, u64::MAX).unwrap();
    assert_eq!(back.len(), all.len());
    for (p, s) in &all {
        let got = back
            .iter()
            .find(|x| x.probe == *p && x.summary.start_ns == s.start_ns)
            .unwrap();
        assert_eq!(got.summary, *s);
    }
    let count = |ch: &ClickHouse| -> u64 {
        on(ch, "fleet_local")
            .execute("SELECT uniqExact(id) FROM summaries")
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (na, nb) = (count(&a), count(&b));
    assert!(na > 0 && nb > 0, "{na} {nb}");
    assert_eq!(na + nb, all.len() as u64);
    // Re-aggregated over both shards (the session's tables sent to them):
    // the files' merge.
    let spec = store::MergeSpec {
        probes: vec![],
        from_ns: 0,
        to_ns: u64::MAX,
        interval_ns: 3_600_000_000_000,
        metric: aguri::Metric::Either,
        threshold: 1.0,
        coarsen: false,
        budget: 4096,
    };
    let (got, stats) = store::merge(&entry, &spec).unwrap();
    assert_eq!(stats.summaries, all.len() as u64);
    let mut v: Vec<Summary> = all.iter().map(|x| x.1.clone()).collect();
    let m = aguri::Merger::new(spec.interval_ns, 1 << 20, spec.metric, spec.threshold);
    assert_eq!(got, aguri::merge_with(&mut v, m).unwrap());
}

/// `n` 5-minute summaries with a long tail over IPv4 and IPv6 (hosts drawn
/// with weight 1/rank in a few hundred networks, ports spread), the 2-D
/// view included when `two_d`. With `v6_heavy`, most traffic is in
/// fd00::/8 and a little in IPv4 and 2001:db8::/32, so that IPv4's family
/// root is light and shares its light ancestors with IPv6 prefixes.
fn tailed(seed: u64, n: u64, two_d: bool, v6_heavy: bool) -> Vec<Summary> {
    let mut p = ProfilerConfig {
        interval_ns: 300_000_000_000,
        pairs: if two_d { 4096 } else { 0 },
        ..Default::default()
    }
    .build()
    .unwrap();
    let t0 = 1_795_132_800_000_000_000u64 + seed * 600_000_000_000;
    let mut out = Vec::new();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let host = |r: u64| -> std::net::IpAddr {
        // Rank ~ 1/u: a few heavy hosts, a long tail.
        let rank = (1u64 << 20) / ((r % (1 << 20)) + 1);
        let net = (rank % 300).wrapping_mul(2_654_435_761) as u32 & 0xffff_f000;
        if v6_heavy && rank % 10 != 3 && rank % 10 != 4 {
            std::net::Ipv6Addr::from((0xfd00u128 << 112) | u128::from(rank)).into()
        } else if v6_heavy && rank % 10 == 3 {
            std::net::Ipv4Addr::from(net | (rank as u32 / 300 % 4096)).into()
        } else if rank.is_multiple_of(7) {
            std::net::Ipv6Addr::from(
                (0x2001_0db8u128 << 96) | (u128::from(rank % 300) << 64) | u128::from(rank),
            )
            .into()
        } else {
            std::net::Ipv4Addr::from(net | (rank as u32 / 300 % 4096)).into()
        }
    };
    for i in 0..n * 400 {
        let (a, b, c) = (next(), next(), next());
        let k = FlowKey {
            src: host(a),
            dst: host(b),
            protocol: [6, 6, 17, 1][(c % 4) as usize],
            src_port: if c % 3 == 0 { 443 } else { (c >> 16) as u16 },
            dst_port: [80, 443, 53, 22, 8080][(c >> 40) as usize % 5],
        };
        out.extend(p.add(t0 + i * 750_000_000, &k, 40 + (c % 1460) as u32));
    }
    out.extend(p.finish());
    out
}

#[test]
fn re_aggregation_at_the_server_is_the_files_merge() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ch) = testkit::clickhouse(dir.path()) else {
        return;
    };
    let c = ch.client();
    store::init(&c).unwrap();
    let mut all = Vec::new();
    for (i, p) in ["a1", "b2", "c3", "d4"].iter().enumerate() {
        for s in tailed(i as u64 + 1, 14, i != 1, i == 3) {
            all.push((p.to_string(), s));
        }
    }
    let batch: Vec<(&str, &Summary)> = all.iter().map(|(p, s)| (p.as_str(), s)).collect();
    store::insert_many(&c, &batch).unwrap();
    // A summary sent twice, and one whose entries went in twice before its
    // row did (a send cut short, then sent again).
    store::insert(&c, &all[3].0, &all[3].1).unwrap();
    let (_, rows) = store::schema::rows(&all[20].0, &all[20].1).unwrap();
    c.insert("entries", rows.entries.as_bytes()).unwrap();
    c.insert("flows", rows.flows.as_bytes()).unwrap();
    // Entries of a summary whose row never came: not counted.
    let ghost = tailed(9, 1, true, false);
    let (_, rows) = store::schema::rows("a1", &ghost[0]).unwrap();
    c.insert("entries", rows.entries.as_bytes()).unwrap();

    let files = |probes: &[&str], from: u64, to: u64, spec: &store::MergeSpec| {
        let mut v: Vec<Summary> = all
            .iter()
            .filter(|(p, s)| {
                (probes.is_empty() || probes.contains(&p.as_str()))
                    && s.start_ns >= from
                    && s.start_ns < to
            })
            .map(|(_, s)| s.clone())
            .collect();
        let m = aguri::Merger::new(spec.interval_ns, 1 << 20, spec.metric, spec.threshold)
            .coarsen(spec.coarsen);
        aguri::merge_with(&mut v, m).unwrap()
    };
    let t0 = 1_795_132_800_000_000_000u64;
    // probes, from, to, interval, metric, threshold, coarsen
    type Case<'a> = (Vec<&'a str>, u64, u64, u64, aguri::Metric, f64, bool);
    let cases: Vec<Case> = vec![
        (vec![], 0, u64::MAX, 0, aguri::Metric::Either, 1.0, false),
        (
            vec![],
            0,
            u64::MAX,
            3_600_000_000_000,
            aguri::Metric::Either,
            1.0,
            false,
        ),
        (
            vec!["a1", "c3"],
            0,
            u64::MAX,
            1_800_000_000_000,
            aguri::Metric::Bytes,
            5.0,
            false,
        ),
        (
            vec!["b2"],
            t0,
            t0 + 3_000_000_000_000,
            0,
            aguri::Metric::Packets,
            0.5,
            false,
        ),
        (
            vec![],
            0,
            u64::MAX,
            3_600_000_000_000,
            aguri::Metric::Either,
            2.0,
            true,
        ),
        (
            vec!["a1"],
            0,
            u64::MAX,
            600_000_000_000,
            aguri::Metric::Either,
            10.0,
            false,
        ),
        (vec![], 0, u64::MAX, 0, aguri::Metric::Either, 0.05, false),
        (
            vec!["d4"],
            0,
            u64::MAX,
            0,
            aguri::Metric::Bytes,
            20.0,
            false,
        ),
        (
            vec!["d4"],
            0,
            u64::MAX,
            1_800_000_000_000,
            aguri::Metric::Either,
            12.0,
            true,
        ),
    ];
    for (probes, from, to, interval_ns, metric, threshold, coarsen) in cases {
        let spec = store::MergeSpec {
            probes: probes.iter().map(|p| p.to_string()).collect(),
            from_ns: from,
            to_ns: to,
            interval_ns,
            metric,
            threshold,
            coarsen,
            budget: 4096,
        };
        let want = files(&probes, from, to, &spec);
        let (got, stats) = store::merge(&c, &spec).unwrap();
        assert_eq!(got.len(), want.len(), "{spec:?}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.to_string(), w.to_string(), "{spec:?}");
            assert_eq!(g, w, "{spec:?}");
        }
        // The folding happened at the server: fewer rows came back than
        // the distinct keys it summed (except at a tiny threshold).
        if threshold >= 1.0 {
            assert!(stats.reduced * 2 < stats.keys, "{stats:?} {spec:?}");
        }
        if probes.is_empty() {
            assert_eq!((stats.repeated, stats.orphans), (2, 1), "{stats:?}");
        }
    }
    // Nothing in the range: nothing.
    let spec = store::MergeSpec {
        probes: vec![],
        from_ns: 0,
        to_ns: 1,
        interval_ns: 0,
        metric: aguri::Metric::Either,
        threshold: 1.0,
        coarsen: false,
        budget: 4096,
    };
    assert!(store::merge(&c, &spec).unwrap().0.is_empty());
    // Hostile values never reach a statement.
    let mut bad = spec.clone();
    bad.probes = vec!["a1' OR 1=1".into()];
    assert!(store::merge(&c, &bad).is_err());
    bad.probes.clear();
    bad.threshold = f64::NAN;
    assert!(store::merge(&c, &bad).is_err());
}

/// ClickHouse's own disk full for a while: the spool keeps every summary,
/// and once there is room each is stored once.
#[test]
fn a_store_whose_disk_is_full_keeps_the_summaries_waiting() {
    let Some(disk) = testkit::Tmpfs::mount(512 * 1024) else {
        return;
    };
    let Some(ch) = testkit::clickhouse(disk.path()) else {
        return;
    };
    let c = ch.client();
    store::init(&c).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spool = Arc::new(Spool::open(&dir.path().join("spool")).unwrap());
    let fill = disk.fill();
    let sender = Sender::start(spool.clone(), c.clone());
    let sums = summaries(13, 40);
    for s in &sums {
        spool.push("full", s).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        sender.stats.down.load(std::sync::atomic::Ordering::Relaxed),
        "the store refused while full"
    );
    assert!(!spool.pending().unwrap().is_empty(), "the spool keeps them");
    std::fs::remove_file(fill).unwrap();
    assert_eq!(sender.finish(&spool, Duration::from_secs(120)), 0);
    let back = store::read(&c, &[], 0, u64::MAX).unwrap();
    assert_eq!(back.len(), sums.len());
    for (b, s) in back.iter().zip(&sums) {
        assert_eq!(b.summary, *s);
    }
}
