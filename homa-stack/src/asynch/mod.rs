//! Async request/reply over an [`Endpoint`], for any executor (feature `async`).
//!
//! The same split as embassy-net's `Stack` and `Runner`: a [`Stack`] holds
//! the endpoint in a `RefCell` with one waker slot per async socket, and
//! tasks borrow it (`&Stack`); a [`Runner`] task polls the endpoint, hands
//! each socket's events to the task waiting on it and wakes that task, and
//! sleeps until the endpoint's [`poll_at`](Endpoint::poll_at), a received
//! frame or a call from a task. On top:
//!
//! - [`Client::call`] (and [`Client::call_with`], which builds the request
//!   and reads the response in place in the pool) sends a request and
//!   awaits its response; dropping the future aborts the RPC.
//! - [`Server::accept`] awaits a request; [`Request::reply`] answers it, and
//!   a [`Request`] dropped unanswered aborts its RPC.
//!
//! Nothing allocates and nothing here is `unsafe`. The executor supplies
//! two things through small traits: a [`Clock`] (what time it is, and a
//! waker to wake at an instant) and an [`Interface`] (the device for one
//! poll, given the runner's task context so it can register the waker for
//! "a frame arrived"). embassy-net drivers are an [`Interface`] through
//! `EmbassyDriver` (feature `embassy`); [`Wire`] is an in-memory pair of
//! devices with wakers for tests and demos.
//!
//! The state is in `RefCell`s, so a `Stack` is for one executor (one
//! thread, or an embassy thread-mode executor), like embassy-net's.
//!
//! # Example
//!
//! A client and a server endpoint joined by a [`Wire`], each with its
//! runner; `block_on` and the clock are whatever the executor provides
//! (here the smallest that works: poll in a loop, time in steps of 10 us).
//!
//! ```
//! use core::future::Future;
//! use core::pin::pin;
//! use core::task::{Context, Poll, Waker};
//! use homa_stack::asynch::{Clock, Runner, Stack, Wire};
//! use homa_stack::endpoint::{PeerSlot, RpcSlot, SocketSlot};
//! use homa_stack::time::{Duration, Instant};
//! use homa_stack::wire::{EthernetAddress, Ipv4Addr};
//! use homa_stack::{Config, Endpoint};
//!
//! /// A clock that moves 10 us on each look and wakes at once.
//! struct Steps(Instant);
//! impl Clock for Steps {
//!     fn now(&mut self) -> Instant {
//!         self.0 += Duration::from_micros(10);
//!         self.0
//!     }
//!     fn wake_at(&mut self, _at: Instant, waker: &Waker) {
//!         waker.wake_by_ref();
//!     }
//! }
//!
//! let (ip_a, mac_a) = (Ipv4Addr::new(10, 0, 0, 1), EthernetAddress([2, 0, 0, 0, 0, 1]));
//! let (ip_b, mac_b) = (Ipv4Addr::new(10, 0, 0, 2), EthernetAddress([2, 0, 0, 0, 0, 2]));
//! let (mut rpcs_a, mut rpcs_b) = ([RpcSlot::EMPTY; 4], [RpcSlot::EMPTY; 4]);
//! let (mut peers_a, mut peers_b) = ([PeerSlot::EMPTY; 2], [PeerSlot::EMPTY; 2]);
//! let (mut socks_a, mut socks_b) = ([SocketSlot::EMPTY; 2], [SocketSlot::EMPTY; 2]);
//! let (mut pool_a, mut pool_b) = ([0u8; 16 * 1024], [0u8; 16 * 1024]);
//! let a = Endpoint::new(Config::new(ip_a, mac_a, 1), &mut rpcs_a[..], &mut peers_a[..],
//!     &mut socks_a[..], &mut pool_a[..], 2048).unwrap();
//! let b = Endpoint::new(Config::new(ip_b, mac_b, 2), &mut rpcs_b[..], &mut peers_b[..],
//!     &mut socks_b[..], &mut pool_b[..], 2048).unwrap();
//!
//! // Two stacks of up to 2 async sockets each, and the wire between them.
//! let (stack_a, stack_b) = (Stack::<2>::new(a), Stack::<2>::new(b));
//! let wire: Wire<8> = Wire::new();
//! let (end_a, end_b) = wire.ends();
//! let mut runner_a = Runner::new(&stack_a, end_a, Steps(Instant::ZERO));
//! let mut runner_b = Runner::new(&stack_b, end_b, Steps(Instant::ZERO));
//!
//! let mut client = stack_a.client().unwrap();
//! let mut server = stack_b.bind(500).unwrap();
//! let serve = async {
//!     let mut request = server.accept().await;
//!     let mut buf = [0u8; 4];
//!     request.copy_to(&mut buf);
//!     assert_eq!(&buf, b"ping");
//!     request.reply(b"pong").unwrap();
//! };
//! let call = async {
//!     let mut response = [0u8; 16];
//!     let len = client.call(ip_b, 500, b"ping", &mut response).await.unwrap();
//!     assert_eq!(&response[..len], b"pong");
//! };
//!
//! // The executor: here, poll everything until the call is done.
//! let (mut call, mut serve) = (pin!(call), pin!(serve));
//! let (mut run_a, mut run_b) = (pin!(runner_a.run()), pin!(runner_b.run()));
//! let mut cx = Context::from_waker(Waker::noop());
//! let mut served = false;
//! loop {
//!     let _ = run_a.as_mut().poll(&mut cx);
//!     let _ = run_b.as_mut().poll(&mut cx);
//!     served = served || serve.as_mut().poll(&mut cx).is_ready();
//!     if call.as_mut().poll(&mut cx).is_ready() {
//!         break;
//!     }
//! }
//! ```

mod runner;
mod socket;
mod wire;

use core::cell::{Cell, RefCell};
use core::task::{Context, Poll, Waker};

use crate::endpoint::{BindError, Endpoint, Event, RpcHandle, SocketHandle};
use crate::phy::Device;
use crate::time::Instant;

#[cfg(feature = "embassy")]
pub use runner::EmbassyDriver;
pub use runner::{Clock, Interface, Runner, WakerCell};
pub use socket::{CallError, Client, Request, Server};
pub use wire::{Wire, WireDevice, WireEnd};

/// What the task on a socket waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// An event (a request, a response, a failure).
    Event,
    /// Room in the endpoint's tables or pool, to start a message.
    Room,
}

/// One async socket: its endpoint socket, the event taken for it and the
/// waker of the task waiting on it.
struct Slot {
    socket: Option<SocketHandle>,
    event: Option<Event>,
    waker: Option<Waker>,
    want: Want,
}

impl Slot {
    const EMPTY: Slot = Slot {
        socket: None,
        event: None,
        waker: None,
        want: Want::Event,
    };

    fn wake(&mut self) {
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }
}

/// Keeps `waker` in `slot`, cloning only when it is a different task's.
fn store(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(w) if w.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

/// An [`Endpoint`] shared by the tasks of one executor, with a waker slot
/// for each of up to `N` async sockets ([`Client`]s and [`Server`]s).
///
/// Tasks hold `&Stack`; each call borrows the endpoint only for the call,
/// never across an `.await`. One task waits on a socket at a time (as with
/// embassy-net's sockets): concurrent calls use one [`Client`] each.
pub struct Stack<'a, const N: usize> {
    endpoint: RefCell<Endpoint<'a>>,
    slots: RefCell<[Slot; N]>,
    /// The runner's task, woken when a task changed the endpoint's state.
    runner: WakerCell,
    /// RPCs in use and free pool bytes at the last look: a drop in one or
    /// a rise in the other wakes the tasks waiting for room.
    room: Cell<(usize, usize)>,
}

impl<'a, const N: usize> Stack<'a, N> {
    /// Shares `endpoint`. Sockets made on it before stay the caller's
    /// business (reach them with [`Stack::with`]).
    pub fn new(endpoint: Endpoint<'a>) -> Self {
        let room = (endpoint.rpcs_in_use(), endpoint.pool_free_bytes());
        Stack {
            endpoint: RefCell::new(endpoint),
            slots: RefCell::new([const { Slot::EMPTY }; N]),
            runner: WakerCell::new(),
            room: Cell::new(room),
        }
    }

    /// Runs `f` on the endpoint (stats, neighbours, sockets of your own),
    /// then lets the runner send what `f` queued. Events of the async
    /// sockets taken here with [`Endpoint::recv`] are lost to their tasks.
    ///
    /// # Panics
    ///
    /// When called from inside another call on this stack (from a `fill`
    /// or `read` closure): the endpoint is borrowed.
    pub fn with<R>(&self, f: impl FnOnce(&mut Endpoint<'a>) -> R) -> R {
        let r = f(&mut self.endpoint.borrow_mut());
        self.changed();
        r
    }

    /// A client socket with an automatic port; [`BindError::TableFull`]
    /// when the endpoint's socket table or this stack's `N` slots are full.
    pub fn client(&self) -> Result<Client<'_, 'a, N>, BindError> {
        let slot = self.open(|ep| ep.socket())?;
        Ok(Client::new(self, slot))
    }

    /// A server socket accepting requests on `port` (1..=0x7fff); errors
    /// as [`Endpoint::bind`], and [`BindError::TableFull`] when this
    /// stack's `N` slots are full.
    pub fn bind(&self, port: u16) -> Result<Server<'_, 'a, N>, BindError> {
        let slot = self.open(|ep| ep.bind(port))?;
        Ok(Server::new(self, slot))
    }

    fn open(
        &self,
        make: impl FnOnce(&mut Endpoint<'a>) -> Result<SocketHandle, BindError>,
    ) -> Result<usize, BindError> {
        let mut slots = self.slots.borrow_mut();
        let i = slots
            .iter()
            .position(|s| s.socket.is_none())
            .ok_or(BindError::TableFull)?;
        let socket = make(&mut self.endpoint.borrow_mut())?;
        slots[i] = Slot {
            socket: Some(socket),
            ..Slot::EMPTY
        };
        Ok(i)
    }

    /// Closes slot `i`'s socket (and its RPCs) and frees the slot.
    fn close(&self, i: usize) {
        let socket = self.slots.borrow_mut()[i].socket.take();
        if let Some(s) = socket {
            self.endpoint.borrow_mut().close(s);
            self.slots.borrow_mut()[i] = Slot::EMPTY;
            self.changed();
        }
    }

    fn socket(&self, i: usize) -> Option<SocketHandle> {
        self.slots.borrow()[i].socket
    }

    /// Polls the endpoint on `device` at `now`, then hands each async
    /// socket the next event for it and wakes the tasks that can go on.
    /// Returns when the endpoint wants the next poll
    /// ([`Endpoint::poll_at`]). [`Runner`] calls this; a runner of your own
    /// (say one that also polls another stack) calls it too.
    pub fn poll<D: Device + ?Sized>(&self, now: Instant, device: &mut D) -> Option<Instant> {
        let mut ep = self.endpoint.borrow_mut();
        ep.poll(now, device);
        let mut slots = self.slots.borrow_mut();
        for slot in slots.iter_mut() {
            let Some(socket) = slot.socket else {
                continue;
            };
            if slot.event.is_none() {
                slot.event = ep.recv(socket);
            }
            if slot.event.is_some() && slot.want == Want::Event {
                slot.wake();
            }
        }
        self.wake_if_room(&ep, &mut slots[..]);
        ep.poll_at()
    }

    /// When the endpoint wants the next poll: [`Endpoint::poll_at`].
    pub fn poll_at(&self) -> Option<Instant> {
        self.endpoint.borrow().poll_at()
    }

    /// Registers the runner's waker: woken whenever a task changes what the
    /// endpoint has to send (a request, a reply, a release, an abort).
    pub fn register_runner(&self, waker: &Waker) {
        self.runner.register(waker);
    }

    /// A task changed the endpoint: the runner should poll, and tasks
    /// waiting for room may find it.
    fn changed(&self) {
        self.runner.wake();
        let ep = self.endpoint.borrow();
        self.wake_if_room(&ep, &mut self.slots.borrow_mut()[..]);
    }

    fn wake_if_room(&self, ep: &Endpoint<'a>, slots: &mut [Slot]) {
        let (rpcs, free) = (ep.rpcs_in_use(), ep.pool_free_bytes());
        let (last_rpcs, last_free) = self.room.replace((rpcs, free));
        if rpcs < last_rpcs || free > last_free {
            for slot in slots.iter_mut().filter(|s| s.want == Want::Room) {
                slot.wake();
            }
        }
    }

    /// The event for slot `i`: the one taken for it at the last poll, or
    /// the endpoint's next; else the task's waker is kept for the next.
    fn poll_event(&self, i: usize, cx: &mut Context<'_>) -> Poll<Event> {
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots[i];
        let Some(socket) = slot.socket else {
            return Poll::Pending;
        };
        let event = slot
            .event
            .take()
            .or_else(|| self.endpoint.borrow_mut().recv(socket));
        match event {
            Some(e) => Poll::Ready(e),
            None => {
                slot.want = Want::Event;
                store(&mut slot.waker, cx.waker());
                Poll::Pending
            }
        }
    }

    /// Keeps slot `i`'s waker for the next time room is freed.
    fn wait_room(&self, i: usize, cx: &mut Context<'_>) {
        let ep = self.endpoint.borrow();
        // From now on, any freeing counts.
        self.room.set((ep.rpcs_in_use(), ep.pool_free_bytes()));
        let slot = &mut self.slots.borrow_mut()[i];
        slot.want = Want::Room;
        store(&mut slot.waker, cx.waker());
    }

    /// Forgets an event taken for slot `i` that concerns `rpc`.
    fn forget(&self, i: usize, rpc: RpcHandle) {
        let slot = &mut self.slots.borrow_mut()[i];
        let of_rpc = match slot.event {
            Some(Event::Request { rpc: r, .. })
            | Some(Event::Response { rpc: r, .. })
            | Some(Event::Failed { rpc: r, .. }) => r == rpc,
            None => false,
        };
        if of_rpc {
            slot.event = None;
        }
    }
}

impl<const N: usize> core::fmt::Debug for Stack<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stack")
            .field("slots", &N)
            .finish_non_exhaustive()
    }
}
