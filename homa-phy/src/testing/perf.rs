//! homa-perf's message format, for every peer that speaks it: homa-perf
//! itself and the boards' firmware (`no_std`, nothing allocated).
//!
//! A request starts with a [`HEADER_LEN`]-byte [`Header`]: `reply_len`
//! (`u32` LE; [`ECHO`] asks for the request back) and `seed` (`u64` LE).
//! Every other byte is the test kit's pattern of `seed`
//! ([`fill_pattern_at`]), byte `i` at offset `i`, so a byte from another
//! message or at the wrong offset shows. A response that is not an echo
//! carries the same header and the pattern of `seed ^` [`RESPONSE_SALT`],
//! and is `max(reply_len, HEADER_LEN)` bytes long.
//!
//! A request shorter than the header carries no header: its bytes are
//! the first bytes of its pattern, and the server sends them back as they
//! came (it has no reply length to read and no seed to check them by). So
//! an echo of any size is sent at that size, while a request that asks
//! for a reply length is raised to the header, which carries it
//! ([`request_len`]).
//!
//! A [`Message`] says what every byte of one message must be: it fills a
//! buffer at any offset and checks bytes at any offset, so a message in
//! pages or in slices is built and checked where it lies, in pieces.
//!
//! ```
//! use homa_phy::testing::perf::{answer, Answer, Header, Message, ECHO};
//!
//! // A client's 100-byte request asking for a 40-byte response.
//! let h = Header { reply_len: 40, seed: 7 };
//! let request = Message::request(h, 100);
//! let mut bytes = [0u8; 100];
//! request.fill_at(0, &mut bytes);
//!
//! // The server reads the header, checks the rest, builds the response.
//! let Answer::Reply { request: want, response } = answer(&bytes[..12], 100, 1 << 20) else {
//!     panic!("a request with a header asks for a reply");
//! };
//! assert!(want.matches([&bytes[..30], &bytes[30..]]));
//! let mut reply = [0u8; 40];
//! response.fill_at(0, &mut reply);
//! assert!(Message::response(h, 100).matches([&reply[..]]));
//!
//! // A 1-byte echo is sent as 1 byte, and echoed as it came.
//! let one = Message::request(Header { reply_len: ECHO, seed: 8 }, 1);
//! assert_eq!((one.len(), answer(&[0], 1, 1 << 20)), (1, Answer::Echo));
//! ```

use super::fill_pattern_at;

/// Bytes of the header.
pub const HEADER_LEN: usize = 12;

/// `reply_len` that asks the server to send the request back.
pub const ECHO: u32 = u32::MAX;

/// What a response's pattern seed differs from its request's by, so that a
/// response cannot pass for its request.
pub const RESPONSE_SALT: u64 = 0x5250_4c59_5250_4c59;

/// The header of a request (and of a response that is not an echo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Length of the response asked for, or [`ECHO`].
    pub reply_len: u32,
    /// Pattern seed of the request.
    pub seed: u64,
}

impl Header {
    /// The header at the start of `bytes`, if there are enough of them.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let b = bytes.get(..HEADER_LEN)?;
        let mut reply_len = [0; 4];
        let mut seed = [0; 8];
        reply_len.copy_from_slice(&b[..4]);
        seed.copy_from_slice(&b[4..]);
        Some(Header {
            reply_len: u32::from_le_bytes(reply_len),
            seed: u64::from_le_bytes(seed),
        })
    }

    /// The header's bytes on the wire.
    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut b = [0; HEADER_LEN];
        b[..4].copy_from_slice(&self.reply_len.to_le_bytes());
        b[4..].copy_from_slice(&self.seed.to_le_bytes());
        b
    }

    /// Whether the request asks for itself back.
    pub fn is_echo(self) -> bool {
        self.reply_len == ECHO
    }
}

/// The length a request of `size` bytes is sent at: `size`, raised to
/// [`HEADER_LEN`] when it asks for a reply length (the header carries it).
pub fn request_len(size: usize, reply_len: u32) -> usize {
    if reply_len == ECHO {
        size
    } else {
        size.max(HEADER_LEN)
    }
}

/// One message of the format: its length and what each of its bytes is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    len: usize,
    seed: u64,
    header: Option<[u8; HEADER_LEN]>,
}

impl Message {
    /// The request with `header` for a `size`-byte message (sent at
    /// [`request_len`]; without its header when shorter than it).
    pub fn request(header: Header, size: usize) -> Message {
        let len = request_len(size, header.reply_len);
        Message {
            len,
            seed: header.seed,
            header: (len >= HEADER_LEN).then(|| header.to_bytes()),
        }
    }

    /// The response owed to the request with `header` of `request_len`
    /// bytes (an echo: the request itself).
    pub fn response(header: Header, request_len: usize) -> Message {
        if header.is_echo() {
            return Message::request(header, request_len);
        }
        Message {
            len: (header.reply_len as usize).max(HEADER_LEN),
            seed: header.seed ^ RESPONSE_SALT,
            header: Some(header.to_bytes()),
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a message has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes bytes `offset..offset + buf.len()` of the message into `buf`
    /// (bytes past its end continue the pattern).
    pub fn fill_at(&self, offset: usize, buf: &mut [u8]) {
        fill_pattern_at(self.seed, offset, buf);
        if let Some(h) = &self.header {
            if let Some(from) = h.get(offset..) {
                let n = from.len().min(buf.len());
                buf[..n].copy_from_slice(&from[..n]);
            }
        }
    }

    /// Whether `bytes` are bytes `offset..offset + bytes.len()` of the
    /// message (and lie within it).
    pub fn matches_at(&self, offset: usize, bytes: &[u8]) -> bool {
        // The expected bytes are made a block at a time on the stack: the
        // check allocates nothing and compares whole blocks.
        const BLOCK: usize = 256;
        let mut want = [0u8; BLOCK];
        if offset.saturating_add(bytes.len()) > self.len {
            return false;
        }
        bytes.chunks(BLOCK).enumerate().all(|(k, got)| {
            let want = &mut want[..got.len()];
            self.fill_at(offset + k * BLOCK, want);
            want == got
        })
    }

    /// Checks `chunks`, consecutive pieces of the message from `offset`:
    /// the offset after the last one when every byte is right, `None` at
    /// the first wrong byte or one past the end.
    pub fn check_from<'a>(
        &self,
        offset: usize,
        chunks: impl IntoIterator<Item = &'a [u8]>,
    ) -> Option<usize> {
        chunks
            .into_iter()
            .try_fold(offset, |at, c| self.matches_at(at, c).then(|| at + c.len()))
    }

    /// Whether `chunks`, in order, are exactly this message.
    pub fn matches<'a>(&self, chunks: impl IntoIterator<Item = &'a [u8]>) -> bool {
        self.check_from(0, chunks) == Some(self.len)
    }
}

/// What a server owes a request, read from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The request is shorter than the header: its bytes go back as they
    /// came, unchecked.
    Echo,
    /// What the request must be, and the response it is owed (for an echo
    /// the same message: a server may send back the bytes it received).
    Reply {
        /// The request as its header says it is.
        request: Message,
        /// The response owed.
        response: Message,
    },
    /// The header asks for a reply of `len` bytes, more than the server
    /// allows.
    TooLong {
        /// The reply length asked for.
        len: usize,
    },
}

/// Reads the header a request of `request_len` bytes starts with (`head`,
/// its first bytes, [`HEADER_LEN`] of them when it has that many) and says
/// what it is owed, allowing replies of at most `max_reply` bytes. Only
/// the header is read: check the rest with [`Answer::Reply`]'s `request`
/// before trusting it.
pub fn answer(head: &[u8], request_len: usize, max_reply: usize) -> Answer {
    let h = match Header::parse(head) {
        Some(h) if request_len >= HEADER_LEN => h,
        _ => return Answer::Echo,
    };
    let response = Message::response(h, request_len);
    if response.len() > max_reply {
        return Answer::TooLong {
            len: response.len(),
        };
    }
    Answer::Reply {
        request: Message::request(h, request_len),
        response,
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::testing::pattern_byte;

    fn bytes(m: &Message) -> std::vec::Vec<u8> {
        let mut v = std::vec![0; m.len()];
        m.fill_at(0, &mut v);
        v
    }

    #[test]
    fn a_request_is_its_header_then_its_pattern() {
        let h = Header {
            reply_len: 100,
            seed: 42,
        };
        let m = Message::request(h, 1000);
        let b = bytes(&m);
        assert_eq!(b.len(), 1000);
        assert_eq!(b[..4], 100u32.to_le_bytes());
        assert_eq!(b[4..12], 42u64.to_le_bytes());
        assert_eq!(Header::parse(&b), Some(h));
        for i in [12, 13, 999] {
            assert_eq!(b[i], pattern_byte(42, i), "byte {i}");
        }
        // Another seed changes every word of the pattern.
        let other = bytes(&Message::request(Header { seed: 43, ..h }, 1000));
        assert_ne!(b[HEADER_LEN..], other[HEADER_LEN..]);
        assert_eq!(Header::parse(&[0; 11]), None);
    }

    #[test]
    fn short_requests_are_raised_to_the_header_only_to_carry_a_reply_length() {
        let echo = Header {
            reply_len: ECHO,
            seed: 5,
        };
        for size in [1, 11] {
            let m = Message::request(echo, size);
            assert_eq!(m.len(), size);
            // No header: the pattern from its first byte.
            assert_eq!(bytes(&m)[0], pattern_byte(5, 0));
            assert_eq!(Message::response(echo, size), m);
        }
        let asks = Header {
            reply_len: 30,
            seed: 5,
        };
        let m = Message::request(asks, 1);
        assert_eq!((m.len(), request_len(1, 30)), (HEADER_LEN, HEADER_LEN));
        assert_eq!(Header::parse(&bytes(&m)), Some(asks));
        assert_eq!(request_len(11, ECHO), 11);
        assert_eq!(request_len(13, 30), 13);
    }

    #[test]
    fn responses_have_the_asked_length_and_echoes_equal_the_request() {
        let h = Header {
            reply_len: 100,
            seed: 7,
        };
        let (req, resp) = (Message::request(h, 5000), Message::response(h, 5000));
        let (rb, pb) = (bytes(&req), bytes(&resp));
        assert_eq!(pb.len(), 100);
        assert_eq!(Header::parse(&pb), Some(h));
        assert_ne!(pb[HEADER_LEN..], rb[HEADER_LEN..100]);
        // A reply length under the header's is raised to it.
        assert_eq!(
            Message::response(Header { reply_len: 3, ..h }, 50).len(),
            12
        );
        let echo = Header {
            reply_len: ECHO,
            ..h
        };
        assert_eq!(
            bytes(&Message::response(echo, 5000)),
            bytes(&Message::request(echo, 5000))
        );
    }

    /// Filled in pieces at any offset, checked in pieces of other sizes:
    /// the same bytes, and one wrong byte anywhere (header included) or a
    /// byte too many or too few fails the check.
    #[test]
    fn pieces_at_any_offset_fill_and_check_the_same_message() {
        let m = Message::request(
            Header {
                reply_len: 9,
                seed: 3,
            },
            3000,
        );
        let whole = bytes(&m);
        let mut pieced = std::vec![0u8; 3000];
        let mut at = 0;
        for n in [1, 5, 6, 7, 255, 256, 257, 1000].iter().cycle() {
            let end = (at + n).min(3000);
            m.fill_at(at, &mut pieced[at..end]);
            at = end;
            if at == 3000 {
                break;
            }
        }
        assert_eq!(pieced, whole);
        let split = |b: &[u8]| {
            let (x, rest) = b.split_at(3);
            let (y, z) = rest.split_at(1021);
            [x.to_vec(), y.to_vec(), z.to_vec()]
        };
        assert!(m.matches(split(&whole).iter().map(|c| &c[..])));
        assert_eq!(m.check_from(700, [&whole[700..900]]), Some(900));
        for i in [0, 4, 11, 12, 255, 256, 2999] {
            let mut bad = whole.clone();
            bad[i] ^= 0x10;
            assert!(!m.matches(split(&bad).iter().map(|c| &c[..])), "byte {i}");
        }
        assert!(!m.matches([&whole[..2999]]));
        let mut long = whole.clone();
        long.push(pattern_byte(3, 3000));
        assert!(!m.matches([&long[..]]));
        assert!(!m.matches_at(2990, &long[2990..]));
        assert_eq!(m.check_from(usize::MAX, [&whole[..1]]), None);
    }

    #[test]
    fn the_answer_is_read_from_the_header_and_bounded() {
        let h = Header {
            reply_len: 100,
            seed: 1,
        };
        let req = bytes(&Message::request(h, 500));
        assert_eq!(
            answer(&req[..HEADER_LEN], 500, 1_000_000),
            Answer::Reply {
                request: Message::request(h, 500),
                response: Message::response(h, 500),
            }
        );
        // Without a header: echoed, whatever its bytes say.
        assert_eq!(answer(&req[..11], 11, 1_000_000), Answer::Echo);
        assert_eq!(answer(&[], 1, 1_000_000), Answer::Echo);
        // A header asking for 454 MB, as the first bytes of a stranger's
        // request may read.
        let big = Header {
            reply_len: 454_000_000,
            seed: 1,
        };
        assert_eq!(
            answer(&big.to_bytes(), 100, 1_000_000),
            Answer::TooLong { len: 454_000_000 }
        );
        // An echo is as long as the request, bounded the same way.
        let echo = Header {
            reply_len: ECHO,
            seed: 1,
        }
        .to_bytes();
        assert_eq!(answer(&echo, 5000, 4096), Answer::TooLong { len: 5000 });
        assert!(matches!(answer(&echo, 5000, 5000), Answer::Reply { .. }));
    }
}
