//! What homa-perf puts in its messages, so every byte can be checked.
//!
//! A request starts with a 12-byte header, `reply_len: u32` (LE;
//! [`ECHO`] asks for the request back) and `seed: u64` (LE); the rest is a
//! pattern derived from the seed (the test kit's,
//! [`homa_phy::testing::fill_pattern`]), one 64-bit word per 8 bytes so
//! that filling and checking a megabyte takes microseconds. A response that is
//! not an echo carries the same header and the pattern of `seed ^
//! RESPONSE_SALT`, and is `max(reply_len, 12)` bytes long.

use homa_phy::testing::fill_pattern;

/// Bytes of the header; shorter messages are raised to this length.
pub const HEADER_LEN: usize = 12;

/// `reply_len` value that asks the server to send the request back.
pub const ECHO: u32 = u32::MAX;

const RESPONSE_SALT: u64 = 0x5250_4c59_5250_4c59;

/// The header of a request or response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Length of the response asked for, or [`ECHO`].
    pub reply_len: u32,
    /// Pattern seed of the request.
    pub seed: u64,
}

impl Header {
    /// Reads the header from the first bytes of a message, if long enough.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let b = bytes.get(..HEADER_LEN)?;
        Some(Header {
            reply_len: u32::from_le_bytes(b[0..4].try_into().ok()?),
            seed: u64::from_le_bytes(b[4..12].try_into().ok()?),
        })
    }

    fn write(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&self.reply_len.to_le_bytes());
        buf[4..12].copy_from_slice(&self.seed.to_le_bytes());
    }

    /// Length of the response this request asks for, given its own length.
    pub fn response_len(&self, request_len: usize) -> usize {
        if self.reply_len == ECHO {
            request_len
        } else {
            (self.reply_len as usize).max(HEADER_LEN)
        }
    }
}

/// Why a server did not answer a request. A server treats what a request
/// carries as untrusted: it checks the header before it allocates or fills
/// anything, and refuses a request it cannot answer instead of leaving it
/// pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// Shorter than the [`HEADER_LEN`]-byte header.
    ShortHeader,
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
            Refusal::ShortHeader => "short_header",
            Refusal::ReplyTooLong => "reply_too_long",
            Refusal::ReplyFailed => "reply_failed",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::ShortHeader => "request shorter than its 12-byte header",
            Refusal::ReplyTooLong => "request asks for a reply longer than the server allows",
            Refusal::ReplyFailed => "the reply could not be sent",
        })
    }
}

/// Checks the header a request of `request_len` bytes starts with (`head`,
/// its first bytes): returns it and the reply length it asks for, at most
/// `max_reply` bytes.
pub fn check_request(
    head: &[u8],
    request_len: usize,
    max_reply: usize,
) -> Result<(Header, usize), Refusal> {
    if request_len < HEADER_LEN {
        return Err(Refusal::ShortHeader);
    }
    let h = Header::parse(head).ok_or(Refusal::ShortHeader)?;
    let reply = h.response_len(request_len);
    if reply > max_reply {
        return Err(Refusal::ReplyTooLong);
    }
    Ok((h, reply))
}

/// Writes request `header` of `len` bytes (at least [`HEADER_LEN`]) into
/// `buf`, resizing it.
pub fn fill_request(buf: &mut Vec<u8>, header: Header, len: usize) {
    buf.resize(len.max(HEADER_LEN), 0);
    fill_pattern(header.seed, buf);
    header.write(buf);
}

/// Writes into `buf` the response the server owes to a request with
/// `header` and length `request_len` (an echo is the request itself).
pub fn fill_response(buf: &mut Vec<u8>, header: Header, request_len: usize) {
    if header.reply_len == ECHO {
        fill_request(buf, header, request_len);
    } else {
        buf.resize(header.response_len(request_len), 0);
        fill_pattern(header.seed ^ RESPONSE_SALT, buf);
        header.write(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_before_anything_is_built() {
        let mut req = Vec::new();
        let h = Header {
            reply_len: 100,
            seed: 1,
        };
        fill_request(&mut req, h, 500);
        assert_eq!(check_request(&req, 500, 1_000_000), Ok((h, 100)));
        assert_eq!(
            check_request(&req[..8], 8, 1_000_000),
            Err(Refusal::ShortHeader)
        );
        // A header asking for 454 MB, as the first bytes of a request
        // without one may read.
        let big = Header {
            reply_len: 454_000_000,
            seed: 1,
        };
        fill_request(&mut req, big, 100);
        assert_eq!(
            check_request(&req, 100, 1_000_000),
            Err(Refusal::ReplyTooLong)
        );
        // An echo is as long as the request, bounded the same way.
        let echo = Header {
            reply_len: ECHO,
            seed: 1,
        };
        fill_request(&mut req, echo, 5000);
        assert_eq!(check_request(&req, 5000, 4096), Err(Refusal::ReplyTooLong));
        assert_eq!(check_request(&req, 5000, 5000), Ok((echo, 5000)));
    }

    #[test]
    fn requests_carry_their_header_and_differ_by_seed() {
        let h = Header {
            reply_len: 100,
            seed: 42,
        };
        let mut a = Vec::new();
        fill_request(&mut a, h, 1000);
        assert_eq!(a.len(), 1000);
        assert_eq!(Header::parse(&a), Some(h));
        let mut b = Vec::new();
        fill_request(&mut b, Header { seed: 43, ..h }, 1000);
        assert_ne!(a[HEADER_LEN..], b[HEADER_LEN..]);
        // Short lengths are raised to the header.
        fill_request(&mut b, h, 1);
        assert_eq!(b.len(), HEADER_LEN);
    }

    #[test]
    fn responses_have_the_asked_length_and_echoes_equal_the_request() {
        let mut req = Vec::new();
        let mut resp = Vec::new();
        let h = Header {
            reply_len: 100,
            seed: 7,
        };
        fill_request(&mut req, h, 5000);
        fill_response(&mut resp, h, req.len());
        assert_eq!(resp.len(), 100);
        assert_eq!(Header::parse(&resp), Some(h));
        assert_ne!(resp[HEADER_LEN..], req[HEADER_LEN..100]);

        let echo = Header {
            reply_len: ECHO,
            ..h
        };
        fill_request(&mut req, echo, 5000);
        fill_response(&mut resp, echo, req.len());
        assert_eq!(resp, req);
        assert_eq!(Header::parse(&[0; 11]), None);
    }
}
