#!/usr/bin/env python3
"""Writes esp_sa_check.pcap: one ESP packet per SA of sa_formats.rs's
ESP_SA_CHECK, each carrying a UDP datagram from port SPI & 0xffff to 4000.
The keys are the test's; the IVs are fixed, so the output is reproducible.
Needs python3-cryptography (40 or newer)."""
import hashlib
import hmac
import struct
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

try:
    from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish, TripleDES
except ImportError:  # before 43
    Blowfish, TripleDES = algorithms.Blowfish, algorithms.TripleDES

PAYLOAD = b"kansoku esp_sa check"


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp(sport):
    # Checksum 0: the decrypted datagram is checked by its ports only.
    return struct.pack("!HHHH", sport, 4000, 8 + len(PAYLOAD), 0) + PAYLOAD


def pad(plain, block):
    n = (-(len(plain) + 2)) % block
    return plain + bytes(range(1, n + 1)) + bytes([n, 17])


def esp(spi, enc, enc_key, auth, auth_key, iv):
    plain = udp(spi & 0xFFFF)
    hdr = struct.pack("!II", spi, 1)
    if enc == "null":
        body = pad(plain, 4)
    elif enc == "aes-gcm-16":
        key, salt = enc_key[:-4], enc_key[-4:]
        ct = AESGCM(key).encrypt(salt + iv, pad(plain, 4), hdr)
        return hdr + iv + ct
    else:
        alg = {"3des-cbc": TripleDES, "aes-cbc": algorithms.AES, "blowfish-cbc": Blowfish}[enc]
        block = 16 if enc == "aes-cbc" else 8
        e = Cipher(alg(enc_key), modes.CBC(iv)).encryptor()
        body = iv + e.update(pad(plain, block)) + e.finalize()
    pkt = hdr + body
    if auth == "hmac-sha1":
        pkt += hmac.new(auth_key, pkt, hashlib.sha1).digest()[:12]
    elif auth == "hmac-sha256":
        pkt += hmac.new(auth_key, pkt, hashlib.sha256).digest()[:16]
    return pkt


def ipv4(src, dst, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0, 64, 50, 0,
                    bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + h + payload


def ipv6(src, dst, payload):
    import ipaddress
    h = struct.pack("!IHBB16s16s", 0x60000000, len(payload), 50, 64,
                    ipaddress.IPv6Address(src).packed, ipaddress.IPv6Address(dst).packed)
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x86\xdd" + h + payload


def h(s):
    return bytes.fromhex(s)


# (src, dst, spi, enc, enc key, auth, auth key, IV): sa_formats.rs's ESP_SA_CHECK.
SAS = [
    ("10.1.0.1", "10.2.0.1", 0x1001, "3des-cbc", h("0123456789abcdef0123456789abcdef0123456789abcdef"),
     "hmac-sha1", h("0102030405060708090a0b0c0d0e0f1011121314"), h("a0a1a2a3a4a5a6a7")),
    ("10.1.0.1", "10.2.0.1", 0x1002, "aes-gcm-16", h("000102030405060708090a0b0c0d0e0fcafebabe"),
     None, b"", h("b0b1b2b3b4b5b6b7")),
    ("10.1.0.1", "10.2.0.1", 0x1004, "aes-cbc", h("101112131415161718191a1b1c1d1e1f"),
     "hmac-sha256", h("202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"),
     h("c0c1c2c3c4c5c6c7c8c9cacbcccdcecf")),
    ("10.1.0.1", "10.2.0.1", 0x1005, "blowfish-cbc", h("404142434445464748494a4b4c4d4e4f"),
     None, b"", h("d0d1d2d3d4d5d6d7")),
    ("10.1.0.1", "10.2.0.1", 0x1006, "null", b"",
     "hmac-sha1", h("5051525354555657585960616263646566676869"), b""),
    ("2001:db8::1", "2001:db8::2", 0x1007, "aes-cbc",
     h("707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f"),
     None, b"", h("e0e1e2e3e4e5e6e7e8e9eaebecedeeef")),
]


def main(out):
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, (src, dst, spi, enc, ek, auth, ak, iv) in enumerate(SAS):
            p = esp(spi, enc, ek, auth, ak, iv)
            frame = (ipv6 if ":" in src else ipv4)(src, dst, p)
            f.write(struct.pack("<IIII", 1700000000 + i, 0, len(frame), len(frame)) + frame)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "esp_sa_check.pcap")
