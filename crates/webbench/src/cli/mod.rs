//! The command-line side of the benchmark (feature `cli`): `kansoku
//! webbench` and `kansoku delay` as clap arguments and the runs they ask
//! for. The `kansoku` binary embeds [`WebbenchArgs`] and [`DelayRunArgs`]
//! and takes the exit code from the [`outcome::Report`] each run returns.

use std::net::IpAddr;
use std::time::Duration;

use crate::TlsVersions;

pub mod delay_run;
pub mod webbench;

pub use delay_run::{run_delay, DelayRunArgs};
pub use webbench::{run_webbench, WebbenchArgs};

/// A fraction from 0 to 1.
pub(crate) fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: a fraction from 0 to 1")),
    }
}

/// Client addresses, as `delay::clients::parse_clients` reads them.
#[derive(Clone, Debug)]
pub struct Clients(pub Vec<IpAddr>);

pub(crate) fn clients(s: &str) -> Result<Clients, String> {
    delay::clients::parse_clients(s).map(Clients)
}

/// A series interval: 100 ms to 1 hour.
pub(crate) fn series_interval(s: &str) -> Result<Duration, String> {
    let d = delay::profile::parse_duration(s)?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err(format!("{s:?}: from 100ms to 1h"));
    }
    Ok(d)
}

/// A TLS version: 1.2 or 1.3.
pub(crate) fn tls_version(s: &str) -> Result<TlsVersions, String> {
    match s {
        "1.2" => Ok(TlsVersions::Tls12),
        "1.3" => Ok(TlsVersions::Tls13),
        _ => Err(format!("{s:?}: 1.2 or 1.3")),
    }
}
