//! Capture files: classic pcap (microsecond or nanosecond, either byte
//! order) and pcapng (every block type, any number of sections and
//! interfaces, `if_tsresol` and `if_tsoffset` honoured), read through
//! pcap-parser from a file or a pipe.
//!
//! Every record comes with the byte offset where it starts, so a damaged
//! file is reported as "frame N at byte offset O".

use std::fmt;
use std::io::{self, Cursor, ErrorKind, Read};

use pcap_parser::pcapng::Block;
use pcap_parser::traits::{PcapNGPacketBlock, PcapReaderIterator};
use pcap_parser::{create_reader, PcapBlockOwned, PcapError};

/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// `LINKTYPE_RAW`: an IPv4 or IPv6 packet, told apart by its version.
pub const LINKTYPE_RAW: u32 = 101;
/// `LINKTYPE_LINUX_SLL`: Linux cooked capture v1 (`tcpdump -i any`, old).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// `LINKTYPE_IPV4`.
pub const LINKTYPE_IPV4: u32 = 228;
/// `LINKTYPE_IPV6`.
pub const LINKTYPE_IPV6: u32 = 229;
/// `LINKTYPE_LINUX_SLL2`: Linux cooked capture v2 (`tcpdump -i any`).
pub const LINKTYPE_LINUX_SLL2: u32 = 276;
/// The link type of a frame from an interface the file never declared.
pub const LINKTYPE_UNDECLARED: u32 = u32::MAX;

/// The buffer starts here and doubles for larger blocks...
const INITIAL_BUFFER: usize = 256 << 10;
/// ... up to this; a larger block is taken as corruption.
const MAX_BUFFER: usize = 32 << 20;

/// A point in time as the capture recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp {
    /// Seconds since the epoch.
    pub secs: u64,
    /// Nanoseconds, below 10^9.
    pub nanos: u32,
    /// Decimal places worth showing: 6 for microsecond captures, 9 for finer.
    pub digits: u8,
}

impl Timestamp {
    /// Seconds and a nanosecond count that may exceed one second.
    pub fn new(secs: u64, nanos: u64, digits: u8) -> Timestamp {
        Timestamp {
            secs: secs.saturating_add(nanos / 1_000_000_000),
            nanos: (nanos % 1_000_000_000) as u32,
            digits,
        }
    }

    /// Nanoseconds since the epoch.
    pub fn total_nanos(&self) -> i128 {
        i128::from(self.secs) * 1_000_000_000 + i128::from(self.nanos)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = u32::from(self.digits.min(9));
        let frac = self.nanos / 10u32.pow(9 - digits);
        write!(f, "{}.{:0width$}", self.secs, frac, width = digits as usize)
    }
}

/// One captured frame.
#[derive(Debug, Clone)]
pub struct Record {
    /// `None` for pcapng simple packet blocks, which carry no time.
    pub time: Option<Timestamp>,
    /// The link type of its interface.
    pub link_type: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// How long the frame was on the wire (more than `data` when the snap
    /// length cut it).
    pub orig_len: usize,
    /// Where its record starts in the file.
    pub offset: u64,
}

/// Why reading stopped before the end of the file.
#[derive(Debug)]
pub enum ReadError {
    /// The file is not a capture, or its header is damaged.
    NotACapture(String),
    /// The file ends inside the record of frame `frame`, which starts at
    /// byte `offset`.
    Truncated {
        /// The number the frame would have had.
        frame: u64,
        /// Where its record starts.
        offset: u64,
    },
    /// The record at byte `offset` (frame `frame` if it held one) is damaged.
    Corrupt {
        /// The number the next frame would have had.
        frame: u64,
        /// Where the record starts.
        offset: u64,
        /// What is wrong.
        why: String,
    },
    /// Reading failed.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotACapture(why) => f.write_str(why),
            ReadError::Truncated { frame, offset } => write!(
                f,
                "truncated capture: the file ends inside the record of frame {frame} \
                 (record at byte offset {offset})"
            ),
            ReadError::Corrupt { frame, offset, why } => write!(
                f,
                "corrupt capture: {why} in the record at byte offset {offset} (frame {frame})"
            ),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link_type: u32,
    snaplen: u32,
    tsresol: u8,
    tsoffset: i64,
}

/// Reads records from a capture, one at a time.
pub struct Reader {
    inner: Box<dyn PcapReaderIterator + Send>,
    /// Classic pcap: nanosecond timestamps.
    nanos: bool,
    /// Classic pcap: the file's link type.
    link_type: u32,
    /// pcapng: the interfaces of the current section.
    interfaces: Vec<Interface>,
    /// Byte offset of the next record.
    offset: u64,
    /// Frames returned so far.
    frames: u64,
    capacity: usize,
    /// Classic pcap: the snap length and whether the file is big-endian,
    /// to tell a corrupt record length from a file that ends early.
    legacy: Option<(u32, bool)>,
}

impl Reader {
    /// Reads the file header of `input`. Reads no further than the header
    /// (a pipe from `tcpdump -U` delivers it before any packet).
    pub fn open(input: impl Read + Send + 'static) -> Result<Reader, ReadError> {
        Reader::with_buffer(input, INITIAL_BUFFER)
    }

    /// Like [`open`](Self::open) with a first buffer of `initial` bytes
    /// (at least the file header's length); it doubles for larger blocks.
    pub fn with_buffer(
        mut input: impl Read + Send + 'static,
        initial: usize,
    ) -> Result<Reader, ReadError> {
        let head = read_header(&mut input)?;
        let legacy = legacy_snaplen(&head);
        let initial = initial.max(head.len() + 1).min(MAX_BUFFER);
        let input = Cursor::new(head).chain(input);
        let inner = create_reader(initial, input).map_err(|e| {
            ReadError::NotACapture(match e {
                PcapError::HeaderNotRecognized => "not a pcap or pcapng file".to_string(),
                other => format!("bad capture header ({})", describe(&other)),
            })
        })?;
        Ok(Reader {
            inner,
            nanos: false,
            link_type: LINKTYPE_ETHERNET,
            interfaces: Vec::new(),
            offset: 0,
            frames: 0,
            capacity: initial,
            legacy,
        })
    }

    /// Frames returned so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The next frame; `Ok(None)` at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<Record>, ReadError> {
        loop {
            let before = self.inner.data().len();
            let (size, record) = match self.inner.next() {
                Ok((size, block)) => {
                    let record = take_block(
                        block,
                        &mut self.nanos,
                        &mut self.link_type,
                        &mut self.interfaces,
                    );
                    (size, record)
                }
                Err(PcapError::Eof) => return Ok(None),
                Err(PcapError::Incomplete(_)) => {
                    self.check_record_length()?;
                    if self.inner.refill().is_err() {
                        return Err(self.io_error());
                    }
                    if self.inner.data().len() == before && !self.inner.reader_exhausted() {
                        // A full buffer that refill cannot add to.
                        self.grow()?;
                    }
                    continue;
                }
                Err(PcapError::BufferTooSmall) => {
                    self.check_record_length()?;
                    self.grow()?;
                    if self.inner.refill().is_err() {
                        return Err(self.io_error());
                    }
                    continue;
                }
                Err(PcapError::UnexpectedEof) => {
                    self.check_record_length()?;
                    return Err(ReadError::Truncated {
                        frame: self.frames + 1,
                        offset: self.offset,
                    });
                }
                Err(PcapError::ReadError) => return Err(self.io_error()),
                Err(e) => {
                    let why = describe(&e);
                    return Err(self.corrupt(why));
                }
            };
            self.inner.consume(size);
            let offset = self.offset;
            self.offset += size as u64;
            match record {
                Ok(Some(mut record)) => {
                    self.frames += 1;
                    record.offset = offset;
                    return Ok(Some(record));
                }
                Ok(None) => {}
                Err(why) => {
                    self.offset = offset;
                    return Err(self.corrupt(why));
                }
            }
        }
    }

    /// A classic pcap record whose captured length is beyond the file's
    /// snap length is corrupt (as tcpdump says), not a file that ends early.
    fn check_record_length(&self) -> Result<(), ReadError> {
        let (Some((snaplen, big)), Some(field)) = (self.legacy, self.inner.data().get(8..12))
        else {
            return Ok(());
        };
        let field = [field[0], field[1], field[2], field[3]];
        let caplen = if big {
            u32::from_be_bytes(field)
        } else {
            u32::from_le_bytes(field)
        };
        if snaplen > 0 && caplen > snaplen {
            return Err(self.corrupt(format!(
                "invalid packet capture length {caplen}, bigger than snaplen of {snaplen}"
            )));
        }
        Ok(())
    }

    fn grow(&mut self) -> Result<(), ReadError> {
        if self.capacity >= MAX_BUFFER {
            let why = format!("a record longer than {} MiB", MAX_BUFFER >> 20);
            return Err(self.corrupt(why));
        }
        self.capacity *= 2;
        self.inner.grow(self.capacity);
        Ok(())
    }

    fn corrupt(&self, why: String) -> ReadError {
        ReadError::Corrupt {
            frame: self.frames + 1,
            offset: self.offset,
            why,
        }
    }

    fn io_error(&self) -> ReadError {
        ReadError::Io(io::Error::other(format!(
            "read error at byte offset {}",
            self.offset
        )))
    }
}

/// pcap-parser's error in words (its `Display` of a parse error dumps the
/// input bytes).
fn describe<I>(e: &PcapError<I>) -> String {
    match e {
        PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
            format!("malformed block ({kind:?})")
        }
        PcapError::Eof | PcapError::UnexpectedEof | PcapError::Incomplete(_) => {
            "too short".to_string()
        }
        PcapError::HeaderNotRecognized => "unknown block header".to_string(),
        PcapError::ReadError => "read error".to_string(),
        PcapError::BufferTooSmall => "block too large".to_string(),
        #[allow(unreachable_patterns)]
        _ => "malformed block".to_string(),
    }
}

/// The first bytes of the file, as many as its header needs: 24 for pcap,
/// the whole section header block for pcapng.
fn read_header(input: &mut impl Read) -> Result<Vec<u8>, ReadError> {
    let mut head = vec![0u8; 12];
    let got = read_full(input, &mut head)?;
    if got == 0 {
        return Err(ReadError::NotACapture("empty file, not a capture".into()));
    }
    head.truncate(got);
    let want = match head.get(..4) {
        Some([0x0a, 0x0d, 0x0d, 0x0a]) if head.len() == 12 => {
            let len = match head[8..12] {
                [0x1a, 0x2b, 0x3c, 0x4d] => {
                    u32::from_be_bytes([head[4], head[5], head[6], head[7]])
                }
                _ => u32::from_le_bytes([head[4], head[5], head[6], head[7]]),
            } as usize;
            len.clamp(12, 1 << 20)
        }
        _ => 24,
    };
    if want > head.len() {
        let have = head.len();
        head.resize(want, 0);
        let got = read_full(input, &mut head[have..])?;
        head.truncate(have + got);
    }
    if head.len() < want.min(24) {
        return Err(ReadError::NotACapture(format!(
            "{} bytes: too short for a capture header",
            head.len()
        )));
    }
    Ok(head)
}

/// A classic pcap header's snap length and byte order (true: big-endian);
/// `None` for pcapng.
fn legacy_snaplen(head: &[u8]) -> Option<(u32, bool)> {
    let big = match head.get(..4)? {
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => true,
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => false,
        _ => return None,
    };
    let f: [u8; 4] = head.get(16..20)?.try_into().ok()?;
    Some((
        if big {
            u32::from_be_bytes(f)
        } else {
            u32::from_le_bytes(f)
        },
        big,
    ))
}

/// Reads until `buf` is full or the input ends; the count read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> Result<usize, ReadError> {
    let mut done = 0;
    while done < buf.len() {
        match input.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    Ok(done)
}

/// The frame a block holds, if any, updating the per-file state.
fn take_block(
    block: PcapBlockOwned<'_>,
    nanos: &mut bool,
    link_type: &mut u32,
    interfaces: &mut Vec<Interface>,
) -> Result<Option<Record>, String> {
    match block {
        PcapBlockOwned::LegacyHeader(h) => {
            if h.version_major != 2 {
                return Err(format!("unsupported pcap version {}", h.version_major));
            }
            *nanos = h.is_nanosecond_precision();
            // The high bits may carry FCS information; the type is below.
            *link_type = (h.network.0 as u32) & 0xffff;
            Ok(None)
        }
        PcapBlockOwned::Legacy(b) => {
            let (frac, digits) = if *nanos {
                (u64::from(b.ts_usec), 9)
            } else {
                (u64::from(b.ts_usec) * 1000, 6)
            };
            Ok(Some(Record {
                time: Some(Timestamp::new(u64::from(b.ts_sec), frac, digits)),
                link_type: *link_type,
                data: b.data.to_vec(),
                orig_len: (b.origlen as usize).max(b.data.len()),
                offset: 0,
            }))
        }
        PcapBlockOwned::NG(Block::SectionHeader(_)) => {
            interfaces.clear();
            Ok(None)
        }
        PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
            interfaces.push(Interface {
                link_type: (idb.linktype.0 as u32) & 0xffff,
                snaplen: idb.snaplen,
                tsresol: idb.if_tsresol,
                tsoffset: idb.if_tsoffset,
            });
            Ok(None)
        }
        PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
            let iface = interfaces.get(epb.if_id as usize).copied();
            let data = epb.packet_data();
            if data.len() < epb.caplen as usize {
                return Err(format!(
                    "packet of {} bytes in a {}-byte block",
                    epb.caplen, epb.block_len1
                ));
            }
            let ts = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
            let time = iface.map(|i| pcapng_time(ts, i.tsresol, i.tsoffset));
            Ok(Some(Record {
                time: Some(time.unwrap_or_else(|| pcapng_time(ts, 6, 0))),
                link_type: iface.map_or(LINKTYPE_UNDECLARED, |i| i.link_type),
                data: data.to_vec(),
                orig_len: (epb.origlen as usize).max(data.len()),
                offset: 0,
            }))
        }
        PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
            let iface = interfaces.first().copied();
            let mut data = spb.packet_data();
            if let Some(i) = iface.filter(|i| i.snaplen != 0) {
                data = &data[..data.len().min(i.snaplen as usize)];
            }
            Ok(Some(Record {
                time: None,
                link_type: iface.map_or(LINKTYPE_UNDECLARED, |i| i.link_type),
                data: data.to_vec(),
                orig_len: (spb.origlen as usize).max(data.len()),
                offset: 0,
            }))
        }
        // Name resolution, statistics, custom blocks...: not frames.
        PcapBlockOwned::NG(_) => Ok(None),
    }
}

/// A pcapng timestamp in units of `tsresol` (10^-n seconds, or 2^-n when
/// the high bit is set) plus `tsoffset` seconds.
pub fn pcapng_time(ts: u64, tsresol: u8, tsoffset: i64) -> Timestamp {
    let exp = u32::from(tsresol & 0x7f);
    let ts = u128::from(ts);
    let (secs, nanos, digits) = if tsresol & 0x80 != 0 {
        // exp <= 127, so the shifts stay inside u128.
        let secs = ts >> exp;
        let frac = ts & ((1u128 << exp) - 1);
        (secs, (frac * 1_000_000_000) >> exp, 9)
    } else {
        let digits = exp.min(9) as u8;
        match 10u128.checked_pow(exp) {
            // frac < unit, so frac * 10^9 fits whenever unit does times 10^9.
            Some(unit) => (
                ts / unit,
                (ts % unit)
                    .checked_mul(1_000_000_000)
                    .map_or(0, |scaled| scaled / unit),
                digits,
            ),
            // Units below 10^-38 s: a 64-bit count is far less than a second.
            None => (0, 0, digits),
        }
    };
    let secs = u64::try_from(secs).unwrap_or(u64::MAX);
    let secs = secs.saturating_add_signed(tsoffset);
    Timestamp::new(secs, nanos as u64, digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_keep_the_capture_resolution() {
        assert_eq!(Timestamp::new(1, 2_000, 6).to_string(), "1.000002");
        assert_eq!(Timestamp::new(1, 2_000, 9).to_string(), "1.000002000");
        assert_eq!(
            Timestamp::new(1, 1_500_000_000, 9).to_string(),
            "2.500000000"
        );
    }

    #[test]
    fn pcapng_resolutions_decimal_binary_and_offset() {
        assert_eq!(pcapng_time(1_500_000, 6, 0).to_string(), "1.500000");
        assert_eq!(pcapng_time(2_000_000_001, 9, 0).to_string(), "2.000000001");
        // 2^-10 s units: 1024 + 512 = 1.5 s.
        assert_eq!(pcapng_time(1536, 0x80 | 10, 0).to_string(), "1.500000000");
        assert_eq!(pcapng_time(1_500_000, 6, 100).to_string(), "101.500000");
        // Absurd resolutions do not panic.
        assert_eq!(pcapng_time(u64::MAX, 0x7f, 0).secs, 0);
        assert_eq!(pcapng_time(u64::MAX, 0xff, 0).secs, 0);
    }
}
