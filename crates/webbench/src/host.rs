//! What the host's kernel says of the server, without touching the server:
//! TCP counters of the network namespace (`/proc/net/netstat`,
//! `/proc/net/snmp`: accept-queue overflows and drops, SYN retransmissions,
//! resets sent), which processes listen on the server's port (from
//! `/proc/net/tcp{,6}` and the processes' descriptors), and their CPU time
//! (`/proc/PID/stat`, the ended children they waited for included, so a
//! prefork server's recycled workers are not lost).
//!
//! Everything here is read from text the kernel writes; a field that is
//! missing or malformed reads as absent, never as a panic.

use std::collections::BTreeMap;
use std::fs;

use serde::Serialize;

/// The counters reported, as `Group:Name` of `/proc/net/netstat` and
/// `/proc/net/snmp`.
pub const COUNTERS: &[&str] = &[
    "TcpExt:ListenOverflows",
    "TcpExt:ListenDrops",
    "TcpExt:TCPSynRetrans",
    "TcpExt:TCPReqQFullDrop",
    "TcpExt:TCPAbortOnData",
    "Tcp:PassiveOpens",
    "Tcp:AttemptFails",
    "Tcp:EstabResets",
    "Tcp:OutRsts",
    "Tcp:RetransSegs",
];

/// Parses the `Group: names` / `Group: values` line pairs of
/// `/proc/net/netstat` and `/proc/net/snmp` into `Group:Name` → value.
pub fn parse_counters(text: &str, into: &mut BTreeMap<String, i64>) {
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((g1, names)), Some((g2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if g1 != g2 {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<i64>() {
                into.insert(format!("{g1}:{n}"), v);
            }
        }
    }
}

/// The namespace's TCP counters now (those of [`COUNTERS`] that exist).
pub fn counters() -> BTreeMap<String, i64> {
    let mut all = BTreeMap::new();
    for f in ["/proc/net/netstat", "/proc/net/snmp"] {
        if let Ok(text) = fs::read_to_string(f) {
            parse_counters(&text, &mut all);
        }
    }
    all.retain(|k, _| COUNTERS.contains(&k.as_str()));
    all
}

/// `after − before`, per counter present in both.
pub fn delta(
    before: &BTreeMap<String, i64>,
    after: &BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    after
        .iter()
        .filter_map(|(k, v)| before.get(k).map(|b| (k.clone(), v - b)))
        .collect()
}

/// Socket inodes listening on `port` in `/proc/net/tcp`-format `text`.
pub fn listening_inodes(text: &str, port: u16) -> Vec<u64> {
    let mut v = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
        let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
            continue;
        };
        let Some((_, p)) = local.rsplit_once(':') else {
            continue;
        };
        // State 0A is TCP_LISTEN.
        if *state == "0A" && u16::from_str_radix(p, 16) == Ok(port) {
            if let Ok(i) = inode.parse::<u64>() {
                v.push(i);
            }
        }
    }
    v
}

/// Processes holding a socket that listens on `port` in this namespace
/// (the server's master and workers), ascending.
pub fn listeners(port: u16) -> Vec<u32> {
    let mut inodes = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = fs::read_to_string(f) {
            inodes.extend(listening_inodes(&text, port));
        }
    }
    if inodes.is_empty() {
        return Vec::new();
    }
    let targets: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut pids = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return pids;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            fs::read_link(fd.path())
                .ok()
                .and_then(|l| l.to_str().map(|s| targets.iter().any(|t| t == s)))
                .unwrap_or(false)
        });
        if holds {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}

/// CPU seconds of `pids` so far, the ended children they waited for
/// included (a process that is gone counts nothing).
pub fn cpu_seconds(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|&p| capture::usage::process_cpu(p).ok())
        .map(|c| (c.own + c.reaped_children).as_secs_f64())
        .sum()
}

/// The kernel's accept-queue limit (`net.core.somaxconn`).
pub fn somaxconn() -> Option<u32> {
    fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What the host says of a server over a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerHost {
    /// Processes listening on the port (at the start).
    pub pids: Vec<u32>,
    /// Their CPU seconds over the run.
    pub cpu_seconds: f64,
    /// TCP counters' change over the run (the namespace's: the clients'
    /// sockets too, when they share it).
    pub counters: BTreeMap<String, i64>,
    pub somaxconn: Option<u32>,
}

/// Reads the counters and the server's CPU at the start of a run.
pub struct HostWatch {
    port: u16,
    pids: Vec<u32>,
    cpu: f64,
    counters: BTreeMap<String, i64>,
}

impl HostWatch {
    pub fn start(port: u16) -> HostWatch {
        let pids = listeners(port);
        HostWatch {
            port,
            cpu: cpu_seconds(&pids),
            counters: counters(),
            pids,
        }
    }

    /// The figures since [`HostWatch::start`]. Listeners that began during
    /// the run (a prefork server's new workers) count from their start;
    /// those that ended were reaped by their parent and count in its
    /// children's time.
    pub fn finish(self) -> ServerHost {
        let mut pids = self.pids;
        let before = self.cpu;
        for p in listeners(self.port) {
            if !pids.contains(&p) {
                pids.push(p);
            }
        }
        pids.sort_unstable();
        ServerHost {
            cpu_seconds: (cpu_seconds(&pids) - before).max(0.0),
            counters: delta(&self.counters, &counters()),
            somaxconn: somaxconn(),
            pids,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_by_group_and_name() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 17 18\n\
                    IpExt: InNoRoutes\nIpExt: 3\nBad: x\nWorse: 1\n";
        let mut m = BTreeMap::new();
        parse_counters(text, &mut m);
        assert_eq!(m["TcpExt:ListenOverflows"], 17);
        assert_eq!(m["TcpExt:ListenDrops"], 18);
        assert_eq!(m["IpExt:InNoRoutes"], 3);
        assert_eq!(m.len(), 4);
        let mut after = m.clone();
        after.insert("TcpExt:ListenDrops".into(), 20);
        assert_eq!(delta(&m, &after)["TcpExt:ListenDrops"], 2);
        // Cut or odd text reads as nothing, never a panic.
        parse_counters("TcpExt: a b\n", &mut m);
        parse_counters("TcpExt: a\nTcpExt: notanumber\n", &mut m);
        parse_counters(":\n:\n", &mut m);
        assert_eq!(m.len(), 4, "{m:?}");
    }

    #[test]
    fn this_process_is_found_listening_on_its_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(listeners(port), vec![std::process::id()]);
        drop(l);
        assert!(listeners(port).is_empty());
        let w = HostWatch::start(port);
        let h = w.finish();
        assert!(h.pids.is_empty() && h.cpu_seconds == 0.0, "{h:?}");
        assert!(h.counters.contains_key("Tcp:PassiveOpens"), "{h:?}");
    }

    #[test]
    fn listening_sockets_are_found_by_port_and_state() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0 100 0 0 10 0\n\
           1: 0100007F:1F90 0200007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 23456 1 0 100 0 0 10 0\n\
           2: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0 100 0 0 10 0\n\
           short line\n";
        assert_eq!(listening_inodes(text, 8080), vec![12345]);
        assert_eq!(listening_inodes(text, 80), vec![777]);
        assert!(listening_inodes(text, 81).is_empty());
    }
}
