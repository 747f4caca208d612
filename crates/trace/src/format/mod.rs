//! pcap and pcapng on-disk formats: parse and emit.
pub mod pcap;
pub mod pcapng;
