//! tcpdump's filter expressions (pcap-filter(7)) over traces: the packets a
//! command reads are those the expression accepts, as with `tcpdump -r FILE
//! EXPRESSION`.
//!
//! libpcap's own compiler turns the expression into a classic BPF program
//! for each interface of a trace, with the interface's link type and snap
//! length and the file's byte order, exactly as `tcpdump -r` compiles it
//! ([`bpf::libpcap::compile_for_trace`]); kansoku's validated interpreter
//! ([`bpf::Program`]) runs it over every packet. A live capture compiles
//! the same expression for the interface and hands it to the kernel
//! instead (`kansoku capture`).

use trace::Record;
use wire::LinkType;

use crate::error::{Error, Result};

/// A filter expression as the user wrote it (the words joined by spaces,
/// as tcpdump joins its arguments).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expression {
    text: String,
}

impl Expression {
    /// The expression `text`; `None` when it is empty or blank, which
    /// selects every packet.
    pub fn new(text: &str) -> Option<Expression> {
        let text = text.trim();
        (!text.is_empty()).then(|| Expression {
            text: text.to_string(),
        })
    }

    /// The expression's words joined by spaces.
    pub fn from_words(words: &[String]) -> Option<Expression> {
        Expression::new(&words.join(" "))
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The instructions for packets of `link_type` cut at `snaplen` (0: no
    /// limit) in a file of that byte order: what `tcpdump -r` compiles.
    pub fn compile(
        &self,
        link_type: LinkType,
        snaplen: u32,
        big_endian: bool,
    ) -> Result<Vec<bpf::Insn>> {
        compile_text(&self.text, link_type, snaplen, big_endian)
    }

    /// [`compile`](Self::compile), validated for the interpreter.
    pub fn program(
        &self,
        link_type: LinkType,
        snaplen: u32,
        big_endian: bool,
    ) -> Result<bpf::Program> {
        let insns = self.compile(link_type, snaplen, big_endian)?;
        bpf::Program::new(&insns).map_err(|e| {
            Error::input(format!(
                "expression `{}`: libpcap's program does not validate: {e}",
                self.text
            ))
        })
    }
}

/// The programs of one trace's interfaces, compiled as each interface is
/// described, and the packets they turned away.
pub(crate) struct Selector {
    expression: Expression,
    /// The current section's interfaces, by index.
    programs: Vec<bpf::Program>,
    /// A compilation that failed, reported after the record that caused it.
    failed: Option<Error>,
    /// Packets the expression rejected.
    pub(crate) unmatched: u64,
}

impl Selector {
    pub(crate) fn new(expression: Expression) -> Selector {
        Selector {
            expression,
            programs: Vec::new(),
            failed: None,
            unmatched: 0,
        }
    }

    /// Whether `rec` goes on to the command: every section and interface
    /// record (compiling the interface's program), and the packets the
    /// expression accepts. `big_endian` is the byte order of the section
    /// being read.
    #[inline]
    pub(crate) fn keep(&mut self, rec: &Record<'_>, big_endian: bool) -> bool {
        match rec {
            Record::Packet(p) => {
                let accepted = self
                    .programs
                    .get(p.interface as usize)
                    .is_some_and(|prog| prog.run(p.data, p.orig_len) != 0);
                if !accepted {
                    self.unmatched += 1;
                }
                accepted
            }
            Record::Section(_) => {
                self.programs.clear();
                true
            }
            Record::Interface(i) => {
                match self.expression.program(i.link_type, i.snaplen, big_endian) {
                    Ok(p) => self.programs.push(p),
                    Err(e) => {
                        let n = self.programs.len();
                        self.failed = Some(e.context(format!("interface {n} ({})", i.link_type)));
                    }
                }
                true
            }
            _ => true,
        }
    }

    pub(crate) fn expression(&self) -> &Expression {
        &self.expression
    }

    /// The error of a compilation that failed, once.
    pub(crate) fn take_failure(&mut self) -> Option<Error> {
        self.failed.take()
    }
}

/// The program of `expression` (every packet without one) for the first
/// interface of the trace at `path`, listed as `tcpdump -d -r FILE` lists it
/// (`level` 1: `-d`, 2: `-dd`, 3 and more: `-ddd`).
/// `text` compiled as `tcpdump -r` compiles it for a file of `link_type`,
/// `snaplen` and that byte order; an error in libpcap's words is a usage
/// error naming the expression.
///
/// Programs compiled are kept for the rest of the process (the last
/// [`COMPILED_KEPT`]): a directory of 30 traces, or a pcapng file of many
/// sections, asks for the same program again and again, and libpcap's
/// compiler took a tenth of a host query over an archive.
fn compile_text(
    text: &str,
    link_type: LinkType,
    snaplen: u32,
    big_endian: bool,
) -> Result<Vec<bpf::Insn>> {
    type Compiled = (String, LinkType, u32, bool, Vec<bpf::Insn>);
    static COMPILED: std::sync::Mutex<Vec<Compiled>> = std::sync::Mutex::new(Vec::new());
    let same =
        |c: &Compiled| c.0 == text && c.1 == link_type && c.2 == snaplen && c.3 == big_endian;
    if let Ok(kept) = COMPILED.lock() {
        if let Some(c) = kept.iter().find(|c| same(c)) {
            return Ok(c.4.clone());
        }
    }
    let insns = bpf::libpcap::compile_for_trace(text, u16::from(link_type), snaplen, big_endian)
        .map_err(|e| Error::usage(format!("expression `{text}`: {e}")))?;
    if let Ok(mut kept) = COMPILED.lock() {
        if kept.len() == COMPILED_KEPT {
            kept.remove(0);
        }
        kept.push((
            text.to_string(),
            link_type,
            snaplen,
            big_endian,
            insns.clone(),
        ));
    }
    Ok(insns)
}

/// How many compiled programs [`compile_text`] keeps.
const COMPILED_KEPT: usize = 8;

pub fn listing_for_trace(
    path: &std::path::Path,
    expression: Option<&Expression>,
    level: u8,
) -> Result<String> {
    // A directory's program is the one of its first trace in time order.
    let first;
    let path = if path.is_dir() {
        let mut left_out = Vec::new();
        let paths = crate::source::dir::trace_paths_in(path, Default::default(), &mut left_out)?;
        first = paths.into_iter().next().ok_or_else(|| {
            Error::input(format!(
                "{}: no traces in the directory",
                crate::error::display_path(path)
            ))
        })?;
        first.as_path()
    } else {
        path
    };
    let name = crate::error::display_path(path);
    let opened = if path.as_os_str() == "-" {
        trace::TraceReader::from_read(Box::new(std::io::stdin()))
    } else {
        trace::TraceReader::open(path)
    };
    let mut reader = opened.map_err(|e| Error::file(path, e))?;
    loop {
        let big_endian = reader.big_endian();
        match reader
            .next_record()
            .map_err(|e| Error::input(format!("{name}: {e}")))?
        {
            Some(Record::Interface(i)) => {
                let text = expression.map_or("", Expression::text);
                let insns = compile_text(text, i.link_type, i.snaplen, big_endian)?;
                return Ok(bpf::dump(&insns, level));
            }
            Some(_) => {}
            None => {
                return Err(Error::input(format!(
                    "{name}: no interface to compile the expression for"
                )))
            }
        }
    }
}
