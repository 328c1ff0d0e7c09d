//! Text output: one line per frame, tcpdump style.
//!
//! ```text
//! N TIME TYPE        SRC > DST details
//! 57 0.005064000 DATA        10.0.0.1:32768 > 10.0.0.2:500 id 1234 off 1424 len 1424/100000 incoming 40000 prio 5
//! ```
//!
//! The type is always the third word, padded to 11 columns so the
//! addresses line up. `-e` appends the link header (`, link A > B`);
//! `-v` adds indented lines with every header field and the checksums.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use homa_stack::wire::homa::{self, Kind, RESEND_ALL};

use super::decode::{mac_text, Decoded, Homa, HomaChecksum, Ip, Link, Net, Transport};
use super::reader::{Record, Timestamp};

/// How the time column reads (`-t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TimeMode {
    /// Seconds since the epoch, as captured.
    Absolute,
    /// Seconds since the first frame printed.
    Relative,
    /// Seconds since the previous frame printed.
    Delta,
    /// No time column.
    None,
}

/// Formats the time column across frames.
#[derive(Debug)]
pub struct Clock {
    mode: TimeMode,
    first: Option<Timestamp>,
    previous: Option<Timestamp>,
}

impl Clock {
    /// A clock for `mode`.
    pub fn new(mode: TimeMode) -> Clock {
        Clock {
            mode,
            first: None,
            previous: None,
        }
    }

    /// The column for a frame at `time` (`-` when the record has none);
    /// `None` in mode `none`.
    pub fn column(&mut self, time: Option<Timestamp>) -> Option<String> {
        let Some(t) = time else {
            return (self.mode != TimeMode::None).then(|| "-".to_string());
        };
        let first = *self.first.get_or_insert(t);
        let previous = self.previous.replace(t).unwrap_or(t);
        match self.mode {
            TimeMode::Absolute => Some(t.to_string()),
            TimeMode::Relative => Some(seconds(t.total_nanos() - first.total_nanos(), t.digits)),
            TimeMode::Delta => Some(seconds(t.total_nanos() - previous.total_nanos(), t.digits)),
            TimeMode::None => None,
        }
    }
}

/// Signed nanoseconds as seconds with `digits` decimals.
pub fn seconds(nanos: i128, digits: u8) -> String {
    let digits = u32::from(digits.min(9));
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let frac = (n % 1_000_000_000) / 10u128.pow(9 - digits);
    format!(
        "{sign}{}.{:0width$}",
        n / 1_000_000_000,
        frac,
        width = digits as usize
    )
}

/// Width of the type column: the longest name, RPC_UNKNOWN.
const TYPE_WIDTH: usize = 11;

/// The line of frame `n`, and with `verbose` the lines of every field.
pub fn text(
    n: u64,
    time: Option<&str>,
    record: &Record,
    d: &Decoded<'_>,
    link: bool,
    verbose: bool,
) -> String {
    let mut out = format!("{n} ");
    if let Some(time) = time {
        out.push_str(time);
        out.push(' ');
    }
    let (kind, rest) = summary(d);
    let _ = write!(out, "{kind:<TYPE_WIDTH$} {rest}");
    if record.data.len() < record.orig_len && d.homa().is_none() {
        let _ = write!(
            out,
            " [{} of {} bytes captured]",
            record.data.len(),
            record.orig_len
        );
    }
    if link {
        if let Some(l) = &d.link {
            let _ = write!(out, ", link {}", link_text(l));
        }
    }
    if verbose {
        verbose_lines(&mut out, record, d);
    }
    out
}

/// The type column and the rest of the line.
fn summary(d: &Decoded<'_>) -> (String, String) {
    match &d.net {
        Net::Arp(f) => (f.kind.to_string(), f.text.clone()),
        Net::Other(note) | Net::Malformed(note) => ("-".to_string(), format!("[{note}]")),
        Net::Ip(_, Transport::Icmp(f)) => (f.kind.to_string(), f.text.clone()),
        Net::Ip(ip, Transport::Other(note) | Transport::Malformed(note)) => (
            format!("IPv{}", ip.version),
            format!("{} > {} [{note}]", ip.src, ip.dst),
        ),
        Net::Ip(ip, Transport::Homa(h)) => (h.ptype.to_string(), homa_text(ip, h)),
    }
}

fn sock(ip: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(ip, port)
}

/// `SRC:PORT > DST:PORT id N details prio P`, with notes for truncation,
/// checksums and hijacking.
fn homa_text(ip: &Ip, h: &Homa<'_>) -> String {
    let p = &h.packet;
    let mut s = format!("{} > {}", sock(ip.src, p.sport()), sock(ip.dst, p.dport()));
    if !h.has_common_header() {
        let _ = write!(
            s,
            " [header truncated: {} of {} bytes captured]",
            h.captured, h.wire_len
        );
        return s;
    }
    let _ = write!(s, " id {}", p.sender_id());
    match &h.repr {
        None => {
            let _ = write!(
                s,
                " [header truncated: {} of {} header bytes captured]",
                h.captured, h.header_len
            );
        }
        Some(repr) => match &repr.kind {
            Kind::Data { header, .. } => {
                let _ = write!(
                    s,
                    " off {} len {}/{} incoming {}",
                    header.offset,
                    h.payload_len(),
                    header.message_length,
                    header.incoming
                );
                if let Some(ack) = header.ack {
                    let _ = write!(s, " ack {ack}");
                }
                if header.retransmit {
                    s.push_str(" retx");
                }
                if header.cutoff_version != 0 {
                    let _ = write!(s, " cv {}", header.cutoff_version);
                }
            }
            Kind::Grant { offset, priority } => {
                let _ = write!(s, " offset {offset} sched-prio {priority}");
            }
            Kind::Resend {
                offset,
                length,
                priority,
            } => {
                let _ = write!(s, " off {offset} len ");
                match *length {
                    RESEND_ALL => s.push_str("all"),
                    length => {
                        let _ = write!(s, "{length}");
                    }
                }
                let _ = write!(s, " retx-prio {priority}");
            }
            Kind::Cutoffs {
                unsched_cutoffs,
                version,
            } => {
                let _ = write!(s, " cutoffs {unsched_cutoffs:?} version {version}");
            }
            Kind::Ack { acks } => {
                let list: Vec<String> = acks.iter().map(|a| a.to_string()).collect();
                let _ = write!(s, " acks [{}]", list.join(", "));
            }
            Kind::RpcUnknown | Kind::Busy | Kind::Freeze | Kind::NeedAck => {}
        },
    }
    let _ = write!(s, " prio {}", ip.priority());
    if h.hijacked {
        s.push_str(" hijacked");
    }
    if h.truncated() && h.repr.is_some() {
        let _ = write!(
            s,
            " [truncated: {} of {} bytes captured]",
            h.captured, h.wire_len
        );
    }
    if let HomaChecksum::Bad(_) = h.checksum {
        s.push_str(" [bad checksum]");
    }
    if let Some((_, false)) = ip.checksum {
        s.push_str(" [bad IPv4 header checksum]");
    }
    s
}

fn link_text(link: &Link) -> String {
    match link {
        Link::Ethernet { src, dst, vlans } => {
            let mut s = format!("{} > {}", mac_text(src), mac_text(dst));
            for v in vlans {
                let _ = write!(s, " vlan {v}");
            }
            s
        }
        Link::Sll {
            version,
            pkttype,
            addr,
            ifindex,
            ..
        } => {
            let dir = match pkttype {
                0 => "In",
                1 => "B",
                2 => "M",
                3 => "P",
                4 => "Out",
                _ => "?",
            };
            let mut s = format!("cooked v{version} {dir} {}", mac_text(addr));
            if let Some(i) = ifindex {
                let _ = write!(s, " ifindex {i}");
            }
            s
        }
        Link::Raw => "raw IP".to_string(),
    }
}

/// `-v`: every field, on indented lines.
fn verbose_lines(out: &mut String, record: &Record, d: &Decoded<'_>) {
    let _ = write!(
        out,
        "\n    frame: {} bytes captured of {}, at byte offset {}",
        record.data.len(),
        record.orig_len,
        record.offset
    );
    if let Some(l) = &d.link {
        let _ = write!(out, "\n    link: {}", link_text(l));
    }
    let Net::Ip(ip, transport) = &d.net else {
        return;
    };
    verbose_ip(out, ip);
    let Transport::Homa(h) = transport else {
        return;
    };
    if !h.has_common_header() {
        return;
    }
    verbose_homa(out, h);
    if let Some(repr) = &h.repr {
        verbose_type(out, h, repr);
    }
}

/// `-v`'s line of the IP header.
fn verbose_ip(out: &mut String, ip: &Ip) {
    let _ = write!(
        out,
        "\n    ip: v{} {} > {} proto {} tos 0x{:02x} (prio {}) ttl {} len {}",
        ip.version,
        ip.src,
        ip.dst,
        ip.proto,
        ip.tos,
        ip.priority(),
        ip.ttl,
        ip.payload_len
    );
    if ip.version == 4 {
        let _ = write!(out, " id {}", ip.ident);
    }
    if let Some((sum, ok)) = ip.checksum {
        let _ = write!(
            out,
            " header checksum 0x{sum:04x} {}",
            if ok { "ok" } else { "bad" }
        );
    }
}

/// `-v`'s lines of the Homa common header and its checksum.
fn verbose_homa(out: &mut String, h: &Homa<'_>) {
    let p = &h.packet;
    let _ = write!(
        out,
        "\n    homa: sport {} dport {} sequence {} type 0x{:02x} doff {} flags 0x{:02x} \
         window {} urgent 0x{:04x} sender_id {}",
        p.sport(),
        p.dport(),
        p.sequence(),
        u8::from(h.ptype),
        p.doff(),
        p.flags(),
        p.window(),
        p.urgent(),
        p.sender_id()
    );
    let _ = write!(out, "\n    checksum: 0x{:04x} ", p.checksum());
    out.push_str(&match h.checksum {
        HomaChecksum::Ok => "ok".to_string(),
        HomaChecksum::Bad(right) => format!("bad (should be 0x{right:04x})"),
        HomaChecksum::Zero => "not filled".to_string(),
        HomaChecksum::Partial => "partial: only the pseudo-header sum, as Linux leaves it for \
                                  the NIC (captured before checksum offload completed it)"
            .to_string(),
        HomaChecksum::Unverified => "unverified (packet truncated)".to_string(),
    });
}

/// `-v`'s lines of the fields of the packet's type.
fn verbose_type(out: &mut String, h: &Homa<'_>, repr: &homa::Repr<'_>) {
    let p = &h.packet;
    match &repr.kind {
        Kind::Data { .. } => {
            let seg = p.seg_offset();
            let _ = write!(
                out,
                "\n    data: message_length {} incoming {} ack_client_id {} ack_server_port {} \
                 cutoff_version {} retransmit {} seg_offset {}{} offset {} payload {} bytes \
                 ({} captured)",
                p.message_length(),
                p.incoming(),
                p.ack_client_id(),
                p.ack_server_port(),
                p.cutoff_version(),
                u8::from(p.retransmit()),
                seg,
                if seg == u32::MAX {
                    " (offset in sequence)"
                } else {
                    ""
                },
                p.offset(),
                h.payload_len(),
                h.captured_payload_len()
            );
        }
        Kind::Ack { acks } => {
            let _ = write!(
                out,
                "\n    ack: num_acks {} (valid {})",
                p.num_acks(),
                acks.len()
            );
            for a in acks.iter() {
                let _ = write!(
                    out,
                    "\n      client_id {} server_port {}",
                    a.client_id, a.server_port
                );
            }
        }
        Kind::Resend { .. } if h.header_len == homa::RESEND_UPSTREAM_HEADER_LEN => {
            out.push_str("\n    resend: 36-byte upstream form, no priority byte");
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keep_the_digits_and_sign() {
        assert_eq!(seconds(1_500_000_000, 6), "1.500000");
        assert_eq!(seconds(42, 9), "0.000000042");
        assert_eq!(seconds(-2_000, 6), "-0.000002");
    }

    #[test]
    fn clock_modes() {
        let t = |s, ns| Some(Timestamp::new(s, ns, 6));
        let mut abs = Clock::new(TimeMode::Absolute);
        assert_eq!(abs.column(t(5, 1_000)).as_deref(), Some("5.000001"));
        let mut rel = Clock::new(TimeMode::Relative);
        rel.column(t(5, 0));
        rel.column(t(6, 0));
        assert_eq!(rel.column(t(7, 500_000)).as_deref(), Some("2.000500"));
        let mut delta = Clock::new(TimeMode::Delta);
        delta.column(t(5, 0));
        delta.column(t(6, 0));
        assert_eq!(delta.column(t(7, 500_000)).as_deref(), Some("1.000500"));
        assert_eq!(delta.column(None).as_deref(), Some("-"));
        assert_eq!(Clock::new(TimeMode::None).column(t(1, 0)), None);
    }
}
