//! Two hosts over an in-memory wire with a one-way delay, on a virtual
//! clock that jumps to the next thing either end waits for.

use std::boxed::Box;
use std::collections::VecDeque;
use std::vec::Vec;

use super::{Host, TestDevice};
use crate::fault::FaultInjector;
use crate::pcap::{PcapSink, PcapWriter};
use crate::{Device, Duration, Instant};

/// A device a [`Pair`] wires: a [`TestDevice`], or middleware around one.
pub trait Wired: Device {
    /// The queues underneath.
    fn wire(&mut self) -> &mut TestDevice;
    /// The queues underneath.
    fn wire_ref(&self) -> &TestDevice;
    /// When the device itself next has something to hand out (a frame a
    /// fault injector holds back), if ever.
    fn wakeup(&self) -> Option<Instant> {
        None
    }
}

impl Wired for TestDevice {
    fn wire(&mut self) -> &mut TestDevice {
        self
    }
    fn wire_ref(&self) -> &TestDevice {
        self
    }
}

impl<D: Wired, S: PcapSink> Wired for PcapWriter<D, S> {
    fn wire(&mut self) -> &mut TestDevice {
        self.get_mut().wire()
    }
    fn wire_ref(&self) -> &TestDevice {
        self.get_ref().wire_ref()
    }
    fn wakeup(&self) -> Option<Instant> {
        self.get_ref().wakeup()
    }
}

impl<D: Wired, const HOLD: usize, const BUF: usize> Wired for FaultInjector<D, HOLD, BUF> {
    fn wire(&mut self) -> &mut TestDevice {
        self.get_mut().wire()
    }
    fn wire_ref(&self) -> &TestDevice {
        self.get_ref().wire_ref()
    }
    fn wakeup(&self) -> Option<Instant> {
        match (self.poll_at(), self.get_ref().wakeup()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Decides whether frame number `i` going `to_b` with these bytes arrives.
pub type Filter = Box<dyn FnMut(usize, bool, &[u8]) -> bool>;

/// Rewrites a frame going `to_b` in place.
pub type Rewrite = Box<dyn FnMut(bool, &mut Vec<u8>)>;

/// Two hosts, the wire between them and the clock.
///
/// Each [`step`](Self::step) delivers the frames that have arrived, polls
/// both hosts and puts what they sent on the wire: each frame arrives
/// `delay` after it was sent, plus its serialisation time when `link_mbps`
/// is set (a direction then carries one frame at a time).
/// [`run_until`](Self::run_until) steps and jumps the clock to the next
/// timer or arrival.
pub struct Pair<A, B, DA = TestDevice, DB = TestDevice> {
    /// The first host.
    pub a: A,
    /// The second host.
    pub b: B,
    /// A's device.
    pub da: DA,
    /// B's device.
    pub db: DB,
    /// Virtual time.
    pub now: Instant,
    /// Frames in flight: (arrival time, to_b, frame).
    pub flight: VecDeque<(Instant, bool, Vec<u8>)>,
    /// One-way delay of the wire.
    pub delay: Duration,
    /// Rate of each direction in Mbit/s; `None`: frames take no time to send.
    pub link_mbps: Option<u64>,
    /// When each direction (to A, to B) is free again.
    busy: [Instant; 2],
    /// Decides whether a frame (index, to_b, bytes) is delivered.
    pub filter: Filter,
    /// Rewrites a frame (to_b, bytes) before delivery.
    pub rewrite: Rewrite,
    /// Decides, after the rewrite, whether a delivered frame arrives twice.
    pub duplicate: Filter,
    /// Frames put on the wire.
    pub sent: usize,
    /// Every frame put on the wire: (time, to_b, bytes, priority), while
    /// `logging` is on.
    pub log: Vec<(Instant, bool, Vec<u8>, u8)>,
    /// Whether `log` records (it copies every frame; on by default).
    pub logging: bool,
    /// B has vanished: it is not polled and frames to it are lost.
    pub b_gone: bool,
    /// A slow host is polled at most once per this period (A's, then
    /// B's): frames wait in its device meanwhile, as for a board busy with
    /// other work, and what one poll reads and sends is all it does until
    /// the next. `None`: polled whenever it or its device wants.
    pub poll_every: [Option<Duration>; 2],
    /// When each slow host may poll next (A's, then B's).
    next_poll: [Instant; 2],
}

impl<A: Host, B: Host> Pair<A, B> {
    /// `a` and `b` on two [`TestDevice`]s sharing one frame pool, 2 us
    /// apart, at 1 ms.
    pub fn new(a: A, b: B) -> Self {
        let da = TestDevice::default();
        let db = TestDevice::with_pool(da.pool.clone());
        Pair::with_devices(a, b, da, db)
    }
}

impl<A: Host, B: Host, DA: Wired, DB: Wired> Pair<A, B, DA, DB> {
    /// `a` on `da` and `b` on `db`, 2 us apart, at 1 ms.
    pub fn with_devices(a: A, b: B, da: DA, db: DB) -> Self {
        Pair {
            a,
            b,
            da,
            db,
            now: Instant::from_millis(1),
            flight: VecDeque::new(),
            delay: Duration::from_micros(2),
            link_mbps: None,
            busy: [Instant::ZERO; 2],
            filter: Box::new(|_, _, _| true),
            rewrite: Box::new(|_, _| {}),
            duplicate: Box::new(|_, _, _| false),
            sent: 0,
            log: Vec::new(),
            logging: true,
            b_gone: false,
            poll_every: [None; 2],
            next_poll: [Instant::ZERO; 2],
        }
    }

    /// Keeps room for `frames` frames on the wire, in both devices and in
    /// their pools, so that with `logging` off a step allocates nothing
    /// while no more frames than that are in the air.
    pub fn reserve(&mut self, frames: usize) {
        self.flight.reserve(frames);
        self.da.wire().reserve(frames);
        self.db.wire().reserve(frames);
    }

    /// Polls both sides and moves frames onto the wire.
    pub fn step(&mut self) {
        let now = self.now;
        while let Some(at) = self.flight.iter().position(|f| f.0 <= now) {
            let (_, to_b, f) = self.flight.remove(at).expect("found");
            let dev = if to_b { self.db.wire() } else { self.da.wire() };
            if to_b && self.b_gone {
                dev.pool.give(f);
            } else {
                dev.rx.push_back(f);
            }
        }
        if self.may_poll(0) {
            self.a.poll(now, &mut self.da);
        }
        if !self.b_gone && self.may_poll(1) {
            self.b.poll(now, &mut self.db);
        }
        for to_b in [true, false] {
            let dev = if to_b { self.da.wire() } else { self.db.wire() };
            while let Some((f, meta)) = dev.tx.pop_front() {
                let i = self.sent;
                self.sent += 1;
                if self.logging {
                    self.log.push((now, to_b, f.clone(), meta.priority));
                }
                if !(self.filter)(i, to_b, &f) {
                    dev.pool.give(f);
                    continue;
                }
                let mut f = f;
                (self.rewrite)(to_b, &mut f);
                let mut at = now;
                if let Some(mbps) = self.link_mbps {
                    // Preamble, FCS and gap: 24 bytes on the wire per frame.
                    let bits = (f.len() as u64 + 24) * 8;
                    let busy = &mut self.busy[usize::from(to_b)];
                    *busy = (*busy).max(now) + Duration::from_nanos(bits * 1000 / mbps);
                    at = *busy;
                }
                if (self.duplicate)(i, to_b, &f) {
                    let mut copy = dev.pool.take(0, 0);
                    copy.extend_from_slice(&f);
                    self.flight.push_back((at + self.delay, to_b, copy));
                }
                self.flight.push_back((at + self.delay, to_b, f));
            }
        }
    }

    /// Whether host `i` (0: A, 1: B) may poll now; a slow one then waits
    /// its period again.
    fn may_poll(&mut self, i: usize) -> bool {
        let Some(every) = self.poll_every[i] else {
            return true;
        };
        if self.now < self.next_poll[i] {
            return false;
        }
        self.next_poll[i] = self.now + every;
        true
    }

    /// The next time anything happens.
    pub fn next_time(&self) -> Instant {
        let mut t = Instant::MAX;
        for f in &self.flight {
            t = t.min(f.0);
        }
        let hosts = [
            (self.a.poll_at(), self.da.wakeup(), self.da.wire_ref()),
            (self.b.poll_at(), self.db.wakeup(), self.db.wire_ref()),
        ];
        for (i, (at, wakeup, wire)) in hosts.into_iter().enumerate() {
            if i == 1 && self.b_gone {
                continue;
            }
            let ready = if wire.rx.is_empty() {
                None
            } else {
                Some(self.now)
            };
            let Some(wants) = [at, wakeup, ready].into_iter().flatten().min() else {
                continue;
            };
            // A slow host polls no sooner than its period allows.
            let wants = match self.poll_every[i] {
                Some(_) => wants.max(self.next_poll[i]),
                None => wants,
            };
            t = t.min(wants);
        }
        t
    }

    /// Runs until `done` or `limit` of virtual time passes; returns whether
    /// `done` said so.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        let end = self.now + limit;
        let mut steps = 0u64;
        while self.now < end {
            self.step();
            if done(self) {
                return true;
            }
            let t = self.next_time();
            self.now = if t <= self.now {
                self.now + Duration::from_nanos(1)
            } else {
                t.min(end)
            };
            steps += 1;
            assert!(steps < 50_000_000, "livelock");
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RxToken, TxToken};

    /// Echoes every frame back, once `start` has passed.
    struct Echo {
        start: Instant,
        seen: usize,
    }

    impl Host for Echo {
        fn poll<D: Device + ?Sized>(&mut self, now: Instant, device: &mut D) {
            if now < self.start {
                return;
            }
            while let Some((rx, tx)) = device.receive(now) {
                let f = rx.consume(|f| f.to_vec());
                self.seen += 1;
                tx.consume(f.len(), |b| b.copy_from_slice(&f));
            }
        }
        fn poll_at(&self) -> Option<Instant> {
            Some(self.start)
        }
    }

    #[test]
    fn frames_arrive_after_the_delay_and_the_link_time() {
        // B never answers: it starts after the test.
        let mut p = Pair::new(
            Echo {
                start: Instant::ZERO,
                seen: 0,
            },
            Echo {
                start: Instant::MAX,
                seen: 0,
            },
        );
        p.link_mbps = Some(1000);
        p.da.rx.push_back(vec![7; 101]); // A echoes it to B
        let t0 = p.now;
        p.run_until(Duration::from_millis(1), |p| !p.db.rx.is_empty());
        // 125 bytes at 1 Gbit/s: 1 us on the wire, then 2 us of delay.
        assert_eq!(p.now - t0, Duration::from_micros(3));
        assert_eq!(p.log.len(), 1);
        assert!(p.log[0].1, "A sent it towards B");
        // A lost frame, a duplicated one, then a vanished B.
        p.filter = Box::new(|i, _, _| i != 1);
        p.duplicate = Box::new(|i, _, _| i == 2);
        p.da.rx.push_back(vec![1; 60]);
        p.run_until(Duration::from_millis(1), |_| false);
        assert_eq!((p.sent, p.db.rx.len()), (2, 1), "the second frame was lost");
        p.da.rx.push_back(vec![2; 60]);
        p.run_until(Duration::from_millis(1), |_| false);
        assert_eq!(
            (p.sent, p.db.rx.len()),
            (3, 3),
            "the third frame arrived twice"
        );
        assert_eq!(p.db.rx[1], p.db.rx[2]);
        p.b_gone = true;
        p.da.rx.push_back(vec![3; 60]);
        p.run_until(Duration::from_millis(1), |_| false);
        assert_eq!((p.sent, p.db.rx.len(), p.flight.len()), (4, 3, 0));
        assert_eq!(p.a.seen, 4);
    }

    #[test]
    fn the_clock_waits_for_a_host_that_waits() {
        let mut p = Pair::new(
            Echo {
                start: Instant::from_millis(5),
                seen: 0,
            },
            Echo {
                start: Instant::ZERO,
                seen: 0,
            },
        );
        p.logging = false;
        p.reserve(4);
        p.da.rx.push_back(vec![1; 60]);
        assert!(p.run_until(Duration::from_millis(10), |p| p.b.seen == 1));
        assert_eq!(p.now, Instant::from_millis(5) + Duration::from_micros(2));
        assert!(p.log.is_empty());
    }
}
