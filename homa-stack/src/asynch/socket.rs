//! Async sockets: [`Client`] (calls), [`Server`] (accepts) and the
//! [`Request`]s it hands out.

use core::fmt;
use core::future::poll_fn;
use core::task::Poll;

use super::Stack;
use crate::endpoint::{Event, RpcError, RpcHandle, SendError};
use crate::storage::{MessageRef, MessageWriter};
use crate::wire::IpAddr;

/// Why a [`Client::call`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CallError {
    /// The request could not be started (never for a lack of room: the
    /// call waits for room instead).
    Send(SendError),
    /// The RPC failed (timed out, unreachable, ...).
    Rpc(RpcError),
    /// The response, of `len` bytes, did not fit the buffer.
    Truncated {
        /// The response's length.
        len: usize,
    },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Send(e) => write!(f, "request not sent: {e}"),
            CallError::Rpc(e) => write!(f, "RPC failed: {e}"),
            CallError::Truncated { len } => write!(f, "response of {len} bytes too long"),
        }
    }
}

impl core::error::Error for CallError {}

/// Whether a send error goes away when RPCs finish.
fn for_lack_of_room(e: SendError) -> bool {
    matches!(
        e,
        SendError::TableFull | SendError::PoolFull | SendError::PeerTableFull
    )
}

/// A client socket of a [`Stack`]: sends requests from an automatic port
/// and awaits their responses, one call at a time (make one `Client` per
/// concurrent call). Dropping it closes the socket.
pub struct Client<'s, 'a, const N: usize> {
    stack: &'s Stack<'a, N>,
    slot: usize,
}

/// Aborts a call's RPC if the call future is dropped before it finished.
struct Pending<'s, 'a, const N: usize> {
    stack: &'s Stack<'a, N>,
    slot: usize,
    rpc: RpcHandle,
}

impl<const N: usize> Drop for Pending<'_, '_, N> {
    fn drop(&mut self) {
        // The RPC is freed at once; the server learns of it by RPC_UNKNOWN
        // (or has answered already, and its ACK timer frees its side).
        let _ = self.stack.endpoint.borrow_mut().abort(self.rpc);
        self.stack.forget(self.slot, self.rpc);
        self.stack.changed();
    }
}

impl<'s, 'a, const N: usize> Client<'s, 'a, N> {
    pub(super) fn new(stack: &'s Stack<'a, N>, slot: usize) -> Self {
        Client { stack, slot }
    }

    /// The socket's automatic port.
    pub fn port(&self) -> Option<u16> {
        let socket = self.stack.socket(self.slot)?;
        self.stack.endpoint.borrow().client_port(socket)
    }

    /// Sends `request` to `port` at `dest` and awaits the response, copied
    /// into `response`; returns its length. When the endpoint has no room
    /// for the request yet (tables or pool full), waits until an RPC frees
    /// some. Dropping the future aborts the RPC and frees its memory.
    ///
    /// ```
    /// # use homa_stack::asynch::Client;
    /// # use homa_stack::wire::Ipv4Addr;
    /// async fn ping(client: &mut Client<'_, '_, 4>) -> bool {
    ///     let mut buf = [0u8; 64];
    ///     let server = Ipv4Addr::new(10, 0, 0, 2);
    ///     match client.call(server, 500, b"ping", &mut buf).await {
    ///         Ok(len) => &buf[..len] == b"pong",
    ///         Err(_) => false,
    ///     }
    /// }
    /// ```
    pub async fn call(
        &mut self,
        dest: impl Into<IpAddr>,
        port: u16,
        request: &[u8],
        response: &mut [u8],
    ) -> Result<usize, CallError> {
        let got = self
            .call_with(
                dest,
                port,
                request.len(),
                |w| {
                    // Cannot fail: the message was sized for the data.
                    let _ = w.write_at(0, request);
                },
                |msg| match msg.len() <= response.len() {
                    true => Ok(msg.copy_to(response)),
                    false => Err(msg.len()),
                },
            )
            .await?;
        got.map_err(|len| CallError::Truncated { len })
    }

    /// Sends a `len`-byte request that `fill` writes in place in the pool
    /// (see [`Endpoint::send_request_with`](crate::Endpoint::send_request_with);
    /// it runs once, when the RPC starts), awaits the response and returns
    /// what `read` makes of it, read in place. The RPC is released after
    /// `read`, or aborted if the future is dropped first.
    ///
    /// # Panics
    ///
    /// When `fill` or `read` calls into this stack (the endpoint is
    /// borrowed while they run).
    pub async fn call_with<R>(
        &mut self,
        dest: impl Into<IpAddr>,
        port: u16,
        len: usize,
        mut fill: impl FnMut(&mut MessageWriter<'_, 'a>),
        read: impl FnOnce(MessageRef<'_>) -> R,
    ) -> Result<R, CallError> {
        let dest = dest.into();
        let (stack, slot) = (self.stack, self.slot);
        let socket = stack
            .socket(slot)
            .ok_or(CallError::Send(SendError::NoSuchSocket))?;
        let rpc = poll_fn(|cx| {
            let sent =
                stack
                    .endpoint
                    .borrow_mut()
                    .send_request_with(socket, dest, port, len, |w| fill(w));
            match sent {
                Ok(rpc) => Poll::Ready(Ok(rpc)),
                Err(e) if for_lack_of_room(e) => {
                    stack.wait_room(slot, cx);
                    Poll::Pending
                }
                Err(e) => Poll::Ready(Err(CallError::Send(e))),
            }
        })
        .await?;
        let pending = Pending { stack, slot, rpc };
        stack.runner.wake();
        loop {
            let event = poll_fn(|cx| stack.poll_event(slot, cx)).await;
            let mut ep = stack.endpoint.borrow_mut();
            match event {
                Event::Response { rpc: done, .. } if done == rpc => {
                    let out = ep.message(rpc).map(read);
                    let _ = ep.release(rpc);
                    drop(ep);
                    core::mem::forget(pending);
                    stack.changed();
                    // A completed client RPC always has its response.
                    return out.ok_or(CallError::Send(SendError::NoSuchRpc));
                }
                Event::Failed { rpc: done, error } if done == rpc => {
                    let _ = ep.release(rpc);
                    drop(ep);
                    core::mem::forget(pending);
                    stack.changed();
                    return Err(CallError::Rpc(error));
                }
                // Not ours (a socket's RPC started outside this client):
                // finish it so it does not hold memory.
                Event::Response { rpc: other, .. } | Event::Failed { rpc: other, .. } => {
                    let _ = ep.release(other);
                }
                Event::Request { rpc: other, .. } => {
                    let _ = ep.abort(other);
                }
            }
        }
    }
}

impl<const N: usize> Drop for Client<'_, '_, N> {
    fn drop(&mut self) {
        self.stack.close(self.slot);
    }
}

impl<const N: usize> fmt::Debug for Client<'_, '_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("slot", &self.slot).finish()
    }
}

/// A server socket of a [`Stack`], bound to a port: awaits requests.
/// Dropping it closes the socket (its unanswered requests are dropped).
pub struct Server<'s, 'a, const N: usize> {
    stack: &'s Stack<'a, N>,
    slot: usize,
}

impl<'s, 'a, const N: usize> Server<'s, 'a, N> {
    pub(super) fn new(stack: &'s Stack<'a, N>, slot: usize) -> Self {
        Server { stack, slot }
    }

    /// Awaits the next request. Several may be in service at once: a
    /// [`Request`] borrows the stack, not the server.
    ///
    /// ```
    /// # use homa_stack::asynch::Server;
    /// async fn echo(server: &mut Server<'_, '_, 4>) -> ! {
    ///     loop {
    ///         let mut request = server.accept().await;
    ///         let mut buf = [0u8; 256];
    ///         let len = request.copy_to(&mut buf);
    ///         // Pool full: the request is dropped, which aborts it.
    ///         let _ = request.reply(&buf[..len]);
    ///     }
    /// }
    /// ```
    pub async fn accept(&mut self) -> Request<'s, 'a, N> {
        let (stack, slot) = (self.stack, self.slot);
        loop {
            let event = poll_fn(|cx| stack.poll_event(slot, cx)).await;
            match event {
                Event::Request {
                    rpc,
                    peer,
                    port,
                    len,
                } => {
                    return Request {
                        stack,
                        rpc,
                        peer,
                        port,
                        len,
                        answered: false,
                    }
                }
                // Responses to requests sent through `Stack::with` from
                // this socket's client port: not ours to read.
                Event::Response { rpc, .. } | Event::Failed { rpc, .. } => {
                    let _ = stack.endpoint.borrow_mut().release(rpc);
                    stack.changed();
                }
            }
        }
    }
}

impl<const N: usize> Drop for Server<'_, '_, N> {
    fn drop(&mut self) {
        self.stack.close(self.slot);
    }
}

impl<const N: usize> fmt::Debug for Server<'_, '_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").field("slot", &self.slot).finish()
    }
}

/// A request from [`Server::accept`], to answer with [`Request::reply`].
/// Dropped unanswered, its RPC is aborted (the client times out or retries).
pub struct Request<'s, 'a, const N: usize> {
    stack: &'s Stack<'a, N>,
    rpc: RpcHandle,
    peer: IpAddr,
    port: u16,
    len: usize,
    answered: bool,
}

impl<'a, const N: usize> Request<'_, 'a, N> {
    /// The server RPC.
    pub fn rpc(&self) -> RpcHandle {
        self.rpc
    }

    /// The client's address.
    pub fn peer(&self) -> IpAddr {
        self.peer
    }

    /// The client's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The request's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: Homa has no empty messages.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What `f` makes of the request, read in place in the pool; `None`
    /// once it was answered.
    ///
    /// # Panics
    ///
    /// When `f` calls into the stack.
    pub fn read<R>(&self, f: impl FnOnce(MessageRef<'_>) -> R) -> Option<R> {
        self.stack.endpoint.borrow().message(self.rpc).map(f)
    }

    /// Copies the first `min(len(), out.len())` bytes of the request into
    /// `out`; returns how many (0 once answered).
    pub fn copy_to(&self, out: &mut [u8]) -> usize {
        self.read(|m| m.copy_to(out)).unwrap_or(0)
    }

    /// Answers with `data`. On [`SendError::PoolFull`] the request stays
    /// readable and the call can be tried again (after other RPCs finish).
    pub fn reply(&mut self, data: &[u8]) -> Result<(), SendError> {
        self.reply_with(data.len(), |w| {
            // Cannot fail: the message was sized for the data.
            let _ = w.write_at(0, data);
        })
    }

    /// Answers with a `len`-byte response that `fill` writes in place (see
    /// [`Endpoint::reply_with`](crate::Endpoint::reply_with): read what you
    /// need of the request first).
    ///
    /// # Panics
    ///
    /// When `fill` calls into the stack.
    pub fn reply_with(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut MessageWriter<'_, 'a>),
    ) -> Result<(), SendError> {
        if self.answered {
            return Err(SendError::NoSuchRpc);
        }
        let r = self
            .stack
            .endpoint
            .borrow_mut()
            .reply_with(self.rpc, len, fill);
        self.answered = r.is_ok();
        self.stack.changed();
        r
    }
}

impl<const N: usize> Drop for Request<'_, '_, N> {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self.stack.endpoint.borrow_mut().abort(self.rpc);
            self.stack.changed();
        }
    }
}

impl<const N: usize> fmt::Debug for Request<'_, '_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("rpc", &self.rpc)
            .field("peer", &self.peer)
            .field("port", &self.port)
            .field("len", &self.len)
            .finish()
    }
}
