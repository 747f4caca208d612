//! Inbound IPsec on arbitrary bytes: the engine holds one SA of every kind
//! (`ipsec::fuzzing::SAS`), so inputs may match an SA or not. A packet is
//! refused with a reason, held as a fragment, passed clear, or decapsulated
//! into a packet that parses as IP; never a panic. The first byte picks
//! inbound or outbound (bit 0) and the copying or in-place path (bit 1).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&dir, pkt)) = data.split_first() else {
        return;
    };
    let mut e = ipsec::fuzzing::engine();
    let mut out = Vec::new();
    if dir & 2 != 0 {
        // The in-place path: the same refusals, or a packet that parses.
        let mut pb = ipsec::PacketBuf::new();
        pb.set(pkt);
        if dir & 1 == 0 {
            if let Ok(ipsec::Inbound::Decapsulated) = e.inbound_buf(&mut pb) {
                assert!(matches!(pb.as_slice().first().map(|b| b >> 4), Some(4 | 6)));
            }
        } else if let Ok(ipsec::Outbound::Protected) = e.outbound_buf(&mut pb) {
            let r = ipsec::fuzzing::engine().inbound_buf(&mut pb);
            assert!(matches!(r, Ok(ipsec::Inbound::Decapsulated) | Err(ipsec::Reject::Dummy)), "{r:?}");
        }
        return;
    }
    if dir & 1 == 0 {
        if let Ok(ipsec::Inbound::Decapsulated) = e.inbound(pkt, &mut out) {
            assert!(matches!(out.first().map(|b| b >> 4), Some(4 | 6)));
        }
    } else if let Ok(ipsec::Outbound::Protected) = e.outbound(pkt, &mut out) {
        // What the engine protects, it takes back.
        let mut back = Vec::new();
        let mut rx = ipsec::fuzzing::engine();
        let r = rx.inbound(&out, &mut back);
        // Protocol 59 inside ESP reads as a dummy packet (RFC 4303 §2.6).
        assert!(matches!(r, Ok(ipsec::Inbound::Decapsulated) | Err(ipsec::Reject::Dummy)), "{r:?}");
    }
});
