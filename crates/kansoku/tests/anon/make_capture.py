#!/usr/bin/env python3
"""Writes a capture of every place an address hides, with right checksums
(scapy computes them): the anonymiser's test input. Usage: make_capture.py OUT.pcap"""
import sys

from scapy.all import (ARP, DNS, DNSQR, DNSRR, ICMP, IP, TCP, UDP, Ether, IPOption_RR, Raw, fragment,
                       wrpcap)
from scapy.layers.inet6 import (ICMPv6DestUnreach, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6ND_RA,
                                ICMPv6NDOptDstLLAddr, ICMPv6NDOptPrefixInfo, ICMPv6NDOptSrcLLAddr,
                                ICMPv6PacketTooBig, ICMPv6TimeExceeded, IPv6, IPv6ExtHdrFragment)

A, B, C = "192.0.2.10", "198.51.100.77", "203.0.113.5"
A6, B6, R6 = "2001:db8::a", "2001:db8:1::abcd:b", "2001:db8:ffff::1"
MA, MB = "00:1b:21:0a:0b:0c", "3c:fd:fe:01:02:03"


def eth(p, src=MA, dst=MB):
    return Ether(src=src, dst=dst) / p


pkts = []
# DNS over UDP, both ways: names and an answer's address in the payload.
q = IP(src=A, dst=B) / UDP(sport=40000, dport=53) / DNS(rd=1, qd=DNSQR(qname="www.example.com"))
pkts.append(eth(q))
pkts.append(eth(IP(src=B, dst=A) / UDP(sport=53, dport=40000) /
                DNS(qr=1, qd=DNSQR(qname="www.example.com"), an=DNSRR(rrname="www.example.com", rdata=C)), MB, MA))
# TCP with a payload that quotes an address.
pkts.append(eth(IP(src=A, dst=B) / TCP(sport=40001, dport=80, flags="PA", seq=1000, ack=2000) /
                Raw(b"GET / HTTP/1.1\r\nHost: 198.51.100.77\r\n\r\n")))
# ICMP echo, and errors quoting a UDP datagram and a TCP segment.
pkts.append(eth(IP(src=A, dst=B) / ICMP(type=8, id=7, seq=1) / Raw(b"ping data")))
pkts.append(eth(IP(src=B, dst=A) / ICMP(type=3, code=3) / IP(src=A, dst=B) / UDP(sport=40002, dport=33434) /
                Raw(b"probe"), MB, MA))
quoted_tcp = bytes(IP(src=A, dst=C) / TCP(sport=40003, dport=443, flags="S"))[:28]
pkts.append(eth(IP(src=B, dst=A) / ICMP(type=11, code=0) / Raw(quoted_tcp), MB, MA))
# A record-route option.
pkts.append(eth(IP(src=A, dst=B, options=[IPOption_RR(routers=[C, B])]) / UDP(sport=1, dport=2) / Raw(b"rr")))
# Fragments: the later ones carry no transport header.
for f in fragment(IP(src=A, dst=B) / UDP(sport=3, dport=4) / Raw(b"F" * 3000), fragsize=1400):
    pkts.append(eth(f))
# ARP request and reply.
pkts.append(Ether(src=MA, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=MA, psrc=A, pdst=B))
pkts.append(eth(ARP(op=2, hwsrc=MB, psrc=B, hwdst=MA, pdst=A), MB, MA))
# IPv6: UDP, echo, errors, neighbour discovery, a router advertisement, fragments.
pkts.append(eth(IPv6(src=A6, dst=B6) / UDP(sport=5, dport=53) / DNS(rd=1, qd=DNSQR(qname="v6.example.com"))))
pkts.append(eth(IPv6(src=A6, dst=B6) / ICMPv6EchoRequest(id=1, seq=1, data=b"echo6")))
pkts.append(eth(IPv6(src=B6, dst=A6) / ICMPv6DestUnreach(code=4) / IPv6(src=A6, dst=B6) /
                UDP(sport=6, dport=7) / Raw(b"lost"), MB, MA))
pkts.append(eth(IPv6(src=R6, dst=A6) / ICMPv6PacketTooBig(mtu=1280) / IPv6(src=A6, dst=B6) /
                TCP(sport=8, dport=9, flags="A") / Raw(b"big" * 20)))
pkts.append(eth(IPv6(src=R6, dst=A6) / ICMPv6TimeExceeded() / IPv6(src=A6, dst=B6, hlim=1) /
                ICMPv6EchoRequest(id=2, seq=2)))
pkts.append(eth(IPv6(src=A6, dst="ff02::1:ffcd:b") / ICMPv6ND_NS(tgt=B6) / ICMPv6NDOptSrcLLAddr(lladdr=MA),
                MA, "33:33:ff:cd:00:0b"))
pkts.append(eth(IPv6(src=B6, dst=A6) / ICMPv6ND_NA(tgt=B6, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=MB),
                MB, MA))
pkts.append(eth(IPv6(src="fe80::1", dst="ff02::1") / ICMPv6ND_RA() / ICMPv6NDOptSrcLLAddr(lladdr=MB) /
                ICMPv6NDOptPrefixInfo(prefix="2001:db8:1::", prefixlen=64), MB, "33:33:00:00:00:01"))
for f in [IPv6(src=A6, dst=B6) / IPv6ExtHdrFragment(offset=0, m=1, id=9) / UDP(sport=10, dport=11, len=1508) /
          Raw(b"G" * 1400),
          IPv6(src=A6, dst=B6) / IPv6ExtHdrFragment(offset=176, m=0, id=9, nh=17) / Raw(b"G" * 100)]:
    pkts.append(eth(f))
# IPv4 in IPv4.
pkts.append(eth(IP(src="10.1.2.3", dst="10.9.8.7") / IP(src=A, dst=B) / UDP(sport=12, dport=13) / Raw(b"tun")))
wrpcap(sys.argv[1], pkts)
