//! homa-dump: prints every Ethernet frame of a pcap or pcapng capture on one
//! line, every layer parsed by homa-stack's wire module.
//!
//! ```text
//! homa-dump [--json] FILE      (FILE `-` reads standard input)
//! ```
//!
//! Text lines are `N TIME FRAME` with `FRAME` as `wire::PrettyFrame` shows
//! it. `--json` prints one object per frame whose `homa` keys are the field
//! names of protocol.md section 3.
//!
//! Input: classic pcap (microsecond `0xa1b2c3d4` or nanosecond `0xa1b23c4d`
//! magic, either byte order) or pcapng (SHB, IDB, EPB and SPB blocks, either
//! byte order, `if_tsresol` honoured, other blocks skipped). Frames must be
//! Ethernet (link type 1); others get a per-frame error.
//!
//! Exit status: 0 when the capture was read (even if it ends in a truncated
//! record, reported on stderr), 1 when the file cannot be opened or its
//! header is not a capture's, 2 for a usage error.

use std::fmt::{self, Write as _};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, ErrorKind, Read, Write};
use std::process::ExitCode;

use homa_stack::wire::homa::{self, Kind};
use homa_stack::wire::pretty::{Link, Network, Transport};
use homa_stack::wire::{
    dissect, ArpRepr, Dissection, EthernetRepr, Icmpv4Repr, Icmpv6Repr, PrettyFrame,
};

const USAGE: &str = "\
Usage: homa-dump [--json] FILE

Prints every frame of a pcap or pcapng capture of Ethernet frames on one
line, with Ethernet, ARP, IPv4, IPv6, ICMP and Homa parsed. FILE `-` reads
standard input.

Options:
  --json      one JSON object per frame instead of text
  -h, --help  this text

Exit status: 0 capture read (a truncated last record is reported on stderr),
1 file unreadable or not a capture, 2 usage error.
";

/// `LINKTYPE_ETHERNET`.
const LINKTYPE_ETHERNET: u32 = 1;
/// Larger records are taken as corruption rather than allocated.
const MAX_RECORD: usize = 16 << 20;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (json, path) = match parse_args(&args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("homa-dump: {msg}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let input: Box<dyn Read> = if path == "-" {
        Box::new(io::stdin().lock())
    } else {
        match File::open(&path) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("homa-dump: {path}: {e}");
                return ExitCode::from(1);
            }
        }
    };
    let mut reader = match Capture::open(BufReader::new(input)) {
        Ok(reader) => reader,
        Err(e) => {
            eprintln!("homa-dump: {path}: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let mut n = 0u64;
    loop {
        let record = match reader.next_record() {
            Ok(Some(record)) => record,
            Ok(None) => break,
            Err(e) => {
                // What was read is printed; the damage is reported, not fatal.
                let _ = out.flush();
                eprintln!("homa-dump: {path}: {e} after frame {n}");
                break;
            }
        };
        n += 1;
        let line = if json {
            json_line(n, &record)
        } else {
            text_line(n, &record)
        };
        if let Err(e) = writeln!(out, "{line}") {
            return stdout_error(e);
        }
    }
    match out.flush() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => stdout_error(e),
    }
}

/// A closed pipe (`homa-dump x | head`) is a normal end.
fn stdout_error(e: io::Error) -> ExitCode {
    if e.kind() == ErrorKind::BrokenPipe {
        ExitCode::SUCCESS
    } else {
        eprintln!("homa-dump: standard output: {e}");
        ExitCode::from(1)
    }
}

/// `Ok(None)` asks for the help text.
fn parse_args(args: &[String]) -> Result<Option<(bool, String)>, String> {
    let mut json = false;
    let mut path = None;
    for arg in args {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--json" => json = true,
            "-" => path = set_once(path, arg)?,
            a if a.starts_with('-') => return Err(format!("unknown option {a}")),
            _ => path = set_once(path, arg)?,
        }
    }
    match path {
        Some(path) => Ok(Some((json, path))),
        None => Err("no capture file given".into()),
    }
}

fn set_once(path: Option<String>, arg: &str) -> Result<Option<String>, String> {
    match path {
        None => Ok(Some(arg.to_string())),
        Some(_) => Err("only one capture file, please".into()),
    }
}

// ---------------------------------------------------------------------------
// Capture files.

/// A point in time as the capture recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timestamp {
    secs: u64,
    nanos: u32,
    /// Decimal places worth showing: 6 for microsecond captures, 9 for finer.
    digits: u8,
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = u32::from(self.digits.min(9));
        let frac = self.nanos / 10u32.pow(9 - digits);
        write!(f, "{}.{:0width$}", self.secs, frac, width = digits as usize)
    }
}

/// One captured frame.
#[derive(Debug)]
struct Record {
    /// `None` for pcapng simple packet blocks, which carry no time.
    time: Option<Timestamp>,
    link_type: u32,
    data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: &[u8]) -> u16 {
        let b = [b[0], b[1]];
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }
    fn u32(self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }
}

/// Why reading stopped.
#[derive(Debug)]
enum ReadError {
    Io(io::Error),
    /// The file ends inside a record.
    Truncated,
    Corrupt(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Truncated => f.write_str("file ends inside a record"),
            ReadError::Corrupt(why) => write!(f, "corrupt capture ({why})"),
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Fills `buf`; `Ok(false)` if the input ended before the first byte,
/// [`ReadError::Truncated`] if it ended in the middle.
fn fill<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<bool, ReadError> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) if done == 0 => return Ok(false),
            Ok(0) => return Err(ReadError::Truncated),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// Like [`fill`], but the input must not end here either.
fn fill_all<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<(), ReadError> {
    match fill(r, buf)? {
        true => Ok(()),
        false if buf.is_empty() => Ok(()),
        false => Err(ReadError::Truncated),
    }
}

enum Capture<R> {
    Pcap {
        r: R,
        endian: Endian,
        nanos: bool,
        link_type: u32,
    },
    Pcapng {
        r: R,
        endian: Endian,
        /// Per interface of the current section: link type, snap length
        /// and timestamp resolution.
        interfaces: Vec<Interface>,
    },
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link_type: u32,
    snaplen: u32,
    tsresol: u8,
}

const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BYTE_ORDER: u32 = 0x1a2b_3c4d;
const PCAPNG_IDB: u32 = 1;
const PCAPNG_SPB: u32 = 3;
const PCAPNG_EPB: u32 = 6;
/// `if_tsresol` option code; the default resolution is microseconds.
const OPT_IF_TSRESOL: u16 = 9;
const DEFAULT_TSRESOL: u8 = 6;

impl<R: Read> Capture<R> {
    /// Reads the file header; an error here means "not a capture".
    fn open(mut r: R) -> Result<Self, String> {
        let mut magic = [0u8; 4];
        match fill(&mut r, &mut magic) {
            Ok(true) => {}
            Ok(false) => return Err("empty file, not a capture".into()),
            Err(ReadError::Truncated) => return Err("too short for a capture header".into()),
            Err(e) => return Err(e.to_string()),
        }
        let (endian, nanos) = match magic {
            [0xd4, 0xc3, 0xb2, 0xa1] => (Endian::Little, false),
            [0xa1, 0xb2, 0xc3, 0xd4] => (Endian::Big, false),
            [0x4d, 0x3c, 0xb2, 0xa1] => (Endian::Little, true),
            [0xa1, 0xb2, 0x3c, 0x4d] => (Endian::Big, true),
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                let mut capture = Capture::Pcapng {
                    r,
                    endian: Endian::Little,
                    interfaces: Vec::new(),
                };
                capture
                    .read_shb()
                    .map_err(|e| format!("bad pcapng section header: {e}"))?;
                return Ok(capture);
            }
            _ => return Err("not a pcap or pcapng file (unknown magic)".into()),
        };
        let mut rest = [0u8; 20];
        fill_all(&mut r, &mut rest).map_err(|_| "pcap header is truncated".to_string())?;
        let major = endian.u16(&rest[0..2]);
        if major != 2 {
            return Err(format!("unsupported pcap version {major}"));
        }
        Ok(Capture::Pcap {
            r,
            endian,
            nanos,
            // The high bits may carry FCS information; the type is below.
            link_type: endian.u32(&rest[16..20]) & 0xffff,
        })
    }

    /// Reads a pcapng section header block whose type was just read.
    fn read_shb(&mut self) -> Result<(), ReadError> {
        let Capture::Pcapng {
            r,
            endian,
            interfaces,
        } = self
        else {
            unreachable!("read_shb on a pcap file")
        };
        let mut head = [0u8; 8];
        fill_all(r, &mut head)?;
        *endian = match head[4..8] {
            [0x4d, 0x3c, 0x2b, 0x1a] => Endian::Little,
            [0x1a, 0x2b, 0x3c, 0x4d] => Endian::Big,
            _ => return Err(ReadError::Corrupt("bad byte-order magic".into())),
        };
        debug_assert_eq!(endian.u32(&head[4..8]), PCAPNG_BYTE_ORDER);
        let total = endian.u32(&head[0..4]) as usize;
        if total < 28 || total % 4 != 0 || total > MAX_RECORD {
            return Err(ReadError::Corrupt(format!("section header length {total}")));
        }
        // Version, section length, options and the trailing length.
        let mut body = vec![0u8; total - 12];
        fill_all(r, &mut body)?;
        let major = endian.u16(&body[0..2]);
        if major != 1 {
            return Err(ReadError::Corrupt(format!("pcapng version {major}")));
        }
        interfaces.clear();
        Ok(())
    }

    fn next_record(&mut self) -> Result<Option<Record>, ReadError> {
        match self {
            Capture::Pcap {
                r,
                endian,
                nanos,
                link_type,
            } => {
                let mut head = [0u8; 16];
                if !fill(r, &mut head)? {
                    return Ok(None);
                }
                let secs = endian.u32(&head[0..4]);
                let frac = endian.u32(&head[4..8]);
                let incl_len = endian.u32(&head[8..12]) as usize;
                if incl_len > MAX_RECORD {
                    return Err(ReadError::Corrupt(format!("record of {incl_len} bytes")));
                }
                let mut data = vec![0u8; incl_len];
                fill_all(r, &mut data)?;
                let (frac_nanos, digits) = if *nanos {
                    (u64::from(frac), 9)
                } else {
                    (u64::from(frac) * 1000, 6)
                };
                Ok(Some(Record {
                    time: Some(normalize(u64::from(secs), frac_nanos, digits)),
                    link_type: *link_type,
                    data,
                }))
            }
            Capture::Pcapng { .. } => self.next_pcapng_record(),
        }
    }

    fn next_pcapng_record(&mut self) -> Result<Option<Record>, ReadError> {
        loop {
            let Capture::Pcapng {
                r,
                endian,
                interfaces,
            } = self
            else {
                unreachable!("next_pcapng_record on a pcap file")
            };
            let mut type_bytes = [0u8; 4];
            if !fill(r, &mut type_bytes)? {
                return Ok(None);
            }
            let block_type = endian.u32(&type_bytes);
            if block_type == PCAPNG_SHB {
                self.read_shb()?;
                continue;
            }
            let mut len_bytes = [0u8; 4];
            fill_all(r, &mut len_bytes)?;
            let total = endian.u32(&len_bytes) as usize;
            if total < 12 || total % 4 != 0 || total > MAX_RECORD {
                return Err(ReadError::Corrupt(format!("block length {total}")));
            }
            let mut body = vec![0u8; total - 8];
            fill_all(r, &mut body)?;
            let trailer = endian.u32(&body[body.len() - 4..]) as usize;
            if trailer != total {
                return Err(ReadError::Corrupt(format!(
                    "block length {total} but trailer {trailer}"
                )));
            }
            let body = &body[..body.len() - 4];
            let e = *endian;
            match block_type {
                PCAPNG_IDB => {
                    if body.len() < 8 {
                        return Err(ReadError::Corrupt("short interface block".into()));
                    }
                    interfaces.push(Interface {
                        link_type: u32::from(e.u16(&body[0..2])),
                        snaplen: e.u32(&body[4..8]),
                        tsresol: find_tsresol(e, &body[8..]).unwrap_or(DEFAULT_TSRESOL),
                    });
                }
                PCAPNG_EPB => {
                    if body.len() < 20 {
                        return Err(ReadError::Corrupt("short packet block".into()));
                    }
                    let id = e.u32(&body[0..4]) as usize;
                    let ts = (u64::from(e.u32(&body[4..8])) << 32) | u64::from(e.u32(&body[8..12]));
                    let caplen = e.u32(&body[12..16]) as usize;
                    let Some(data) = body[20..].get(..caplen) else {
                        return Err(ReadError::Corrupt(format!(
                            "packet of {caplen} bytes in a {total}-byte block"
                        )));
                    };
                    // An undeclared interface leaves the link type unknown
                    // (0 is not Ethernet): a per-frame error, not the end.
                    let iface = interfaces.get(id).copied().unwrap_or(Interface {
                        link_type: u32::MAX,
                        snaplen: 0,
                        tsresol: DEFAULT_TSRESOL,
                    });
                    return Ok(Some(Record {
                        time: Some(pcapng_time(ts, iface.tsresol)),
                        link_type: iface.link_type,
                        data: data.to_vec(),
                    }));
                }
                PCAPNG_SPB => {
                    if body.len() < 4 {
                        return Err(ReadError::Corrupt("short simple packet block".into()));
                    }
                    let iface = interfaces.first().copied().unwrap_or(Interface {
                        link_type: u32::MAX,
                        snaplen: 0,
                        tsresol: DEFAULT_TSRESOL,
                    });
                    let orig_len = e.u32(&body[0..4]) as usize;
                    // The captured length is implicit: the original length
                    // cut by the snap length and by the block.
                    let mut caplen = orig_len.min(body.len() - 4);
                    if iface.snaplen != 0 {
                        caplen = caplen.min(iface.snaplen as usize);
                    }
                    return Ok(Some(Record {
                        time: None,
                        link_type: iface.link_type,
                        data: body[4..4 + caplen].to_vec(),
                    }));
                }
                // Name resolution, statistics, custom blocks...: not frames.
                _ => {}
            }
        }
    }
}

/// Seconds and a nanosecond count that may exceed one second.
fn normalize(secs: u64, nanos: u64, digits: u8) -> Timestamp {
    Timestamp {
        secs: secs + nanos / 1_000_000_000,
        nanos: (nanos % 1_000_000_000) as u32,
        digits,
    }
}

/// The value of the first `if_tsresol` option in an IDB's options.
fn find_tsresol(e: Endian, mut options: &[u8]) -> Option<u8> {
    while options.len() >= 4 {
        let code = e.u16(&options[0..2]);
        let len = usize::from(e.u16(&options[2..4]));
        let value = options.get(4..4 + len)?;
        match code {
            0 => return None,
            OPT_IF_TSRESOL if len == 1 => return Some(value[0]),
            _ => {}
        }
        let padded = 4 + len.div_ceil(4) * 4;
        options = options.get(padded..)?;
    }
    None
}

/// A pcapng timestamp in units of `tsresol`: 10^-n seconds, or 2^-n when
/// the high bit is set.
fn pcapng_time(ts: u64, tsresol: u8) -> Timestamp {
    let exp = u32::from(tsresol & 0x7f);
    let ts = u128::from(ts);
    if tsresol & 0x80 != 0 {
        // exp <= 127, so the shifts stay inside u128.
        let secs = ts >> exp;
        let frac = ts & ((1u128 << exp) - 1);
        let nanos = (frac * 1_000_000_000) >> exp;
        return normalize(secs as u64, nanos as u64, 9);
    }
    let digits = exp.min(9) as u8;
    match 10u128.checked_pow(exp) {
        Some(unit) => {
            let secs = ts / unit;
            let frac = ts % unit;
            // frac < unit, so frac * 10^9 fits whenever unit does times 10^9.
            let nanos = frac
                .checked_mul(1_000_000_000)
                .map_or(0, |scaled| scaled / unit);
            normalize(secs as u64, nanos as u64, digits)
        }
        // Units below 10^-38 s: a 64-bit count is far less than a second.
        None => normalize(0, 0, digits),
    }
}

// ---------------------------------------------------------------------------
// Output.

fn text_line(n: u64, record: &Record) -> String {
    let time = match record.time {
        Some(t) => t.to_string(),
        None => "-".to_string(),
    };
    if record.link_type != LINKTYPE_ETHERNET {
        return format!("{n} {time} [{}]", link_type_error(record.link_type));
    }
    format!("{n} {time} {}", PrettyFrame(&record.data))
}

fn link_type_error(link_type: u32) -> String {
    if link_type == u32::MAX {
        "frame of an undeclared interface".to_string()
    } else {
        format!("link type {link_type} is not Ethernet")
    }
}

/// A JSON value, with object keys in insertion order.
enum Json {
    Null,
    Bool(bool),
    /// Already formatted (integers, and times with fixed decimals).
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    fn num(n: impl fmt::Display) -> Json {
        Json::Num(n.to_string())
    }
    fn str(s: impl fmt::Display) -> Json {
        Json::Str(s.to_string())
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Num(n) => f.write_str(n),
            Json::Str(s) => write_json_string(f, s),
            Json::Arr(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Json::Obj(fields) => {
                f.write_char('{')?;
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write_json_string(f, key)?;
                    write!(f, ": {value}")?;
                }
                f.write_char('}')
            }
        }
    }
}

/// A JSON string literal: quotes, backslashes and control characters escaped.
fn write_json_string(f: &mut impl fmt::Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if u32::from(c) < 0x20 => write!(f, "\\u{:04x}", u32::from(c))?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

fn json_line(n: u64, record: &Record) -> String {
    let frame = ("frame", Json::num(n));
    if record.link_type != LINKTYPE_ETHERNET {
        return Json::Obj(vec![
            frame,
            ("error", Json::str(link_type_error(record.link_type))),
        ])
        .to_string();
    }
    let d = dissect(&record.data);
    let eth = match (&d.link, &d.network) {
        (Link::Malformed, _) => {
            return json_error(frame, "malformed Ethernet: truncated");
        }
        (
            Link::Ethernet(_),
            Network::Malformed {
                ethertype, problem, ..
            },
        ) => {
            return json_error(frame, format!("malformed {ethertype}: {problem}"));
        }
        (Link::Ethernet(eth), _) => eth_json(eth),
    };
    let time = match record.time {
        Some(t) => Json::num(t),
        None => Json::Null,
    };
    let mut fields = vec![
        frame,
        ("time", time),
        ("len", Json::num(record.data.len())),
        ("eth", eth),
    ];
    match &d.network {
        Network::Arp(arp) => fields.push(("arp", arp_json(arp))),
        Network::Ipv4 { .. } | Network::Ipv6(_) => fields.push(("ip", ip_json(&d))),
        // Handled above, or nothing above Ethernet to show.
        Network::None | Network::Other { .. } | Network::Malformed { .. } => {}
    }
    match &d.transport {
        Transport::Homa { repr, packet, .. } => fields.push(("homa", homa_json(repr, packet))),
        Transport::Icmpv4 { repr, checksum_ok } => {
            fields.push(("icmp", icmpv4_json(repr, *checksum_ok)))
        }
        Transport::Icmpv6 { repr, checksum_ok } => {
            fields.push(("icmp", icmpv6_json(repr, *checksum_ok)))
        }
        Transport::IcmpOther {
            ip_version,
            msg_type,
            code,
            len,
        } => fields.push((
            "icmp",
            Json::Obj(vec![
                ("version", Json::num(ip_version)),
                ("type", Json::num(msg_type)),
                ("code", Json::num(code)),
                ("len", Json::num(len)),
            ]),
        )),
        Transport::Malformed {
            protocol, problem, ..
        } => fields.push((
            "error",
            Json::str(format!("malformed {protocol}: {problem}")),
        )),
        Transport::None | Transport::Other { .. } => {}
    }
    Json::Obj(fields).to_string()
}

fn json_error(frame: (&'static str, Json), error: impl fmt::Display) -> String {
    Json::Obj(vec![frame, ("error", Json::str(error))]).to_string()
}

fn eth_json(eth: &EthernetRepr) -> Json {
    let vlan = match eth.vlan {
        Some(tag) => Json::Obj(vec![
            ("id", Json::num(tag.vid)),
            ("pcp", Json::num(tag.pcp)),
            ("dei", Json::Bool(tag.dei)),
        ]),
        None => Json::Null,
    };
    Json::Obj(vec![
        ("src", Json::str(eth.src_addr)),
        ("dst", Json::str(eth.dst_addr)),
        ("vlan", vlan),
        ("ethertype", Json::num(u16::from(eth.ethertype))),
    ])
}

fn arp_json(arp: &ArpRepr) -> Json {
    match *arp {
        ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_hardware_addr,
            target_protocol_addr,
        } => Json::Obj(vec![
            ("operation", Json::num(u16::from(operation))),
            ("sender_mac", Json::str(source_hardware_addr)),
            ("sender_ip", Json::str(source_protocol_addr)),
            ("target_mac", Json::str(target_hardware_addr)),
            ("target_ip", Json::str(target_protocol_addr)),
        ]),
        // ArpRepr is non-exhaustive; new kinds show their text form.
        #[allow(unreachable_patterns)]
        ref other => Json::Obj(vec![("summary", Json::str(other))]),
    }
}

fn ip_json(d: &Dissection<'_>) -> Json {
    match d.network {
        Network::Ipv4 { repr, checksum_ok } => Json::Obj(vec![
            ("version", Json::num(4)),
            ("src", Json::str(repr.src_addr)),
            ("dst", Json::str(repr.dst_addr)),
            ("proto", Json::num(u8::from(repr.next_header))),
            ("tos", Json::num(repr.tos)),
            ("priority", Json::num(repr.tos >> 5)),
            ("hop_limit", Json::num(repr.hop_limit)),
            ("payload_len", Json::num(repr.payload_len)),
            ("checksum_ok", Json::Bool(checksum_ok)),
        ]),
        Network::Ipv6(repr) => Json::Obj(vec![
            ("version", Json::num(6)),
            ("src", Json::str(repr.src_addr)),
            ("dst", Json::str(repr.dst_addr)),
            ("proto", Json::num(u8::from(repr.next_header))),
            ("traffic_class", Json::num(repr.traffic_class)),
            ("priority", Json::num(repr.traffic_class >> 5)),
            ("hop_limit", Json::num(repr.hop_limit)),
            ("payload_len", Json::num(repr.payload_len)),
        ]),
        _ => Json::Null,
    }
}

/// The fields of protocol.md section 3, named as there; raw values from the
/// packet except `offset` (DATA: after the 0xFFFFFFFF rule) and `acks`
/// (the valid entries).
fn homa_json(repr: &homa::Repr<'_>, p: &homa::Packet<&[u8]>) -> Json {
    let mut fields = vec![
        ("type", Json::str(repr.packet_type())),
        ("sport", Json::num(p.sport())),
        ("dport", Json::num(p.dport())),
        ("sequence", Json::num(p.sequence())),
        ("doff", Json::num(p.doff())),
        ("sender_id", Json::num(p.sender_id())),
        ("checksum", Json::num(p.checksum())),
        ("flags", Json::num(p.flags())),
        ("urgent", Json::num(p.urgent())),
    ];
    match &repr.kind {
        Kind::Data { payload, .. } => fields.extend([
            ("message_length", Json::num(p.message_length())),
            ("incoming", Json::num(p.incoming())),
            ("ack_client_id", Json::num(p.ack_client_id())),
            ("ack_server_port", Json::num(p.ack_server_port())),
            ("cutoff_version", Json::num(p.cutoff_version())),
            ("retransmit", Json::Bool(p.retransmit())),
            ("offset", Json::num(p.offset())),
            ("seg_offset", Json::num(p.seg_offset())),
            ("payload_len", Json::num(payload.len())),
        ]),
        Kind::Grant { .. } => fields.extend([
            ("offset", Json::num(p.grant_offset())),
            ("priority", Json::num(p.grant_priority())),
        ]),
        Kind::Resend { .. } => fields.extend([
            ("offset", Json::num(p.resend_offset())),
            ("length", Json::num(p.resend_length())),
            // A 36-byte (upstream) RESEND has no priority byte.
            (
                "priority",
                p.resend_priority().map_or(Json::Null, Json::num),
            ),
        ]),
        Kind::Cutoffs {
            unsched_cutoffs,
            version,
        } => fields.extend([
            (
                "unsched_cutoffs",
                Json::Arr(unsched_cutoffs.iter().map(Json::num).collect()),
            ),
            ("cutoff_version", Json::num(version)),
        ]),
        Kind::Ack { acks } => fields.extend([
            ("num_acks", Json::num(p.num_acks())),
            (
                "acks",
                Json::Arr(
                    acks.iter()
                        .map(|a| {
                            Json::Obj(vec![
                                ("client_id", Json::num(a.client_id)),
                                ("server_port", Json::num(a.server_port)),
                            ])
                        })
                        .collect(),
                ),
            ),
        ]),
        Kind::RpcUnknown | Kind::Busy | Kind::Freeze | Kind::NeedAck => {}
    }
    Json::Obj(fields)
}

fn icmpv4_json(repr: &Icmpv4Repr<'_>, checksum_ok: bool) -> Json {
    let mut fields = vec![("version", Json::num(4))];
    match *repr {
        Icmpv4Repr::EchoRequest {
            ident,
            seq_no,
            data,
        }
        | Icmpv4Repr::EchoReply {
            ident,
            seq_no,
            data,
        } => {
            let (t, name) = match repr {
                Icmpv4Repr::EchoRequest { .. } => (8, "echo request"),
                _ => (0, "echo reply"),
            };
            fields.extend([
                ("type", Json::num(t)),
                ("code", Json::num(0)),
                ("name", Json::str(name)),
                ("ident", Json::num(ident)),
                ("seq_no", Json::num(seq_no)),
                ("data_len", Json::num(data.len())),
            ]);
        }
        Icmpv4Repr::DstUnreachable {
            reason,
            header,
            data,
        } => {
            fields.extend([
                ("type", Json::num(3)),
                ("code", Json::num(u8::from(reason))),
                ("name", Json::str("dst-unreachable")),
                ("reason", Json::str(reason)),
                (
                    "quoted",
                    quoted_json(
                        header.src_addr.into(),
                        header.dst_addr.into(),
                        u8::from(header.next_header),
                        data,
                    ),
                ),
            ]);
        }
        #[allow(unreachable_patterns)]
        ref other => fields.push(("summary", Json::str(other))),
    }
    fields.push(("checksum_ok", Json::Bool(checksum_ok)));
    Json::Obj(fields)
}

fn icmpv6_json(repr: &Icmpv6Repr<'_>, checksum_ok: bool) -> Json {
    let mut fields = vec![("version", Json::num(6))];
    match *repr {
        Icmpv6Repr::EchoRequest {
            ident,
            seq_no,
            data,
        }
        | Icmpv6Repr::EchoReply {
            ident,
            seq_no,
            data,
        } => {
            let (t, name) = match repr {
                Icmpv6Repr::EchoRequest { .. } => (128, "echo request"),
                _ => (129, "echo reply"),
            };
            fields.extend([
                ("type", Json::num(t)),
                ("code", Json::num(0)),
                ("name", Json::str(name)),
                ("ident", Json::num(ident)),
                ("seq_no", Json::num(seq_no)),
                ("data_len", Json::num(data.len())),
            ]);
        }
        Icmpv6Repr::DstUnreachable {
            reason,
            header,
            data,
        } => fields.extend([
            ("type", Json::num(1)),
            ("code", Json::num(u8::from(reason))),
            ("name", Json::str("dst-unreachable")),
            ("reason", Json::str(reason)),
            (
                "quoted",
                quoted_json(
                    header.src_addr.into(),
                    header.dst_addr.into(),
                    u8::from(header.next_header),
                    data,
                ),
            ),
        ]),
        Icmpv6Repr::NeighborSolicit {
            target_addr,
            lladdr,
        } => fields.extend([
            ("type", Json::num(135)),
            ("code", Json::num(0)),
            ("name", Json::str("neighbor solicit")),
            ("target", Json::str(target_addr)),
            ("lladdr", lladdr.map_or(Json::Null, Json::str)),
        ]),
        Icmpv6Repr::NeighborAdvert {
            router,
            solicited,
            override_,
            target_addr,
            lladdr,
        } => fields.extend([
            ("type", Json::num(136)),
            ("code", Json::num(0)),
            ("name", Json::str("neighbor advert")),
            ("target", Json::str(target_addr)),
            ("lladdr", lladdr.map_or(Json::Null, Json::str)),
            ("router", Json::Bool(router)),
            ("solicited", Json::Bool(solicited)),
            ("override", Json::Bool(override_)),
        ]),
        #[allow(unreachable_patterns)]
        ref other => fields.push(("summary", Json::str(other))),
    }
    fields.push(("checksum_ok", Json::Bool(checksum_ok)));
    Json::Obj(fields)
}

/// The packet an ICMP error quotes: its addresses and protocol, and the
/// ports when the first four bytes after its header were quoted (Homa's
/// and TCP's sit there).
fn quoted_json(src: std::net::IpAddr, dst: std::net::IpAddr, proto: u8, data: &[u8]) -> Json {
    let mut fields = vec![
        ("src", Json::str(src)),
        ("dst", Json::str(dst)),
        ("proto", Json::num(proto)),
    ];
    if let [a, b, c, d, ..] = *data {
        fields.push(("sport", Json::num(u16::from_be_bytes([a, b]))));
        fields.push(("dport", Json::num(u16::from_be_bytes([c, d]))));
    }
    Json::Obj(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        let s = Json::str("a\"b\\c\nd\u{1}").to_string();
        assert_eq!(s, r#""a\"b\\c\nd\u0001""#);
    }

    #[test]
    fn timestamps_keep_the_capture_resolution() {
        assert_eq!(normalize(1, 2_000, 6).to_string(), "1.000002");
        assert_eq!(normalize(1, 2_000, 9).to_string(), "1.000002000");
        assert_eq!(normalize(1, 1_500_000_000, 9).to_string(), "2.500000000");
    }

    #[test]
    fn pcapng_resolutions_decimal_and_binary() {
        // Default microseconds.
        assert_eq!(pcapng_time(1_500_000, 6).to_string(), "1.500000");
        // Nanoseconds.
        assert_eq!(pcapng_time(2_000_000_001, 9).to_string(), "2.000000001");
        // 2^-10 s units: 1024 + 512 = 1.5 s.
        assert_eq!(pcapng_time(1536, 0x80 | 10).to_string(), "1.500000000");
        // Absurd resolutions do not panic.
        assert_eq!(pcapng_time(u64::MAX, 0x7f).secs, 0);
        assert_eq!(pcapng_time(u64::MAX, 0xff).secs, 0);
    }

    #[test]
    fn tsresol_is_found_among_other_options() {
        // if_name "eth0" (code 2), then if_tsresol 9, then end of options.
        let opts = [
            2, 0, 4, 0, b'e', b't', b'h', b'0', 9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(find_tsresol(Endian::Little, &opts), Some(9));
        assert_eq!(find_tsresol(Endian::Little, &opts[..8]), None);
    }

    #[test]
    fn arguments() {
        let args = |a: &[&str]| parse_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(args(&["x.pcap"]), Ok(Some((false, "x.pcap".into()))));
        assert_eq!(args(&["--json", "-"]), Ok(Some((true, "-".into()))));
        assert_eq!(args(&["--help", "x"]), Ok(None));
        assert!(args(&[]).is_err());
        assert!(args(&["a", "b"]).is_err());
        assert!(args(&["--jsn", "a"]).is_err());
    }
}
