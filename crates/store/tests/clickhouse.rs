//! The store against a real ClickHouse (Debian's clickhouse-server, which
//! scripts/install-deps.sh installs), started here on ports of its own in a
//! directory of its own: summaries stored and read back exactly, each once
//! though sent twice, the spool surviving the server's SIGKILL, and hostile
//! probe names refused.

use std::sync::Arc;
use std::time::Duration;

use aguri::{FlowKey, ProfilerConfig, Summary};
use store::testing::ClickHouse;
use store::{Client, Credentials, Sender, Spool};

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
    let Some(mut ch) = ClickHouse::start(dir.path()) else {
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
    let cat = webview::DataSource::catalog(&src).unwrap();
    assert_eq!(cat.probes.len(), 3);
    assert_eq!(cat.levels[0].summaries, all.len());
    ch.kill();
}

#[test]
fn the_spool_keeps_what_the_store_cannot_take_and_sends_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut ch) = ClickHouse::start(dir.path()) else {
        return;
    };
    let c = ch.client();
    store::init(&c).unwrap();
    let spool = Arc::new(Spool::open(&dir.path().join("spool")).unwrap());
    let sender = Sender::start(spool.clone(), c.clone());
    let sums = summaries(9, 60);
    let probes = ["a", "b", "c"];
    let mut n = 0;
    for (i, s) in sums.iter().enumerate() {
        for p in probes {
            spool.push(p, s).unwrap();
            n += 1;
        }
        if i == 20 {
            ch.kill(); // SIGKILL in the middle of the run
        }
        if i == 40 {
            assert!(
                !spool.pending().unwrap().is_empty(),
                "the spool holds what waits"
            );
            ch.run();
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
    let Some(ch) = ClickHouse::start(dir.path()) else {
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
    let Some((a, b)) = ClickHouse::start_cluster(dir.path()) else {
        return;
    };
    let on = |ch: &ClickHouse, db: &str| {
        let mut url = ch.url();
        url.database = db.to_string();
        Client::new(
            url,
            Some(Credentials::new("kansoku", store::testing::PASSWORD)),
        )
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
}
