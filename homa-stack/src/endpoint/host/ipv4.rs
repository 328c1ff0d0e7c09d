//! IPv4 in, and ICMP: echo replies, and destination unreachable both
//! ways (sent by the endpoint's input for closed ports; received ones are
//! handed up, sorted by what they mean, when they quote our Homa packets).

use super::{HandUp, HomaIn, Route, HOP_LIMIT};
use crate::endpoint::types::{IpHeader, Reply, Unreachable};
use crate::endpoint::Endpoint;
use crate::phy::TxToken;
use crate::stats::DropReason;
use crate::time::Instant;
use crate::wire::icmpv4::{Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr};
use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::wire::{EthernetAddress, IpAddr, IpProtocol, Ipv4Addr};

impl<'a> Endpoint<'a> {
    /// An IPv4 packet for us: ICMP is taken in here, Homa handed up.
    pub(super) fn process_ipv4<'f>(
        &mut self,
        now: Instant,
        src_mac: EthernetAddress,
        payload: &'f [u8],
    ) -> Option<Reply<'f>> {
        let verify = self.caps.checksum.ipv4.rx();
        let Ok(packet) = Ipv4Packet::new_checked(payload) else {
            return self.drop_frame(DropReason::Malformed, "bad IPv4 header");
        };
        let Ok(ip) = Ipv4Repr::parse(&packet, verify) else {
            return self.drop_frame(DropReason::Malformed, "bad IPv4 packet");
        };
        if ip.dst_addr != self.config.ipv4_addr {
            return self.drop_frame(DropReason::NotForUs, "IPv4 packet for another host");
        }
        // No host sends from these. Believed, they would make a peer and
        // be answered (to every host, or to ourselves).
        let src = ip.src_addr;
        if src.is_broadcast()
            || src.is_multicast()
            || src.is_unspecified()
            || src == self.config.ipv4_addr
        {
            return self.drop_frame(
                DropReason::Malformed,
                "IPv4 packet from an impossible source",
            );
        }
        let body = packet.payload();
        match ip.next_header {
            IpProtocol::Icmp => self.process_icmp(src_mac, &ip, body),
            IpProtocol::Homa => {
                let packet = HomaIn {
                    mac: src_mac,
                    ip: IpHeader::V4(ip),
                    body,
                };
                self.homa(now, packet)
            }
            _ => self.drop_frame(DropReason::Unsupported, "IP protocol not handled"),
        }
    }

    fn process_icmp<'f>(
        &mut self,
        src_mac: EthernetAddress,
        ip: &Ipv4Repr,
        body: &'f [u8],
    ) -> Option<Reply<'f>> {
        let verify = self.caps.checksum.icmpv4.rx();
        let Ok(packet) = Icmpv4Packet::new_checked(body) else {
            return self.drop_frame(DropReason::Malformed, "bad ICMP");
        };
        let Ok(repr) = Icmpv4Repr::parse(&packet, verify) else {
            // Only a type we act on can fail to parse for its contents; an
            // intact message of another type is one we do not handle.
            let handled = matches!(
                packet.msg_type(),
                Icmpv4Message::EchoRequest
                    | Icmpv4Message::EchoReply
                    | Icmpv4Message::DstUnreachable
            );
            if !handled && (!verify || packet.verify_checksum()) {
                return self.drop_frame(DropReason::NotHandled, "ICMP type not handled");
            }
            return self.drop_frame(DropReason::Malformed, "bad ICMP");
        };
        match repr {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                if self.config.passive_host {
                    net_trace!("homa: echo request left to the other stack");
                    return None;
                }
                Some(Reply::Echo {
                    dst_mac: src_mac,
                    dst_ip: ip.src_addr,
                    ident,
                    seq_no,
                    data,
                })
            }
            Icmpv4Repr::DstUnreachable {
                reason,
                header,
                data,
            } => {
                self.stats.icmp_unreachable_received += 1;
                if header.next_header != IpProtocol::Homa
                    || header.src_addr != self.config.ipv4_addr
                {
                    self.stats.icmp_ignored.not_homa += 1;
                    net_trace!("homa: ICMP unreachable for non-Homa traffic ignored");
                    return None;
                }
                let what = match reason {
                    Icmpv4DstUnreachable::PortUnreachable => Unreachable::Port,
                    Icmpv4DstUnreachable::ProtoUnreachable => Unreachable::Protocol,
                    Icmpv4DstUnreachable::FragRequired => Unreachable::PathMtu,
                    _ => Unreachable::Soft,
                };
                self.unreachable(IpAddr::V4(header.dst_addr), data, what);
                None
            }
            _ => self.drop_frame(DropReason::NotHandled, "ICMP type not handled"),
        }
    }

    pub(super) fn emit_icmp<T: TxToken>(
        &mut self,
        tx: T,
        dst_mac: EthernetAddress,
        dst_ip: Ipv4Addr,
        icmp: &Icmpv4Repr<'_>,
        priority: u8,
    ) {
        let fill = self.caps.checksum.icmpv4.tx();
        let route = Route {
            dst_mac,
            dst: IpAddr::V4(dst_ip),
            protocol: IpProtocol::Icmp,
            ip_payload_len: icmp.buffer_len(),
            priority,
            hop_limit: HOP_LIMIT,
            src_v6: None,
        };
        self.emit_ip(tx, &route, |body| {
            icmp.emit(&mut Icmpv4Packet::new_unchecked(body), fill)
        });
    }
}
