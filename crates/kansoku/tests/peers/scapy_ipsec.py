#!/usr/bin/env python3
"""scapy's IPsec, as an independent stack for kansoku's tests.

    scapy_ipsec.py check SA_JSON PLAIN.pcap PROTECTED.pcap
        Decrypts and verifies every packet of PROTECTED (written by kansoku)
        with scapy, and checks it equals the same packet of PLAIN.
    scapy_ipsec.py make SA_JSON PLAIN.pcap OUT.pcap
        Protects every packet of PLAIN with scapy and writes OUT (the link
        header kept), for kansoku's decap to take apart.
    scapy_ipsec.py batch MANIFEST
        Many of the above in one run: a JSON list of {"op": "check"|"make",
        "sas": SA list, "plain": path, "other": path}.

SA_JSON is a list of SAs, applied in order outbound (ESP first, then AH
around it for a bundle): {"proto": "esp"|"ah", "spi": int, "mode":
"transport"|"tunnel", "src", "dst", "crypt": scapy's name or null,
"crypt_key": hex, "auth": scapy's name or null, "auth_key": hex, "natt":
bool}.

AH over ESP is not given to scapy, which gets it wrong: for bundles the AH
ICV is computed here from RFC 4302 section 3.3.3 (mutable fields zeroed),
then AH is removed and scapy takes the ESP packet.

Exits 0 when every packet agrees; prints the first disagreement and exits 1.
"""

import hashlib
import hmac
import json
import struct
import sys
import warnings

warnings.filterwarnings("ignore")

from scapy.all import IP, UDP, Ether, IPv6, raw, rdpcap, wrpcap  # noqa: E402
from scapy.layers.ipsec import AH, ESP, SecurityAssociation  # noqa: E402


def make_sa(d):
    tunnel = None
    if d["mode"] == "tunnel":
        tunnel = (IPv6 if ":" in d["src"] else IP)(src=d["src"], dst=d["dst"])
    natt = UDP(sport=4500, dport=4500) if d.get("natt") else None
    kw = {}
    if d["proto"] == "esp":
        kw["crypt_algo"] = d["crypt"] or "NULL"
        kw["crypt_key"] = bytes.fromhex(d["crypt_key"]) if d.get("crypt_key") else None
    kw["auth_algo"] = d["auth"] or "NULL"
    kw["auth_key"] = bytes.fromhex(d["auth_key"]) if d.get("auth_key") else None
    return SecurityAssociation(
        ESP if d["proto"] == "esp" else AH,
        spi=d["spi"],
        tunnel_header=tunnel,
        nat_t_header=natt,
        **kw,
    )


def ip_of(frame):
    """The IP packet of a frame (Ethernet or raw IP)."""
    if Ether in frame:
        return frame[Ether].payload
    return frame


def zero_mutable(hdr):
    """RFC 4302 3.3.3.1: the IP header with its mutable fields zeroed (no
    options or extension headers in these tests)."""
    b = bytearray(hdr)
    if b[0] >> 4 == 4:
        b[1] = 0
        b[6] = b[7] = 0
        b[8] = 0
        b[10] = b[11] = 0
    else:
        b[0] &= 0xF0
        b[1] = b[2] = b[3] = 0
        b[7] = 0
    return bytes(b)


def strip_ah(pkt, d):
    """Checks the AH ICV of `pkt` (bytes, AH right after a plain IP header)
    independently, and returns the packet without AH."""
    v6 = pkt[0] >> 4 == 6
    hl = 40 if v6 else (pkt[0] & 0x0F) * 4
    ah = pkt[hl:]
    nh, plen = ah[0], (ah[1] + 2) * 4
    spi = struct.unpack("!I", ah[4:8])[0]
    if spi != d["spi"]:
        raise ValueError(f"AH SPI {spi:#x}, want {d['spi']:#x}")
    digest, n = {
        "HMAC-SHA1-96": (hashlib.sha1, 12),
        "SHA2-256-128": (hashlib.sha256, 16),
    }[d["auth"]]
    icv = ah[12 : 12 + n]
    zeroed_ah = ah[:12] + bytes(plen - 12)
    mac = hmac.new(bytes.fromhex(d["auth_key"]), zero_mutable(pkt[:hl]) + zeroed_ah + ah[plen:], digest)
    if not hmac.compare_digest(mac.digest()[:n], icv):
        raise ValueError("AH ICV does not check (independent computation)")
    out = bytearray(pkt[:hl] + ah[plen:])
    if v6:
        out[6] = nh
        struct.pack_into("!H", out, 4, len(out) - 40)
    else:
        out[9] = nh
        struct.pack_into("!H", out, 2, len(out))
        out[10] = out[11] = 0
        s = sum(struct.unpack("!%dH" % (hl // 2), bytes(out[:hl])))
        while s > 0xFFFF:
            s = (s & 0xFFFF) + (s >> 16)
        struct.pack_into("!H", out, 10, ~s & 0xFFFF)
    return bytes(out)


def parse(b):
    return IPv6(b) if b[0] >> 4 == 6 else IP(b)


def decrypt(ip, sas):
    """Undoes the SAs (outermost first) on the IP packet `ip` (bytes)."""
    bundle = len(sas) > 1
    for d in reversed(sas):
        if d["proto"] == "ah" and bundle:
            ip = strip_ah(ip, d)
        else:
            ip = raw(make_sa(d).decrypt(parse(ip)))
    return ip


def encrypt(ip, sas, made):
    """Applies the SAs in order; `made` holds scapy's SA objects, whose
    sequence numbers count on from packet to packet."""
    for d, sa in zip(sas, made):
        if d["proto"] == "ah" and len(sas) > 1:
            raise SystemExit("scapy cannot be trusted with AH over ESP")
        ip = raw(sa.encrypt(parse(ip)))
    return ip


def main():
    if sys.argv[1:2] == ["batch"]:
        # One interpreter for many cases: scapy's import is most of the cost.
        failed = 0
        for job in json.loads(open(sys.argv[2]).read()):
            rc = one(job["op"], job["sas"], job["plain"], job["other"])
            if rc != 0:
                print(f"  in {job['op']} {job['other']}")
                failed += 1
        return 1 if failed else 0
    mode, sa_json, plain_path, other_path = sys.argv[1:5]
    return one(mode, json.loads(open(sa_json).read()), plain_path, other_path)


def one(mode, sas, plain_path, other_path):
    plain = rdpcap(plain_path)
    if mode == "check":
        prot = rdpcap(other_path)
        if len(prot) != len(plain):
            print(f"{len(prot)} protected packets, {len(plain)} plain")
            return 1
        for i, (p, q) in enumerate(zip(plain, prot)):
            want = raw(ip_of(p))
            # The plain frame may carry link padding past the IP length.
            want = raw(parse(want))
            try:
                got = decrypt(raw(ip_of(q)), sas)
            except Exception as e:  # scapy raises on a bad ICV or padding
                print(f"packet {i + 1}: scapy refused it: {type(e).__name__}: {e}")
                return 1
            if got != want:
                print(f"packet {i + 1}: decrypted\n  {got.hex()}\nwant\n  {want.hex()}")
                return 1
        return 0
    if mode == "make":
        out = []
        made = [make_sa(d) for d in sas]
        for p in plain:
            ip = encrypt(raw(parse(raw(ip_of(p)))), sas, made)
            f = Ether(src=p[Ether].src, dst=p[Ether].dst) / parse(ip) if Ether in p else parse(ip)
            f.time = p.time
            out.append(f)
        wrpcap(other_path, out)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
