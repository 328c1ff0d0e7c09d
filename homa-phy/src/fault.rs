//! A middleware device that drops, duplicates, reorders, delays, corrupts and
//! rate-limits frames, deterministically for a seed.
//!
//! [`FaultInjector`] wraps any [`Device`]. Every probability is in parts per
//! million ([`PPM`] = certain), so the whole thing stays integer and `no_std`.
//! Randomness comes from a [`SplitMix64`](crate::rng::SplitMix64) generator seeded by the
//! caller: the same seed, configuration and sequence of calls give the same
//! faults, which is what tests and simulations need.
//!
//! # What happens to a received frame
//!
//! Each frame taken from the inner device draws exactly one fate from the
//! configured rates (checked in this order; if they add up to more than
//! [`PPM`], the later ones get what is left): drop, delay, reorder,
//! duplicate, corrupt, or pass. The fate is drawn when the frame is taken, so
//! the sequence of fates depends only on the seed and the frames, not on how
//! often the device is polled.
//!
//! - **drop**: the frame is discarded.
//! - **delay**: the frame is held for a random time in `0..=max_delay`.
//!   Frames behind it are not held up, so delays also reorder.
//! - **reorder**: the frame is held until a frame that arrived after it has
//!   been delivered, or `reorder_timeout` passes.
//! - **duplicate**: the frame is delivered, and a copy right after it.
//! - **corrupt**: one bit, chosen at random, is flipped.
//!
//! Held frames (delayed, reordered, duplicate copies) live in `HOLD` internal
//! slots of `BUF` bytes each. When every slot is taken the fault is skipped
//! and the frame passes unmodified (counted in `hold_full`). Call
//! [`FaultInjector::poll_at`] to learn when a held frame becomes due.
//!
//! Frames larger than `BUF` cannot be copied. When corrupt or duplicate hits
//! one, it passes unmodified (counted in `oversized`). Delay, reorder and a
//! configured `max_size` must take the frame off the inner device before the
//! stack sees it, and the token API offers no way to hand it on afterwards,
//! so such a frame is lost (also counted in `oversized`); keep `BUF` at least
//! the inner device's MTU (the default 1536 covers standard Ethernet).
//!
//! # What happens to a transmitted frame
//!
//! Transmit applies drop, corrupt and `max_size` (hold faults are receive-only:
//! to disturb both directions of a link, wrap both ends). Dropping a frame
//! still has to run the stack's closure, which writes into an internal `BUF`
//! scratch buffer; a frame larger than that is sent unmodified (`oversized`).
//!
//! # Checksums
//!
//! A flipped bit must meet a checksum that no longer matches, or it would
//! reach the stack (or the peer) as sound data. So while `corrupt_ppm` is
//! set the injector takes back the stack's part of every checksum in each
//! direction it corrupts, whatever the inner device offloads:
//!
//! - on receive always: the flip comes after the inner device's checks, so
//!   the stack verifies every checksum itself;
//! - on transmit when `transmit_faults` is on: the flip comes after the
//!   stack filled the frame, so the stack fills every checksum itself. An
//!   inner device that still fills checksums on its own would cover the
//!   flip, as a NIC covers a bit flipped in memory before it: over such a
//!   device, turn its offload off or corrupt on receive only
//!   (`transmit_faults` off), where the inner device's transmit offload is
//!   passed through.
//!
//! # Rate limits
//!
//! Token buckets shape rather than police, like a real NIC: when the receive
//! bucket is empty, [`receive`](Device::receive) returns `None` and the frame
//! stays in the inner device; when the transmit bucket is empty,
//! [`transmit`](Device::transmit) returns `None`. Each refusal counts in
//! `rate_limited`. The transmit token handed out with a received frame (for
//! replies) is not rate limited.
//!
//! ```
//! use homa_phy::fault::{FaultConfig, FaultInjector, PPM};
//! use homa_phy::{Device, Instant, Loopback, RxToken, TxToken};
//!
//! let mut config = FaultConfig::new();
//! config.drop_ppm = PPM / 10; // 10 %
//! let mut dev: FaultInjector<Loopback<8>> =
//!     FaultInjector::with_config(Loopback::new(), 42, config);
//! let now = Instant::ZERO;
//! for _ in 0..8 {
//!     dev.get_mut().transmit(now).unwrap().consume(60, |buf| buf.fill(0));
//! }
//! while let Some((rx, _tx)) = dev.receive(now) {
//!     rx.consume(|_frame| ());
//! }
//! let rx = dev.stats().rx;
//! assert_eq!(rx.offered, 8);
//! assert_eq!(rx.passed + rx.dropped, 8);
//! ```

use crate::rng::SplitMix64 as Rng;
use crate::{ChecksumCapabilities, Device, DeviceCapabilities, Duration, Instant, PacketMeta};

/// One million: a probability of [`PPM`] parts per million is certainty.
pub const PPM: u32 = 1_000_000;

/// At most this many frames are swallowed (dropped or held) in one
/// [`receive`](Device::receive) call, to keep the work of one call bounded.
const MAX_SWALLOW_PER_CALL: usize = 32;

/// A token bucket: up to `frames` frames per `interval`, refilled to full once
/// per interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RateLimit {
    /// Bucket size, and how many frames one interval allows.
    pub frames: u32,
    /// How often the bucket is refilled.
    pub interval: Duration,
}

/// What to inject. All zero (the default) injects nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct FaultConfig {
    /// Frames dropped, in parts per million (receive and transmit).
    pub drop_ppm: u32,
    /// Received frames held for a random time up to `max_delay`, in ppm.
    pub delay_ppm: u32,
    /// Longest delay of a delayed frame.
    pub max_delay: Duration,
    /// Received frames held until a later frame has been delivered, in ppm.
    pub reorder_ppm: u32,
    /// How long a reordered frame waits for a later one before it is
    /// delivered anyway.
    pub reorder_timeout: Duration,
    /// Received frames delivered twice, in ppm.
    pub duplicate_ppm: u32,
    /// Frames with one bit flipped, in ppm (receive and transmit).
    pub corrupt_ppm: u32,
    /// Frames longer than this are dropped (receive and transmit).
    pub max_size: Option<usize>,
    /// Receive rate limit.
    pub rx_rate_limit: Option<RateLimit>,
    /// Transmit rate limit.
    pub tx_rate_limit: Option<RateLimit>,
    /// Whether drop and corrupt also apply to transmitted frames (the
    /// default). Turn it off when both ends of a link have an injector, so
    /// each frame meets the configured rates once, not twice.
    pub transmit_faults: bool,
}

impl FaultConfig {
    /// No faults; a reordered frame waits at most 1 ms.
    pub const fn new() -> FaultConfig {
        FaultConfig {
            drop_ppm: 0,
            delay_ppm: 0,
            max_delay: Duration::ZERO,
            reorder_ppm: 0,
            reorder_timeout: Duration::from_millis(1),
            duplicate_ppm: 0,
            corrupt_ppm: 0,
            max_size: None,
            rx_rate_limit: None,
            tx_rate_limit: None,
            transmit_faults: true,
        }
    }
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig::new()
    }
}

/// What the injector did in one direction.
///
/// Every frame counted in `offered` lands in exactly one of the other
/// counters except `rate_limited`, so `offered == outcomes()` once no token is
/// outstanding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct FaultCounters {
    /// Frames seen: taken from the inner device (receive) or written by the
    /// stack (transmit).
    pub offered: u64,
    /// Frames delivered unmodified, no fault drawn.
    pub passed: u64,
    /// Frames dropped at random.
    pub dropped: u64,
    /// Frames dropped because they exceeded `max_size`.
    pub too_large: u64,
    /// Frames delivered with one bit flipped.
    pub corrupted: u64,
    /// Frames delivered twice.
    pub duplicated: u64,
    /// Frames held for a random delay.
    pub delayed: u64,
    /// Frames held until a later frame went past them.
    pub reordered: u64,
    /// Frames larger than the internal buffer whose fault could not be
    /// applied: passed unmodified (corrupt, duplicate, transmit) or lost
    /// (delay, reorder, receive with `max_size` set).
    pub oversized: u64,
    /// Frames whose hold fault was skipped because every hold slot was taken;
    /// delivered unmodified.
    pub hold_full: u64,
    /// Times `receive`/`transmit` said "not now" because the bucket was
    /// empty. Not an outcome: no frame was taken.
    pub rate_limited: u64,
}

impl FaultCounters {
    /// The sum of all per-frame outcomes (everything but `offered` and
    /// `rate_limited`).
    pub const fn outcomes(&self) -> u64 {
        self.passed
            + self.dropped
            + self.too_large
            + self.corrupted
            + self.duplicated
            + self.delayed
            + self.reordered
            + self.oversized
            + self.hold_full
    }
}

/// Counters of both directions; see [`FaultInjector::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct FaultStats {
    /// Frames from the inner device towards the stack.
    pub rx: FaultCounters,
    /// Frames from the stack towards the inner device.
    pub tx: FaultCounters,
}

/// The fault drawn for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pass,
    Drop,
    Delay(Duration),
    Reorder,
    Duplicate,
    /// Carries the random number that picks the bit, scaled to the length
    /// when the length is known.
    Corrupt(u32),
}

impl Fate {
    /// Whether the frame must be taken off the inner device before the stack
    /// sees it.
    fn withholds(self) -> bool {
        matches!(self, Fate::Drop | Fate::Delay(_) | Fate::Reorder)
    }
}

/// The random numbers behind one received frame's fate. They are drawn when
/// the injector asks the inner device for a frame and turned into a [`Fate`]
/// with the configuration in force when the frame is taken, so a draw kept for
/// a frame that had not arrived yet still honours a later configuration change.
#[derive(Debug, Clone, Copy)]
struct Draw {
    /// Picks the fate: uniform in `0..PPM`.
    r: u32,
    /// Picks the delay or the bit to flip.
    extra: u64,
}

fn draw_rx(rng: &mut Rng) -> Draw {
    Draw {
        r: rng.below(u64::from(PPM)) as u32,
        extra: rng.next_u64(),
    }
}

fn rx_fate(draw: Draw, config: &FaultConfig) -> Fate {
    let r = draw.r;
    let mut edge = config.drop_ppm;
    if r < edge {
        return Fate::Drop;
    }
    edge = edge.saturating_add(config.delay_ppm);
    if r < edge {
        let span = u128::from(config.max_delay.total_nanos()) + 1;
        let nanos = (u128::from(draw.extra) * span) >> 64;
        return Fate::Delay(Duration::from_nanos(nanos as u64));
    }
    edge = edge.saturating_add(config.reorder_ppm);
    if r < edge {
        return Fate::Reorder;
    }
    edge = edge.saturating_add(config.duplicate_ppm);
    if r < edge {
        return Fate::Duplicate;
    }
    edge = edge.saturating_add(config.corrupt_ppm);
    if r < edge {
        return Fate::Corrupt((draw.extra >> 32) as u32);
    }
    Fate::Pass
}

fn draw_tx_fate(rng: &mut Rng, config: &FaultConfig) -> Fate {
    let r = rng.below(u64::from(PPM)) as u32;
    if !config.transmit_faults {
        return Fate::Pass;
    }
    if r < config.drop_ppm {
        Fate::Drop
    } else if r < config.drop_ppm.saturating_add(config.corrupt_ppm) {
        Fate::Corrupt(rng.next_u32())
    } else {
        Fate::Pass
    }
}

/// Flips the bit of `frame` that `r` (uniform over `u32`) picks.
/// Returns false for an empty frame, which has no bit to flip.
fn flip_bit(frame: &mut [u8], r: u32) -> bool {
    let bits = frame.len() as u64 * 8;
    let bit = (u64::from(r) * bits) >> 32;
    match frame.get_mut((bit / 8) as usize) {
        Some(byte) => {
            *byte ^= 1 << (bit % 8);
            true
        }
        None => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    tokens: u32,
    refilled_at: Instant,
    /// Whether the bucket has been filled once; the first use fills it.
    primed: bool,
}

impl Bucket {
    const NEW: Bucket = Bucket {
        tokens: 0,
        refilled_at: Instant::ZERO,
        primed: false,
    };

    fn refill(&mut self, limit: Option<RateLimit>, now: Instant) {
        let Some(limit) = limit else { return };
        if !self.primed || now.saturating_duration_since(self.refilled_at) >= limit.interval {
            self.tokens = limit.frames;
            self.refilled_at = now;
            self.primed = true;
        }
    }

    fn available(&self, limit: Option<RateLimit>) -> bool {
        limit.is_none() || self.tokens > 0
    }

    fn take(&mut self) {
        self.tokens = self.tokens.saturating_sub(1);
    }
}

/// A frame buffer of `BUF` bytes.
struct Buf<const BUF: usize> {
    len: usize,
    meta: PacketMeta,
    data: [u8; BUF],
}

impl<const BUF: usize> Buf<BUF> {
    const EMPTY: Buf<BUF> = Buf {
        len: 0,
        meta: PacketMeta::with_priority(0),
        data: [0; BUF],
    };

    /// Copies `frame` in; the caller has checked that it fits.
    fn fill(&mut self, frame: &[u8], meta: PacketMeta) {
        if let Some(dst) = self.data.get_mut(..frame.len()) {
            dst.copy_from_slice(frame);
            self.len = frame.len();
            self.meta = meta;
        }
    }

    fn frame(&self) -> &[u8] {
        self.data.get(..self.len).unwrap_or(&[])
    }

    fn frame_mut(&mut self) -> &mut [u8] {
        self.data.get_mut(..self.len).unwrap_or(&mut [])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeldKind {
    Free,
    Delayed,
    Reordered,
    Duplicate,
}

struct Held<const BUF: usize> {
    kind: HeldKind,
    /// Arrival order of the frame (a duplicate shares its original's).
    seq: u64,
    release_at: Instant,
    buf: Buf<BUF>,
}

impl<const BUF: usize> Held<BUF> {
    const FREE: Held<BUF> = Held {
        kind: HeldKind::Free,
        seq: 0,
        release_at: Instant::ZERO,
        buf: Buf::EMPTY,
    };

    fn is_due(&self, now: Instant, newest_delivered: u64) -> bool {
        match self.kind {
            HeldKind::Free => false,
            HeldKind::Delayed | HeldKind::Duplicate => self.release_at <= now,
            HeldKind::Reordered => self.release_at <= now || newest_delivered > self.seq,
        }
    }
}

fn free_slot<const BUF: usize>(held: &mut [Held<BUF>]) -> Option<&mut Held<BUF>> {
    held.iter_mut().find(|h| h.kind == HeldKind::Free)
}

/// Where the next received frame comes from.
enum Source {
    Stage,
    Held(usize),
    Inner(Draw, Fate),
}

/// A [`Device`] that injects faults into the frames of an inner device.
///
/// - `HOLD`: how many frames can be held at once (delayed, reordered,
///   duplicate copies).
/// - `BUF`: the largest frame that can be held, staged or corrupted.
///
/// The struct holds `HOLD + 2` buffers of `BUF` bytes: the hold slots, a
/// staging buffer for received frames it had to take off the inner device,
/// and a scratch buffer for dropped transmit frames.
///
/// See the [module documentation](self) for the exact semantics.
pub struct FaultInjector<D: Device, const HOLD: usize = 4, const BUF: usize = 1536> {
    inner: D,
    config: FaultConfig,
    rng: Rng,
    /// The draw for the next frame of the inner device, when the draw
    /// happened but the inner device had no frame (keeps fates independent of
    /// polling).
    pending: Option<Draw>,
    rx_bucket: Bucket,
    tx_bucket: Bucket,
    held: [Held<BUF>; HOLD],
    /// A received frame that was taken off the inner device and is to be
    /// delivered next; also the scratch buffer for lazily corrupted frames.
    stage: Buf<BUF>,
    stage_ready: bool,
    stage_seq: u64,
    /// Where dropped transmit frames are written.
    junk: [u8; BUF],
    /// Arrival number of the next frame from the inner device (starts at 1).
    next_seq: u64,
    /// Highest arrival number delivered so far (0 = none).
    newest_delivered: u64,
    rx: FaultCounters,
    tx: FaultCounters,
}

impl<D: Device, const HOLD: usize, const BUF: usize> FaultInjector<D, HOLD, BUF> {
    /// Wraps `inner`, injecting nothing until configured.
    pub fn new(inner: D, seed: u64) -> Self {
        Self::with_config(inner, seed, FaultConfig::new())
    }

    /// Wraps `inner` with the given faults.
    pub fn with_config(inner: D, seed: u64, config: FaultConfig) -> Self {
        FaultInjector {
            inner,
            config,
            rng: Rng::new(seed),
            pending: None,
            rx_bucket: Bucket::NEW,
            tx_bucket: Bucket::NEW,
            held: [Held::FREE; HOLD],
            stage: Buf::EMPTY,
            stage_ready: false,
            stage_seq: 0,
            junk: [0; BUF],
            next_seq: 1,
            newest_delivered: 0,
            rx: FaultCounters::default(),
            tx: FaultCounters::default(),
        }
    }

    /// The current configuration.
    pub fn config(&self) -> &FaultConfig {
        &self.config
    }

    /// Changes the configuration; takes effect for the next frame drawn.
    pub fn config_mut(&mut self) -> &mut FaultConfig {
        &mut self.config
    }

    /// What the injector did so far.
    pub fn stats(&self) -> FaultStats {
        FaultStats {
            rx: self.rx,
            tx: self.tx,
        }
    }

    /// Sets all counters back to zero.
    pub fn reset_stats(&mut self) {
        self.rx = FaultCounters::default();
        self.tx = FaultCounters::default();
    }

    /// Frames currently held (delayed, reordered, duplicate copies, staged).
    pub fn held(&self) -> usize {
        self.held
            .iter()
            .filter(|h| h.kind != HeldKind::Free)
            .count()
            + usize::from(self.stage_ready)
    }

    /// The earliest time a held frame becomes due, so an event loop can wake
    /// up for it (`Instant::ZERO` when one is due at once); `None` when
    /// nothing is held. A reordered frame may come out earlier, as soon as a
    /// later frame passes it.
    pub fn poll_at(&self) -> Option<Instant> {
        let held = self
            .held
            .iter()
            .filter(|h| h.kind != HeldKind::Free)
            .map(|h| h.release_at)
            .min();
        if self.stage_ready {
            Some(Instant::ZERO)
        } else {
            held
        }
    }

    /// The wrapped device.
    pub fn get_ref(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably (e.g. to queue frames behind the faults).
    pub fn get_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Unwraps the device; held frames are lost.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// The held frame to deliver first, if any is due.
    fn due(&self, now: Instant) -> Option<usize> {
        self.held
            .iter()
            .enumerate()
            .filter(|(_, h)| h.is_due(now, self.newest_delivered))
            .min_by_key(|(_, h)| (h.release_at.min(now), h.seq))
            .map(|(i, _)| i)
    }
}

/// Takes a frame whose fate withholds it (or that must be size-checked) off
/// the inner device: drops it, holds it, or stages it for delivery.
#[allow(clippy::too_many_arguments)]
fn swallow<const HOLD: usize, const BUF: usize>(
    frame: &[u8],
    meta: PacketMeta,
    fate: Fate,
    seq: u64,
    now: Instant,
    config: &FaultConfig,
    held: &mut [Held<BUF>; HOLD],
    stage: &mut Buf<BUF>,
    counters: &mut FaultCounters,
) -> bool {
    counters.offered += 1;
    if fate == Fate::Drop {
        counters.dropped += 1;
        return false;
    }
    if config.max_size.is_some_and(|max| frame.len() > max) {
        counters.too_large += 1;
        return false;
    }
    if frame.len() > BUF {
        counters.oversized += 1;
        return false;
    }
    let (kind, release_at) = match fate {
        Fate::Delay(d) => (HeldKind::Delayed, now + d),
        Fate::Reorder => (HeldKind::Reordered, now + config.reorder_timeout),
        _ => (HeldKind::Free, now),
    };
    if kind != HeldKind::Free {
        if let Some(slot) = free_slot(held) {
            slot.buf.fill(frame, meta);
            slot.kind = kind;
            slot.seq = seq;
            slot.release_at = release_at;
            if kind == HeldKind::Delayed {
                counters.delayed += 1;
            } else {
                counters.reordered += 1;
            }
            return false;
        }
        counters.hold_full += 1;
        stage.fill(frame, meta);
        return true;
    }
    stage.fill(frame, meta);
    match fate {
        Fate::Corrupt(r) if flip_bit(stage.frame_mut(), r) => counters.corrupted += 1,
        Fate::Duplicate => match free_slot(held) {
            Some(slot) => {
                slot.buf.fill(frame, meta);
                slot.kind = HeldKind::Duplicate;
                slot.seq = seq;
                slot.release_at = now;
                counters.duplicated += 1;
            }
            None => counters.hold_full += 1,
        },
        _ => counters.passed += 1,
    }
    true
}

/// Receive token of a [`FaultInjector`].
pub struct FaultRxToken<'a, D: Device + 'a, const HOLD: usize, const BUF: usize> {
    kind: RxKind<'a, D, HOLD, BUF>,
}

enum RxKind<'a, D: Device + 'a, const HOLD: usize, const BUF: usize> {
    /// A frame the injector already holds.
    Memory { frame: &'a [u8], meta: PacketMeta },
    /// A frame still in the inner device; a corrupt or duplicate fate is
    /// applied while it is read.
    Inner {
        token: D::RxToken<'a>,
        fate: Fate,
        seq: u64,
        now: Instant,
        scratch: &'a mut Buf<BUF>,
        held: &'a mut [Held<BUF>; HOLD],
        counters: &'a mut FaultCounters,
    },
}

impl<'a, D: Device + 'a, const HOLD: usize, const BUF: usize> crate::RxToken
    for FaultRxToken<'a, D, HOLD, BUF>
{
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        match self.kind {
            RxKind::Memory { frame, .. } => f(frame),
            RxKind::Inner {
                token,
                fate,
                seq,
                now,
                scratch,
                held,
                counters,
            } => {
                let meta = token.meta();
                token.consume(|frame| {
                    counters.offered += 1;
                    match fate {
                        Fate::Corrupt(_) | Fate::Duplicate if frame.len() > BUF => {
                            counters.oversized += 1;
                            f(frame)
                        }
                        Fate::Corrupt(r) => {
                            scratch.fill(frame, meta);
                            if flip_bit(scratch.frame_mut(), r) {
                                counters.corrupted += 1;
                            } else {
                                counters.passed += 1;
                            }
                            f(scratch.frame())
                        }
                        Fate::Duplicate => {
                            match free_slot(held) {
                                Some(slot) => {
                                    slot.buf.fill(frame, meta);
                                    slot.kind = HeldKind::Duplicate;
                                    slot.seq = seq;
                                    slot.release_at = now;
                                    counters.duplicated += 1;
                                }
                                None => counters.hold_full += 1,
                            }
                            f(frame)
                        }
                        // Withholding fates never take this path.
                        _ => {
                            counters.passed += 1;
                            f(frame)
                        }
                    }
                })
            }
        }
    }

    fn meta(&self) -> PacketMeta {
        match &self.kind {
            RxKind::Memory { meta, .. } => *meta,
            RxKind::Inner { token, .. } => token.meta(),
        }
    }
}

/// Transmit token of a [`FaultInjector`].
pub struct FaultTxToken<'a, D: Device + 'a, const BUF: usize> {
    token: D::TxToken<'a>,
    junk: &'a mut [u8; BUF],
    rng: &'a mut Rng,
    config: FaultConfig,
    counters: &'a mut FaultCounters,
}

impl<'a, D: Device + 'a, const BUF: usize> crate::TxToken for FaultTxToken<'a, D, BUF> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let FaultTxToken {
            token,
            junk,
            rng,
            config,
            counters,
        } = self;
        counters.offered += 1;
        let fate = draw_tx_fate(rng, &config);
        let discard = if fate == Fate::Drop {
            Some(&mut counters.dropped)
        } else if config.max_size.is_some_and(|max| len > max) {
            Some(&mut counters.too_large)
        } else {
            None
        };
        if let Some(counter) = discard {
            if let Some(buf) = junk.get_mut(..len) {
                *counter += 1;
                return f(buf);
            }
            counters.oversized += 1;
            return token.consume(len, f);
        }
        match fate {
            Fate::Corrupt(r) => token.consume(len, |buf| {
                let out = f(buf);
                if flip_bit(buf, r) {
                    counters.corrupted += 1;
                } else {
                    counters.passed += 1;
                }
                out
            }),
            _ => {
                counters.passed += 1;
                token.consume(len, f)
            }
        }
    }

    fn set_meta(&mut self, meta: PacketMeta) {
        self.token.set_meta(meta);
    }
}

impl<D: Device, const HOLD: usize, const BUF: usize> Device for FaultInjector<D, HOLD, BUF> {
    type RxToken<'a>
        = FaultRxToken<'a, D, HOLD, BUF>
    where
        Self: 'a;
    type TxToken<'a>
        = FaultTxToken<'a, D, BUF>
    where
        Self: 'a;

    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let now = timestamp;
        self.rx_bucket.refill(self.config.rx_rate_limit, now);
        let mut source = None;
        for _ in 0..MAX_SWALLOW_PER_CALL {
            if self.stage_ready {
                source = Some(Source::Stage);
                break;
            }
            if let Some(i) = self.due(now) {
                source = Some(Source::Held(i));
                break;
            }
            if !self.rx_bucket.available(self.config.rx_rate_limit) {
                self.rx.rate_limited += 1;
                return None;
            }
            let draw = match self.pending.take() {
                Some(draw) => draw,
                None => draw_rx(&mut self.rng),
            };
            let fate = rx_fate(draw, &self.config);
            if !fate.withholds() && self.config.max_size.is_none() {
                source = Some(Source::Inner(draw, fate));
                break;
            }
            let seq = self.next_seq;
            let Some((token, _reply)) = self.inner.receive(now) else {
                self.pending = Some(draw);
                return None;
            };
            let meta = crate::RxToken::meta(&token);
            let staged = crate::RxToken::consume(token, |frame| {
                swallow(
                    frame,
                    meta,
                    fate,
                    seq,
                    now,
                    &self.config,
                    &mut self.held,
                    &mut self.stage,
                    &mut self.rx,
                )
            });
            self.next_seq += 1;
            self.rx_bucket.take();
            if staged {
                self.stage_ready = true;
                self.stage_seq = seq;
            }
        }

        let FaultInjector {
            inner,
            config,
            rng,
            pending,
            rx_bucket,
            held,
            stage,
            stage_ready,
            stage_seq,
            junk,
            next_seq,
            newest_delivered,
            rx,
            tx,
            ..
        } = self;
        let (kind, token) = match source? {
            Source::Stage => {
                let token = inner.transmit(now)?;
                *stage_ready = false;
                *newest_delivered = (*newest_delivered).max(*stage_seq);
                let kind = RxKind::Memory {
                    frame: stage.frame(),
                    meta: stage.meta,
                };
                (kind, token)
            }
            Source::Held(i) => {
                let token = inner.transmit(now)?;
                let slot = &mut held[i];
                slot.kind = HeldKind::Free;
                *newest_delivered = (*newest_delivered).max(slot.seq);
                let kind = RxKind::Memory {
                    frame: slot.buf.frame(),
                    meta: slot.buf.meta,
                };
                (kind, token)
            }
            Source::Inner(draw, fate) => {
                let Some((token, tx_token)) = inner.receive(now) else {
                    *pending = Some(draw);
                    return None;
                };
                let seq = *next_seq;
                *next_seq += 1;
                rx_bucket.take();
                *newest_delivered = (*newest_delivered).max(seq);
                let kind = RxKind::Inner {
                    token,
                    fate,
                    seq,
                    now,
                    scratch: stage,
                    held,
                    counters: rx,
                };
                (kind, tx_token)
            }
        };
        let reply = FaultTxToken {
            token,
            junk,
            rng,
            config: *config,
            counters: tx,
        };
        Some((FaultRxToken { kind }, reply))
    }

    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>> {
        self.tx_bucket.refill(self.config.tx_rate_limit, timestamp);
        if !self.tx_bucket.available(self.config.tx_rate_limit) {
            self.tx.rate_limited += 1;
            return None;
        }
        let token = self.inner.transmit(timestamp)?;
        self.tx_bucket.take();
        Some(FaultTxToken {
            token,
            junk: &mut self.junk,
            rng: &mut self.rng,
            config: self.config,
            counters: &mut self.tx,
        })
    }

    /// The inner device's, except that while it flips bits the stack does
    /// every checksum in each direction it corrupts (see the module's
    /// documentation): verifies them all on receive, and fills them all on
    /// transmit when `transmit_faults` is on.
    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = self.inner.capabilities();
        if self.config.corrupt_ppm > 0 {
            let stack = ChecksumCapabilities::default();
            let tx = if self.config.transmit_faults {
                &stack
            } else {
                &caps.checksum
            };
            caps.checksum = ChecksumCapabilities::join(&stack, tx);
        }
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Loopback, RxToken as _, TxToken as _};
    use std::vec::Vec;

    type Inj<const HOLD: usize = 4, const BUF: usize = 1536> =
        FaultInjector<Loopback<16, 256>, HOLD, BUF>;

    fn at(micros: u64) -> Instant {
        Instant::from_micros(micros)
    }

    /// Queues a frame in the inner loopback, behind the faults.
    fn inject<D: Device, const H: usize, const B: usize>(
        dev: &mut FaultInjector<D, H, B>,
        frame: &[u8],
    ) {
        dev.get_mut()
            .transmit(Instant::ZERO)
            .expect("inner loopback has room")
            .consume(frame.len(), |buf| buf.copy_from_slice(frame));
    }

    fn recv<D: Device>(dev: &mut D, now: Instant) -> Option<Vec<u8>> {
        let (rx, _tx) = dev.receive(now)?;
        Some(rx.consume(|f| f.to_vec()))
    }

    fn drain<D: Device>(dev: &mut D, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(frame) = recv(dev, now) {
            out.push(frame);
        }
        out
    }

    fn frame(id: u16, len: usize) -> Vec<u8> {
        let mut f = std::vec![0xa5u8; len];
        f[..2].copy_from_slice(&id.to_be_bytes());
        f
    }

    fn all_faults() -> FaultConfig {
        let mut c = FaultConfig::new();
        c.drop_ppm = 100_000;
        c.delay_ppm = 50_000;
        c.max_delay = Duration::from_micros(50);
        c.reorder_ppm = 50_000;
        c.reorder_timeout = Duration::from_micros(20);
        c.duplicate_ppm = 50_000;
        c.corrupt_ppm = 50_000;
        c
    }

    /// Offers `n` frames one per microsecond and records what comes out.
    fn run(seed: u64, config: FaultConfig, n: u16) -> (Vec<(u64, Vec<u8>)>, FaultStats) {
        let mut dev: Inj<8> = FaultInjector::with_config(Loopback::new(), seed, config);
        let mut out = Vec::new();
        let mut now = 0;
        for id in 0..n {
            inject(&mut dev, &frame(id, 64));
            for f in drain(&mut dev, at(now)) {
                out.push((now, f));
            }
            now += 1;
        }
        // Let every held frame come out.
        now += 1_000;
        for f in drain(&mut dev, at(now)) {
            out.push((now, f));
        }
        assert_eq!(dev.held(), 0);
        (out, dev.stats())
    }

    #[test]
    fn same_seed_gives_the_same_outcome_sequence() {
        let (a, stats_a) = run(7, all_faults(), 2_000);
        let (b, stats_b) = run(7, all_faults(), 2_000);
        assert_eq!(a, b);
        assert_eq!(stats_a, stats_b);
        let (c, _) = run(8, all_faults(), 2_000);
        assert_ne!(a, c, "another seed gives other faults");
    }

    #[test]
    fn fates_do_not_depend_on_how_often_the_device_is_polled() {
        let config = all_faults();
        let mut calm: Inj<8> = FaultInjector::with_config(Loopback::new(), 3, config);
        let mut busy: Inj<8> = FaultInjector::with_config(Loopback::new(), 3, config);
        for id in 0..500 {
            // `busy` is polled with nothing to receive in between.
            assert!(recv(&mut busy, Instant::ZERO).is_none());
            inject(&mut calm, &frame(id, 64));
            inject(&mut busy, &frame(id, 64));
            drain(&mut calm, Instant::ZERO);
            drain(&mut busy, Instant::ZERO);
        }
        assert_eq!(calm.stats(), busy.stats());
    }

    #[test]
    fn rates_roughly_match_the_configuration_over_10k_frames() {
        let (out, stats) = run(1, all_faults(), 10_000);
        let rx = stats.rx;
        assert_eq!(rx.offered, 10_000);
        let near = |got: u64, want: u64| got > want * 7 / 10 && got < want * 13 / 10;
        assert!(near(rx.dropped, 1_000), "dropped {}", rx.dropped);
        assert!(near(rx.delayed, 500), "delayed {}", rx.delayed);
        assert!(near(rx.reordered, 500), "reordered {}", rx.reordered);
        assert!(near(rx.duplicated, 500), "duplicated {}", rx.duplicated);
        assert!(near(rx.corrupted, 500), "corrupted {}", rx.corrupted);
        assert!(near(rx.passed, 7_500), "passed {}", rx.passed);
        assert_eq!(rx.hold_full, 0, "8 slots are plenty at this rate");
        // Every frame not dropped comes out once, duplicates twice.
        assert_eq!(out.len() as u64, rx.offered - rx.dropped + rx.duplicated);
    }

    #[test]
    fn counters_add_up_to_the_offered_frames() {
        let mut config = all_faults();
        config.max_size = Some(110);
        let mut dev: Inj<2, 128> = FaultInjector::with_config(Loopback::new(), 9, config);
        for id in 0..3_000u16 {
            if id == 1_500 {
                // Above the buffer: receive loses frames of 129..=150 bytes.
                dev.config_mut().max_size = Some(150);
            }
            // Some too large for max_size, some too large for the buffer.
            let len = [64, 120, 140, 200][usize::from(id % 4)];
            inject(&mut dev, &frame(id, len));
            drain(&mut dev, at(u64::from(id)));
            let mut tx = dev.transmit(at(u64::from(id))).unwrap();
            tx.set_meta(PacketMeta::default());
            tx.consume(len, |buf| buf.fill(1));
            // Empty the inner loopback of what was transmitted.
            recv(dev.get_mut(), Instant::ZERO);
        }
        drain(&mut dev, at(1_000_000));
        let s = dev.stats();
        assert_eq!(s.rx.offered, 3_000);
        assert_eq!(s.rx.outcomes(), s.rx.offered, "{:?}", s.rx);
        assert_eq!(s.tx.offered, 3_000);
        assert_eq!(s.tx.outcomes(), s.tx.offered, "{:?}", s.tx);
        assert!(s.rx.too_large > 0 && s.rx.oversized > 0 && s.rx.hold_full > 0);
        assert!(s.tx.too_large > 0 && s.tx.oversized > 0);
    }

    fn differing_bits(a: &[u8], b: &[u8]) -> u32 {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
    }

    #[test]
    fn corrupt_flips_exactly_one_bit_on_receive_and_transmit() {
        let mut config = FaultConfig::new();
        config.corrupt_ppm = PPM;
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 11, config);
        for id in 0..100u16 {
            let sent = frame(id, 60 + usize::from(id));
            inject(&mut dev, &sent);
            let got = recv(&mut dev, Instant::ZERO).unwrap();
            assert_eq!(differing_bits(&sent, &got), 1);

            dev.transmit(Instant::ZERO)
                .unwrap()
                .consume(sent.len(), |buf| buf.copy_from_slice(&sent));
            let got = recv(dev.get_mut(), Instant::ZERO).unwrap();
            assert_eq!(differing_bits(&sent, &got), 1);
        }
        assert_eq!(dev.stats().rx.corrupted, 100);
        assert_eq!(dev.stats().tx.corrupted, 100);
    }

    #[test]
    fn corrupt_with_max_size_set_flips_one_bit_in_the_staged_copy() {
        let mut config = FaultConfig::new();
        config.corrupt_ppm = PPM;
        config.max_size = Some(200);
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 12, config);
        let sent = frame(1, 80);
        inject(&mut dev, &sent);
        let got = recv(&mut dev, Instant::ZERO).unwrap();
        assert_eq!(differing_bits(&sent, &got), 1);
    }

    #[test]
    fn duplicate_delivers_a_copy_right_after_the_original() {
        let mut config = FaultConfig::new();
        config.duplicate_ppm = PPM;
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 1, config);
        inject(&mut dev, b"one");
        inject(&mut dev, b"two");
        let got = drain(&mut dev, Instant::ZERO);
        let want: [&[u8]; 4] = [b"one", b"one", b"two", b"two"];
        assert_eq!(got, want);
        assert_eq!(dev.stats().rx.duplicated, 2);
    }

    #[test]
    fn delayed_frame_comes_out_when_due_and_poll_at_says_when() {
        let mut config = FaultConfig::new();
        config.delay_ppm = PPM;
        config.max_delay = Duration::from_millis(10);
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 5, config);
        inject(&mut dev, b"late");
        assert!(recv(&mut dev, at(0)).is_none());
        let due = dev.poll_at().expect("a frame is held");
        assert!(due <= at(10_000));
        if due > at(0) {
            assert!(recv(&mut dev, due - Duration::from_nanos(1)).is_none());
        }
        assert_eq!(recv(&mut dev, due).unwrap(), b"late");
        assert_eq!(dev.poll_at(), None);
        assert_eq!(dev.stats().rx.delayed, 1);
    }

    #[test]
    fn reordered_frame_comes_out_after_the_next_one() {
        let mut config = FaultConfig::new();
        config.reorder_ppm = PPM;
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 5, config);
        inject(&mut dev, b"first");
        assert!(recv(&mut dev, at(0)).is_none());
        dev.config_mut().reorder_ppm = 0;
        inject(&mut dev, b"second");
        let got = drain(&mut dev, at(1));
        let want: [&[u8]; 2] = [b"second", b"first"];
        assert_eq!(got, want);
        assert_eq!(dev.stats().rx.reordered, 1);
    }

    #[test]
    fn reordered_frame_alone_comes_out_after_the_timeout() {
        let mut config = FaultConfig::new();
        config.reorder_ppm = PPM;
        config.reorder_timeout = Duration::from_micros(100);
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 5, config);
        inject(&mut dev, b"lonely");
        assert!(recv(&mut dev, at(0)).is_none());
        assert!(recv(&mut dev, at(99)).is_none());
        assert_eq!(recv(&mut dev, at(100)).unwrap(), b"lonely");
    }

    #[test]
    fn full_hold_slots_let_frames_pass_unmodified() {
        let mut config = FaultConfig::new();
        config.delay_ppm = PPM;
        config.max_delay = Duration::from_secs(1);
        let mut dev: Inj<1> = FaultInjector::with_config(Loopback::new(), 2, config);
        inject(&mut dev, b"held");
        inject(&mut dev, b"through");
        assert_eq!(recv(&mut dev, at(0)).unwrap(), b"through");
        let rx = dev.stats().rx;
        assert_eq!((rx.delayed, rx.hold_full), (1, 1));
    }

    #[test]
    fn max_size_drops_larger_frames_both_ways() {
        let mut config = FaultConfig::new();
        config.max_size = Some(100);
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 2, config);
        inject(&mut dev, &frame(1, 150));
        inject(&mut dev, &frame(2, 100));
        assert_eq!(drain(&mut dev, at(0)), [frame(2, 100)]);
        dev.transmit(at(0)).unwrap().consume(101, |b| b.fill(0));
        dev.transmit(at(0)).unwrap().consume(100, |b| b.fill(0));
        assert_eq!(dev.get_ref().len(), 1);
        assert_eq!(dev.stats().rx.too_large, 1);
        assert_eq!(dev.stats().tx.too_large, 1);
    }

    #[test]
    fn drop_on_transmit_discards_the_frame() {
        let mut config = FaultConfig::new();
        config.drop_ppm = PPM;
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 2, config);
        let r = dev.transmit(at(0)).unwrap().consume(60, |b| {
            b.fill(9);
            42
        });
        assert_eq!(r, 42, "the closure still runs");
        assert!(dev.get_ref().is_empty());
        assert_eq!(dev.stats().tx.dropped, 1);
    }

    #[test]
    fn oversized_frames_pass_unmodified_when_corrupted() {
        let mut config = FaultConfig::new();
        config.corrupt_ppm = PPM;
        let mut dev: Inj<1, 64> = FaultInjector::with_config(Loopback::new(), 2, config);
        let big = frame(1, 100);
        inject(&mut dev, &big);
        assert_eq!(recv(&mut dev, at(0)).unwrap(), big);
        assert_eq!(dev.stats().rx.oversized, 1);
    }

    #[test]
    fn rate_limits_refuse_until_the_bucket_refills() {
        let mut config = FaultConfig::new();
        let limit = RateLimit {
            frames: 2,
            interval: Duration::from_millis(1),
        };
        config.rx_rate_limit = Some(limit);
        config.tx_rate_limit = Some(limit);
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 2, config);
        for id in 0..5 {
            inject(&mut dev, &frame(id, 60));
        }
        assert_eq!(drain(&mut dev, at(0)).len(), 2);
        assert_eq!(drain(&mut dev, at(999)).len(), 0);
        assert_eq!(drain(&mut dev, at(1_000)).len(), 2);
        assert_eq!(dev.stats().rx.rate_limited, 3);
        assert_eq!(dev.get_ref().len(), 1, "refused frames stay in the device");

        assert!(dev.transmit(at(0)).is_some());
        assert!(dev.transmit(at(0)).is_some());
        assert!(dev.transmit(at(0)).is_none());
        assert!(dev.transmit(at(1_000)).is_some());
        assert_eq!(dev.stats().tx.rate_limited, 1);
    }

    #[test]
    fn wrapper_forwards_capabilities_and_meta() {
        let mut dev: Inj = FaultInjector::new(Loopback::new(), 0);
        assert_eq!(dev.capabilities(), dev.get_ref().capabilities());
        let mut tx = dev.transmit(at(0)).unwrap();
        tx.set_meta(PacketMeta::with_priority(6));
        tx.consume(10, |b| b.fill(0));
        let (rx, _) = dev.receive(at(0)).unwrap();
        assert_eq!(rx.meta().priority, 6);
        let inner: Loopback<16, 256> = dev.into_inner();
        assert!(inner.is_empty());
    }

    #[test]
    fn a_corrupting_injector_leaves_no_flip_to_the_inner_devices_checks() {
        use crate::Checksum;
        let stack = |c: ChecksumCapabilities| [c.ipv4, c.icmpv4, c.icmpv6, c.homa];
        // The inner device claims every checksum both ways.
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 1, FaultConfig::new());
        assert_eq!(
            dev.capabilities().checksum,
            ChecksumCapabilities::ignored(),
            "no corruption: the inner device's offload stands"
        );
        dev.config_mut().corrupt_ppm = 1;
        assert_eq!(
            stack(dev.capabilities().checksum),
            [Checksum::Both; 4],
            "corrupting both ways: the stack fills and verifies everything"
        );
        dev.config_mut().transmit_faults = false;
        assert_eq!(
            stack(dev.capabilities().checksum),
            [Checksum::Rx; 4],
            "corrupting on receive: the stack verifies, the device still fills"
        );
        // The rest of the capabilities are the inner device's.
        assert_eq!(
            dev.capabilities().max_transmission_unit,
            dev.get_ref().capabilities().max_transmission_unit
        );
    }

    #[test]
    fn transmit_faults_off_leaves_transmitted_frames_alone() {
        let mut config = FaultConfig::new();
        config.drop_ppm = PPM;
        config.corrupt_ppm = 0;
        config.transmit_faults = false;
        let mut dev: Inj = FaultInjector::with_config(Loopback::new(), 3, config);
        for _ in 0..8 {
            dev.transmit(Instant::ZERO)
                .unwrap()
                .consume(4, |buf| buf.copy_from_slice(&[1, 2, 3, 4]));
        }
        assert_eq!(dev.stats().tx.dropped, 0);
        assert_eq!(dev.get_ref().len(), 8);
        // Receive still drops everything.
        while let Some((rx, _)) = dev.receive(Instant::ZERO) {
            rx.consume(|_| ());
        }
        assert_eq!(dev.stats().rx.dropped, 8);
    }
}
