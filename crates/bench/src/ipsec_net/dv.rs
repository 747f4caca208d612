//! `--part dv`, the paper's §2.3: a constant-rate UDP stream of about
//! 3,000 packets a second over IPv6, in the clear and through ESP with
//! per-SA and per-packet keys, its packets and bytes received counted
//! second by second.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use pipeline::{Error, Report, Result};
use plot::Series;
use serde_json::json;

use crate::args::BenchIpsecArgs;
use crate::harness::table::{self, Align};
use crate::ipsec_net::netperf::Test;

use super::report::draw;
use super::{choose, dv_configs, link_rate, measure};

/// `--part dv`.
pub fn run_dv(args: &BenchIpsecArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let all = dv_configs();
    let configs = choose(&all, args.configs.as_deref())?;
    let test = Test::UdpRate {
        payload: 500,
        ip_bits_per_s: args.dv_mbit * 1e6,
    };
    let rate = link_rate(args)?;
    let (rows, gateways, problems) =
        measure(&configs, &[("dv", test)], &[6], rate.as_deref(), args, stop)?;
    if args.json {
        writeln!(
            out,
            "{}",
            json!({"part": "dv", "seconds": args.seconds, "test": test.name(), "results": rows, "gateways": gateways})
        ).map_err(Error::stdout)?;
    } else {
        writeln!(
            out,
            "# bench ipsec, part (c): a DV-like stream ({}) over IPv6\n",
            test.name()
        )
        .map_err(Error::stdout)?;
        writeln!(
            out,
            "The paper (Fig. 13-14): ESP about 30% below NONE; Blowfish about 20% below 3DES.\n"
        )
        .map_err(Error::stdout)?;
        table::header(
            out,
            &[
                ("config", Align::Left),
                ("Mbit/s", Align::Right),
                ("/ NONE", Align::Right),
                ("packets/s", Align::Right),
                ("loss", Align::Right),
                ("delay ms", Align::Right),
                ("jitter ms", Align::Right),
                ("gateway CPU A/B", Align::Right),
            ],
        )
        .map_err(Error::stdout)?;
        let none = rows
            .iter()
            .find(|r| r.config == "none")
            .map(|r| r.outcome.mbit_s);
        for r in &rows {
            let o = &r.outcome;
            table::row(
                out,
                &[
                    r.config.clone(),
                    format!("{:.2}", o.mbit_s),
                    none.filter(|n| *n > 0.0)
                        .map_or("n/a".into(), |n| format!("{:.2}", o.mbit_s / n)),
                    format!("{:.0}", o.count as f64 / o.seconds.max(1e-9)),
                    o.loss.map_or("".into(), |l| format!("{:.2}%", l * 100.0)),
                    o.delay_ms.map_or("".into(), |d| format!("{d:.3}")),
                    o.jitter_ms.map_or("".into(), |d| format!("{d:.3}")),
                    r.carrier_cpu
                        .iter()
                        .map(|c| format!("{:.1}%", c * 100.0))
                        .collect::<Vec<_>>()
                        .join("/"),
                ],
            )
            .map_err(Error::stdout)?;
        }
        writeln!(out, "\n## Per second: packets received / bytes received\n")
            .map_err(Error::stdout)?;
        let mut cols = vec![("second".to_string(), Align::Right)];
        cols.extend(rows.iter().map(|r| (r.config.clone(), Align::Right)));
        let cols_ref: Vec<(&str, Align)> = cols.iter().map(|(n, a)| (n.as_str(), *a)).collect();
        table::header(out, &cols_ref).map_err(Error::stdout)?;
        let secs = rows
            .iter()
            .map(|r| r.outcome.per_second.len())
            .max()
            .unwrap_or(0);
        for s in 0..secs {
            let mut cells = vec![(s + 1).to_string()];
            for r in &rows {
                cells.push(r.outcome.per_second.get(s).map_or(String::new(), |x| {
                    format!("{} / {:.0}", x.count, x.mbit_s * 1e6 / 8.0)
                }));
            }
            table::row(out, &cells).map_err(Error::stdout)?;
        }
    }
    if let Some(dir) = &args.plot_dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::output(pipeline::display_path(dir), &e))?;
        let series: Vec<Series> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let pts = r
                    .outcome
                    .per_second
                    .iter()
                    .enumerate()
                    .map(|(s, x)| (s as f64 + 1.0, x.count as f64))
                    .collect();
                Series::new(r.config.clone(), pts, i)
            })
            .collect();
        draw(
            &test.name(),
            6,
            &series,
            "packets received/s",
            &dir.join("ipsec-dv-v6.svg"),
        )?;
    }
    Ok(Report {
        interrupted: stop
            .load(Ordering::Relaxed)
            .then(|| "bench ipsec".to_string()),
        problems,
        ..Report::default()
    })
}
