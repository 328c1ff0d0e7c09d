//! What homa-perf puts in its messages, so every byte can be checked.
//!
//! The format is [`homa_phy::testing::perf`], shared with the boards'
//! firmware: a 12-byte header (`reply_len`, `seed`) and the seed's pattern;
//! a request shorter than the header, as an echo of any size may be, has no
//! header and is sent back as it came. Here is what a host adds: messages
//! in `Vec`s, and why a server refused a request.

pub use homa_phy::testing::perf::{answer, request_len, Answer, Header, Message, ECHO, HEADER_LEN};

/// Writes message `m` into `buf`, resizing it.
pub fn fill(buf: &mut Vec<u8>, m: Message) {
    buf.resize(m.len(), 0);
    m.fill_at(0, buf);
}

/// Why a server did not answer a request. A server treats what a request
/// carries as untrusted: it reads the header ([`answer`]) before it
/// allocates or fills anything, and refuses a request it cannot answer
/// instead of leaving it pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// Asks for a reply longer than Homa's 1,000,000 bytes or than the
    /// server can hold.
    ReplyTooLong,
    /// The transport refused the reply.
    ReplyFailed,
}

impl Refusal {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::ReplyTooLong => "reply_too_long",
            Refusal::ReplyFailed => "reply_failed",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::ReplyTooLong => "request asks for a reply longer than the server allows",
            Refusal::ReplyFailed => "the reply could not be sent",
        })
    }
}
