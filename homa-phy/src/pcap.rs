//! Writing frames to a pcap capture, readable by Wireshark and tcpdump.
//!
//! [`PcapWriter`] wraps a [`Device`] and records the frames that pass through
//! it into a [`PcapSink`]: a tiny `no_std` trait with a byte `write` and a
//! `flush`, whose provided methods lay out the pcap headers. Under `std` every
//! [`std::io::Write`] (a `File`, a `BufWriter`, a `Vec<u8>`) is a sink; on bare
//! metal, [`SliceSink`] writes into a caller buffer, or implement the trait
//! over a UART or RTT channel.
//!
//! The format is classic pcap with **nanosecond** timestamps (magic
//! `0xa1b23c4d`), version 2.4, snap length 65535, written little-endian on
//! every host so captures are byte-for-byte reproducible. Timestamps are the
//! `timestamp` given to `receive`/`transmit`, counted from the caller's epoch.
//!
//! ```
//! use homa_phy::pcap::{PcapMode, PcapWriter, SliceSink};
//! use homa_phy::{Device, Instant, Loopback, TxToken};
//!
//! let mut storage = [0u8; 256];
//! let mut dev = PcapWriter::new(Loopback::<4>::new(), SliceSink::new(&mut storage), PcapMode::Both);
//! dev.transmit(Instant::from_micros(5)).unwrap().consume(14, |b| b.fill(0xff));
//! let (_, sink) = dev.into_parts();
//! assert_eq!(sink.written().len(), 24 + 16 + 14);
//! ```

use core::cell::{Cell, RefCell};
use core::fmt;

use crate::{Device, DeviceCapabilities, Instant, PacketMeta};

/// Magic number of pcap files with nanosecond timestamps.
pub const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Largest number of bytes recorded per frame; longer frames are cut.
pub const PCAP_SNAPLEN: u32 = 65_535;

/// The link type recorded in the global header: what the frames start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PcapLinkType {
    /// `LINKTYPE_ETHERNET` (1): Ethernet II frames.
    Ethernet,
    /// `LINKTYPE_RAW` (101): bare IPv4 or IPv6 packets.
    Raw,
}

impl PcapLinkType {
    /// The number written into the file.
    pub const fn code(self) -> u32 {
        match self {
            PcapLinkType::Ethernet => 1,
            PcapLinkType::Raw => 101,
        }
    }
}

/// A sink could not take the bytes (full buffer, I/O error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SinkError;

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("pcap sink could not take the data")
    }
}

impl core::error::Error for SinkError {}

/// Where pcap bytes go.
///
/// Implement [`write`](PcapSink::write) (and [`flush`](PcapSink::flush) if the
/// sink buffers); the header helpers are provided.
pub trait PcapSink {
    /// Appends all of `data`, or reports that it could not.
    fn write(&mut self, data: &[u8]) -> Result<(), SinkError>;

    /// Pushes buffered bytes out. The default does nothing.
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// Writes the 24-byte pcap global header.
    fn global_header(&mut self, link_type: PcapLinkType) -> Result<(), SinkError> {
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes()); // version major
        header[6..8].copy_from_slice(&4u16.to_le_bytes()); // version minor
                                                           // thiszone (8..12) and sigfigs (12..16) stay zero.
        header[16..20].copy_from_slice(&PCAP_SNAPLEN.to_le_bytes());
        header[20..24].copy_from_slice(&link_type.code().to_le_bytes());
        self.write(&header)
    }

    /// Writes the 16-byte header of a record of a `length`-byte frame seen at
    /// `timestamp`. The recorded length is capped at [`PCAP_SNAPLEN`].
    fn packet_header(&mut self, timestamp: Instant, length: usize) -> Result<(), SinkError> {
        let nanos = timestamp.total_nanos();
        // pcap seconds are 32 bits: they wrap after 136 years of uptime.
        let secs = (nanos / 1_000_000_000) as u32;
        let frac = (nanos % 1_000_000_000) as u32;
        let orig_len = u32::try_from(length).unwrap_or(u32::MAX);
        let incl_len = orig_len.min(PCAP_SNAPLEN);
        let mut header = [0u8; 16];
        header[0..4].copy_from_slice(&secs.to_le_bytes());
        header[4..8].copy_from_slice(&frac.to_le_bytes());
        header[8..12].copy_from_slice(&incl_len.to_le_bytes());
        header[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.write(&header)
    }

    /// Writes one whole record: header and (up to the snap length) bytes.
    fn packet(&mut self, timestamp: Instant, frame: &[u8]) -> Result<(), SinkError> {
        self.packet_header(timestamp, frame.len())?;
        let shown = frame.len().min(PCAP_SNAPLEN as usize);
        self.write(&frame[..shown])
    }
}

#[cfg(feature = "std")]
impl<T: std::io::Write + ?Sized> PcapSink for T {
    fn write(&mut self, data: &[u8]) -> Result<(), SinkError> {
        self.write_all(data).map_err(|_| SinkError)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        std::io::Write::flush(self).map_err(|_| SinkError)
    }
}

/// A sink over a caller-provided byte buffer, for `no_std` targets and tests.
///
/// A write that does not fit is refused whole, so the buffer always holds
/// complete records.
#[derive(Debug)]
pub struct SliceSink<'a> {
    buffer: &'a mut [u8],
    len: usize,
}

impl<'a> SliceSink<'a> {
    /// An empty sink over `buffer`.
    pub fn new(buffer: &'a mut [u8]) -> Self {
        SliceSink { buffer, len: 0 }
    }

    /// The bytes written so far.
    pub fn written(&self) -> &[u8] {
        &self.buffer[..self.len]
    }

    /// Forgets what was written.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl PcapSink for SliceSink<'_> {
    fn write(&mut self, data: &[u8]) -> Result<(), SinkError> {
        let end = self.len.checked_add(data.len()).ok_or(SinkError)?;
        let dst = self.buffer.get_mut(self.len..end).ok_or(SinkError)?;
        dst.copy_from_slice(data);
        self.len = end;
        Ok(())
    }
}

/// Which frames a [`PcapWriter`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PcapMode {
    /// Received and transmitted frames.
    Both,
    /// Received frames only.
    RxOnly,
    /// Transmitted frames only.
    TxOnly,
}

impl PcapMode {
    fn rx(self) -> bool {
        matches!(self, PcapMode::Both | PcapMode::RxOnly)
    }
    fn tx(self) -> bool {
        matches!(self, PcapMode::Both | PcapMode::TxOnly)
    }
}

/// Shared by the writer and its tokens.
struct Recorder<S> {
    // RX records are written before the stack runs and TX records after, so
    // the two tokens of a `receive` never write at once; a failed borrow only
    // counts as a lost record.
    sink: RefCell<S>,
    errors: Cell<u64>,
}

impl<S: PcapSink> Recorder<S> {
    fn record(&self, timestamp: Instant, frame: &[u8]) {
        let ok = match self.sink.try_borrow_mut() {
            Ok(mut sink) => sink.packet(timestamp, frame).is_ok(),
            Err(_) => false,
        };
        if !ok {
            self.errors.set(self.errors.get().saturating_add(1));
        }
    }
}

/// A [`Device`] that records the frames passing through it as pcap.
///
/// Sink errors never disturb the traffic: the frame is still delivered and
/// the failure is counted ([`PcapWriter::sink_errors`]).
pub struct PcapWriter<D: Device, S: PcapSink> {
    lower: D,
    recorder: Recorder<S>,
    mode: PcapMode,
}

impl<D: Device, S: PcapSink> PcapWriter<D, S> {
    /// Wraps `lower`, writing the global header (Ethernet) to `sink` now.
    pub fn new(lower: D, sink: S, mode: PcapMode) -> Self {
        Self::with_link_type(lower, sink, mode, PcapLinkType::Ethernet)
    }

    /// Like [`new`](Self::new) for a device whose frames are not Ethernet.
    pub fn with_link_type(lower: D, mut sink: S, mode: PcapMode, link_type: PcapLinkType) -> Self {
        let errors = u64::from(sink.global_header(link_type).is_err());
        PcapWriter {
            lower,
            recorder: Recorder {
                sink: RefCell::new(sink),
                errors: Cell::new(errors),
            },
            mode,
        }
    }

    /// Which frames are recorded.
    pub fn mode(&self) -> PcapMode {
        self.mode
    }

    /// Records (header or frame) the sink refused.
    pub fn sink_errors(&self) -> u64 {
        self.recorder.errors.get()
    }

    /// Flushes the sink.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        self.recorder.sink.get_mut().flush()
    }

    /// The sink, mutably.
    pub fn sink_mut(&mut self) -> &mut S {
        self.recorder.sink.get_mut()
    }

    /// The wrapped device.
    pub fn get_ref(&self) -> &D {
        &self.lower
    }

    /// The wrapped device, mutably.
    pub fn get_mut(&mut self) -> &mut D {
        &mut self.lower
    }

    /// Unwraps the device (the sink is dropped; flush first if it buffers).
    pub fn into_inner(self) -> D {
        self.lower
    }

    /// Unwraps the device and the sink.
    pub fn into_parts(self) -> (D, S) {
        (self.lower, self.recorder.sink.into_inner())
    }
}

/// Receive token of a [`PcapWriter`].
pub struct PcapRxToken<'a, T, S> {
    token: T,
    /// `None` when received frames are not recorded.
    recorder: Option<&'a Recorder<S>>,
    timestamp: Instant,
}

/// Transmit token of a [`PcapWriter`].
pub struct PcapTxToken<'a, T, S> {
    token: T,
    /// `None` when transmitted frames are not recorded.
    recorder: Option<&'a Recorder<S>>,
    timestamp: Instant,
}

impl<T: crate::RxToken, S: PcapSink> crate::RxToken for PcapRxToken<'_, T, S> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let (recorder, timestamp) = (self.recorder, self.timestamp);
        self.token.consume(|frame| {
            if let Some(recorder) = recorder {
                recorder.record(timestamp, frame);
            }
            f(frame)
        })
    }

    fn meta(&self) -> PacketMeta {
        self.token.meta()
    }
}

impl<T: crate::TxToken, S: PcapSink> crate::TxToken for PcapTxToken<'_, T, S> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let (recorder, timestamp) = (self.recorder, self.timestamp);
        self.token.consume(len, |frame| {
            let r = f(frame);
            if let Some(recorder) = recorder {
                recorder.record(timestamp, frame);
            }
            r
        })
    }

    fn set_meta(&mut self, meta: PacketMeta) {
        self.token.set_meta(meta);
    }
}

impl<D: Device, S: PcapSink> Device for PcapWriter<D, S> {
    type RxToken<'a>
        = PcapRxToken<'a, D::RxToken<'a>, S>
    where
        Self: 'a;
    type TxToken<'a>
        = PcapTxToken<'a, D::TxToken<'a>, S>
    where
        Self: 'a;

    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let (rx, tx) = self.lower.receive(timestamp)?;
        let recorder = &self.recorder;
        Some((
            PcapRxToken {
                token: rx,
                recorder: self.mode.rx().then_some(recorder),
                timestamp,
            },
            PcapTxToken {
                token: tx,
                recorder: self.mode.tx().then_some(recorder),
                timestamp,
            },
        ))
    }

    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>> {
        let tx = self.lower.transmit(timestamp)?;
        Some(PcapTxToken {
            token: tx,
            recorder: self.mode.tx().then_some(&self.recorder),
            timestamp,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.lower.capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Loopback, RxToken as _, TxToken as _};

    /// An ARP request: who-has 10.0.0.1 tell 10.0.0.2.
    const ARP: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x06, //
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, //
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 10, 0, 0, 2, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 10, 0, 0, 1,
    ];

    /// Sends ARP at 1.5 s (TX), receives it at 2.000000007 s (RX), then sends
    /// a 60-byte frame at 3 s.
    fn exercise<S: PcapSink>(dev: &mut PcapWriter<Loopback<4, 128>, S>) {
        dev.transmit(Instant::from_millis(1_500))
            .unwrap()
            .consume(ARP.len(), |b| b.copy_from_slice(&ARP));
        let (rx, _) = dev.receive(Instant::from_nanos(2_000_000_007)).unwrap();
        rx.consume(|_| ());
        dev.transmit(Instant::from_secs(3))
            .unwrap()
            .consume(60, |b| b.fill(0x11));
    }

    fn le32(bytes: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn global_header_bytes_are_exact() {
        let mut buf = [0u8; 24];
        let mut sink = SliceSink::new(&mut buf);
        sink.global_header(PcapLinkType::Ethernet).unwrap();
        assert_eq!(
            sink.written(),
            [
                0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0,
                0, 0
            ]
        );
    }

    #[test]
    fn slice_sink_refuses_what_does_not_fit_and_counts_it() {
        let mut buf = [0u8; 24 + 16 + 10];
        let mut dev = PcapWriter::new(
            Loopback::<4, 128>::new(),
            SliceSink::new(&mut buf),
            PcapMode::Both,
        );
        dev.transmit(Instant::ZERO)
            .unwrap()
            .consume(10, |b| b.fill(1));
        dev.transmit(Instant::ZERO)
            .unwrap()
            .consume(10, |b| b.fill(2));
        assert_eq!(dev.sink_errors(), 1);
        assert_eq!(dev.get_ref().len(), 2, "traffic is not disturbed");
        let (_, sink) = dev.into_parts();
        assert_eq!(sink.written().len(), 24 + 16 + 10);
    }

    #[test]
    fn modes_select_directions() {
        for (mode, want) in [
            (PcapMode::Both, 3),
            (PcapMode::RxOnly, 1),
            (PcapMode::TxOnly, 2),
        ] {
            let mut storage = [0u8; 1024];
            let mut dev = PcapWriter::new(Loopback::new(), SliceSink::new(&mut storage), mode);
            exercise(&mut dev);
            let (_, sink) = dev.into_parts();
            let bytes = sink.written();
            let mut records = 0;
            let mut at = 24;
            while at < bytes.len() {
                at += 16 + le32(bytes, at + 8) as usize;
                records += 1;
            }
            assert_eq!(records, want, "{mode:?}");
        }
    }

    #[test]
    fn long_frames_are_cut_at_the_snap_length() {
        let mut storage = std::vec![0u8; 70_000];
        let mut sink = SliceSink::new(&mut storage);
        sink.packet(Instant::ZERO, &[7u8; 70_000]).unwrap();
        let out = sink.written();
        assert_eq!(le32(out, 8), 65_535);
        assert_eq!(le32(out, 12), 70_000);
        assert_eq!(out.len(), 16 + 65_535);
    }

    #[cfg(feature = "std")]
    fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(std::format!("homa-phy-{}-{name}.pcap", std::process::id()))
    }

    #[test]
    #[cfg(feature = "std")]
    fn file_has_exact_headers_and_frames() {
        let path = temp_path("exact");
        let file = std::fs::File::create(&path).unwrap();
        let mut dev = PcapWriter::new(Loopback::new(), file, PcapMode::Both);
        exercise(&mut dev);
        dev.flush().unwrap();
        drop(dev);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();

        assert_eq!(le32(&bytes, 0), 0xa1b2_3c4d);
        assert_eq!(&bytes[4..8], [2, 0, 4, 0]);
        assert_eq!(le32(&bytes, 8), 0);
        assert_eq!(le32(&bytes, 12), 0);
        assert_eq!(le32(&bytes, 16), 65_535);
        assert_eq!(le32(&bytes, 20), 1, "LINKTYPE_ETHERNET");

        let mut at = 24;
        let want: [(u32, u32, &[u8]); 3] =
            [(1, 500_000_000, &ARP), (2, 7, &ARP), (3, 0, &[0x11; 60])];
        for (secs, nanos, frame) in want {
            assert_eq!(le32(&bytes, at), secs);
            assert_eq!(le32(&bytes, at + 4), nanos);
            assert_eq!(le32(&bytes, at + 8), frame.len() as u32);
            assert_eq!(le32(&bytes, at + 12), frame.len() as u32);
            assert_eq!(&bytes[at + 16..at + 16 + frame.len()], frame);
            at += 16 + frame.len();
        }
        assert_eq!(at, bytes.len());
    }

    /// Ignored by default (it needs tcpdump); CI installs tcpdump and runs
    /// it with the other ignored tests, where a missing tcpdump fails it.
    #[test]
    #[cfg(feature = "std")]
    #[ignore = "needs tcpdump"]
    fn tcpdump_reads_the_file() {
        let probe = std::process::Command::new("tcpdump")
            .arg("--version")
            .output()
            .expect("tcpdump is not installed (apt-get install tcpdump)");
        assert!(probe.status.success());
        let path = temp_path("tcpdump");
        let mut dev = PcapWriter::new(
            Loopback::new(),
            std::fs::File::create(&path).unwrap(),
            PcapMode::Both,
        );
        exercise(&mut dev);
        drop(dev);
        let out = std::process::Command::new("tcpdump")
            .args(["-nn", "-r"])
            .arg(&path)
            .output()
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let stdout = std::string::String::from_utf8_lossy(&out.stdout);
        let stderr = std::string::String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "tcpdump failed: {stderr}");
        let lines: std::vec::Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{stdout}");
        for line in &lines[..2] {
            assert!(
                line.contains("ARP, Request who-has 10.0.0.1 tell 10.0.0.2"),
                "{line}"
            );
        }
        // Nanosecond timestamps survive: tcpdump prints seconds since the
        // epoch in local time, so check only the sub-second part.
        assert!(lines[0].contains(".500000"), "{}", lines[0]);
        assert!(lines[1].contains(".000000"), "{}", lines[1]);
    }
}
