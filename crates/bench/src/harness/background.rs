//! Background loads that keep a box busy while a capture is measured (the
//! busy-box regimes of bench/busy-box-results.md): a process spinning on
//! the capture's CPU, a writer of 512 MB files with `fsync` on the
//! captures' file system, one `xz -6` on each CPU, and a small C build
//! (two compiler jobs, as `make -j2` runs them).
//!
//! Each process runs in a session of its own (`setsid`), as a user's
//! programs do: the scheduler's autogroups then share a CPU between the
//! sessions, not between the threads, and stopping a load ends its
//! children (the `dd` under the writer's shell) with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pipeline::{Error, Result};

use crate::args::BackgroundLoad;

/// Megabytes of each file the fsync writer writes, and the most files one
/// run writes (a bound, not a target: the bench stops it long before).
const WRITER_MB: u32 = 512;
const WRITER_FILES: u32 = 10_000;

/// Compiler jobs of the build load, and the most builds each makes.
const BUILD_JOBS: usize = 2;
const BUILDS: u32 = 100_000;

/// The running loads; dropping it stops them, removes the writer's file
/// and syncs, so that the next measurement inherits no dirty pages.
pub struct Background {
    procs: Vec<(String, Child)>,
    files: Vec<PathBuf>,
}

impl BackgroundLoad {
    pub fn name(self) -> &'static str {
        match self {
            BackgroundLoad::Spin => "spin",
            BackgroundLoad::FsyncWriter => "fsync-writer",
            BackgroundLoad::CpuHogs => "cpu-hogs",
            BackgroundLoad::Build => "build",
        }
    }
}

impl Background {
    /// Starts `loads` (none: an empty background): the writer's file in
    /// `dir`, the spinner on `capture_cpu` (CPU 0 without one), a hog on
    /// each of `cpus`.
    pub fn start(
        loads: &[BackgroundLoad],
        dir: &Path,
        capture_cpu: Option<usize>,
        cpus: usize,
    ) -> Result<Background> {
        let mut bg = Background {
            procs: Vec::new(),
            files: Vec::new(),
        };
        for &load in loads {
            match load {
                BackgroundLoad::Spin => {
                    let cpu = capture_cpu.unwrap_or(0).to_string();
                    bg.spawn(
                        load,
                        &["taskset", "-c", &cpu, "sh", "-c", "while :; do :; done"],
                    )?;
                }
                BackgroundLoad::FsyncWriter => {
                    let file = dir.join("background-fsync-writer.bin");
                    let script = format!(
                        "i=0; while [ $i -lt {WRITER_FILES} ]; do \
                         dd if=/dev/urandom of='{}' bs=1M count={WRITER_MB} conv=fsync status=none; \
                         i=$((i+1)); done",
                        file.display()
                    );
                    bg.files.push(file);
                    bg.spawn(load, &["sh", "-c", &script])?;
                }
                BackgroundLoad::Build => {
                    let src = dir.join("background-build.c");
                    std::fs::write(&src, c_source()).map_err(|e| {
                        Error::input(format!("background build: writing {}: {e}", src.display()))
                    })?;
                    bg.files.push(src.clone());
                    for job in 0..BUILD_JOBS {
                        let obj = dir.join(format!("background-build-{job}.o"));
                        let script = format!(
                            "i=0; while [ $i -lt {BUILDS} ]; do cc -O2 -c '{}' -o '{}'; i=$((i+1)); done",
                            src.display(),
                            obj.display()
                        );
                        bg.files.push(obj);
                        bg.spawn(load, &["sh", "-c", &script])?;
                    }
                }
                BackgroundLoad::CpuHogs => {
                    for cpu in 0..cpus {
                        let cpu = cpu.to_string();
                        bg.spawn(
                            load,
                            &[
                                "taskset",
                                "-c",
                                &cpu,
                                "sh",
                                "-c",
                                "exec xz -6 -T1 -c < /dev/urandom > /dev/null",
                            ],
                        )?;
                    }
                }
            }
        }
        Ok(bg)
    }

    fn spawn(&mut self, load: BackgroundLoad, argv: &[&str]) -> Result<()> {
        let child = Command::new("setsid")
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                Error::input(format!("background {}: setsid {argv:?}: {e}", load.name()))
            })?;
        self.procs.push((load.name().to_string(), child));
        Ok(())
    }

    /// An error if a load has ended: the box would no longer be as busy as
    /// the measurement says (a missing `xz`, a full disk).
    pub fn check(&mut self) -> Result<()> {
        for (name, child) in &mut self.procs {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(Error::input(format!(
                    "background {name}: a process ended early ({status})"
                )));
            }
        }
        Ok(())
    }

    /// Whether any load runs.
    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // `setsid` made each child the leader of its own process group:
        // the group's signal reaches its children too.
        for (_, child) in &self.procs {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
        }
        for (_, child) in &mut self.procs {
            let _ = child.wait();
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        if !self.files.is_empty() {
            let _ = Command::new("sync").status();
        }
    }
}

/// A C source that keeps the compiler busy for a while at -O2 (12 s on
/// the 2-core VM): three thousand small functions with loops to optimise.
fn c_source() -> String {
    (0..3000)
        .map(|i| {
            format!(
                "int f{i}(const int *a, int n) {{ int s = {i}; \
                 for (int j = 0; j < n; j++) s = s * 31 + a[j] * {i}; return s; }}\n"
            )
        })
        .collect()
}

/// How long a background runs before the first point under it: the
/// writer's first file and the hogs' caches are under way.
pub const WARMUP: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    }

    #[test]
    fn loads_run_until_dropped_and_leave_no_process_or_file() {
        let dir = tempfile::tempdir().unwrap();
        let loads = [
            BackgroundLoad::Spin,
            BackgroundLoad::FsyncWriter,
            BackgroundLoad::CpuHogs,
            BackgroundLoad::Build,
        ];
        let mut bg = Background::start(&loads, dir.path(), Some(0), 2).unwrap();
        // The spinner, the writer, a hog on each of two CPUs, two builds.
        assert_eq!(bg.procs.len(), 6);
        std::thread::sleep(Duration::from_millis(500));
        bg.check().unwrap();
        let pids: Vec<u32> = bg.procs.iter().map(|(_, c)| c.id()).collect();
        assert!(pids.iter().all(|&p| alive(p)));
        let file = dir.path().join("background-fsync-writer.bin");
        assert!(file.exists(), "the writer writes its file");
        let src = dir.path().join("background-build.c");
        assert!(src.exists(), "the build has its source");
        drop(bg);
        assert!(pids.iter().all(|&p| !alive(p)), "every load stopped");
        assert!(
            !file.exists() && !src.exists(),
            "the loads' files are removed"
        );
    }

    #[test]
    fn a_load_that_ends_early_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut bg = Background::start(&[], dir.path(), None, 1).unwrap();
        assert!(bg.is_empty());
        bg.spawn(BackgroundLoad::Spin, &["true"]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let e = bg.check().unwrap_err();
        assert!(e.to_string().contains("ended early"), "{e}");
    }
}
