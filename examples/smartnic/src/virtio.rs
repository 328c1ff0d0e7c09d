//! The board's NIC: a virtio-net device on a virtio-mmio transport, driven
//! by `virtio-drivers`' raw interface ([`VirtIONetRaw`], no `alloc`) and
//! offered as an [`embassy_net_driver::Driver`], so that
//! `homa_phy::share::driver::SharedDriver` can split it between homa-stack
//! and embassy-net.
//!
//! The driver owns [`QUEUE`] receive and [`QUEUE`] transmit buffers of
//! [`BUF`] bytes, from statics of the program. Every receive buffer is
//! handed to the device at start; a received frame is read in place and its
//! buffer handed back on the next call. A frame to send is written in place
//! behind the virtio-net header and handed to the device; its buffer is free
//! again once the device has used it. Nothing waits: with no frame, or no
//! free transmit buffer, the driver wakes its caller again at once, so the
//! executor keeps polling it (the device's interrupt is not used).
//!
//! [`BoardHal`] gives the device its queues from a static arena and the
//! buffers' addresses as they are: the MMU is off, so addresses are
//! physical and no cache stands between the core and the device.

use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::Context;

use embassy_net_driver as driver;
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::mmio::{MmioTransport, VirtIOHeader};
use virtio_drivers::transport::{DeviceType, Transport};
use virtio_drivers::{BufferDirection, Hal, PhysAddr, PAGE_SIZE};

/// QEMU `virt`'s virtio-mmio transports: [`VIRT_MMIO_COUNT`] windows of
/// [`VIRT_MMIO_SIZE`] bytes from here.
pub const VIRT_MMIO_BASE: usize = 0x0a00_0000;
/// Bytes of one virtio-mmio window.
pub const VIRT_MMIO_SIZE: usize = 0x200;
/// virtio-mmio windows on QEMU `virt`.
pub const VIRT_MMIO_COUNT: usize = 32;

/// Descriptors per virtqueue; also the receive buffers and the transmit
/// buffers the driver owns. With every receive buffer full, QEMU stops
/// reading the TAP (the host's queue holds the frames; none is dropped).
pub const QUEUE: usize = 64;
/// Bytes of one buffer: the virtio-net header (10 or 12 bytes) and an
/// Ethernet frame of up to [`MTU`] bytes.
pub const BUF: usize = 1536;
/// The largest Ethernet frame without its FCS.
pub const MTU: usize = 1514;

/// One set of buffers (receive or transmit).
pub type Buffers = [[u8; BUF]; QUEUE];

/// Pages of the DMA arena: the two virtqueues (at most 4 pages each for
/// [`QUEUE`] descriptors).
const DMA_PAGES: usize = 16;

/// Memory the device reads and writes: the virtqueues.
#[repr(C, align(4096))]
struct DmaArena(UnsafeCell<[u8; DMA_PAGES * PAGE_SIZE]>);

// SAFETY: pages are handed out once each (`DMA_NEXT` only grows), and only
// through `dma_alloc`.
unsafe impl Sync for DmaArena {}

static DMA: DmaArena = DmaArena(UnsafeCell::new([0; DMA_PAGES * PAGE_SIZE]));
/// The first page of the arena not handed out yet.
static DMA_NEXT: AtomicUsize = AtomicUsize::new(0);

/// `virtio-drivers`' view of the board: identity-mapped addresses, DMA
/// pages from a static arena (never given back: the NIC lives as long as
/// the program).
pub struct BoardHal;

// SAFETY: `dma_alloc` gives page-aligned, zeroed pages (the arena is in
// `.bss` and no page is handed out twice); with the MMU off an address is
// its physical address, and no cache needs cleaning for the device.
unsafe impl Hal for BoardHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let first = DMA_NEXT.fetch_add(pages, Ordering::Relaxed);
        if first.saturating_add(pages) > DMA_PAGES {
            // Address 0: virtio-drivers reports DmaError.
            return (0, NonNull::dangling());
        }
        let start = DMA.0.get().cast::<u8>().wrapping_add(first * PAGE_SIZE);
        match NonNull::new(start) {
            Some(p) => (start as usize as PhysAddr, p),
            None => (0, NonNull::dangling()),
        }
    }

    unsafe fn dma_dealloc(_paddr: PhysAddr, _vaddr: NonNull<u8>, _pages: usize) -> i32 {
        0
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        NonNull::new(paddr as usize as *mut u8).unwrap_or(NonNull::dangling())
    }

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        buffer.cast::<u8>().as_ptr() as usize as PhysAddr
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}

/// The first virtio-mmio window of QEMU `virt` that holds a network
/// device.
///
/// # Safety
///
/// The board is QEMU `virt` (its virtio-mmio windows are at
/// [`VIRT_MMIO_BASE`]), and nothing else uses them while the transport
/// lives.
pub unsafe fn find_net() -> Option<MmioTransport<'static>> {
    (0..VIRT_MMIO_COUNT).find_map(|i| {
        let header = NonNull::new((VIRT_MMIO_BASE + i * VIRT_MMIO_SIZE) as *mut VirtIOHeader)?;
        // SAFETY: window `i` is a virtio-mmio window of the board, which
        // the caller leaves to us.
        let transport = unsafe { MmioTransport::new(header, VIRT_MMIO_SIZE) }.ok()?;
        (transport.device_type() == DeviceType::Network).then_some(transport)
    })
}

/// What the driver counted.
#[derive(Clone, Copy, Debug, Default)]
pub struct NetStats {
    /// Frames received.
    pub rx_frames: u64,
    /// Frames handed to the device to send.
    pub tx_frames: u64,
    /// Receive buffers the device gave back holding less than a
    /// virtio-net header (handed to the device again), or with a token the
    /// driver did not hand out.
    pub rx_errors: u64,
    /// Frames the device refused to take.
    pub tx_errors: u64,
}

/// The receive side: every buffer is with the device but the one held.
struct Rx {
    bufs: &'static mut Buffers,
    /// The token of each buffer with the device.
    token: [Option<u16>; QUEUE],
    /// The buffer of the frame last handed out, to hand back to the device.
    held: Option<usize>,
}

/// The transmit side: the buffers with the device, and their lengths.
struct Tx {
    bufs: &'static mut Buffers,
    /// The token and length of each buffer with the device.
    sent: [Option<(u16, usize)>; QUEUE],
}

impl Tx {
    fn free(&self) -> Option<usize> {
        self.sent.iter().position(Option::is_none)
    }
}

/// A virtio-net device as an embassy-net driver (see the [module
/// docs](self)).
pub struct VirtioNet<T: Transport> {
    raw: VirtIONetRaw<BoardHal, T, QUEUE>,
    rx: Rx,
    tx: Tx,
    mac: [u8; 6],
    stats: NetStats,
}

impl<T: Transport> VirtioNet<T> {
    /// Starts the device on `transport` and hands it every buffer of
    /// `rx_bufs`; `tx_bufs` carry the frames to send.
    pub fn new(
        transport: T,
        rx_bufs: &'static mut Buffers,
        tx_bufs: &'static mut Buffers,
    ) -> Result<Self, virtio_drivers::Error> {
        let raw = VirtIONetRaw::new(transport)?;
        let mut net = VirtioNet {
            mac: raw.mac_address(),
            raw,
            rx: Rx {
                bufs: rx_bufs,
                token: [None; QUEUE],
                held: None,
            },
            tx: Tx {
                bufs: tx_bufs,
                sent: [None; QUEUE],
            },
            stats: NetStats::default(),
        };
        for i in 0..QUEUE {
            net.post(i)?;
        }
        Ok(net)
    }

    /// The device's MAC address (QEMU's `mac=`).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The counters.
    pub fn stats(&self) -> NetStats {
        self.stats
    }

    /// Hands receive buffer `i` to the device.
    fn post(&mut self, i: usize) -> Result<(), virtio_drivers::Error> {
        // SAFETY: the buffer is the driver's for the program's lifetime, and
        // it is touched again only after the device gave its token back
        // (`receive`), through `receive_complete`.
        let token = unsafe { self.raw.receive_begin(&mut self.rx.bufs[i])? };
        self.rx.token[i] = Some(token);
        Ok(())
    }

    /// Hands the held receive buffer back, and frees the transmit buffers
    /// the device is done with.
    fn tidy(&mut self) {
        if let Some(i) = self.rx.held.take() {
            if self.post(i).is_err() {
                // Not seen with as many descriptors as buffers; keep it to
                // try again.
                self.rx.held = Some(i);
            }
        }
        while let Some(token) = self.raw.poll_transmit() {
            let Some(i) = self
                .tx
                .sent
                .iter()
                .position(|s| matches!(s, Some((t, _)) if *t == token))
            else {
                break;
            };
            let len = self.tx.sent[i].map_or(0, |(_, len)| len);
            // SAFETY: the same buffer, and length, as handed to
            // `transmit_begin` for this token.
            let _ = unsafe { self.raw.transmit_complete(token, &self.tx.bufs[i][..len]) };
            self.tx.sent[i] = None;
        }
    }
}

/// A received frame, in its buffer.
pub struct RxToken<'a> {
    frame: &'a mut [u8],
}

/// A free transmit buffer.
pub struct TxToken<'a, T: Transport> {
    raw: &'a mut VirtIONetRaw<BoardHal, T, QUEUE>,
    tx: &'a mut Tx,
    slot: usize,
    stats: &'a mut NetStats,
}

impl driver::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

impl<T: Transport> driver::TxToken for TxToken<'_, T> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let buf = &mut self.tx.bufs[self.slot];
        // The header fits (a buffer is larger); a zero-length header would
        // be refused by the device below.
        let header = self.raw.fill_buffer_header(buf).unwrap_or(0);
        let end = header + len.min(BUF - header);
        let r = f(&mut buf[header..end]);
        // SAFETY: the buffer is not touched again until the device gives
        // its token back (`tidy`).
        match unsafe { self.raw.transmit_begin(&buf[..end]) } {
            Ok(token) => {
                self.tx.sent[self.slot] = Some((token, end));
                self.stats.tx_frames += 1;
            }
            Err(_) => self.stats.tx_errors += 1,
        }
        r
    }
}

impl<T: Transport> driver::Driver for VirtioNet<T> {
    type RxToken<'a>
        = RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a, T>
    where
        Self: 'a;

    fn receive(&mut self, cx: &mut Context) -> Option<(RxToken<'_>, TxToken<'_, T>)> {
        self.tidy();
        let (Some(slot), Some(token)) = (self.tx.free(), self.raw.poll_receive()) else {
            cx.waker().wake_by_ref();
            return None;
        };
        let Some(i) = self.rx.token.iter().position(|t| *t == Some(token)) else {
            self.stats.rx_errors += 1;
            cx.waker().wake_by_ref();
            return None;
        };
        // SAFETY: buffer `i` is the one handed to `receive_begin` for this
        // token.
        let done = unsafe { self.raw.receive_complete(token, &mut self.rx.bufs[i]) };
        self.rx.token[i] = None;
        self.rx.held = Some(i);
        let Ok((header, len)) = done else {
            self.stats.rx_errors += 1;
            cx.waker().wake_by_ref();
            return None;
        };
        self.stats.rx_frames += 1;
        let frame = &mut self.rx.bufs[i][header..(header + len).min(BUF)];
        Some((
            RxToken { frame },
            TxToken {
                raw: &mut self.raw,
                tx: &mut self.tx,
                slot,
                stats: &mut self.stats,
            },
        ))
    }

    fn transmit(&mut self, cx: &mut Context) -> Option<TxToken<'_, T>> {
        self.tidy();
        let Some(slot) = self.tx.free() else {
            cx.waker().wake_by_ref();
            return None;
        };
        Some(TxToken {
            raw: &mut self.raw,
            tx: &mut self.tx,
            slot,
            stats: &mut self.stats,
        })
    }

    fn link_state(&mut self, _cx: &mut Context) -> driver::LinkState {
        driver::LinkState::Up
    }

    fn capabilities(&self) -> driver::Capabilities {
        let mut caps = driver::Capabilities::default();
        caps.max_transmission_unit = MTU;
        caps
    }

    fn hardware_address(&self) -> driver::HardwareAddress {
        driver::HardwareAddress::Ethernet(self.mac)
    }
}
