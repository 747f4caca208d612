#!/usr/bin/env python3
"""Medians of several rounds of `kansoku bench capture`.

Each round runs every configuration at every load (in the order the bench
runs them); the figures quoted are the medians over the rounds of each
point's capture rate, of each configuration's maximum loss-free load (a
round without one counts as 0), and of its CPU time per packet written.
The maximum loss-free loads are also given as ratios to tcpdump's and
netsniff-ng's of the same rounds.

usage: capture-rounds.py ROUNDS [kansoku bench capture arguments ...]
  e.g. capture-rounds.py 5 --loads 300000,400000,500000 --packets 300000 \
       --size 1518 --payload random --configs lz4,netsniff,tcpdump \
       --kernel-rx-on-capture-core
The kansoku binary is $KANSOKU, else target/release/kansoku; with
$ROUNDS_JSON set, every round's JSON is saved there (a list).
"""
import json
import os
import statistics
import subprocess
import sys


def main():
    if len(sys.argv) < 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        print(__doc__, file=sys.stderr)
        return 2
    rounds = int(sys.argv[1])
    args = sys.argv[2:]
    exe = os.environ.get("KANSOKU", "target/release/kansoku")
    runs = []
    for r in range(rounds):
        out = subprocess.run([exe, "bench", "capture", "--json", *args],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        runs.append(json.loads(out.stdout))
        print(f"round {r + 1} of {rounds} done", file=sys.stderr)
    if os.environ.get("ROUNDS_JSON"):
        with open(os.environ["ROUNDS_JSON"], "w") as f:
            json.dump(runs, f)
    first = runs[0]
    names = [c["config"] for c in first["configs"]]
    loads = [p["load_pps"] for p in first["configs"][0]["points"]]

    def per(name):
        return [next(c for c in run["configs"] if c["config"] == name) for run in runs]

    def med(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    print(f"medians of {rounds} rounds: size {first['size']}, payload {first['payload']}, "
          f"{first['packets_per_point']} packets a point, ring {first['ring_mib']} MiB, "
          f"kernel receive work on the capture core: {first['kernel_rx_on_capture_core']}")
    head = "config".ljust(12) + "".join(f"{int(l):>10}" for l in loads)
    print("capture rate (written/sent) at the asked load")
    print(head + "  max loss-free (median)   per round")
    best = {}
    for n in names:
        cs = per(n)
        rates = [med([c["points"][i]["capture_rate"] for c in cs]) for i in range(len(loads))]
        lf = [c["max_loss_free_pps"] or 0 for c in cs]
        best[n] = med(lf)
        print(n.ljust(12) + "".join(f"{x:>10.4f}" for x in rates)
              + f"  {best[n]:>12,.0f}   " + " ".join(f"{x:,.0f}" for x in lf))
    print("load that reached the capture's interface, packets/s (median; * generator-bound in some round)")
    for n in names:
        cs = per(n)
        row = []
        for i in range(len(loads)):
            got = med([c["points"][i]["received_pps"] for c in cs])
            bound = any(c["points"][i]["generator_bound"] for c in cs)
            row.append(f"{got:>9,.0f}{'*' if bound else ' '}")
        print(n.ljust(12) + "".join(row))
    print("frames lost per round where any: kernel drops + kansoku's own (round: kernel+kansoku)")
    for n in names:
        cs = per(n)
        for i, l in enumerate(loads):
            lost = [(r + 1, c["points"][i]["kernel_drops"], c["points"][i]["dropped_writer"])
                    for r, c in enumerate(cs)
                    if c["points"][i]["kernel_drops"] or c["points"][i]["dropped_writer"]]
            if lost:
                print(n.ljust(12) + f"{int(l):>10}  " + "  ".join(f"{r}: {k}+{w}" for r, k, w in lost))
    print("CPU time per packet written, microseconds (median)")
    for n in names:
        cs = per(n)
        row = [med([c["points"][i]["cpu_us_per_packet"] for c in cs]) for i in range(len(loads))]
        print(n.ljust(12) + "".join(f"{x:>10.2f}" if x is not None else f"{'-':>10}" for x in row))
    for base in ("tcpdump", "netsniff"):
        if base in best and best[base]:
            print(f"max loss-free load over {base}'s: "
                  + ", ".join(f"{n} {best[n] / best[base]:.2f}x" for n in names if n != base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
