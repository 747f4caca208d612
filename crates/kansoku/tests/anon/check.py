#!/usr/bin/env python3
"""Checks kansoku anon's output against the original with tshark and an
independent Crypto-PAn (yacryptopan).

check.py images ORIG OUT KEYFILE   every address tshark shows in OUT is yacryptopan's image of ORIG's at the place
check.py leaks ORIG OUT            no address of ORIG, and no payload, anywhere in OUT (the default policy)
check.py checksums ORIG OUT        OUT has no more bad checksums than ORIG (tshark's checks)
check.py traceanon ORIG OUT KEYFILE  OUT's IPv4 addresses equal those libtrace's traceanon writes from ORIG
Prints what it compared; exits 1 on the first difference."""
import ipaddress
import subprocess
import sys

from yacryptopan import CryptoPAn

ADDRESS_FIELDS = ["ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "arp.src.proto_ipv4", "arp.dst.proto_ipv4",
                  "icmpv6.nd.ns.target_address", "icmpv6.nd.na.target_address", "icmpv6.opt.prefix"]
CHECKSUM_FIELDS = ["ip.checksum.status", "tcp.checksum.status", "udp.checksum.status", "icmp.checksum.status",
                   "icmpv6.checksum.status"]
CHECKS = ["-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"]


def fields(path, names, extra=()):
    args = ["tshark", "-n", "-r", path, *extra, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a",
            "-E", "aggregator=,"]
    for n in names:
        args += ["-e", n]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [[c.split(",") if c else [] for c in line.split("\t")] for line in out.splitlines()]


def images(orig, out, keyfile):
    key = bytes.fromhex(open(keyfile).read().strip())
    pan = CryptoPAn(key)
    a, b = fields(orig, ADDRESS_FIELDS), fields(out, ADDRESS_FIELDS)
    if len(a) != len(b):
        sys.exit(f"{len(a)} packets in {orig}, {len(b)} in {out}")
    compared = 0
    for n, (ra, rb) in enumerate(zip(a, b), 1):
        for name, va, vb in zip(ADDRESS_FIELDS, ra, rb):
            if len(va) != len(vb):
                sys.exit(f"packet {n} {name}: {va} became {vb}")
            for x, y in zip(va, vb):
                want = pan.anonymize(x)
                if ipaddress.ip_address(want) != ipaddress.ip_address(y):
                    sys.exit(f"packet {n} {name}: {x} became {y}, yacryptopan says {want}")
                compared += 1
    print(f"{compared} addresses in {len(a)} packets equal yacryptopan's images")
    if compared == 0:
        sys.exit("no address compared")


def leaks(orig, out):
    data = open(out, "rb").read()
    seen = set()
    for row in fields(orig, ADDRESS_FIELDS):
        for values in row:
            for v in values:
                packed = ipaddress.ip_address(v).packed
                # Bytes that appear in any file (all zeros, all ones) prove nothing.
                if len(set(packed)) > 1:
                    seen.add((v, packed))
    for v, packed in sorted(seen):
        if packed in data:
            sys.exit(f"{v} appears in {out}")
    # Fragments dissected one by one: a first fragment's transport header is a header.
    payload = fields(out, ["tcp.payload", "udp.payload", "data.data", "dns.qry.name"],
                     ["-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE"])
    for n, row in enumerate(payload, 1):
        if any(row):
            sys.exit(f"packet {n} of {out} keeps payload: {row}")
    print(f"none of {len(seen)} addresses and no payload in {out}")
    if not seen:
        sys.exit("no address looked for")


def checksums(orig, out):
    def bad(path):
        count = 0
        for row in fields(path, CHECKSUM_FIELDS, CHECKS):
            count += sum(v.count("0") for values in row for v in values if v == "0")
        return count
    a, b = bad(orig), bad(out)
    print(f"bad checksums: {a} in {orig}, {b} in {out}")
    if b > a:
        sys.exit(1)


def traceanon(orig, out, keyfile):
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        raw = os.path.join(d, "key.bin")
        with open(raw, "wb") as f:
            f.write(bytes.fromhex(open(keyfile).read().strip()))
        theirs = os.path.join(d, "traceanon.pcap")
        subprocess.run(["traceanon", "-s", "-d", "-f", raw, "pcapfile:" + orig, "pcapfile:" + theirs], check=True)
        a, b = fields(theirs, ["ip.src", "ip.dst"]), fields(out, ["ip.src", "ip.dst"])
    compared = 0
    for n, (ra, rb) in enumerate(zip(a, b), 1):
        # The outer header: traceanon leaves a tunnel's inner header as it was (kansoku does not).
        ra, rb = [v[:1] for v in ra], [v[:1] for v in rb]
        if ra != rb:
            sys.exit(f"packet {n}: traceanon wrote {ra}, kansoku {rb}")
        compared += sum(len(v) for v in ra)
    print(f"{compared} IPv4 addresses in {len(a)} packets equal traceanon's")
    if len(a) != len(b) or compared == 0:
        sys.exit(f"{len(a)} packets from traceanon, {len(b)} from kansoku, {compared} addresses compared")


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"images": images, "leaks": leaks, "checksums": checksums, "traceanon": traceanon}[cmd](*sys.argv[2:])
