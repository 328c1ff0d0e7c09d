//! A real TAP interface against the real kernel: ask the kernel's ARP for its
//! address and check its answer. Needs root and /dev/net/tun, so it is
//! `#[ignore = "needs root"]`: `sudo cargo test -p homa-phy --test tap --
//! --ignored` runs it, and CI (as root) does.
#![cfg(all(feature = "std", target_os = "linux"))]

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use homa_phy::tap::{self, TapInterface};
use homa_phy::testing::frames;
use homa_phy::{Device, Duration, Instant, RxToken, TxToken};

const IFNAME: &str = "hptest0";
const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 1);
const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 203, 0, 2);
const OUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// who-has KERNEL_IP tell OUR_IP, from OUR_MAC, broadcast.
fn arp_request() -> Vec<u8> {
    let arp = frames::arp(1, OUR_MAC, OUR_IP, [0; 6], KERNEL_IP);
    frames::ethernet(OUR_MAC, frames::BROADCAST, None, frames::ARP, &arp)
}

fn kernel_mac() -> [u8; 6] {
    let text = std::fs::read_to_string(format!("/sys/class/net/{IFNAME}/address")).unwrap();
    let mut mac = [0u8; 6];
    for (byte, hex) in mac.iter_mut().zip(text.trim().split(':')) {
        *byte = u8::from_str_radix(hex, 16).unwrap();
    }
    mac
}

#[test]
#[ignore = "needs root"]
fn kernel_answers_an_arp_request_sent_through_the_tap() {
    assert!(
        Path::new("/dev/net/tun").exists(),
        "this test needs /dev/net/tun"
    );
    let mut dev = TapInterface::new(IFNAME).expect("a TAP interface (this test needs root)");
    assert_eq!(dev.name(), IFNAME);
    assert_eq!(dev.capabilities().max_transmission_unit, 1500 + 14);
    dev.set_ipv4_address(KERNEL_IP.octets(), 24).unwrap();
    dev.set_up(true).unwrap();
    let kernel_mac = kernel_mac();

    let request = arp_request();
    dev.transmit(Instant::ZERO)
        .unwrap()
        .consume(request.len(), |buf| buf.copy_from_slice(&request));
    assert_eq!(dev.stats().tx_frames, 1, "{:?}", dev.take_last_error());

    // The kernel may also send IPv6 router solicitations and the like; look
    // for the ARP reply among them.
    let deadline = StdInstant::now() + StdDuration::from_secs(2);
    let mut reply = None;
    while reply.is_none() && StdInstant::now() < deadline {
        tap::wait(dev.as_raw_fd(), Some(Duration::from_millis(50))).unwrap();
        while let Some((rx, _)) = dev.receive(Instant::ZERO) {
            let frame = rx.consume(|f| f.to_vec());
            if frame.len() >= 42 && frame[12..14] == [0x08, 0x06] && frame[20..22] == [0, 2] {
                reply = Some(frame);
            }
        }
    }
    let reply = reply.expect("no ARP reply from the kernel within 2 s");

    assert_eq!(reply[0..6], OUR_MAC, "Ethernet destination");
    assert_eq!(reply[6..12], kernel_mac, "Ethernet source");
    assert_eq!(reply[14..16], [0, 1], "hardware type Ethernet");
    assert_eq!(reply[16..18], [0x08, 0x00], "protocol IPv4");
    assert_eq!(reply[18..20], [6, 4], "address lengths");
    assert_eq!(reply[22..28], kernel_mac, "sender MAC");
    assert_eq!(reply[28..32], KERNEL_IP.octets(), "sender IP");
    assert_eq!(reply[32..38], OUR_MAC, "target MAC");
    assert_eq!(reply[38..42], OUR_IP.octets(), "target IP");
    assert_eq!(dev.stats().rx_errors, 0);

    // Closing a non-persistent TAP deletes the interface.
    drop(dev);
    let gone = Path::new("/sys/class/net").join(IFNAME);
    let deadline = StdInstant::now() + StdDuration::from_secs(1);
    while gone.exists() && StdInstant::now() < deadline {
        std::thread::sleep(StdDuration::from_millis(10));
    }
    assert!(!gone.exists(), "{IFNAME} still exists after close");
}

#[test]
fn errors_name_the_interface() {
    // A name the kernel cannot take fails before any privilege matters.
    let err = TapInterface::new("much-too-long-name").unwrap_err();
    assert!(err.to_string().contains("much-too-long-name"), "{err}");
}
