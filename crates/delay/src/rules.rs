//! The iptables rules that send the clients' packets into the delay line's
//! queue, installed at the start and removed at the end, on Ctrl-C, and,
//! after a run that was killed, by the next run.
//!
//! Each run has two chains of its own in the `mangle` table, named after
//! its process and instance, `KSKDELAY-<pid>-<n>-OUT` and `...-IN`:
//!
//! ```text
//! OUTPUT ─► KSKDELAY-…-OUT: -s CLIENT [-d SERVER -p tcp --dport PORT] -j NFQUEUE   (from a client)
//! INPUT  ─► KSKDELAY-…-IN:  -d CLIENT [-s SERVER -p tcp --sport PORT] -j NFQUEUE   (to a client)
//! ```
//!
//! The packets leave a client through OUTPUT and come back to it through
//! INPUT, so both halves of the round trip are held on the client's host,
//! and a tap between them (loopback's, or the server's interface) sees every
//! packet at the time the server sends or receives it. The rules go in with
//! one `iptables-restore --noflush` per IP version, all or nothing, and come
//! out the same way. Their packet counters tell how many packets the rules
//! sent to the queue, which the delay line compares with what it received.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// What the rules select.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The client addresses.
    pub clients: Vec<IpAddr>,
    /// Only traffic with this server (TCP to and from its port; any port
    /// if 0); `None`: everything from and to the clients.
    pub server: Option<SocketAddr>,
}

/// The prefix of every chain a delay line makes.
pub const CHAIN_PREFIX: &str = "KSKDELAY-";

static INSTANCE: AtomicU32 = AtomicU32::new(0);

/// The two iptables tools of an IP version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn of(a: IpAddr) -> Family {
        if a.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }

    fn restore(self) -> &'static str {
        match self {
            Family::V4 => "iptables-restore",
            Family::V6 => "ip6tables-restore",
        }
    }

    fn save(self) -> &'static str {
        match self {
            Family::V4 => "iptables-save",
            Family::V6 => "ip6tables-save",
        }
    }

    fn prefix_len(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
}

/// The `iptables-restore` text that makes the chains `out` and `inn` and
/// jumps to them.
pub fn install_script(sel: &Selection, family: Family, queue: u16, out: &str, inn: &str) -> String {
    let bits = family.prefix_len();
    let mut s = format!("*mangle\n:{out} - [0:0]\n:{inn} - [0:0]\n");
    let server = sel.server.filter(|s| Family::of(s.ip()) == family);
    for c in sel.clients.iter().filter(|c| Family::of(**c) == family) {
        let (mut to, mut from) = (String::new(), String::new());
        if let Some(srv) = server {
            let _ = write!(to, " -d {}/{bits} -p tcp", srv.ip());
            let _ = write!(from, " -s {}/{bits} -p tcp", srv.ip());
            if srv.port() != 0 {
                let _ = write!(to, " --dport {}", srv.port());
                let _ = write!(from, " --sport {}", srv.port());
            }
        }
        let _ = writeln!(
            s,
            "-A {out} -s {c}/{bits}{to} -j NFQUEUE --queue-num {queue}"
        );
        let _ = writeln!(
            s,
            "-A {inn} -d {c}/{bits}{from} -j NFQUEUE --queue-num {queue}"
        );
    }
    let _ = writeln!(s, "-I OUTPUT 1 -j {out}\n-I INPUT 1 -j {inn}\nCOMMIT");
    s
}

/// The `iptables-restore` text that removes the chains named in `chains`
/// and the jumps to them listed in `jumps` (`(hook chain, target)`).
pub fn remove_script(chains: &[String], jumps: &[(String, String)]) -> String {
    let mut s = String::from("*mangle\n");
    for (hook, target) in jumps {
        let _ = writeln!(s, "-D {hook} -j {target}");
    }
    for c in chains {
        let _ = writeln!(s, "-F {c}\n-X {c}");
    }
    s.push_str("COMMIT\n");
    s
}

/// What `iptables-save -c -t mangle` shows of the delay lines' chains.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Saved {
    /// Every chain whose name starts with [`CHAIN_PREFIX`].
    pub chains: Vec<String>,
    /// Jumps to them: `(hook chain, target chain)`.
    pub jumps: Vec<(String, String)>,
    /// Packets each chain's rules sent to a queue: `(chain, packets)`.
    pub queued: Vec<(String, u64)>,
}

/// Reads the delay lines' chains out of `iptables-save -c` text.
pub fn parse_saved(text: &str) -> Saved {
    let mut saved = Saved::default();
    let mut in_mangle = false;
    for line in text.lines() {
        if let Some(table) = line.strip_prefix('*') {
            in_mangle = table == "mangle";
            continue;
        }
        if !in_mangle {
            continue;
        }
        if let Some(decl) = line.strip_prefix(':') {
            let name = decl.split_whitespace().next().unwrap_or("");
            if name.starts_with(CHAIN_PREFIX) {
                saved.chains.push(name.to_string());
            }
            continue;
        }
        // "[packets:bytes] -A CHAIN ... -j TARGET ..." (counters with -c).
        let (counters, rule) = match line.strip_prefix('[') {
            Some(rest) => match rest.split_once("] ") {
                Some((c, r)) => (Some(c), r),
                None => continue,
            },
            None => (None, line),
        };
        let words: Vec<&str> = rule.split_whitespace().collect();
        let (Some(&"-A"), Some(chain)) = (words.first(), words.get(1)) else {
            continue;
        };
        let target = words.windows(2).find(|w| w[0] == "-j").map(|w| w[1]);
        if target.is_some_and(|t| t.starts_with(CHAIN_PREFIX)) && !chain.starts_with(CHAIN_PREFIX) {
            saved
                .jumps
                .push((chain.to_string(), target.unwrap_or_default().to_string()));
        }
        if chain.starts_with(CHAIN_PREFIX) && target == Some("NFQUEUE") {
            let packets = counters
                .and_then(|c| c.split(':').next())
                .and_then(|p| p.parse::<u64>().ok())
                .unwrap_or(0);
            match saved.queued.iter_mut().find(|(c, _)| c == chain) {
                Some((_, n)) => *n += packets,
                None => saved.queued.push((chain.to_string(), packets)),
            }
        }
    }
    saved
}

/// The process id in a chain's name, `KSKDELAY-<pid>-...`.
pub fn chain_pid(chain: &str) -> Option<u32> {
    chain
        .strip_prefix(CHAIN_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

fn run_tool(tool: &str, args: &[&str], input: Option<&str>) -> io::Result<String> {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{tool}: {e} (the delay line needs iptables and root)"),
            )
        })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{tool} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn saved(family: Family) -> io::Result<Saved> {
    run_tool(family.save(), &["-c", "-t", "mangle"], None).map(|t| parse_saved(&t))
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes the chains (and jumps) of delay lines whose process is gone
/// (killed before it could clean up); the chains it removed.
pub fn remove_stale(family: Family) -> io::Result<Vec<String>> {
    let s = saved(family)?;
    let own = std::process::id();
    let stale = |c: &str| chain_pid(c).is_some_and(|p| !alive(p) || (p == own && !ours(c)));
    let chains: Vec<String> = s.chains.into_iter().filter(|c| stale(c)).collect();
    let jumps: Vec<(String, String)> = s.jumps.into_iter().filter(|(_, t)| stale(t)).collect();
    if chains.is_empty() && jumps.is_empty() {
        return Ok(chains);
    }
    run_tool(
        family.restore(),
        &["--noflush"],
        Some(&remove_script(&chains, &jumps)),
    )?;
    Ok(chains)
}

/// Chains of this process's live rule sets (a leftover of an earlier
/// process with the same pid is not one of them).
static LIVE: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());

fn ours(chain: &str) -> bool {
    LIVE.lock().map(|l| l.contains(chain)).unwrap_or(false)
}

/// Installed rules; removed when dropped.
#[derive(Debug)]
pub struct Rules {
    families: Vec<Family>,
    out: String,
    inn: String,
    unhooked: bool,
    removed: bool,
}

impl Rules {
    /// Removes stale chains, then installs rules sending `sel`'s packets
    /// to `queue`.
    pub fn install(sel: &Selection, queue: u16) -> io::Result<Rules> {
        let n = INSTANCE.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let out = format!("{CHAIN_PREFIX}{pid}-{n}-OUT");
        let inn = format!("{CHAIN_PREFIX}{pid}-{n}-IN");
        let mut families: Vec<Family> = sel.clients.iter().map(|a| Family::of(*a)).collect();
        families.sort_by_key(|f| *f as u8);
        families.dedup();
        if let Some(s) = sel.server {
            if !families.contains(&Family::of(s.ip())) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the server {s} is of another IP version than every client"),
                ));
            }
        }
        if let Ok(mut l) = LIVE.lock() {
            l.insert(out.clone());
            l.insert(inn.clone());
        }
        let mut rules = Rules {
            families: Vec::new(),
            out,
            inn,
            unhooked: false,
            removed: false,
        };
        for f in families {
            remove_stale(f)?;
            let script = install_script(sel, f, queue, &rules.out, &rules.inn);
            run_tool(f.restore(), &["--noflush"], Some(&script))?;
            rules.families.push(f);
        }
        Ok(rules)
    }

    /// The chain names (out, in).
    pub fn chains(&self) -> (&str, &str) {
        (&self.out, &self.inn)
    }

    /// Packets the rules have sent to the queue so far.
    pub fn queued(&self) -> io::Result<u64> {
        let mut n = 0;
        for f in &self.families {
            n += saved(*f)?
                .queued
                .iter()
                .filter(|(c, _)| *c == self.out || *c == self.inn)
                .map(|(_, p)| p)
                .sum::<u64>();
        }
        Ok(n)
    }

    /// Takes the jumps to the chains out, so that no packet enters the
    /// queue any more; the chains and their counters stay until
    /// [`Rules::remove`].
    pub fn unhook(&mut self) -> io::Result<()> {
        if self.unhooked {
            return Ok(());
        }
        self.unhooked = true;
        let jumps = vec![
            ("OUTPUT".to_string(), self.out.clone()),
            ("INPUT".to_string(), self.inn.clone()),
        ];
        self.each_family(&remove_script(&[], &jumps))
    }

    /// Removes the rules (also done when dropped, errors then unreported).
    pub fn remove(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        let unhooked = self.unhook();
        self.removed = true;
        let chains = vec![self.out.clone(), self.inn.clone()];
        let result = unhooked.and(self.each_family(&remove_script(&chains, &[])));
        if let Ok(mut l) = LIVE.lock() {
            l.remove(&self.out);
            l.remove(&self.inn);
        }
        result
    }

    /// Runs an `iptables-restore` script for each IP version in use; the
    /// first error, after trying all.
    fn each_family(&self, script: &str) -> io::Result<()> {
        let mut result = Ok(());
        for f in &self.families {
            if let Err(e) = run_tool(f.restore(), &["--noflush"], Some(script)) {
                result = result.and(Err(e));
            }
        }
        result
    }
}

impl Drop for Rules {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_script_holds_each_client_both_ways() {
        let sel = Selection {
            clients: vec!["127.0.0.2".parse().unwrap(), "::2".parse().unwrap()],
            server: Some("127.0.0.1:8080".parse().unwrap()),
        };
        let s = install_script(&sel, Family::V4, 12, "KSKDELAY-1-0-OUT", "KSKDELAY-1-0-IN");
        assert_eq!(
            s,
            "*mangle\n:KSKDELAY-1-0-OUT - [0:0]\n:KSKDELAY-1-0-IN - [0:0]\n\
             -A KSKDELAY-1-0-OUT -s 127.0.0.2/32 -d 127.0.0.1/32 -p tcp --dport 8080 -j NFQUEUE --queue-num 12\n\
             -A KSKDELAY-1-0-IN -d 127.0.0.2/32 -s 127.0.0.1/32 -p tcp --sport 8080 -j NFQUEUE --queue-num 12\n\
             -I OUTPUT 1 -j KSKDELAY-1-0-OUT\n-I INPUT 1 -j KSKDELAY-1-0-IN\nCOMMIT\n"
        );
        let s6 = install_script(&sel, Family::V6, 12, "O", "I");
        assert!(s6.contains("-A O -s ::2/128 -j NFQUEUE"), "{s6}");
    }

    #[test]
    fn saved_rules_give_chains_jumps_and_counts() {
        let text = "# Generated\n*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j KSKDELAY-9-0-IN\nCOMMIT\n\
                    *mangle\n:PREROUTING ACCEPT [5:300]\n:KSKDELAY-9-0-IN - [0:0]\n:KSKDELAY-9-0-OUT - [0:0]\n\
                    [0:0] -A INPUT -j KSKDELAY-9-0-IN\n[0:0] -A OUTPUT -j KSKDELAY-9-0-OUT\n\
                    [10:600] -A KSKDELAY-9-0-IN -d 127.0.0.2/32 -j NFQUEUE --queue-num 3\n\
                    [7:420] -A KSKDELAY-9-0-IN -d 127.0.0.3/32 -j NFQUEUE --queue-num 3\n\
                    [4:240] -A KSKDELAY-9-0-OUT -s 127.0.0.2/32 -j NFQUEUE --queue-num 3\nCOMMIT\n";
        let s = parse_saved(text);
        assert_eq!(s.chains, vec!["KSKDELAY-9-0-IN", "KSKDELAY-9-0-OUT"]);
        assert_eq!(
            s.jumps,
            vec![
                ("INPUT".to_string(), "KSKDELAY-9-0-IN".to_string()),
                ("OUTPUT".to_string(), "KSKDELAY-9-0-OUT".to_string())
            ]
        );
        assert_eq!(
            s.queued,
            vec![
                ("KSKDELAY-9-0-IN".to_string(), 17),
                ("KSKDELAY-9-0-OUT".to_string(), 4)
            ]
        );
        assert_eq!(chain_pid("KSKDELAY-9-0-IN"), Some(9));
        assert_eq!(chain_pid("OTHER"), None);
        let r = remove_script(&s.chains, &s.jumps);
        assert!(r.starts_with("*mangle\n-D INPUT -j KSKDELAY-9-0-IN\n"));
        assert!(r.ends_with("-F KSKDELAY-9-0-OUT\n-X KSKDELAY-9-0-OUT\nCOMMIT\n"));
    }
}
