//! `kansoku anon`: a trace made fit to publish (the `anon` crate's
//! rewrite over every packet), its key made or read, its policy printed.
//!
//! A file of aguri summaries is mapped too (its address prefixes, as
//! Crypto-PAn maps the trace's addresses), so that a profile can be
//! published without its trace.
//!
//! The output is written under a temporary name beside the final one and
//! renamed only once the whole input was read and written: a key or an
//! input that fails part way leaves nothing under the final name.

use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anon::{Anonymizer, CryptoPan, MacPolicy, PayloadPolicy};
use clap::{Args, Subcommand, ValueEnum};
use trace::index::sidecars;
use trace::record::OPT_COMMENT;
use trace::{Interface, Packet, RawOption, Record, Section};

use crate::error::{Error, Result};
use crate::report::Report;
use crate::run::{Consumer, Flow};
use crate::sink::trace::TraceSink;
use crate::sink::PacketSink;
use crate::source::dir::run_path;
use crate::source::trace::{TraceSource, Window};

use super::output::OutputArgs;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AnonArgs {
    #[command(subcommand)]
    pub command: Option<AnonCommand>,
    /// Trace to anonymise: pcap or pcapng, plain or gzip/zstd/lz4 ("-" for standard input), a directory of rotated
    /// traces (read as one, in time order); or a file of aguri
    /// summaries, whose address prefixes are mapped as the trace's addresses would be.
    #[arg(short = 'r', value_name = "FILE")]
    pub read: Option<PathBuf>,
    /// The Crypto-PAn key: a file of 64 hexadecimal digits (`kansoku anon keygen FILE` makes one).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// What becomes of the bytes after the transport header.
    #[arg(long, value_enum, default_value_t = PayloadArg::Strip)]
    pub payload: PayloadArg,
    /// What becomes of link-layer (MAC) addresses.
    #[arg(long, value_enum, default_value_t = MacArg::Hash)]
    pub mac: MacArg,
    /// Print the policy (what is kept, changed and removed, field by field) and exit.
    #[arg(long)]
    pub policy: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum AnonCommand {
    /// Write a new random Crypto-PAn key (64 hex digits, mode 0600) to FILE, which must not exist.
    Keygen { file: PathBuf },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PayloadArg {
    /// Cut each record at the end of its transport header; the wire length is kept (MAWI's and CAIDA's practice).
    Strip,
    /// Keep the captured length, zero the payload's bytes.
    Zero,
    /// Keep the payload as captured (DNS and other payloads may carry addresses).
    Keep,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MacArg {
    /// A keyed hash: one station, one image; the multicast bit kept; broadcast kept.
    Hash,
    /// All zeros.
    Zero,
}

impl From<PayloadArg> for PayloadPolicy {
    fn from(p: PayloadArg) -> Self {
        match p {
            PayloadArg::Strip => PayloadPolicy::Strip,
            PayloadArg::Zero => PayloadPolicy::Zero,
            PayloadArg::Keep => PayloadPolicy::Keep,
        }
    }
}

impl From<MacArg> for MacPolicy {
    fn from(m: MacArg) -> Self {
        match m {
            MacArg::Hash => MacPolicy::Hash,
            MacArg::Zero => MacPolicy::Zero,
        }
    }
}

/// `kansoku anon`.
pub fn run(args: &AnonArgs) -> Result<Report> {
    if let Some(AnonCommand::Keygen { file }) = &args.command {
        return keygen(file);
    }
    let (payload, mac) = (PayloadPolicy::from(args.payload), MacPolicy::from(args.mac));
    let policy = anon::policy::text(payload, mac);
    if args.policy {
        print!("{policy}");
        return Ok(Report::default());
    }
    let (Some(input), Some(key_path)) = (&args.read, &args.key) else {
        return Err(Error::usage("anon needs -r FILE and --key FILE"));
    };
    let key = read_key(key_path)?;
    let Some(out_path) = &args.out.write else {
        return Err(Error::usage(
            "anon needs -w FILE (\"-\" for standard output)",
        ));
    };
    if is_summary_file(input) {
        return anon_summaries(input, out_path, &key);
    }
    let staging = Staging::new(out_path);
    let sink = args.out.sink(staging.path())?;
    let mut job = AnonJob {
        anonymizer: Anonymizer::new(CryptoPan::new(&key), mac, payload),
        sink,
        scratch: Vec::new(),
        policy,
        blocks_dropped: 0,
    };
    // A file, standard input, or a directory of rotated files read as one
    // trace in time order. Nothing is created before the first record, so
    // an input that cannot be opened leaves nothing behind.
    let stop = crate::signals::stop_flag();
    let mut report = match run_path(input, Window::default(), None, &mut job, stop) {
        Ok(r) => r,
        Err(e) => {
            drop(job);
            staging.abandon();
            return Err(e);
        }
    };
    let AnonJob {
        anonymizer,
        sink,
        blocks_dropped,
        ..
    } = job;
    match sink.finish() {
        Ok(_) => {}
        Err(e) => report.output_failed(e),
    }
    if report.read_error.is_some() || report.output_error.is_some() || report.interrupted.is_some()
    {
        staging.abandon();
        if report.read_error.is_none() && report.output_error.is_none() {
            report.problems.push(format!(
                "interrupted: nothing written to {}",
                crate::display_path(out_path)
            ));
        }
        return Ok(report);
    }
    staging
        .commit()
        .map_err(|e| Error::output(crate::display_path(out_path), &e))?;
    let c = anonymizer.counts;
    let (hits, misses) = anonymizer.cache();
    eprintln!(
        "kansoku: anon: {} packets: {} IPv4 and {} IPv6 addresses, {} link-layer addresses; {} payload bytes removed; {} headers read only in part; {} pcapng blocks left out; address cache {hits} hits, {misses} misses",
        c.packets,
        c.ipv4_addresses,
        c.ipv6_addresses,
        c.mac_addresses,
        c.payload_bytes_removed,
        c.stopped_early,
        blocks_dropped
    );
    Ok(report)
}

/// Reads a key file: 64 hex digits. A file others can read is a warning
/// (the key is what keeps the mapping secret); any other content is an
/// error, never padded or cut.
fn read_key(path: &Path) -> Result<[u8; anon::KEY_LEN]> {
    let name = crate::display_path(path);
    let mut text = String::new();
    let mut file =
        std::fs::File::open(path).map_err(|e| Error::usage(format!("--key {name}: {e}")))?;
    file.by_ref()
        .take(4096)
        .read_to_string(&mut text)
        .map_err(|e| Error::usage(format!("--key {name}: {e}")))?;
    if let Ok(m) = file.metadata() {
        if m.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "kansoku: warning: --key {name} can be read by others (mode {:o}); chmod 600 it",
                m.permissions().mode() & 0o777
            );
        }
    }
    anon::parse_key(&text).map_err(|e| Error::usage(format!("--key {name}: {e}")))
}

/// `kansoku anon keygen FILE`.
fn keygen(path: &Path) -> Result<Report> {
    use std::io::Write;
    let name = crate::display_path(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::usage(format!("{name}: {e}")))?;
    f.write_all(anon::new_key_text().as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::output(name, &e))?;
    Ok(Report::default())
}

/// The output under a temporary name beside the final one (its name ends
/// as the final one's, so the format and codec it says are the same).
struct Staging {
    fin: PathBuf,
    tmp: PathBuf,
}

impl Staging {
    fn new(fin: &Path) -> Staging {
        if fin.as_os_str() == "-" {
            return Staging {
                fin: fin.to_path_buf(),
                tmp: fin.to_path_buf(),
            };
        }
        let name = fin
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = fin.with_file_name(format!(".anon-{}-{name}", std::process::id()));
        Staging {
            fin: fin.to_path_buf(),
            tmp,
        }
    }

    fn path(&self) -> &Path {
        &self.tmp
    }

    fn commit(&self) -> std::io::Result<()> {
        if self.tmp == self.fin {
            return Ok(());
        }
        for (ti, fi) in sidecars(&self.tmp).into_iter().zip(sidecars(&self.fin)) {
            if ti.exists() {
                std::fs::rename(&ti, &fi)?;
            } else {
                // An older sidecar beside the final name describes another
                // file.
                let _ = std::fs::remove_file(&fi);
            }
        }
        std::fs::rename(&self.tmp, &self.fin)
    }

    fn abandon(&self) {
        if self.tmp != self.fin {
            let _ = std::fs::remove_file(&self.tmp);
            for s in sidecars(&self.tmp) {
                let _ = std::fs::remove_file(s);
            }
        }
    }
}

/// The rewrite over a trace's records, into the sink.
struct AnonJob {
    anonymizer: Anonymizer,
    sink: TraceSink,
    scratch: Vec<u8>,
    policy: String,
    /// pcapng blocks left out (name resolution, decryption secrets, custom
    /// blocks: they can carry addresses and names).
    blocks_dropped: u64,
}

/// IDB options that say nothing about the network: speed, time
/// resolution, time zone, FCS length, time offset. The rest (name,
/// description, addresses, filter, OS, hardware) are left out.
const KEPT_INTERFACE_OPTIONS: [u16; 5] = [8, 9, 10, 13, 14];

/// pcapng's Interface Statistics Block, the one other block kept.
const INTERFACE_STATISTICS: u32 = 5;

impl Consumer<TraceSource> for AnonJob {
    fn consume(&mut self, rec: Record<'_>) -> Result<Flow> {
        match rec {
            Record::Section(s) => {
                // The section's own options (comments, hardware, OS, the
                // application) go; the policy takes their place.
                let section = Section {
                    options: vec![RawOption {
                        code: OPT_COMMENT,
                        value: self.policy.clone().into_bytes(),
                    }],
                    ..s.clone()
                };
                self.sink.record(&Record::Section(&section))?;
            }
            Record::Interface(i) => {
                let interface = Interface {
                    options: i
                        .options
                        .iter()
                        .filter(|o| KEPT_INTERFACE_OPTIONS.contains(&o.code))
                        .cloned()
                        .collect(),
                    ..i.clone()
                };
                self.sink.record(&Record::Interface(&interface))?;
            }
            Record::Packet(p) => {
                self.scratch.clear();
                self.scratch.extend_from_slice(p.data);
                let r = self.anonymizer.frame(p.link_type, &mut self.scratch);
                let packet = Packet {
                    data: &self.scratch[..r.kept],
                    // Comments and other packet options can name anything.
                    options: &[],
                    ..p
                };
                self.sink.record(&Record::Packet(packet))?;
            }
            Record::Block(b) if b.block_type == INTERFACE_STATISTICS => {
                self.sink.record(&Record::Block(b))?;
            }
            Record::Block(_) => self.blocks_dropped += 1,
        }
        Ok(Flow::Continue)
    }

    fn idle(&mut self) -> Result<()> {
        self.sink.idle()
    }
}

/// Whether `path` is a file of aguri summaries (text) rather than a trace:
/// it starts with no trace format's magic, and with text.
fn is_summary_file(path: &Path) -> bool {
    if path.as_os_str() == "-" {
        return false;
    }
    let mut head = [0u8; 16];
    let Ok(n) = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    let head = &head[..n];
    n > 0
        && !trace::format::starts_a_trace(head)
        && head
            .iter()
            .all(|&b| b.is_ascii_graphic() || b.is_ascii_whitespace())
}

/// `kansoku anon` of a summary file: every address prefix mapped as the
/// trace's addresses are, in the file's own format.
fn anon_summaries(input: &Path, out: &Path, key: &[u8; anon::KEY_LEN]) -> Result<Report> {
    use aguri::formats::{detect, write_aguri2, write_aguri3, Format};
    let text = crate::error::read_text(input)?;
    let name = crate::display_path(input);
    let mut summaries =
        aguri::parse_summaries(&text).map_err(|e| Error::input(format!("{name}:{e}")))?;
    if summaries.is_empty() {
        return Err(Error::input(format!(
            "{name}: no aguri summary in the file"
        )));
    }
    let mut pan = CryptoPan::new(key);
    let format = detect(&text);
    let mut written = String::new();
    for s in &mut summaries {
        anonymize_summary(&mut pan, s);
        match format {
            Format::Kansoku => written.push_str(&s.to_string()),
            Format::Aguri2 => written.push_str(&write_aguri2(s)),
            Format::Aguri3 => written.push_str(&write_aguri3(s).unwrap_or_default()),
        }
    }
    if out.as_os_str() == "-" {
        print!("{written}");
        return Ok(Report::default());
    }
    let staging = Staging::new(out);
    std::fs::write(staging.path(), written)
        .and_then(|()| staging.commit())
        .map_err(|e| {
            staging.abandon();
            Error::output(crate::display_path(out), &e)
        })?;
    eprintln!(
        "kansoku: anon: {} summaries of {name}: every address prefix mapped",
        summaries.len()
    );
    Ok(Report::default())
}

/// Maps a summary's address prefixes as `kansoku anon` maps the addresses
/// of the trace it was made from: Crypto-PAn preserves prefixes, so the
/// image of a prefix is the same length of any of its addresses' images,
/// and the summary of the anonymised trace is this one's image. Entries
/// and 2-D flows are put back in the order the profiler writes them.
pub fn anonymize_summary(pan: &mut CryptoPan, s: &mut aguri::Summary) {
    for section in &mut s.sections {
        if section.kind.key_kind() != aguri::KeyKind::Address {
            continue;
        }
        for e in &mut section.entries {
            e.prefix = anon_prefix(pan, e.prefix);
        }
        // Preorder: a parent's key is its children's with trailing zeros.
        section
            .entries
            .sort_by_key(|e| (e.prefix.key, e.prefix.len));
    }
    for f in &mut s.flows {
        f.src = anon_prefix(pan, f.src);
        f.dst = anon_prefix(pan, f.dst);
    }
    s.flows
        .sort_by_key(|f| (f.src.key, f.src.len, f.dst.key, f.dst.len));
}

/// An address prefix's image: an IPv4 one (under `::ffff:0:0/96`, as
/// aguri keeps them) by IPv4 Crypto-PAn, an IPv6 one by the 128-bit one.
/// A prefix that holds the whole IPv4 space (the roots, `::/0` ... `::ffff:0:0/96`)
/// stays as it is: it is a catch-all, and IPv4's images stay under it.
fn anon_prefix(pan: &mut CryptoPan, p: aguri::Prefix) -> aguri::Prefix {
    use aguri::label::{mask, V4_MAPPED, V4_MAPPED_LEN};
    if p.kind != aguri::KeyKind::Address
        || V4_MAPPED & mask(p.len) == p.key && p.len <= V4_MAPPED_LEN
    {
        return p;
    }
    let key = if p.key & mask(V4_MAPPED_LEN) == V4_MAPPED {
        V4_MAPPED | u128::from(pan.ipv4(p.key as u32))
    } else {
        pan.ipv6(p.key)
    };
    aguri::Prefix::new(aguri::KeyKind::Address, key, p.len)
}
