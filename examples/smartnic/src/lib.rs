//! What the SmartNIC-class board needs under homa-stack: start-up on an
//! aarch64 core at EL1 ([`boot`]), time from the generic timer ([`clock`]),
//! the virtio-net NIC as an embassy-net driver ([`virtio`]), and the
//! verdict over semihosting ([`finish`]).
#![no_std]

use core::fmt::Display;

pub mod boot;
pub mod clock;
pub mod virtio;

/// Prints the verdict over semihosting, `PASS` or `FAIL: why`, and leaves
/// QEMU with the matching exit status.
pub fn finish(verdict: Result<(), impl Display>) -> ! {
    match verdict {
        Ok(()) => {
            semihosting::println!("PASS");
            semihosting::process::exit(0)
        }
        Err(why) => {
            semihosting::println!("FAIL: {}", why);
            semihosting::process::exit(1)
        }
    }
}

/// The secret hash seed of the endpoint with link address `mac`.
///
/// A real board reads its hardware random number generator here (or mixes
/// a unique device id with a boot counter kept in flash; see
/// `Config::new`). The example mixes a constant with the link address:
/// fixed for the board, which is safe only on a test network.
pub const fn hash_seed(mac: [u8; 6]) -> u64 {
    let mut m = [0u8; 8];
    let mut i = 0;
    while i < 6 {
        m[i] = mac[i];
        i += 1;
    }
    u64::from_le_bytes(m) ^ 0x2545_f491_4f6c_dd1d
}
