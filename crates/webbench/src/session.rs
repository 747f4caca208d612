//! A benchmark session: one load run, or a sweep of them (the paper's
//! experiment 2: 1, 10, 50 ... 2000 connections, 3 minutes a step, 1 minute
//! between), with the server watched throughout from its packets
//! ([`crate::tap`]) and its host's counters ([`crate::host`]). Each step
//! gives the client's results beside the server's view of its steady part
//! (the step less its first tenth, where connections build up): connections
//! in progress, arrivals, resets, TIME_WAIT, and Little's law's prediction
//! from the client's side (the server's arrival rate × the client's mean
//! connection lifetime) beside the count measured at the server.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::host::{HostWatch, ServerHost};
use crate::load::{run, unix_ns, Model, Plan, Results};
use crate::observe::{RttCheck, Window};
use crate::tap::Tap;

/// What to run.
#[derive(Clone, Debug)]
pub struct SessionPlan {
    /// The load; its model is replaced by each step's.
    pub plan: Plan,
    /// One model per step (one step: a plain run).
    pub steps: Vec<Model>,
    /// Idle time between steps.
    pub cooldown: Duration,
    /// Watch the server on this interface (its namespace's `lo`).
    pub observe: Option<String>,
    /// The time series' interval.
    pub interval: Duration,
    /// The round trip each client address was given (for the check of
    /// what the server saw).
    pub rtts: Vec<(IpAddr, Duration)>,
}

/// Little's law at the server, measured and predicted.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Little {
    /// Time-averaged connections in progress at the server.
    pub measured: f64,
    /// The server's arrival rate × the client's mean connection lifetime.
    pub predicted: f64,
    /// measured / predicted.
    pub ratio: f64,
}

/// One step's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub model: String,
    /// The connections of a closed-model step (0 for the open model).
    pub connections: usize,
    pub results: Results,
    /// The server's view of the step's steady part.
    pub server: Option<Window>,
    pub little: Option<Little>,
    pub host: ServerHost,
}

/// The tap's own counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TapStats {
    pub interface: String,
    pub packets: u64,
    pub drops: u64,
    pub segments: u64,
    pub untracked: u64,
    pub error: Option<String>,
}

/// What a session measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SessionResult {
    pub steps: Vec<Step>,
    /// The server's view per interval, seconds from the session's start.
    pub series: Vec<(f64, Window)>,
    pub tap: Option<TapStats>,
    /// Round trips the server saw against those given.
    pub rtt: Option<RttCheck>,
    /// Every handshake round trip the server saw, in µs, ascending.
    #[serde(skip)]
    pub server_rtts_us: Vec<u32>,
    /// What went wrong that makes the figures incomplete.
    pub problems: Vec<String>,
}

/// A model in words.
pub fn describe(m: &Model) -> String {
    match *m {
        Model::Closed { connections } => format!("closed, {connections} connections"),
        Model::Open { rate, poisson } => format!(
            "open, {rate}/s {}",
            if poisson { "Poisson" } else { "constant" }
        ),
    }
}

/// Waits `d` (a cooldown), or until `stop` is set.
pub fn idle(d: Duration, stop: &AtomicBool) {
    let until = std::time::Instant::now() + d;
    while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the steps in order until the last or until `stop`.
pub fn run_session(sp: &SessionPlan, stop: Arc<AtomicBool>) -> io::Result<SessionResult> {
    let port = sp.plan.target.addr.port();
    let origin = unix_ns();
    let tap = match &sp.observe {
        Some(ifc) => Some((ifc.clone(), Tap::watch(ifc, sp.plan.target.addr, origin)?)),
        None => None,
    };
    let mut steps = Vec::new();
    let mut windows = Vec::new();
    for (i, model) in sp.steps.iter().enumerate() {
        if i > 0 {
            idle(sp.cooldown, &stop);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut plan = sp.plan.clone();
        plan.model = *model;
        let watch = HostWatch::start(port);
        let results = run(&plan, Arc::clone(&stop))?;
        let host = watch.finish();
        // The step as asked (its last answers' wait left out).
        let span = plan
            .duration
            .map_or(results.seconds, |d| d.as_secs_f64().min(results.seconds));
        let from = results.start_unix_ns;
        windows.push((from, from + (span * 1e9) as u64));
        steps.push(Step {
            model: describe(model),
            connections: match model {
                Model::Closed { connections } => *connections,
                Model::Open { .. } => 0,
            },
            results,
            server: None,
            little: None,
            host,
        });
    }
    let mut out = SessionResult::default();
    let seen = tap.map(|(interface, tap)| (interface, tap.stop()));
    if let Some((interface, Err(e))) = &seen {
        out.problems
            .push(format!("{interface}: the tap's figures are lost: {e}"));
    }
    if let Some((interface, Ok(seen))) = seen {
        let o = &seen.observer;
        for (step, &(from, to)) in steps.iter_mut().zip(&windows) {
            let w = o.steady(from, to);
            let predicted = w.arrival_rate * step.results.lifetime.mean_ms / 1e3;
            step.little = Some(Little {
                measured: w.mean_in_progress,
                predicted,
                ratio: if predicted > 0.0 {
                    w.mean_in_progress / predicted
                } else {
                    0.0
                },
            });
            step.server = Some(w);
        }
        out.series = o.series(sp.interval);
        if !sp.rtts.is_empty() {
            out.rtt = Some(o.rtt_check(&sp.rtts));
        }
        out.server_rtts_us = o.all_rtts_us();
        out.problems.extend(
            seen.problems()
                .into_iter()
                .map(|p| format!("{interface}: {p}")),
        );
        out.tap = Some(TapStats {
            interface,
            packets: seen.kernel.packets,
            drops: seen.kernel.drops,
            segments: o.segments,
            untracked: o.untracked,
            error: seen.error.clone(),
        });
    }
    out.steps = steps;
    Ok(out)
}
