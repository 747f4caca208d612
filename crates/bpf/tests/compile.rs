//! libpcap's compiler through `bpf::libpcap`: errors in libpcap's words,
//! the trace's header deciding the program as it does for `tcpdump -r`,
//! compiles from many threads at once, and live programs, whose VLAN
//! code reads the kernel's data, agreeing with the trace programs.

mod common;

use bpf::libpcap::{compile_for_trace, compile_live, CompileError};
use bpf::{dump, Aux, Program};
use common::*;

#[test]
fn a_syntax_error_gives_libpcaps_message() {
    let e = compile_for_trace("tcp port", ETHERNET, 0, false).unwrap_err();
    assert_eq!(
        e,
        CompileError::Expression("can't parse filter expression: syntax error".into())
    );
    assert_eq!(e.to_string(), "can't parse filter expression: syntax error");
    let e = compile_for_trace("host 300.1.2.3", ETHERNET, 0, false).unwrap_err();
    assert!(e.to_string().contains("300.1.2.3"), "{e}");
    let e = compile_for_trace("ip[0] / 0 = 1", ETHERNET, 0, false).unwrap_err();
    assert_eq!(e.to_string(), "division by zero");
    let e = compile_for_trace("tcp\0port 80", ETHERNET, 0, false).unwrap_err();
    assert_eq!(e.to_string(), "the expression holds a NUL byte");
}

#[test]
fn vlan_on_sll2_gives_libpcaps_message() {
    let e = compile_for_trace("vlan", SLL2, 0, false).unwrap_err();
    assert_eq!(
        e,
        CompileError::Expression("no VLAN support for Linux cooked v2".into())
    );
    let e = compile_for_trace("vlan 7 and tcp", SLL, 0, false).unwrap_err();
    assert_eq!(e.to_string(), "no VLAN support for Linux cooked v1");
    let e = compile_for_trace("ether host 02:00:00:00:00:01", RAW, 0, false).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("ethernet addresses supported only on ethernet"),
        "{e}"
    );
}

#[test]
fn the_trace_header_decides_the_program_as_for_tcpdump_r() {
    let listing = |expr: &str, link: u16, snaplen: u32, big: bool| {
        dump(&compile_for_trace(expr, link, snaplen, big).unwrap(), 1)
    };
    // A snap length of 0 is libpcap's largest, and the accept returns it.
    assert_eq!(listing("", ETHERNET, 0, false), "(000) ret      #262144\n");
    assert_eq!(listing("", ETHERNET, 96, true), "(000) ret      #96\n");
    // LINKTYPE_RAW is 101 in files, DLT_RAW 12 to libpcap: it is mapped.
    assert!(listing("ip", RAW, 0, false).contains("ldb      [0]"));
    // BSD loopback compares the address family in the file's byte order.
    assert!(listing("ip", NULL, 0, true).contains("jeq      #0x2 "));
    assert!(listing("ip", NULL, 0, false).contains("jeq      #0x2000000 "));
    // An unknown link type is libpcap's error.
    let e = compile_for_trace("ip", 65000, 0, false).unwrap_err();
    assert!(e.to_string().contains("65000"), "{e}");
}

#[test]
fn compiling_from_many_threads_gives_what_one_thread_gives() {
    let one: Vec<_> = EXPRESSIONS
        .iter()
        .map(|e| compile_for_trace(e, ETHERNET, 0, false).unwrap())
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let one = &one;
                s.spawn(move || {
                    for round in 0..5 {
                        for (i, e) in EXPRESSIONS.iter().enumerate().skip((t + round) % 3) {
                            assert_eq!(
                                compile_for_trace(e, ETHERNET, 0, false).unwrap(),
                                one[i],
                                "`{e}`"
                            );
                            assert!(compile_for_trace("tcp port", ETHERNET, 0, false).is_err());
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

#[test]
fn compile_live_names_a_missing_interface() {
    if !testkit::require_root("opening an interface") {
        return;
    }
    let e = compile_live("tcp", "kansoku-nosuchif", 0).unwrap_err();
    assert!(matches!(e, CompileError::Open(_)));
    assert!(e.to_string().starts_with("No such device exists"), "{e}");
}

/// A frame as the kernel hands it to a packet socket's filter: the outer
/// VLAN tag taken out of the data and given beside it.
fn kernel_view(frame: &[u8]) -> (Vec<u8>, Aux) {
    let tpid = u16::from_be_bytes([frame[12], frame[13]]);
    if frame.len() >= 18 && matches!(tpid, 0x8100 | 0x88a8) {
        let tci = u16::from_be_bytes([frame[14], frame[15]]);
        let mut data = frame[..12].to_vec();
        data.extend(&frame[16..]);
        let aux = Aux {
            vlan_tci: Some(tci),
            vlan_tpid: Some(tpid),
            ..Aux::default()
        };
        (data, aux)
    } else {
        (frame.to_vec(), Aux::default())
    }
}

/// Tagged and untagged frames: the sample captures' and some made here
/// (802.1Q 100 and 7 over TCP and UDP, QinQ, priority bits set).
fn vlan_frames() -> Vec<Vec<u8>> {
    let mut frames: Vec<Vec<u8>> = sample_packets()
        .into_iter()
        .filter(|(l, p)| *l == ETHERNET && p.data.len() >= 18)
        .map(|(_, p)| p.data)
        .collect();
    let untagged = frames
        .iter()
        .find(|f| f[12..14] == [0x08, 0x00] && f[23] == 6)
        .expect("an untagged IPv4 TCP frame")
        .clone();
    let tag = |f: &[u8], tpid: u16, tci: u16| {
        let mut v = f[..12].to_vec();
        v.extend(tpid.to_be_bytes());
        v.extend(tci.to_be_bytes());
        v.extend(&f[12..]);
        v
    };
    for (tpid, tci) in [
        (0x8100, 100),
        (0x8100, 7),
        (0x88a8, 7),
        (0x8100, 0xe007),
        (0x8100, 0x1064),
    ] {
        frames.push(tag(&untagged, tpid, tci));
        frames.push(tag(&tag(&untagged, 0x8100, 8), tpid, tci));
    }
    frames
}

#[test]
fn live_programs_on_the_kernels_view_give_the_trace_programs_answer() {
    if !testkit::require_root("a network namespace and a veth pair") {
        return;
    }
    let ns = testkit::Namespace::create("kbpf").unwrap();
    ns.ip(&["link", "add", "v0", "type", "veth", "peer", "name", "v1"])
        .unwrap();
    // Down, it cannot be opened, in libpcap's words.
    let e = ns
        .run(|| compile_live("vlan", "v0", 0))
        .unwrap()
        .unwrap_err();
    assert_eq!(e.to_string(), "That device is not up");
    ns.ip(&["link", "set", "v0", "up"]).unwrap();
    ns.ip(&["link", "set", "v1", "up"]).unwrap();
    let exprs = [
        "vlan",
        "vlan 7",
        "vlan 100",
        "vlan 100 and vlan 8",
        "vlan and vlan",
        "vlan and tcp",
        "vlan 7 and udp port 47000",
        "vlan 100 and tcp port 18080",
    ];
    let frames = vlan_frames();
    let mut accepted = 0;
    for expr in exprs {
        let live = ns.run(|| compile_live(expr, "v0", 0)).unwrap().unwrap();
        // libpcap compiled the kernel's VLAN data in.
        assert!(
            dump(&live, 1).contains("[vlanp]"),
            "`{expr}`:\n{}",
            dump(&live, 1)
        );
        let live = Program::new(&live).unwrap();
        let trace = Program::new(&compile_for_trace(expr, ETHERNET, 0, false).unwrap()).unwrap();
        for f in &frames {
            let want = trace.run(f, f.len() as u32);
            let (data, aux) = kernel_view(f);
            let got = live.run_with_aux(&data, f.len() as u32, &aux);
            assert_eq!(got, want, "`{expr}` on {f:02x?}");
            // Without the kernel's data the live program cannot tell.
            assert_eq!(live.run(&data, data.len() as u32), 0);
            accepted += usize::from(got != 0);
        }
    }
    assert!(accepted > 10, "{accepted} accepted");
}

#[test]
fn ancillary_loads_read_the_kernels_data_or_reject() {
    use bpf::opcode::*;
    use bpf::Insn;
    let load = |size: u16, item: u32| {
        Program::new(&[
            Insn::stmt(LD | size | ABS, SKF_AD_OFF + item),
            Insn::stmt(RET | A, 0),
        ])
        .unwrap()
    };
    let aux = Aux {
        vlan_tci: Some(0xe007),
        vlan_tpid: Some(0x88a8),
        protocol: Some(0x0800),
        pkttype: Some(4),
        ifindex: Some(9),
    };
    for size in [W, H, B] {
        assert_eq!(
            load(size, SKF_AD_VLAN_TAG).run_with_aux(&[], 0, &aux),
            0xe007
        );
        assert_eq!(
            load(size, SKF_AD_VLAN_TAG_PRESENT).run_with_aux(&[], 0, &aux),
            1
        );
        assert_eq!(
            load(size, SKF_AD_VLAN_TPID).run_with_aux(&[], 0, &aux),
            0x88a8
        );
        assert_eq!(
            load(size, SKF_AD_PROTOCOL).run_with_aux(&[], 0, &aux),
            0x0800
        );
        assert_eq!(load(size, SKF_AD_PKTTYPE).run_with_aux(&[], 0, &aux), 4);
        assert_eq!(load(size, SKF_AD_IFINDEX).run_with_aux(&[], 0, &aux), 9);
        // Items kansoku does not have reject; so does every item without
        // the kernel's data, as in libpcap's bpf_filter.
        assert_eq!(load(size, 20).run_with_aux(&[1; 64], 64, &aux), 0);
        assert_eq!(load(size, SKF_AD_VLAN_TAG).run(&[1; 64], 64), 0);
        let none = Aux::default();
        assert_eq!(
            load(size, SKF_AD_VLAN_TAG_PRESENT).run_with_aux(&[], 0, &none),
            0
        );
        assert_eq!(load(size, SKF_AD_VLAN_TAG).run_with_aux(&[], 0, &none), 0);
        let p = Program::new(&[
            Insn::stmt(LD | size | ABS, SKF_AD_OFF + SKF_AD_IFINDEX),
            Insn::stmt(RET | K, 5),
        ])
        .unwrap();
        assert_eq!(p.run_with_aux(&[], 0, &none), 0);
    }
}
