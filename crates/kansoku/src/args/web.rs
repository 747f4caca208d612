//! `kansoku delay`: per-client network delay on real packets.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use webbench::TlsVersions;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DelayArgs {
    #[command(subcommand)]
    pub tool: Option<DelayTool>,
    #[command(flatten)]
    pub run: DelayRunArgs,
}

#[derive(Debug, Subcommand)]
pub enum DelayTool {
    /// Build an RTT profile (a CDF file for --profile cdf:FILE) from a capture taken at a server: the time from
    /// the server's SYN-ACK to the client's ACK, per connection, as the paper's ENMA measured it.
    Profile(DelayProfileArgs),
}

#[derive(Debug, Args)]
pub struct DelayProfileArgs {
    /// The capture (pcap or pcapng, plain or compressed; "-" for standard input), taken at the server.
    #[arg(long, value_name = "FILE")]
    pub from_pcap: PathBuf,
    /// Write the CDF here (default: standard output).
    #[arg(short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The server (ADDR or ADDR:PORT): only its handshakes; by default every side that answers a SYN.
    #[arg(long, value_name = "ADDR[:PORT]")]
    pub server: Option<String>,
}

#[derive(Debug, Args)]
pub struct DelayRunArgs {
    /// Client addresses: a count (that many from 127.0.0.2), a range A-B, addresses, or a mix, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "1", value_parser = clients)]
    pub clients: Clients,
    /// Round-trip times: none, const:48ms, lognormal:median=48ms,sigma=1, or cdf:FILE (RTT_MS FRACTION lines);
    /// client i of N gets the quantile at (i + 1/2) / N. Half of it is put on each direction.
    #[arg(long, value_name = "PROFILE", default_value = "none")]
    pub profile: String,
    /// Only traffic with this server (ADDR:PORT, TCP; port 0 for any): by default every packet from or to a client.
    #[arg(long, value_name = "ADDR:PORT")]
    pub server: Option<std::net::SocketAddr>,
    /// Packets the kernel holds in the queue at most; past that they are dropped and the run is invalid.
    #[arg(long, value_name = "PACKETS", default_value_t = 65_536, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub queue_len: u32,
    /// Let packets that find the queue full through undelayed (the run is then reported invalid) instead of dropping them.
    #[arg(long)]
    pub fail_open: bool,
    /// Drop this fraction of packets, each direction (0 to 1).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0, value_parser = fraction)]
    pub loss: f64,
    /// Each client's link rate, each direction (e.g. 10mbit, 512kbit, 1gbit).
    #[arg(long, value_name = "RATE")]
    #[arg(value_parser = delay::schedule::parse_rate)]
    pub rate: Option<u64>,
    /// A packet released later than this after its due time counts as late.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = delay::profile::parse_duration)]
    pub late_after: Duration,
    /// Stop after this long (e.g. 30s); by default run until COMMAND ends, or until SIGINT/SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = delay::profile::parse_duration)]
    pub duration: Option<Duration>,
    /// Pin the delay line's thread to this CPU.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<usize>,
    /// Watch the server (--server, with its port) from its packets on this interface while the delay runs: its
    /// connections in progress, arrivals, resets and TIME_WAIT over the run less its first tenth (as webbench
    /// --observe does), for a program that cannot say so itself (httperf).
    #[arg(long, value_name = "INTERFACE", requires = "server")]
    pub observe: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// List each client's round trip in the text report.
    #[arg(long)]
    pub list: bool,
    /// A program to run while the delay is on (its output is its own; kansoku's report then goes to stderr).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `kansoku webbench`: HTTP load from many client addresses.
#[derive(Debug, Args)]
pub struct WebbenchArgs {
    /// The page to ask for (`http://` or `https://HOST[:PORT]/PATH`).
    pub url: String,
    /// Closed model: this many connections, each asking again when answered (default 10 without --rate); a
    /// comma-separated list runs a sweep, one step per count (e.g. 1,10,50,100,200,500,800,900,1000), each -d long.
    #[arg(short = 'c', long, value_name = "N[,N...]", conflicts_with = "rate", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub connections: Option<Vec<u64>>,
    /// Idle time between a sweep's steps (the paper: 1m).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = delay::profile::parse_duration)]
    pub cooldown: Duration,
    /// Open model: start this many requests a second, answered or not; latency counts from the scheduled time.
    #[arg(long, value_name = "PER_SECOND", value_parser = webbench::load::parse_rate)]
    pub rate: Option<f64>,
    /// Open model: exponential gaps between requests (Poisson arrivals) instead of even ones.
    #[arg(long, requires = "rate")]
    pub poisson: bool,
    /// Stop starting requests after this long (default 10s unless --requests).
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = delay::profile::parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many requests.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,
    /// Keep connections open between requests; default: one connection per request, closed by the server
    /// (HTTP/2: by the client, once its one stream is answered).
    #[arg(long)]
    pub keep_alive: bool,
    /// HTTP/2: over TLS with ALPN h2 for https://, with prior knowledge (h2c) for http://. Each request a stream.
    #[arg(long)]
    pub http2: bool,
    /// HTTP/2 with --keep-alive: streams in flight on a connection at most (h2load's -m).
    #[arg(long, value_name = "M", requires = "http2", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub streams: Option<u64>,
    /// https: only this TLS version (1.2 or 1.3); by default both are offered and the server chooses.
    #[arg(long, value_name = "VERSION", value_parser = tls_version)]
    pub tls_version: Option<TlsVersions>,
    /// https: accept any certificate (a self-signed test server); the handshake's signatures are still checked.
    #[arg(short = 'k', long, conflicts_with = "cacert")]
    pub insecure: bool,
    /// https: trust the CA certificates in this PEM file instead of Mozilla's roots (webpki-roots).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
    /// Client source addresses, used round-robin: a count (that many from 127.0.0.2), a range A-B, or a list.
    #[arg(long, value_name = "LIST", value_parser = clients)]
    pub clients: Option<Clients>,
    /// Give each client its own round trip on real packets (a delay line, root): const:48ms,
    /// lognormal:median=48ms,sigma=1, cdf:FILE. Client i of N gets the (i + 1/2) / N quantile.
    #[arg(long, value_name = "PROFILE")]
    pub delay: Option<String>,
    /// Packets the delay line's queue holds at most.
    #[arg(long, value_name = "PACKETS", default_value_t = 65_536)]
    pub queue_len: u32,
    /// Event-loop threads (default: the cores).
    #[arg(short = 't', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub threads: Option<u64>,
    /// Longest a connect, or a wait for an answer, may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = delay::profile::parse_duration)]
    pub timeout: Duration,
    /// Write every request's times (microseconds from the start) to this CSV file.
    #[arg(long, value_name = "FILE")]
    pub records: Option<std::path::PathBuf>,
    /// Watch the server from its packets on this interface (root; its namespace's lo, or the interface its
    /// packets cross), as the paper's ENMA did: connections in progress from SYN to close or reset, arrivals,
    /// resets, TIME_WAIT, handshake round trips per client.
    #[arg(long, value_name = "INTERFACE")]
    pub observe: Option<String>,
    /// The server's time series' interval (with --observe).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = series_interval)]
    pub interval: Duration,
    /// Write the server's time series (one row per --interval) to this CSV file (with --observe).
    #[arg(long, value_name = "FILE", requires = "observe")]
    pub series: Option<std::path::PathBuf>,
    /// Write the handshake round trips the server saw as a CDF file (RTT_MS FRACTION, with --observe).
    #[arg(long, value_name = "FILE", requires = "observe")]
    pub server_rtts: Option<std::path::PathBuf>,
    /// Pin the load threads to these CPUs (thread i to the i-th, round-robin), e.g. 1 or 0,1.
    #[arg(long, value_name = "CPU[,CPU...]", value_delimiter = ',')]
    pub cpus: Option<Vec<usize>>,
    /// Pin the delay line's thread to this CPU.
    #[arg(long, value_name = "CPU", requires = "delay")]
    pub delay_cpu: Option<usize>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A fraction from 0 to 1.
fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: a fraction from 0 to 1")),
    }
}

/// Client addresses, as `delay::clients::parse_clients` reads them.
#[derive(Clone, Debug)]
pub struct Clients(pub Vec<IpAddr>);

fn clients(s: &str) -> Result<Clients, String> {
    delay::clients::parse_clients(s).map(Clients)
}

/// A series interval: 100 ms to 1 hour.
fn series_interval(s: &str) -> Result<Duration, String> {
    let d = delay::profile::parse_duration(s)?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err(format!("{s:?}: from 100ms to 1h"));
    }
    Ok(d)
}

/// A TLS version: 1.2 or 1.3.
fn tls_version(s: &str) -> Result<TlsVersions, String> {
    match s {
        "1.2" => Ok(TlsVersions::Tls12),
        "1.3" => Ok(TlsVersions::Tls13),
        _ => Err(format!("{s:?}: 1.2 or 1.3")),
    }
}
