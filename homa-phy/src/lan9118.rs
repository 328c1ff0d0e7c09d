//! The SMSC LAN9118 Ethernet controller as an [`embassy_net_driver::Driver`]
//! (feature `lan9118`).
//!
//! The LAN9118 is a MAC and PHY on a 32-bit memory bus with on-chip FIFOs
//! instead of descriptor rings: a frame is received by popping its status
//! word from the RX status FIFO and then its data words from the RX data
//! FIFO, and sent by pushing two command words and the data words into the
//! TX data FIFO. ARM's MPS2 boards carry one (QEMU models it on
//! `mps2-an385`/`mps2-an386`/`mps2-an500` at `0x4020_0000`, see
//! [`MPS2_BASE`]).
//!
//! The driver is polled: it uses no interrupt, and when it has no frame it
//! wakes its task again at once, so an executor keeps polling it. A board
//! that wires the controller's IRQ line can instead wake the task from the
//! handler. Every frame is copied once between a FIFO and the driver's own
//! frame buffer; the FIFO's 4-byte FCS is stripped. The controller offers
//! no checksum offload, so the capabilities ask the stacks to compute every
//! checksum.
//!
//! Register access goes through [`Registers`], so the driver runs on any
//! bus mapping ([`Mmio`] for the memory-mapped controller) and in host
//! tests against a model.

use core::task::Context;

use embassy_net_driver as driver;

/// Where the MPS2 boards (and QEMU's models of them) map the controller.
pub const MPS2_BASE: usize = 0x4020_0000;

/// The largest frame handled, without the FCS: 1,500 bytes of IP and the
/// Ethernet header.
pub const MAX_FRAME: usize = 1514;
/// A largest frame and its FCS in whole FIFO words.
const RX_BUF: usize = (MAX_FRAME + 4).next_multiple_of(4);

// Register offsets (LAN9118 data sheet, "System Control and Status Registers").
const RX_DATA_FIFO: usize = 0x00;
const TX_DATA_FIFO: usize = 0x20;
const RX_STATUS_FIFO: usize = 0x40;
const BYTE_TEST: usize = 0x64;
const TX_CFG: usize = 0x70;
const HW_CFG: usize = 0x74;
const RX_FIFO_INF: usize = 0x7c;
const TX_FIFO_INF: usize = 0x80;
const MAC_CSR_CMD: usize = 0xa4;
const MAC_CSR_DATA: usize = 0xa8;

/// What BYTE_TEST reads on a LAN9118 in 32-bit mode.
const BYTE_TEST_VALUE: u32 = 0x8765_4321;
const HW_CFG_SRST: u32 = 1;
const TX_CFG_TX_ON: u32 = 1 << 1;
/// Lets the TX status FIFO overrun: the driver never reads it.
const TX_CFG_TXSAO: u32 = 1 << 2;
const CSR_BUSY: u32 = 1 << 31;
const CSR_READ: u32 = 1 << 30;

// MAC control and status registers, reached through MAC_CSR_CMD/DATA.
const MAC_CR: u32 = 1;
const MAC_ADDRH: u32 = 2;
const MAC_ADDRL: u32 = 3;
const MAC_MII_ACC: u32 = 6;
const MAC_MII_DATA: u32 = 7;
const MAC_CR_RXEN: u32 = 1 << 2;
const MAC_CR_TXEN: u32 = 1 << 3;
/// Pass all multicast (IPv6 neighbour discovery needs its groups).
const MAC_CR_MCPAS: u32 = 1 << 19;
const MAC_CR_FDPX: u32 = 1 << 20;
const MII_BUSY: u32 = 1;
/// The internal PHY's address on the MII bus.
const PHY_ADDR: u32 = 1;
const PHY_BASIC_STATUS: u32 = 1;
const PHY_LINK_UP: u32 = 1 << 2;

/// RX status word: frame length (with FCS) in bits 29:16, error summary in bit 15.
const RX_STS_ERROR: u32 = 1 << 15;
/// TX command A: first and last segment in one buffer.
const TX_CMD_A_FIRST: u32 = 1 << 13;
const TX_CMD_A_LAST: u32 = 1 << 12;
/// Bounded waits on the controller's busy bits; the model's are instant.
const SPINS: u32 = 100_000;

/// 32-bit register access to the controller.
pub trait Registers {
    /// Reads the register at byte `offset`.
    fn read(&mut self, offset: usize) -> u32;
    /// Writes `value` to the register at byte `offset`.
    fn write(&mut self, offset: usize, value: u32);
}

/// The controller's registers mapped at a physical address.
pub struct Mmio {
    base: *mut u32,
}

impl Mmio {
    /// The registers at `base`.
    ///
    /// # Safety
    ///
    /// `base` must be the address of a LAN9118's 256-byte register window,
    /// mapped as device memory, and nothing else may access it while this
    /// value lives.
    #[allow(unsafe_code)]
    pub const unsafe fn new(base: usize) -> Mmio {
        Mmio {
            base: base as *mut u32,
        }
    }
}

#[allow(unsafe_code)]
impl Registers for Mmio {
    fn read(&mut self, offset: usize) -> u32 {
        // SAFETY: `new`'s contract: a register window of 256 bytes; the
        // offsets used here are word-aligned and below 0x100.
        unsafe { self.base.add(offset / 4).read_volatile() }
    }

    fn write(&mut self, offset: usize, value: u32) {
        // SAFETY: as in `read`.
        unsafe { self.base.add(offset / 4).write_volatile(value) }
    }
}

/// Why [`Lan9118::new`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitError {
    /// BYTE_TEST did not read 0x87654321: no LAN9118 there, or not in
    /// 32-bit mode.
    NotFound(u32),
    /// The soft reset or a MAC register access did not complete.
    Timeout,
}

/// Receive counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Lan9118Stats {
    /// Frames handed to the stacks.
    pub rx_frames: u64,
    /// Frames the controller flagged (error summary) or too short or too
    /// long for the buffer; skipped.
    pub rx_dropped: u64,
    /// Frames pushed into the TX FIFO.
    pub tx_frames: u64,
}

/// The driver: the controller's registers and one receive and one transmit
/// frame buffer.
pub struct Lan9118<R> {
    regs: R,
    mac: [u8; 6],
    rx: [u8; RX_BUF],
    tx: [u8; MAX_FRAME],
    stats: Lan9118Stats,
}

impl<R: Registers> Lan9118<R> {
    /// Resets the controller and starts it with address `mac`, or with the
    /// address it loaded from its EEPROM when `mac` is `None`.
    pub fn new(mut regs: R, mac: Option<[u8; 6]>) -> Result<Self, InitError> {
        let test = regs.read(BYTE_TEST);
        if test != BYTE_TEST_VALUE {
            return Err(InitError::NotFound(test));
        }
        regs.write(HW_CFG, HW_CFG_SRST);
        spin(|| regs.read(HW_CFG) & HW_CFG_SRST == 0)?;
        let mut nic = Lan9118 {
            regs,
            mac: [0; 6],
            rx: [0; RX_BUF],
            tx: [0; MAX_FRAME],
            stats: Lan9118Stats::default(),
        };
        match mac {
            Some(m) => {
                nic.mac_write(MAC_ADDRL, u32::from_le_bytes([m[0], m[1], m[2], m[3]]))?;
                nic.mac_write(MAC_ADDRH, u32::from(m[4]) | u32::from(m[5]) << 8)?;
                nic.mac = m;
            }
            None => {
                let lo = nic.mac_read(MAC_ADDRL)?.to_le_bytes();
                let hi = nic.mac_read(MAC_ADDRH)?.to_le_bytes();
                nic.mac = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1]];
            }
        }
        // Own address, broadcast and multicast; full duplex.
        nic.mac_write(
            MAC_CR,
            MAC_CR_RXEN | MAC_CR_TXEN | MAC_CR_MCPAS | MAC_CR_FDPX,
        )?;
        nic.regs.write(TX_CFG, TX_CFG_TX_ON | TX_CFG_TXSAO);
        Ok(nic)
    }

    /// The controller's Ethernet address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The receive and transmit counters.
    pub fn stats(&self) -> Lan9118Stats {
        self.stats
    }

    fn mac_read(&mut self, reg: u32) -> Result<u32, InitError> {
        self.regs.write(MAC_CSR_CMD, CSR_BUSY | CSR_READ | reg);
        let regs = &mut self.regs;
        spin(|| regs.read(MAC_CSR_CMD) & CSR_BUSY == 0)?;
        Ok(self.regs.read(MAC_CSR_DATA))
    }

    fn mac_write(&mut self, reg: u32, value: u32) -> Result<(), InitError> {
        self.regs.write(MAC_CSR_DATA, value);
        self.regs.write(MAC_CSR_CMD, CSR_BUSY | reg);
        let regs = &mut self.regs;
        spin(|| regs.read(MAC_CSR_CMD) & CSR_BUSY == 0)
    }

    fn phy_read(&mut self, reg: u32) -> Result<u32, InitError> {
        self.mac_write(MAC_MII_ACC, PHY_ADDR << 11 | reg << 6 | MII_BUSY)?;
        for _ in 0..SPINS {
            if self.mac_read(MAC_MII_ACC)? & MII_BUSY == 0 {
                return self.mac_read(MAC_MII_DATA);
            }
        }
        Err(InitError::Timeout)
    }

    /// Pops the next good frame into the receive buffer; its length.
    /// Bounded by the frames the status FIFO held when called.
    fn pop_frame(&mut self) -> Option<usize> {
        let waiting = (self.regs.read(RX_FIFO_INF) >> 16) & 0xff;
        for _ in 0..waiting {
            let status = self.regs.read(RX_STATUS_FIFO);
            let len = ((status >> 16) & 0x3fff) as usize;
            let words = len.div_ceil(4);
            if status & RX_STS_ERROR != 0 || !(14 + 4..=MAX_FRAME + 4).contains(&len) {
                self.skip(words);
                self.stats.rx_dropped += 1;
                continue;
            }
            for chunk in self.rx[..words * 4].chunks_exact_mut(4) {
                chunk.copy_from_slice(&self.regs.read(RX_DATA_FIFO).to_le_bytes());
            }
            self.stats.rx_frames += 1;
            return Some(len - 4);
        }
        None
    }

    /// Discards a frame of `words` data words (at most 4,096: the status
    /// word's length field has 14 bits). Read out rather than fast-forwarded:
    /// QEMU's model does not free the FIFO space of a fast-forwarded frame.
    fn skip(&mut self, words: usize) {
        for _ in 0..words {
            self.regs.read(RX_DATA_FIFO);
        }
    }

    /// Room in the TX data FIFO for a largest frame and its command words.
    fn tx_room(&mut self) -> bool {
        (self.regs.read(TX_FIFO_INF) & 0xffff) as usize >= MAX_FRAME + 8
    }
}

fn spin(mut done: impl FnMut() -> bool) -> Result<(), InitError> {
    for _ in 0..SPINS {
        if done() {
            return Ok(());
        }
    }
    Err(InitError::Timeout)
}

/// A received frame in the driver's buffer.
pub struct RxToken<'a> {
    frame: &'a mut [u8],
}

/// Permission to push one frame into the TX FIFO.
pub struct TxToken<'a, R> {
    regs: &'a mut R,
    buf: &'a mut [u8; MAX_FRAME],
    frames: &'a mut u64,
}

impl driver::RxToken for RxToken<'_> {
    fn consume<T, F: FnOnce(&mut [u8]) -> T>(self, f: F) -> T {
        f(self.frame)
    }
}

impl<R: Registers> driver::TxToken for TxToken<'_, R> {
    fn consume<T, F: FnOnce(&mut [u8]) -> T>(self, len: usize, f: F) -> T {
        let len = len.min(MAX_FRAME);
        let frame = &mut self.buf[..len];
        let result = f(frame);
        let n = len as u32;
        self.regs
            .write(TX_DATA_FIFO, TX_CMD_A_FIRST | TX_CMD_A_LAST | n);
        // Command B: the packet tag (unused, the length again) and length.
        self.regs.write(TX_DATA_FIFO, n << 16 | n);
        for chunk in frame.chunks(4) {
            let mut word = [0; 4];
            word[..chunk.len()].copy_from_slice(chunk);
            self.regs.write(TX_DATA_FIFO, u32::from_le_bytes(word));
        }
        *self.frames += 1;
        result
    }
}

impl<R: Registers> driver::Driver for Lan9118<R> {
    type RxToken<'a>
        = RxToken<'a>
    where
        R: 'a;
    type TxToken<'a>
        = TxToken<'a, R>
    where
        R: 'a;

    fn receive(&mut self, cx: &mut Context) -> Option<(RxToken<'_>, TxToken<'_, R>)> {
        if !self.tx_room() {
            cx.waker().wake_by_ref();
            return None;
        }
        let Some(len) = self.pop_frame() else {
            // Polled: ask to be polled again.
            cx.waker().wake_by_ref();
            return None;
        };
        Some((
            RxToken {
                frame: &mut self.rx[..len],
            },
            TxToken {
                regs: &mut self.regs,
                buf: &mut self.tx,
                frames: &mut self.stats.tx_frames,
            },
        ))
    }

    fn transmit(&mut self, cx: &mut Context) -> Option<TxToken<'_, R>> {
        if !self.tx_room() {
            cx.waker().wake_by_ref();
            return None;
        }
        Some(TxToken {
            regs: &mut self.regs,
            buf: &mut self.tx,
            frames: &mut self.stats.tx_frames,
        })
    }

    fn link_state(&mut self, _cx: &mut Context) -> driver::LinkState {
        match self.phy_read(PHY_BASIC_STATUS) {
            Ok(status) if status & PHY_LINK_UP != 0 => driver::LinkState::Up,
            _ => driver::LinkState::Down,
        }
    }

    fn capabilities(&self) -> driver::Capabilities {
        let mut caps = driver::Capabilities::default();
        caps.max_transmission_unit = MAX_FRAME;
        caps.max_burst_size = Some(1);
        caps
    }

    fn hardware_address(&self) -> driver::HardwareAddress {
        driver::HardwareAddress::Ethernet(self.mac)
    }
}

#[cfg(test)]
mod tests {
    //! The driver against a model of the controller's FIFOs (the behaviour
    //! QEMU's model shows: little-endian FIFO words, the FCS after the
    //! frame, the length with FCS in the status word).
    use super::*;
    use driver::{Driver as _, RxToken as _, TxToken as _};
    use std::collections::VecDeque;
    use std::task::Waker;
    use std::vec::Vec;

    #[derive(Default)]
    struct Model {
        mac: [u8; 6],
        mac_cr: u32,
        csr_data: u32,
        mii_acc: u32,
        arriving: VecDeque<(u32, Vec<u8>)>,
        data: VecDeque<u32>,
        tx_words: Vec<u32>,
        sent: Vec<Vec<u8>>,
    }

    impl Model {
        fn arrive(&mut self, frame: &[u8], error: bool) {
            let status = ((frame.len() as u32 + 4) << 16) | if error { RX_STS_ERROR } else { 0 };
            self.arrival(status, frame);
        }

        fn arrival(&mut self, status: u32, frame: &[u8]) {
            let mut bytes = frame.to_vec();
            bytes.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
            self.arriving.push_back((status, bytes));
        }

        fn take_tx(&mut self) {
            let Some(&a) = self.tx_words.first() else {
                return;
            };
            let len = (a & 0x7ff) as usize;
            if self.tx_words.len() < 2 + len.div_ceil(4) {
                return;
            }
            let mut bytes: Vec<u8> = self.tx_words[2..]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            bytes.truncate(len);
            self.sent.push(bytes);
            self.tx_words.clear();
        }
    }

    impl Registers for Model {
        fn read(&mut self, offset: usize) -> u32 {
            match offset {
                // Past the frame: the hardware's underflow reads zero.
                RX_DATA_FIFO => self.data.pop_front().unwrap_or(0),
                RX_STATUS_FIFO => {
                    let (status, bytes) = self.arriving.pop_front().expect("no status");
                    for c in bytes.chunks(4) {
                        let mut w = [0; 4];
                        w[..c.len()].copy_from_slice(c);
                        self.data.push_back(u32::from_le_bytes(w));
                    }
                    status
                }
                BYTE_TEST => BYTE_TEST_VALUE,
                RX_FIFO_INF => (self.arriving.len() as u32) << 16,
                TX_FIFO_INF => 4608,
                MAC_CSR_DATA => self.csr_data,
                _ => 0,
            }
        }

        fn write(&mut self, offset: usize, value: u32) {
            match offset {
                TX_DATA_FIFO => {
                    self.tx_words.push(value);
                    self.take_tx();
                }
                MAC_CSR_DATA => self.csr_data = value,
                MAC_CSR_CMD => {
                    let reg = value & 0xf;
                    let m = self.mac;
                    if value & CSR_READ != 0 {
                        self.csr_data = match reg {
                            MAC_CR => self.mac_cr,
                            MAC_ADDRL => u32::from_le_bytes([m[0], m[1], m[2], m[3]]),
                            MAC_ADDRH => u32::from(m[4]) | u32::from(m[5]) << 8,
                            MAC_MII_ACC => self.mii_acc & !MII_BUSY,
                            MAC_MII_DATA => 0x7809 | PHY_LINK_UP,
                            _ => 0,
                        };
                    } else {
                        match reg {
                            MAC_CR => self.mac_cr = self.csr_data,
                            MAC_ADDRL => {
                                self.mac[..4].copy_from_slice(&self.csr_data.to_le_bytes())
                            }
                            MAC_ADDRH => {
                                self.mac[4..].copy_from_slice(&self.csr_data.to_le_bytes()[..2])
                            }
                            MAC_MII_ACC => self.mii_acc = self.csr_data,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn frame(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn reads_the_eeprom_address_or_sets_one_and_starts_the_mac() {
        let model = Model {
            mac: [2, 0, 0, 0, 0, 9],
            ..Model::default()
        };
        let nic = Lan9118::new(model, None).unwrap();
        assert_eq!(nic.mac(), [2, 0, 0, 0, 0, 9]);
        assert_eq!(
            nic.regs.mac_cr & (MAC_CR_RXEN | MAC_CR_TXEN),
            MAC_CR_RXEN | MAC_CR_TXEN
        );
        let nic = Lan9118::new(Model::default(), Some([2, 1, 2, 3, 4, 5])).unwrap();
        assert_eq!(nic.regs.mac, [2, 1, 2, 3, 4, 5]);
        assert!(matches!(
            nic.hardware_address(),
            driver::HardwareAddress::Ethernet([2, 1, 2, 3, 4, 5])
        ));
    }

    #[test]
    fn frames_of_every_length_mod_4_cross_both_fifos_intact() {
        let mut nic = Lan9118::new(Model::default(), None).unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        for len in [60, 61, 62, 63, 1514] {
            let sent = frame(len, len as u8);
            nic.regs.arrive(&sent, false);
            let (rx, _) = nic.receive(&mut cx).unwrap();
            assert_eq!(rx.consume(|f| f.to_vec()), sent, "received {len}");
            nic.transmit(&mut cx)
                .unwrap()
                .consume(len, |f| f.copy_from_slice(&sent));
            assert_eq!(nic.regs.sent.pop().unwrap(), sent, "sent {len}");
        }
        assert!(nic.receive(&mut cx).is_none());
        assert_eq!(nic.stats().rx_frames, 5);
        assert_eq!(nic.stats().tx_frames, 5);
        assert!(matches!(nic.link_state(&mut cx), driver::LinkState::Up));
    }

    #[test]
    fn flagged_runt_and_oversized_frames_are_skipped_and_counted() {
        let mut nic = Lan9118::new(Model::default(), None).unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        nic.regs.arrive(&frame(100, 1), true);
        nic.regs.arrive(&frame(10, 2), false);
        // A status word claiming more than the buffer holds.
        nic.regs.arrival(0x3fff << 16, &frame(64, 3));
        let good = frame(64, 4);
        nic.regs.arrive(&good, false);
        let (rx, _) = nic.receive(&mut cx).unwrap();
        assert_eq!(rx.consume(|f| f.to_vec()), good);
        assert_eq!(nic.stats().rx_dropped, 3);
        assert!(
            nic.regs.data.is_empty(),
            "nothing of the skipped frames left"
        );
    }

    #[test]
    fn no_controller_is_an_error() {
        struct Absent;
        impl Registers for Absent {
            fn read(&mut self, _: usize) -> u32 {
                0xffff_ffff
            }
            fn write(&mut self, _: usize, _: u32) {}
        }
        assert_eq!(
            Lan9118::new(Absent, None).err(),
            Some(InitError::NotFound(0xffff_ffff))
        );
    }
}
