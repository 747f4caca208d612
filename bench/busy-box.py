#!/usr/bin/env python3
"""Capture loss on a busy box: kansoku's capture (and a build of it from before a change), tcpdump.

The regime of the capture issue, with the machine kept busy meanwhile:
kansoku's own generator (`kansoku generate`, as `kansoku bench capture`
runs it) sends --packets frames of --size bytes (FCS included) with random
payload at --pps into a veth pair inside a network namespace of this
script's own (`kbb-PID`); the receiving veth's rps_cpus puts the kernel's
receive work on the capture CPU (the last one), the capture is pinned there
with taskset and the generator to another CPU. Every capture writes to a
file on ext4: kansoku `capture -i IF -B 32 -w F.pcap.lz4 --json` (lz4,
the defaults otherwise), the same with the build --kansoku-before names
(config `before`), and `tcpdump -i IF -B 32768 -w F.pcap` (with -n -Z root,
as the bench runs it).

Backgrounds, each started before a round's points under it and stopped
after them:
  idle  nothing;
  spin  one process spinning on the capture CPU;
  disk  a writer of 512 MB files with fsync in a loop (dd from /dev/urandom,
        conv=fsync) on the captures' file system, and one `xz -6 -T1` of
        /dev/urandom pinned on each CPU.

Each round runs every background, and under each every configuration (the
configurations' order rotates from round to round). Loss of a point =
(frames sent - frames in the written file) / frames sent; frames sent is
the generator's report, the file is counted with `kansoku stats --json`.
Beside it each point keeps the tool's own counts (kernel ring drops,
kansoku's writer-queue drops, ring blocks copied), the frames that reached
the receiving veth, the capture CPU's softnet backlog drops and busy share,
the capture's threads' time on the CPU and runnable but waiting for it
(/proc/PID/task/*/schedstat), the load average, and the CPU time that
someone else's build or tests took meanwhile (cargo, rustc, ... or programs
under this repository not started by this script: on a shared machine they
make the box busy too; before each point the script waits up to
--quiet-wait seconds for them to go quiet, and marks the points they
overlapped).

Scheduling: the capture, the generator and every background process each
run in a session of their own, hence (kernel.sched_autogroup_enabled=1)
in an autogroup of their own with the same weight, as on a box where they
were started apart. The generator stands in for the wire, which a busy box
does not slow down: by default it runs SCHED_FIFO (priority 1) on its CPU,
which leaves that CPU's xz little time and makes the scheduler move the
unpinned dd onto the capture CPU; with --generator normal it shares its CPU
and sends at about half the rate under `disk`. (A nice -20 generator in the
capture's own autogroup would take the group's weight off the capture CPU:
the capture got 0.05 s of CPU in 3 s beside the spinner.)

Needs root. Everything it makes (the namespace and its veth pair, the work
directory under --dir, a loop-mounted ext4 image when --dir is not on ext4,
the background processes) is removed in a `finally`, also on Ctrl-C.
Every background is bounded in time (timeout) and the dd loop in count;
the whole run stops starting points after --max-minutes.

usage: bench/busy-box.py [--rounds 3] [--packets 1000000] [--pps 200000]
         [--kansoku PATH] [--dir /tmp] [--json-out FILE] ...
Prints the per-round and median tables as Markdown on standard output.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

CONFIGS = {
    "kansoku": "kansoku capture (direct, the default)",
    "before": "kansoku capture, the build --kansoku-before names (a before-and-after in the same rounds)",
    "tcpdump": "tcpdump -w",
}
BACKGROUNDS = {
    "idle": "(a) nothing",
    "spin": "(b) one process spinning on the capture CPU",
    "disk": "(c) dd of 512 MB files with fsync in a loop, xz -6 pinned on each CPU",
}
# Processes of someone else's build: a busy box too, but not the one measured.
BUILD_COMMANDS = ("cargo", "cargo-clippy", "rustc", "clippy-driver", "rustdoc", "cc", "ld")
FOREIGN_MARK = 0.5
REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
NS_PREFIX = "kbb"
TX, RX = "kbb-tx", "kbb-rx"
LISTEN_TIMEOUT = 15.0
# After the generator is done: libpcap hands over a ring block only after
# its 1000 ms read timeout; kansoku's blocks retire after 10 ms. The same
# wait for every tool.
SETTLE = 1.5
STOP_TIMEOUT = 90.0
DD_MB = 512
DD_MAX_FILES = 200


def run(argv, timeout=60, check=True, **kw):
    """Runs argv to completion and returns its standard output as text."""
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def fs_type(path):
    """The file system type of the mount holding path (/proc/self/mountinfo)."""
    path = os.path.realpath(path)
    best, kind = "", None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            mnt = left.split()[4].replace("\\040", " ")
            inside = path == mnt or path.startswith(mnt.rstrip("/") + "/")
            if inside and len(mnt) >= len(best):
                best, kind = mnt, right.split()[0]
    return kind


class Namespace:
    """A network namespace `kbb-PID` with the veth pair kbb-tx/kbb-rx in it."""

    def __init__(self, rps_cpu):
        self.name = f"{NS_PREFIX}-{os.getpid()}"
        run(["ip", "netns", "add", self.name])
        self.exec(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                   "net.ipv6.conf.default.disable_ipv6=1"])
        self.exec(["ip", "link", "add", TX, "type", "veth", "peer", "name", RX])
        self.exec(["ip", "link", "set", TX, "up"])
        self.exec(["ip", "link", "set", RX, "up"])
        # RPS: the receiving veth's packets are processed on the capture CPU,
        # as a NIC queue's interrupt would have them.
        self.exec(["sh", "-c", f"echo {1 << rps_cpu:x} > /sys/class/net/{RX}/queues/rx-0/rps_cpus"])

    def prefix(self, cpu=None):
        argv = ["ip", "netns", "exec", self.name]
        return argv + (["taskset", "-c", str(cpu)] if cpu is not None else [])

    def exec(self, argv, timeout=30):
        return run(self.prefix() + argv, timeout=timeout)

    def counter(self, dev, name):
        return int(self.exec(["cat", f"/sys/class/net/{dev}/statistics/{name}"]).strip())

    def remove(self):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)


class WorkDir:
    """A directory on ext4 for the captures and the dd files: under --dir if
    that is ext4, else on a loop-mounted ext4 image made there."""

    def __init__(self, base, image_gib):
        self.image = self.mount = None
        tag = f"{NS_PREFIX}-busy-{os.getpid()}"
        kind = fs_type(base)
        if kind == "ext4":
            self.path = os.path.join(base, tag)
            os.makedirs(self.path)
        else:
            print(f"{base} is on {kind}, not ext4: making a {image_gib} GiB ext4 image there",
                  file=sys.stderr)
            self.image = os.path.join(base, tag + ".img")
            with open(self.image, "wb") as f:
                f.truncate(image_gib << 30)
            run(["mkfs.ext4", "-q", "-F", self.image], timeout=300)
            self.mount = os.path.join(base, tag + ".mnt")
            os.makedirs(self.mount)
            run(["mount", "-o", "loop", self.image, self.mount])
            self.path = self.mount
        self.fs = fs_type(self.path)

    def remove(self):
        if self.mount:
            subprocess.run(["umount", self.mount], capture_output=True, timeout=300)
            os.rmdir(self.mount)
            os.remove(self.image)
        else:
            shutil.rmtree(self.path, ignore_errors=True)


class Background:
    """The processes of one background, each in a session of its own so that
    stopping it ends its children (the dd under the loop's shell)."""

    def __init__(self, kind, workdir, capture_cpu, cpus, seconds):
        self.kind, self.procs, self.files = kind, [], []
        limit = ["timeout", str(int(seconds))]
        if kind == "spin":
            spin = ("import time\nend = time.monotonic() + %d\n"
                    "while time.monotonic() < end:\n    pass\n" % int(seconds))
            self.start(["taskset", "-c", str(capture_cpu), sys.executable, "-c", spin])
        elif kind == "disk":
            f = os.path.join(workdir, "dd-writer.bin")
            self.files.append(f)
            loop = (f"i=0; while [ $i -lt {DD_MAX_FILES} ]; do "
                    f"dd if=/dev/urandom of={f} bs=1M count={DD_MB} conv=fsync status=none; "
                    f"i=$((i+1)); done")
            self.start(limit + ["sh", "-c", loop])
            for cpu in range(cpus):
                with open("/dev/urandom", "rb") as src:
                    self.start(limit + ["taskset", "-c", str(cpu), "xz", "-6", "-T1", "-c"],
                               stdin=src)

    def start(self, argv, stdin=subprocess.DEVNULL):
        self.procs.append(subprocess.Popen(argv, stdin=stdin, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True))

    def check(self):
        """Raises if a background process ended early (it would not load the box)."""
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"background {self.kind}: {' '.join(p.args)} ended ({p.returncode})")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for f in self.files:
            if os.path.exists(f):
                os.remove(f)
        if self.kind == "disk":
            # Do not leave the next points a backlog of dirty pages.
            subprocess.run(["sync"], timeout=120)


class Capture:
    """A capture process pinned to the capture CPU; standard error is read on
    a thread that notes when it says it listens."""

    def __init__(self, ns, cpu, config, kansoku, tcpdump, file):
        if config == "tcpdump":
            argv = [tcpdump, "-i", RX, "-n", "-s", "262144", "-Z", "root", "-B", "32768", "-w", file]
        else:
            argv = [kansoku, "capture", "-i", RX, "-B", "32", "-w", file, "--json"]
        self.argv = argv
        self.proc = subprocess.Popen(ns.prefix(cpu) + argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.listening = threading.Event()
        self.err = []
        self.reader = threading.Thread(target=self.read_stderr, daemon=True)
        self.reader.start()
        if not self.listening.wait(LISTEN_TIMEOUT):
            self.kill()
            raise RuntimeError(f"{config}: did not start listening: {''.join(self.err).strip()}")

    def read_stderr(self):
        for line in self.proc.stderr:
            self.err.append(line)
            if "listening on" in line:
                self.listening.set()

    def stop(self):
        """SIGINT, as Ctrl-C: the tool drains what it holds and reports."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"{self.argv[0]}: did not stop within {STOP_TIMEOUT:.0f} s")
        out = self.proc.stdout.read()  # a few hundred bytes of JSON: the pipe held them
        self.reader.join(timeout=10)
        return self.proc.returncode, out, "".join(self.err)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def softnet_dropped(cpu):
    """The CPU's backlog drops (/proc/net/softnet_stat, second column)."""
    with open("/proc/net/softnet_stat") as f:
        return int(f.read().splitlines()[cpu].split()[1], 16)


def cpu_times(cpu):
    """(busy, softirq, total) jiffies of one CPU from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:9]]
                total = sum(v)
                return total - v[3] - v[4], v[6], total
    raise RuntimeError(f"cpu{cpu} not in /proc/stat")


def schedstat(pid):
    """(on CPU, runnable but waiting for it) seconds summed over the process's
    threads (/proc/PID/task/*/schedstat), threads that ended left out."""
    run_ns = wait_ns = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                r, w, _ = f.read().split()
        except (OSError, ValueError):
            continue
        run_ns, wait_ns = run_ns + int(r), wait_ns + int(w)
    return run_ns / 1e9, wait_ns / 1e9


def foreign_cpu():
    """CPU seconds so far of each process of someone else's build or tests
    (a build command by name, or a program under this repository, such as
    its test binaries) that is not a descendant of this script: pid -> (name, s)."""
    tick = os.sysconf("SC_CLK_TCK")
    me, procs = os.getpid(), {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2:].split()
        procs[int(pid)] = (name, exe, int(rest[1]), (int(rest[11]) + int(rest[12])) / tick)
    out = {}
    for pid, (name, exe, _, cpu) in procs.items():
        if name not in BUILD_COMMANDS and not exe.startswith(REPO + "/"):
            continue
        up, hops = pid, 0
        while up in procs and up != me and hops < 64:
            up, hops = procs[up][2], hops + 1
        if up != me:
            out[pid] = (name, cpu)
    return out


def foreign_since(before):
    """(CPU seconds, names) of foreign processes since the snapshot `before`
    (processes that began and ended in between are missed)."""
    now = foreign_cpu()
    used = {pid: cpu - before.get(pid, (None, 0.0))[1] for pid, (_, cpu) in now.items()}
    names = sorted({now[pid][0] for pid, s in used.items() if s > 0})
    return sum(max(s, 0.0) for s in used.values()), names


def wait_for_quiet(seconds):
    """Waits up to `seconds` (checking every second) until someone else's build
    or tests have used no CPU for a second; returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        before = foreign_cpu()
        time.sleep(1)
        if foreign_since(before)[0] < 0.02:
            break
    return time.monotonic() - start


def tcpdump_counts(stderr):
    def count(suffix):
        m = re.search(r"^\s*(\d+) " + re.escape(suffix), stderr, re.M)
        return int(m.group(1)) if m else None
    return {"said_captured": count("packets captured"),
            "kernel_packets": count("packets received by filter"),
            "kernel_drops": count("packets dropped by kernel")}


def file_packets(kansoku, path):
    out = run([kansoku, "stats", path, "--json"], timeout=300)
    return json.loads(out)["packets"]


def run_point(args, ns, work, config, background, rnd):
    ext = ".pcap" if config == "tcpdump" else ".pcap.lz4"
    file = os.path.join(work.path, f"{config}-{background}-{rnd}{ext}")
    gen_cpu, cap_cpu = args.generator_cpu, args.capture_cpu
    p = {"config": config, "background": background, "round": rnd,
         "loadavg": os.getloadavg()[0]}
    foreign0 = foreign_cpu()
    kansoku = args.kansoku_before if config == "before" else args.kansoku
    cap = Capture(ns, cap_cpu, config, kansoku, args.tcpdump, file)
    try:
        rx0, snd0, cpu0 = ns.counter(RX, "rx_packets"), softnet_dropped(cap_cpu), cpu_times(cap_cpu)
        sched0 = schedstat(cap.proc.pid)
        gen = [args.kansoku, "generate", "-i", TX, "--proto", "udp", "--json",
               "-c", str(args.packets), "--pps", str(args.pps),
               "--payload", "random", "--size", str(args.size)]
        if args.generator == "fifo":
            gen = ["chrt", "-f", "1"] + gen
        out = run(ns.prefix(gen_cpu) + gen, timeout=args.packets / args.pps * 4 + 60,
                  start_new_session=True)
        cpu1 = cpu_times(cap_cpu)
        sent = json.loads(next(l for l in out.splitlines() if l.startswith("{")))
        time.sleep(SETTLE)
        rx1, snd1 = ns.counter(RX, "rx_packets"), softnet_dropped(cap_cpu)
        sched1 = schedstat(cap.proc.pid)
        p["foreign_cpu_s"], p["builds"] = foreign_since(foreign0)
    except BaseException:
        cap.kill()
        raise
    code, out, err = cap.stop()
    jiffies = max(cpu1[2] - cpu0[2], 1)
    p.update(sent=sent["packets"], sent_pps=sent["pps"], gen_retries=sent.get("queue_full_retries", 0),
             at_interface=rx1 - rx0, softnet_drops=snd1 - snd0,
             capture_cpu_busy=(cpu1[0] - cpu0[0]) / jiffies,
             capture_cpu_softirq=(cpu1[1] - cpu0[1]) / jiffies, exit=code,
             tool_run_s=sched1[0] - sched0[0], tool_wait_s=sched1[1] - sched0[1])
    if config == "tcpdump":
        c = tcpdump_counts(err)
        if None in c.values():
            raise RuntimeError(f"tcpdump: no counts in its output: {err.strip()}")
        p.update(c, queue_drops=0)
    else:
        if code not in (0, 1):  # 1: drops happened, which is what is measured
            raise RuntimeError(f"{config}: capture failed (exit {code}): {err.strip()}")
        s = json.loads(next(l for l in out.splitlines() if l.startswith("{")))
        p.update(said_captured=s["written"], kernel_packets=s["kernel_packets"],
                 kernel_drops=s["kernel_drops"], queue_drops=s["dropped_kansoku"],
                 kernel_freezes=s.get("kernel_freezes"),
                 blocks_in_place=s.get("ring_blocks_in_place"),
                 blocks_copied=s.get("ring_blocks_copied"),
                 write_s=s.get("output", {}).get("write_ns", 0) / 1e9)
        # Where the lane waited (builds that report it): the rescuer's copies,
        # its longest stall, the writer's time blocked on the file system.
        lanes = s.get("lanes") or []
        if lanes:
            writers = [ln.get("writer") or {} for ln in lanes]
            p.update(blocks_rescued=sum(ln["ring_blocks_rescued"] for ln in lanes),
                     longest_stall_ms=max(ln["longest_stall_ms"] for ln in lanes),
                     blocked_s=sum(w.get("blocked_ms", 0) for w in writers) / 1e3,
                     longest_block_ms=max(w.get("longest_block_ms", 0) for w in writers))
    p["in_file"] = file_packets(args.kansoku, file)
    for f in (file, file + ".kidx"):
        if os.path.exists(f):
            os.remove(f)
    p["loss"] = max(p["sent"] - p["in_file"], 0) / p["sent"] if p["sent"] else None
    return p


def pct(x):
    return "-" if x is None else f"{100 * x:.2f}"


def report(points, args, command, incomplete):
    """The Markdown tables: loss per round and medians, kansoku's drops, the load."""
    def cell(cfg, bg):
        return sorted((q for q in points if q["config"] == cfg and q["background"] == bg),
                      key=lambda q: q["round"])

    def med(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    cfgs, bgs = args.configs, args.backgrounds
    o = [f"Command: `{command}`", "",
         f"{args.packets:,} frames of {args.size} bytes (random payload) at {args.pps:,} pps a point; "
         f"capture CPU {args.capture_cpu} (RPS there), generator CPU {args.generator_cpu}; "
         f"files on {args.fs}; {args.rounds} rounds" + (" (INCOMPLETE: stopped early)" if incomplete else ""),
         "", "Configurations: " + "; ".join(f"{k}: {v}" for k, v in CONFIGS.items() if k in cfgs) + ".",
         "Backgrounds: " + "; ".join(f"{k}: {v}" for k, v in BACKGROUNDS.items() if k in bgs) + ".",
         "", "Loss % = (sent - frames in the file) / sent, per round and the median "
         f"(* someone else's build or tests used more than {FOREIGN_MARK} CPU s during the point):", "",
         "| background | config | " + " | ".join(f"round {r + 1}" for r in range(args.rounds)) + " | median |",
         "|---|---|" + "---:|" * (args.rounds + 1)]
    medians = {}
    for bg in bgs:
        for cfg in cfgs:
            qs = cell(cfg, bg)
            by_round = {q["round"]: pct(q["loss"]) + ("*" if q["foreign_cpu_s"] > FOREIGN_MARK else "")
                        for q in qs}
            medians[bg, cfg] = med([q["loss"] for q in qs])
            o.append(f"| {bg} | {cfg} | " + " | ".join(by_round.get(r, "-") for r in range(1, args.rounds + 1))
                     + f" | **{pct(medians[bg, cfg])}** |")
    o += ["", "Median loss % (rows: background; before / now: the ratio of the medians):", "",
          "| background | " + " | ".join(cfgs) + " | before / now |", "|---|" + "---:|" * (len(cfgs) + 1)]
    for bg in bgs:
        d, r = medians.get((bg, "kansoku")), medians.get((bg, "before"))
        ratio = "-" if d is None or r is None else ("both 0" if d == r == 0 else
                                                    "inf" if d == 0 else f"{r / d:.2f}x")
        o.append(f"| {bg} | " + " | ".join(pct(medians[bg, c]) for c in cfgs) + f" | {ratio} |")
    o += ["", "Where the frames went, per point (round: sent / at the veth / ring drops + queue drops "
          "/ in the file; blocks copied; generator pps):", ""]
    for bg in bgs:
        for cfg in cfgs:
            for q in cell(cfg, bg):
                copied = "" if q.get("blocks_copied") is None else f", {q['blocks_copied']} blocks copied"
                said = "" if q["said_captured"] == q["in_file"] else f" (the tool said {q['said_captured']:,})"
                o.append(f"- {bg} {cfg} r{q['round']}: {q['sent']:,} / {q['at_interface']:,} / "
                         f"{q['kernel_drops']:,} + {q['queue_drops']:,} / {q['in_file']:,}{said}{copied}; "
                         f"{q['sent_pps']:,.0f} pps, softnet drops {q['softnet_drops']}, "
                         f"capture CPU busy {100 * q['capture_cpu_busy']:.0f}% "
                         f"(softirq {100 * q['capture_cpu_softirq']:.0f}%), tool on CPU {q['tool_run_s']:.2f} s, "
                         f"waiting for it {q['tool_wait_s']:.2f} s"
                         + ("" if q.get("write_s") is None else f", in write {q['write_s']:.2f} s")
                         + ("" if q.get("blocked_s") is None else
                            f", blocked on the file {q['blocked_s']:.2f} s (longest {q['longest_block_ms']:.1f} ms), "
                            f"{q['blocks_rescued']} blocks rescued, longest stall {q['longest_stall_ms']:.1f} ms")
                         + f", load {q['loadavg']:.2f}"
                         + (f", FOREIGN {q['foreign_cpu_s']:.1f} CPU s ({','.join(q['builds'])})"
                            if q["builds"] else ""))
    return "\n".join(o)


def on_sigterm(_signum, _frame):
    raise KeyboardInterrupt  # the same cleanup as Ctrl-C


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--packets", type=int, default=1_000_000, help="frames a point")
    ap.add_argument("--pps", type=int, default=200_000, help="offered load, frames/s")
    ap.add_argument("--size", type=int, default=1518, help="frame size, FCS included")
    ap.add_argument("--configs", default="kansoku,tcpdump", help="of: " + ", ".join(CONFIGS))
    ap.add_argument("--backgrounds", default=",".join(BACKGROUNDS), help="of: " + ", ".join(BACKGROUNDS))
    ap.add_argument("--generator", choices=("fifo", "normal"), default="fifo",
                    help="the generator's scheduling: SCHED_FIFO 1 (it stands in for the wire, which a "
                         "busy box does not slow down), or normal (a background on its CPU then "
                         "takes half its rate)")
    ap.add_argument("--kansoku", default=os.environ.get("KANSOKU", "target/release/kansoku"))
    ap.add_argument("--kansoku-before", help="the build config `before` runs (a change's before-and-after)")
    ap.add_argument("--tcpdump", default="tcpdump")
    ap.add_argument("--dir", default="/tmp", help="where the files go (an ext4 image is made there if it is not ext4)")
    ap.add_argument("--image-gib", type=int, default=8, help="size of that image")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds a background runs before its first point")
    ap.add_argument("--quiet-wait", type=float, default=60.0,
                    help="seconds to wait at most, before each point, while someone else's build or "
                         "tests use the CPU")
    ap.add_argument("--max-minutes", type=float, default=25.0, help="start no point after this")
    ap.add_argument("--json-out", help="save every point's figures here")
    args = ap.parse_args()
    args.configs = args.configs.split(",")
    args.backgrounds = args.backgrounds.split(",")
    bad = [c for c in args.configs if c not in CONFIGS] + [b for b in args.backgrounds if b not in BACKGROUNDS]
    if bad or args.rounds < 1 or args.packets < 1 or args.pps < 1:
        ap.error(f"bad arguments {bad or ''}")
    if "before" in args.configs and not args.kansoku_before:
        ap.error("config before needs --kansoku-before")
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces, RPS, captures)")
    cpus = os.cpu_count() or 1
    if cpus < 2:
        ap.error("needs two CPUs: one for the capture, one for the generator")
    args.capture_cpu, args.generator_cpu = cpus - 1, 0
    command = " ".join(["python3", "bench/busy-box.py"] + sys.argv[1:])
    signal.signal(signal.SIGTERM, on_sigterm)

    start = time.monotonic()
    deadline = start + args.max_minutes * 60
    ns = work = bg = None
    points, incomplete, failed = [], False, False
    try:
        work = WorkDir(args.dir, args.image_gib)
        args.fs = f"{work.fs} ({work.path})"
        ns = Namespace(args.capture_cpu)
        for rnd in range(1, args.rounds + 1):
            shift = (rnd - 1) % len(args.configs)
            order = args.configs[shift:] + args.configs[:shift]
            for background in args.backgrounds:
                if time.monotonic() > deadline:
                    incomplete = True
                    break
                bg = Background(background, work.path, args.capture_cpu, cpus,
                                max(deadline - time.monotonic(), 0) + 120)
                time.sleep(args.warmup)
                for config in order:
                    if time.monotonic() > deadline:
                        incomplete = True
                        break
                    waited = wait_for_quiet(min(args.quiet_wait, max(deadline - time.monotonic(), 0)))
                    bg.check()
                    p = run_point(args, ns, work, config, background, rnd)
                    p["waited_s"] = waited
                    points.append(p)
                    print(f"round {rnd} {background:5} {config:12} loss {pct(p['loss']):>6}%  "
                          f"(sent {p['sent']:,} at {p['sent_pps']:,.0f} pps, file {p['in_file']:,}, "
                          f"ring drops {p['kernel_drops']:,}, queue drops {p['queue_drops']:,}) "
                          f"[{time.monotonic() - start:.0f} s]", file=sys.stderr)
                bg.stop()
                bg = None
    except KeyboardInterrupt:
        incomplete = True
        print("interrupted", file=sys.stderr)
    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        incomplete = failed = True
        print(f"failed: {e}", file=sys.stderr)
    finally:
        try:
            if bg:
                bg.stop()
        finally:
            try:
                if ns:
                    ns.remove()
            finally:
                if work:
                    work.remove()
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"command": command, "points": points}, f, indent=1)
    if points:
        print(report(points, args, command, incomplete))
    print(f"{len(points)} points in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return 2 if failed else 1 if incomplete else 0


if __name__ == "__main__":
    sys.exit(main())
