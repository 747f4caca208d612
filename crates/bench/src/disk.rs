//! `kansoku bench disk`: sequential write throughput of a directory's file
//! system, as Tsukahara et al. measured its capture disk with `dd` (Table 5: 1024
//! writes of 1 MB, and one write of 1 GB or 2 GB), and the compressor speed
//! Shimizu et al. 2006's condition `T_c > T_d / (1 - r)` asks for at that `T_d`.
//!
//! Each mode writes the same pseudo-random bytes (so a compressing file system
//! cannot flatter the figure) to a fresh file in the directory, times it, and
//! removes the file. Modes without fsync measure what `write()` costs the
//! writer (the page cache absorbs it until dirty limits bite); modes with fsync
//! include getting the bytes to the device, which is the sustained rate `T_d`
//! of Shimizu et al. 2006's condition. Between runs the file is synced untimed, so one
//! run's dirty pages are not written back during the next one's timing. The
//! table carries a baseline from the same run: memcpy of the same bytes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use pipeline::{display_path, Error, Report, Result};
use serde_json::{json, Value};

use crate::args::BenchDiskArgs;
use crate::harness::stats::{compressor_needed, mb_per_s, median};
use crate::harness::table::{self, Align};

/// Bytes per `write()` call in the 1 MiB modes, as `dd bs=1M`.
pub const WRITE_SIZE: usize = 1 << 20;
/// Alignment O_DIRECT asks of buffers and offsets on common file systems.
const DIRECT_ALIGN: usize = 4096;
/// Compression ratios for which the needed compressor speed is printed.
const PAPER_RATIOS: [f64; 3] = [0.2, 0.5, 0.9];

/// How the file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskMode {
    /// 1 MiB `write()` calls, no sync (`dd bs=1M`).
    Writes1M,
    /// 1 MiB `write()` calls, then `fsync` (`dd bs=1M conv=fsync`).
    Writes1MFsync,
    /// One `write()` of the whole buffer, no sync (`dd bs=1000M count=1`).
    Single,
    /// One `write()` of the whole buffer, then `fsync`.
    SingleFsync,
    /// 1 MiB writes with O_DIRECT (bypassing the page cache), then `fsync`.
    Direct1M,
}

impl DiskMode {
    pub const ALL: [DiskMode; 5] = [
        DiskMode::Writes1M,
        DiskMode::Writes1MFsync,
        DiskMode::Single,
        DiskMode::SingleFsync,
        DiskMode::Direct1M,
    ];

    /// Short name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            DiskMode::Writes1M => "1MiB-writes",
            DiskMode::Writes1MFsync => "1MiB-writes+fsync",
            DiskMode::Single => "single-write",
            DiskMode::SingleFsync => "single-write+fsync",
            DiskMode::Direct1M => "1MiB-writes+O_DIRECT+fsync",
        }
    }

    fn fsync(self) -> bool {
        !matches!(self, DiskMode::Writes1M | DiskMode::Single)
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct DiskConfig {
    /// Directory the test files are written in.
    pub dir: PathBuf,
    /// Bytes written per run; a multiple of [`WRITE_SIZE`].
    pub size: usize,
    /// Runs per mode; the median is reported.
    pub runs: usize,
}

/// One mode's outcome.
#[derive(Clone, Debug)]
pub struct ModeResult {
    pub mode: DiskMode,
    /// MB/s of each run, in order.
    pub runs: Vec<f64>,
    /// Median of `runs`.
    pub median: f64,
    /// Why the mode could not run here (O_DIRECT on tmpfs, say); `runs` is then empty.
    pub unsupported: Option<String>,
}

/// All modes, and the baseline: copying the same bytes in memory.
#[derive(Clone, Debug)]
pub struct DiskReport {
    pub modes: Vec<ModeResult>,
    /// MB/s of `memcpy` of the buffer, 1 MiB at a time, median of the runs:
    /// the ceiling any `write()` into the page cache is held to.
    pub memcpy: f64,
}

/// Removes the test file however the run ends.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// A buffer of `size` pseudo-random bytes starting at a [`DIRECT_ALIGN`]
/// boundary: returns the backing vector and the offset of the aligned start.
fn aligned_buffer(size: usize) -> io::Result<(Vec<u8>, usize)> {
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(size + DIRECT_ALIGN).map_err(|_| {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("cannot allocate a {} MiB buffer", size >> 20),
        )
    })?;
    v.resize(size + DIRECT_ALIGN, 0);
    let off = v.as_ptr().align_offset(DIRECT_ALIGN).min(DIRECT_ALIGN);
    // xorshift64: cheap bytes that no file system compresses.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for c in v[off..off + size].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
    Ok((v, off))
}

/// Times one run of `mode`, writing `data` to a new file at `path`.
fn run_once(mode: DiskMode, data: &[u8], path: &Path) -> io::Result<f64> {
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    if mode == DiskMode::Direct1M {
        opts.custom_flags(libc::O_DIRECT);
    }
    let file = opts.open(path)?;
    let _guard = TempFile(path.to_path_buf());
    let mut f: &File = &file;
    let start = Instant::now();
    match mode {
        DiskMode::Single | DiskMode::SingleFsync => {
            // Linux moves at most 0x7ffff000 bytes per write(); write_all
            // issues the rest, so sizes past 2 GiB take more than one call.
            f.write_all(data)?;
        }
        _ => {
            for piece in data.chunks(WRITE_SIZE) {
                f.write_all(piece)?;
            }
        }
    }
    if mode.fsync() {
        file.sync_all()?;
    }
    let secs = start.elapsed().as_secs_f64();
    if !mode.fsync() {
        // Untimed: leave no dirty pages to slow down the next run.
        file.sync_all()?;
    }
    Ok(mb_per_s(data.len() as u64, secs))
}

/// Runs every mode `cfg.runs` times. An O_DIRECT failure marks that mode
/// unsupported; any other I/O error ends the benchmark. `stop` is polled
/// between runs; once set, the benchmark ends with `ErrorKind::Interrupted`
/// (the test file of the current run is removed either way).
pub fn measure(cfg: &DiskConfig, stop: &AtomicBool) -> io::Result<DiskReport> {
    let (buf, off) = aligned_buffer(cfg.size)?;
    let data = &buf[off..off + cfg.size];
    let runs = cfg.runs.max(1);

    let mut dst = vec![0u8; WRITE_SIZE];
    let mut copies = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        for piece in data.chunks(WRITE_SIZE) {
            let d = &mut dst[..piece.len()];
            d.copy_from_slice(piece);
            std::hint::black_box(&mut *d);
        }
        copies.push(mb_per_s(data.len() as u64, start.elapsed().as_secs_f64()));
    }

    let mut modes = Vec::new();
    for mode in DiskMode::ALL {
        let mut r = ModeResult {
            mode,
            runs: Vec::new(),
            median: 0.0,
            unsupported: None,
        };
        for i in 0..runs {
            if stop.load(Ordering::Relaxed) {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
            }
            let path = cfg.dir.join(format!(
                ".kansoku-bench-disk-{}-{}-{i}.tmp",
                std::process::id(),
                modes.len()
            ));
            match run_once(mode, data, &path) {
                Ok(v) => r.runs.push(v),
                Err(e) if mode == DiskMode::Direct1M => {
                    r.unsupported = Some(format!("O_DIRECT not usable here: {e}"));
                    r.runs.clear();
                    break;
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{}: mode {}: {e}", path.display(), mode.name()),
                    ))
                }
            }
        }
        r.median = median(&r.runs);
        modes.push(r);
    }
    Ok(DiskReport {
        modes,
        memcpy: median(&copies),
    })
}

/// `kansoku bench disk`: measures, then prints the tables (or JSON) to `out`.
pub fn run(args: &BenchDiskArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let meta = fs::metadata(&args.dir).map_err(|e| Error::file(&args.dir, e))?;
    if !meta.is_dir() {
        return Err(Error::file(
            &args.dir,
            "not a directory (expected --dir DIR)",
        ));
    }
    let cfg = DiskConfig {
        dir: args.dir.clone(),
        size: usize::try_from(args.size << 20)
            .map_err(|_| Error::usage(format!("--size {} MiB is too large here", args.size)))?,
        runs: args.runs as usize,
    };
    let rep = match measure(&cfg, stop) {
        Ok(rep) => rep,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {
            return Ok(Report {
                problems: vec!["bench disk: interrupted".to_string()],
                ..Report::default()
            })
        }
        Err(e) if e.kind() == io::ErrorKind::OutOfMemory => {
            return Err(Error::usage(format!("--size {} MiB: {e}", args.size)))
        }
        Err(e) => return Err(Error::output(display_path(&args.dir), &e)),
    };
    if args.json {
        print_json(out, args, &rep).map_err(Error::stdout)?;
    } else {
        print_tables(out, args, &rep).map_err(Error::stdout)?;
    }
    Ok(Report::default())
}

fn print_json(out: &mut dyn Write, args: &BenchDiskArgs, rep: &DiskReport) -> io::Result<()> {
    let needed = |td: f64| -> Value {
        let mut m = serde_json::Map::new();
        for r in PAPER_RATIOS {
            m.insert(format!("{r}"), json!(compressor_needed(td, r)));
        }
        Value::Object(m)
    };
    let modes: Vec<Value> = rep
        .modes
        .iter()
        .map(|m| {
            json!({
                "mode": m.mode.name(),
                "mb_per_s": m.unsupported.is_none().then_some(m.median),
                "runs_mb_per_s": m.runs,
                "vs_memcpy": m.unsupported.is_none().then(|| m.median / rep.memcpy),
                "unsupported": m.unsupported,
                "tc_needed_mb_per_s": m.unsupported.is_none().then(|| needed(m.median)),
            })
        })
        .collect();
    let v = json!({
        "dir": display_path(&args.dir),
        "size_mib": args.size,
        "runs": args.runs,
        "mb": "10^6 bytes",
        "memcpy_mb_per_s": rep.memcpy,
        "modes": modes,
    });
    writeln!(out, "{v}")
}

fn print_tables(out: &mut dyn Write, args: &BenchDiskArgs, rep: &DiskReport) -> io::Result<()> {
    writeln!(
        out,
        "# kansoku bench disk: {}, {} MiB per run, median of {} run(s); MB = 10^6 bytes",
        display_path(&args.dir),
        args.size,
        args.runs
    )?;
    writeln!(out)?;
    table::header(
        out,
        &[
            ("mode", Align::Left),
            ("MB/s", Align::Right),
            ("runs (MB/s)", Align::Left),
            ("vs memcpy", Align::Right),
        ],
    )?;
    table::row(
        out,
        &[
            "memcpy, 1 MiB at a time (baseline)".to_string(),
            format!("{:.1}", rep.memcpy),
            String::new(),
            "1.000".to_string(),
        ],
    )?;
    for m in &rep.modes {
        match &m.unsupported {
            Some(why) => table::row(out, &[m.mode.name(), "-", why.as_str(), "-"])?,
            None => {
                let runs: Vec<String> = m.runs.iter().map(|r| format!("{r:.1}")).collect();
                table::row(
                    out,
                    &[
                        m.mode.name().to_string(),
                        format!("{:.1}", m.median),
                        runs.join(" "),
                        format!("{:.3}", m.median / rep.memcpy),
                    ],
                )?;
            }
        }
    }
    writeln!(out)?;
    writeln!(
        out,
        "# Shimizu et al. 2006, eq. (2): compressing before writing pays when T_c > T_d / (1 - r);"
    )?;
    writeln!(
        out,
        "# T_c needed for each measured T_d (the +fsync modes are the sustained disk rate)."
    )?;
    writeln!(out)?;
    table::header(
        out,
        &[
            ("T_d from", Align::Left),
            ("T_d MB/s", Align::Right),
            ("T_c at r=0.2", Align::Right),
            ("T_c at r=0.5", Align::Right),
            ("T_c at r=0.9", Align::Right),
        ],
    )?;
    for m in rep.modes.iter().filter(|m| m.unsupported.is_none()) {
        let mut cells = vec![m.mode.name().to_string(), format!("{:.1}", m.median)];
        cells.extend(
            PAPER_RATIOS
                .iter()
                .map(|&r| format!("{:.1}", compressor_needed(m.median, r).unwrap_or(f64::NAN))),
        );
        table::row(out, &cells)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_aligned_and_not_constant() {
        let (v, off) = aligned_buffer(1 << 16).unwrap();
        assert_eq!((v.as_ptr() as usize + off) % DIRECT_ALIGN, 0);
        assert_ne!(v[off], v[off + 1]);
    }

    #[test]
    fn writes_and_removes_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = DiskConfig {
            dir: dir.path().to_path_buf(),
            size: 2 << 20,
            runs: 1,
        };
        let rep = measure(&cfg, &AtomicBool::new(false)).unwrap();
        assert_eq!(rep.modes.len(), DiskMode::ALL.len());
        for m in &rep.modes {
            if m.unsupported.is_none() {
                assert!(m.median > 0.0, "{:?}", m);
            }
        }
        assert!(rep.memcpy > 0.0);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        let stopped = measure(&cfg, &AtomicBool::new(true)).unwrap_err();
        assert_eq!(stopped.kind(), io::ErrorKind::Interrupted);
    }

    fn args(dir: &Path, json: bool) -> BenchDiskArgs {
        BenchDiskArgs {
            dir: dir.to_path_buf(),
            size: 1,
            runs: 1,
            json,
        }
    }

    #[test]
    fn prints_the_tables_and_the_paper_condition() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Vec::new();
        let r = run(&args(dir.path(), false), &AtomicBool::new(false), &mut out).unwrap();
        assert_eq!(r.exit_code(), pipeline::ExitCode::Ok);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("| mode | MB/s | runs (MB/s) | vs memcpy |\n|---|---:|---|---:|\n| memcpy, 1 MiB at a time (baseline) | "), "{text}");
        assert!(text.contains(" | | 1.000 |\n"), "{text}");
        assert!(text.contains("T_c > T_d / (1 - r)"), "{text}");
        assert!(text.contains("| T_d from | T_d MB/s | T_c at r=0.2 | T_c at r=0.5 | T_c at r=0.9 |\n|---|---:|---:|---:|---:|\n"), "{text}");
        assert!(text.contains("| 1MiB-writes+fsync |"), "{text}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn json_has_the_paper_condition_per_mode() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Vec::new();
        run(&args(dir.path(), true), &AtomicBool::new(false), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert!(v["memcpy_mb_per_s"].as_f64().unwrap() > 0.0);
        let m = &v["modes"][1];
        assert_eq!(m["mode"], "1MiB-writes+fsync");
        let td = m["mb_per_s"].as_f64().unwrap();
        let tc = m["tc_needed_mb_per_s"]["0.5"].as_f64().unwrap();
        assert!((tc - 2.0 * td).abs() < 1e-6 * td);
    }

    #[test]
    fn a_missing_directory_is_an_input_error_and_a_stop_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let e = run(
            &args(&missing, false),
            &AtomicBool::new(false),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), pipeline::ExitCode::Usage);
        let mut out = Vec::new();
        let r = run(&args(dir.path(), false), &AtomicBool::new(true), &mut out).unwrap();
        assert_eq!(r.exit_code(), pipeline::ExitCode::Problems);
        assert!(out.is_empty());
    }
}
