//! Every reading command ends the same way, because one loop runs under all
//! of them (`pipeline::run`) and one function decides the exit code
//! (`pipeline::Report::exit_code`): a cut input warns with the file and the
//! offset and exits 1; Ctrl-C leaves complete output and exits 1 with
//! "interrupted"; an input that is not a trace exits 2; an output that
//! cannot be written (a full disk) exits 3, with what was written before
//! the failure readable.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{kansoku, p, read_all, run, run_ok, Owned};

const RULES: &str = "ip filter 10 pass * * udp * *\nip filter 20 pass * * tcp * *\n";

/// The commands that read packets (or headers), with `input` as their input
/// and their outputs in `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Read,
    Stats,
    Filter,
    Profile,
    Generate,
    Match,
}

const PACKET_COMMANDS: [Cmd; 5] = [
    Cmd::Read,
    Cmd::Stats,
    Cmd::Filter,
    Cmd::Profile,
    Cmd::Generate,
];

struct Setup {
    dir: tempfile::TempDir,
    rules: PathBuf,
    /// A plain pcap of 20,000 synthetic frames (about 4.6 MB).
    trace: PathBuf,
    /// A ClassBench header trace of 20,000 lines.
    headers: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("r.rules");
    std::fs::write(&rules, RULES).unwrap();
    let trace = dir.path().join("in.pcap");
    run_ok(&[
        "synth",
        "-c",
        "20000",
        "--size",
        "64-400",
        "--compress",
        "none",
        "-w",
        p(&trace),
    ]);
    let headers = dir.path().join("in.trace");
    let mut text = String::new();
    for i in 0..20_000u32 {
        text.push_str(&format!(
            "{}\t{}\t{}\t80\t{}\t0\n",
            0x0a00_0000 + i,
            0xc0a8_0101u32,
            1024 + i % 1000,
            if i % 2 == 0 { 17 } else { 6 }
        ));
    }
    std::fs::write(&headers, text).unwrap();
    Setup {
        dir,
        rules,
        trace,
        headers,
    }
}

impl Setup {
    fn out(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The arguments of `cmd` reading `input`, writing its outputs to `out`
    /// (or to the directory when `out` is None).
    fn argv(&self, cmd: Cmd, input: &str, out: Option<&str>) -> Vec<String> {
        let o = |name: &str| out.map_or_else(|| p(&self.out(name)).to_string(), str::to_string);
        let v: Vec<String> = match cmd {
            Cmd::Read => vec!["read", "-r", input, "-w", &o("read.pcap.lz4")]
                .into_iter()
                .map(String::from)
                .collect(),
            Cmd::Stats => vec!["stats".into(), input.into()],
            Cmd::Filter => vec![
                "filter".into(),
                "-r".into(),
                input.into(),
                "--rules".into(),
                p(&self.rules).into(),
                "-w".into(),
                o("pass.pcap"),
            ],
            Cmd::Profile => vec![
                "profile".into(),
                "-r".into(),
                input.into(),
                "-i".into(),
                "1".into(),
                "-w".into(),
                o("p.agr"),
            ],
            Cmd::Generate => vec![
                "generate".into(),
                "-i".into(),
                "lo".into(),
                "-r".into(),
                input.into(),
                "-w".into(),
                o("sent.pcap"),
            ],
            Cmd::Match => vec![
                "filter".into(),
                "match".into(),
                "--rules".into(),
                p(&self.rules).into(),
                "--trace".into(),
                input.into(),
            ],
        };
        v
    }
}

/// Runs kansoku, inside a network namespace of its own for `generate`
/// (which sends on that namespace's loopback).
fn command(cmd: Cmd, argv: &[String]) -> Command {
    if cmd == Cmd::Generate {
        let mut c = Command::new("unshare");
        c.args(["-n", "bash", "-c", "ip link set lo up && exec \"$@\"", "-"]);
        c.arg(env!("CARGO_BIN_EXE_kansoku")).args(argv);
        c
    } else {
        let mut c = kansoku();
        c.args(argv);
        c
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The commands to try here: `generate` needs root for its raw socket.
fn commands(all: &[Cmd]) -> Vec<Cmd> {
    let root = testkit::require_root("generate -r");
    all.iter()
        .copied()
        .filter(|&c| c != Cmd::Generate || root)
        .collect()
}

#[test]
fn a_truncated_input_warns_with_the_file_and_offset_and_exits_1() {
    let s = setup();
    let bytes = std::fs::read(&s.trace).unwrap();
    let cut = s.out("cut.pcap");
    // In the middle of a record: 57 bytes past the 1000th packet's start.
    std::fs::write(&cut, &bytes[..bytes.len() / 2 + 57]).unwrap();
    for cmd in commands(&PACKET_COMMANDS) {
        let out = command(cmd, &s.argv(cmd, p(&cut), None)).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {e}");
        assert!(
            e.contains(&format!("{}: warning: offset ", p(&cut))),
            "{cmd:?}: {e}"
        );
        assert!(!e.contains("panicked"), "{cmd:?}: {e}");
    }
    // A header trace cut in a line, and a zstd one cut in a frame.
    let text = std::fs::read(&s.headers).unwrap();
    let cut_text = s.out("cut.trace");
    std::fs::write(&cut_text, &text[..text.len() / 2 + 5]).unwrap();
    let zst = s.out("in.trace.zst");
    let z = zstd::encode_all(&text[..], 3).unwrap();
    std::fs::write(&zst, &z[..z.len() * 2 / 3]).unwrap();
    for input in [&cut_text, &zst] {
        let out = command(Cmd::Match, &s.argv(Cmd::Match, p(input), None))
            .output()
            .unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{}: {e}", p(input));
        assert!(
            e.contains(&format!("{}: warning: offset ", p(input))),
            "{e}"
        );
        // Every line printed is a whole answer.
        let lines = String::from_utf8(out.stdout).unwrap();
        assert!(lines.lines().count() > 1000, "{}", lines.len());
        assert!(lines.lines().all(|l| l == "10" || l == "20"), "{lines}");
    }
}

#[test]
fn an_input_that_is_not_a_trace_exits_2() {
    let s = setup();
    let text = s.out("notes.txt");
    std::fs::write(&text, "this is not a capture\nat all\n").unwrap();
    let mut all = commands(&PACKET_COMMANDS);
    all.push(Cmd::Match);
    for cmd in all {
        let out = command(cmd, &s.argv(cmd, p(&text), None)).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {e}");
        assert!(e.contains("notes.txt"), "{cmd:?}: {e}");
        assert!(!e.contains("panicked"), "{cmd:?}: {e}");
    }
}

/// Sends SIGINT to `pid`.
fn interrupt(pid: u32) {
    signal(pid, "-INT");
}

/// Sends `sig` (`-INT`, `-HUP` ...) to `pid`.
fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Runs `cmd` on standard input: half the input, then the signals `sigs`
/// (10 ms apart), then the rest. The loop notices the first signal before
/// its next record, so the output ends part way, and is complete.
fn interrupted(s: &Setup, cmd: Cmd, input: &Path, sigs: &[&str]) -> Output {
    let bytes = std::fs::read(input).unwrap();
    let mut child = command(cmd, &s.argv(cmd, "-", None))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let half = bytes.len() / 2;
    // The read side stops early; a broken pipe here is fine.
    let _ = stdin.write_all(&bytes[..half]);
    std::thread::sleep(Duration::from_millis(400));
    for (i, sig) in sigs.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        signal(child.id(), sig);
    }
    std::thread::sleep(Duration::from_millis(200));
    let _ = stdin.write_all(&bytes[half..]);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// Packets of a trace kansoku wrote, insisting it is complete.
fn complete_packets(path: &Path) -> usize {
    let (records, truncated) = read_all(path);
    assert!(!truncated, "{} is cut short", p(path));
    records
        .iter()
        .filter(|r| matches!(r, Owned::Packet { .. }))
        .count()
}

#[test]
fn ctrl_c_leaves_complete_output_and_exits_1_interrupted() {
    let s = setup();
    // One SIGINT; two 10 ms apart (the second is ignored with a note, as
    // `timeout` and a quick second Ctrl-C send them); SIGHUP.
    for sigs in [&["-INT"][..], &["-INT", "-INT"], &["-HUP"]] {
        for cmd in [Cmd::Read, Cmd::Stats, Cmd::Filter, Cmd::Profile, Cmd::Match] {
            let input = if cmd == Cmd::Match {
                &s.headers
            } else {
                &s.trace
            };
            let out = interrupted(&s, cmd, input, sigs);
            let e = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{cmd:?} {sigs:?}: {e}");
            // (A command done within 10 ms of the first signal never sees
            // the second: the note is checked where the capture takes longer.)
            assert!(e.contains("interrupted"), "{cmd:?}: {e}");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            match cmd {
                Cmd::Read => {
                    let n = complete_packets(&s.out("read.pcap.lz4"));
                    assert!(n > 0 && n < 20_000, "{n}");
                }
                Cmd::Filter => {
                    let n = complete_packets(&s.out("pass.pcap"));
                    assert!(n > 0 && n < 20_000, "{n}");
                    assert!(text.contains("passed "), "the hit table is printed: {text}");
                }
                Cmd::Stats => assert!(text.contains("packets:"), "{text}"),
                Cmd::Profile => {
                    let t = std::fs::read_to_string(s.out("p.agr")).unwrap();
                    let summaries = aguri::parse_summaries(&t).expect("complete summaries");
                    assert!(!summaries.is_empty());
                }
                Cmd::Match => {
                    let n = text.lines().count();
                    assert!((4096..20_000).contains(&n), "{n}");
                    assert!(text.lines().all(|l| l == "10" || l == "20"));
                }
                Cmd::Generate => unreachable!(),
            }
        }
    }
    // generate -r, slowed to 2,000 packets a second, stopped after a while.
    if testkit::require_root("generate -r") {
        let mut argv = s.argv(Cmd::Generate, p(&s.trace), None);
        argv.extend(["--pps".to_string(), "2000".to_string()]);
        let child = command(Cmd::Generate, &argv)
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(800));
        // unshare's bash execs kansoku: the child's pid is kansoku's.
        interrupt(child.id());
        let out = child.wait_with_output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{e}");
        assert!(e.contains("interrupted"), "{e}");
        let n = complete_packets(&s.out("sent.pcap"));
        assert!(n > 100 && n < 20_000, "{n}");
    }
}

#[test]
fn an_output_that_cannot_be_written_exits_3() {
    let s = setup();
    // /dev/full: every write fails with ENOSPC.
    let mut all = commands(&PACKET_COMMANDS);
    all.push(Cmd::Match);
    for cmd in all {
        let input = if cmd == Cmd::Match {
            &s.headers
        } else {
            &s.trace
        };
        let mut c = command(cmd, &s.argv(cmd, p(input), Some("/dev/full")));
        if matches!(cmd, Cmd::Stats | Cmd::Match) {
            // These write to standard output.
            c.stdout(std::fs::File::create("/dev/full").unwrap());
        }
        let out = c.output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(3), "{cmd:?}: {e}");
        assert!(e.contains("No space left on device"), "{cmd:?}: {e}");
        assert!(!e.contains("panicked"), "{cmd:?}: {e}");
    }
    assert!(
        !Path::new("/dev/full.kidx").exists(),
        "no seek index is made beside a device"
    );
}

/// A file system that fills up part way: a 1 MiB tmpfs in a mount
/// namespace of the test's own. What was written before is readable.
#[test]
fn a_full_filesystem_keeps_every_block_written_before_the_failure() {
    if !testkit::require_root("tmpfs") {
        return;
    }
    let s = setup();
    let keep = s.out("kept");
    std::fs::create_dir(&keep).unwrap();
    let script = r#"
set -u
mkdir -p "$DIR/small"
mount -t tmpfs -o size=1m kansoku-full "$DIR/small"
$K read -r "$IN" -w "$DIR/small/r.pcap.lz4" 2> "$KEEP/r.err"; echo $? > "$KEEP/r.code"
cp "$DIR/small/r.pcap.lz4" "$KEEP/"
rm -f "$DIR/small/"*
$K filter -r "$IN" --rules "$RULES" -w "$DIR/small/f.pcap" --compress none 2> "$KEEP/f.err"; echo $? > "$KEEP/f.code"
cp "$DIR/small/f.pcap" "$KEEP/"
umount "$DIR/small"
"#;
    let out = Command::new("unshare")
        .args(["-m", "bash", "-c", script])
        .env("K", env!("CARGO_BIN_EXE_kansoku"))
        .env("DIR", s.dir.path())
        .env("IN", &s.trace)
        .env("RULES", &s.rules)
        .env("KEEP", &keep)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for (name, file) in [("r", "r.pcap.lz4"), ("f", "f.pcap")] {
        let code = std::fs::read_to_string(keep.join(format!("{name}.code"))).unwrap();
        let err = std::fs::read_to_string(keep.join(format!("{name}.err"))).unwrap();
        assert_eq!(code.trim(), "3", "{name}: {err}");
        assert!(err.contains("No space left on device"), "{err}");
        // The file holds whole blocks up to the failure: kansoku reads them
        // (the last, partly written block is reported as a cut, not an error).
        let path = keep.join(file);
        let out = run(&[
            "read",
            "-r",
            p(&path),
            "-w",
            p(&s.out(&format!("{name}.copy.pcap"))),
        ]);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
        let (records, _) = read_all(&path);
        let n = records
            .iter()
            .filter(|r| matches!(r, Owned::Packet { .. }))
            .count();
        assert!(n > 1000, "{name}: only {n} packets kept");
    }
}
