//! What `kansoku anon` keeps, changes and removes, and the text that says
//! so (printed by `kansoku anon --policy` and written into a pcapng
//! output's section comment, so that a published trace says how it was
//! made).

/// What happens to the bytes after the last header a packet's walk reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PayloadPolicy {
    /// Records cut at the end of the transport header; the length on the
    /// wire is kept (MAWI's and CAIDA's practice).
    #[default]
    Strip,
    /// Captured length kept, the bytes zeroed.
    Zero,
    /// Kept as captured: application payload (DNS names and answers, HTTP
    /// hosts, SIP and FTP addresses ...) is published as it was.
    Keep,
}

/// What happens to link-layer (MAC) addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MacPolicy {
    /// Replaced by six bytes of AES (under a key derived from the
    /// Crypto-PAn key) of the address, with the original's group
    /// (multicast) bit and the locally-administered bit set: one station,
    /// one image, across files and runs; no vendor. Broadcast is kept.
    #[default]
    Hash,
    /// All zeros.
    Zero,
}

/// The policy, field by field.
pub fn text(payload: PayloadPolicy, mac: MacPolicy) -> String {
    let payload_line = match payload {
        PayloadPolicy::Strip => "removed: each record is cut at the end of its transport header (TCP with options, UDP 8 bytes, ICMP 8 bytes, ESP 8, SCTP 12); the length on the wire is kept",
        PayloadPolicy::Zero => "zeroed: the captured length is kept, every byte after the transport header is 0",
        PayloadPolicy::Keep => "kept as captured (application data, DNS names and answers included, may hold addresses)",
    };
    let mac_line = match mac {
        MacPolicy::Hash => "hashed: 6 bytes of AES under a key derived from the Crypto-PAn key, the original's multicast bit kept, the locally-administered bit set; broadcast kept",
        MacPolicy::Zero => "zeroed",
    };
    format!(
        "Anonymised by kansoku anon (policy {payload:?}/{mac:?}).\n\
         IPv4 and IPv6 addresses: Crypto-PAn (Xu, Fan, Ammar, Moon 2002), prefix-preserving, one key for every file; IPv6 over 128 bits as yacryptopan and cryptopANT. Changed wherever they appear: IPv4 and IPv6 headers (tunnels' inner headers too), IPv4 record-route, source-route and time-stamp options, IPv6 routing headers (types 0, 2, 4) and home-address options, the headers quoted in ICMP and ICMPv6 errors, ICMP redirects' gateways, ARP, neighbour discovery targets and prefix, DNS-server and redirected-header options, MLD groups and sources.\n\
         Link-layer addresses (Ethernet, Linux cooked capture, ARP, neighbour discovery): {mac_line}.\n\
         Checksums: IPv4 header checksums computed again; TCP, UDP and ICMP/ICMPv6 checksums updated for the changed words (RFC 1624), so a checksum that was right stays right; a GRE checksum is left as it was.\n\
         Removed whatever the policy: unknown IPv6 routing types and neighbour discovery options' contents, Multipath TCP options' contents, MLD auxiliary data, packet comments and other packet options; the bytes of any header the anonymiser cannot read whole are treated as payload.\n\
         Payload: {payload_line}.\n\
         Kept: times, lengths on the wire, ports, protocols, TCP flags, sequence numbers and options, TTLs, IP identifiers, VLAN tags.\n"
    )
}
