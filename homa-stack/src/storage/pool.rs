//! The message-buffer pool: fixed-size pages carved from one caller buffer.
//!
//! Every Homa message the endpoint holds lives here: outgoing messages (kept
//! until acknowledged, for retransmission) and incoming ones (written as DATA
//! arrives, read by the application in place).
//!
//! # Layout
//!
//! The caller hands in `B` bytes and a page size `P` (a power of two, at
//! least [`MIN_PAGE_SIZE`]). The pool keeps a page-link table of one
//! little-endian `u32` per page at the front of the same buffer and uses the
//! rest as pages:
//!
//! ```text
//! [ link[0] link[1] … link[N-1] | page 0 | page 1 | … | page N-1 | unused ]
//!   4 bytes per page              P bytes per page
//! ```
//!
//! so `N = B / (P + 4)` pages and `N * P` usable bytes ([`usable_bytes`]);
//! the overhead is 4 bytes per page. [`buffer_len_for`] gives the `B` needed
//! for a number of pages.
//!
//! A message is a chain of pages linked through that table; free pages form
//! one more chain (the free list). [`Pool::alloc`] takes all pages a message
//! needs at once or none, so a message never stalls half-allocated.
//!
//! # Guarantees
//!
//! No method panics or allocates. Offsets and lengths (which come from
//! packets) are checked and rejected with [`PoolError`]. A [`MessageBuf`]
//! must be used with the pool that allocated it; a foreign buffer is detected
//! where its page chain is inconsistent ([`PoolError::InvalidBuffer`]) but
//! can otherwise read or overwrite another message's pages (never memory
//! outside the pool).
//!
//! Pages are not cleared between messages; the endpoint only exposes bytes
//! it has written or received.

use core::fmt;
use core::iter::FusedIterator;
use core::num::NonZeroU32;
use core::ops::Range;

use managed::ManagedSlice;

/// Largest Homa message (`HOMA_MAX_MESSAGE_LENGTH`, docs/protocol.md 4.9).
pub const MAX_MESSAGE_LEN: usize = crate::wire::homa::MAX_MESSAGE_LENGTH as usize;

/// Smallest page size [`Pool::new`] accepts. It bounds a message to
/// `1_000_000 / 64 = 15_625` pages, which lets [`MessageBuf`] count pages
/// in a `u16`.
pub const MIN_PAGE_SIZE: usize = 64;

/// Bytes of link table per page.
pub const LINK_BYTES: usize = 4;

/// End of a chain / empty free list.
const NIL: u32 = u32::MAX;

/// Whether reads and writes within one page skip the general walk
/// ([`Pool::in_one_page`]): faster on hosts; left out of the firmware,
/// whose size the walk alone keeps smaller.
const ONE_PAGE_PATH: bool = cfg!(not(target_os = "none"));

/// Pages needed to hold `len` bytes: `ceil(len / page_size)`; 0 if
/// `page_size` is 0.
pub const fn pages_for(len: usize, page_size: usize) -> usize {
    if page_size == 0 {
        return 0;
    }
    len / page_size + !len.is_multiple_of(page_size) as usize
}

/// Usable message bytes of a pool built from `buffer_len` bytes with pages
/// of `page_size`: `floor(buffer_len / (page_size + 4)) * page_size`, before
/// the `u32` page-count cap. 0 if `page_size` is 0.
pub const fn usable_bytes(buffer_len: usize, page_size: usize) -> usize {
    match page_size.checked_add(LINK_BYTES) {
        Some(per_page) if page_size > 0 => buffer_len / per_page * page_size,
        _ => 0,
    }
}

/// Buffer length that yields exactly `pages` pages of `page_size`:
/// `pages * (page_size + 4)`, saturating.
pub const fn buffer_len_for(pages: usize, page_size: usize) -> usize {
    pages.saturating_mul(page_size.saturating_add(LINK_BYTES))
}

/// Why a pool operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PoolError {
    /// The page size is not a power of two, or below [`MIN_PAGE_SIZE`].
    BadPageSize,
    /// The buffer cannot hold even one page and its link.
    BufferTooSmall,
    /// Homa has no zero-length messages (sendmsg rejects them).
    ZeroLength,
    /// Longer than [`MAX_MESSAGE_LEN`].
    TooLong,
    /// Not enough free pages right now; nothing was allocated.
    Exhausted,
    /// The offset/length reach past the end of the message.
    OutOfRange,
    /// The message's page chain is inconsistent: it was not allocated from
    /// this pool.
    InvalidBuffer,
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolError::BadPageSize => "page size is not a power of two >= 64",
            PoolError::BufferTooSmall => "pool buffer is too small for one page",
            PoolError::ZeroLength => "zero-length message",
            PoolError::TooLong => "message longer than 1000000 bytes",
            PoolError::Exhausted => "message pool exhausted",
            PoolError::OutOfRange => "range outside the message",
            PoolError::InvalidBuffer => "message buffer does not belong to this pool",
        })
    }
}

impl core::error::Error for PoolError {}

/// Handle to one message's pages in a [`Pool`].
///
/// Neither `Clone` nor `Copy`: [`Pool::free`] consumes it, so a buffer cannot
/// be freed twice. Holds the first page, the length, the page count and a
/// cursor (page ordinal and page index) that [`Pool::write_at`],
/// [`Pool::read_at`] and [`Pool::seek`] move, so sequential access walks
/// each link once. `size_of::<MessageBuf>() == 16` and, thanks to the
/// nonzero length, `size_of::<Option<MessageBuf>>() == 16`.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MessageBuf {
    first: u32,
    len: NonZeroU32,
    cursor_page: u32,
    pages: u16,
    cursor_ord: u16,
}

impl MessageBuf {
    /// Message length in bytes (at least 1).
    pub const fn len(&self) -> usize {
        self.len.get() as usize
    }

    /// Always false: the pool has no zero-length messages.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Number of pages the message occupies.
    pub const fn page_count(&self) -> usize {
        self.pages as usize
    }
}

/// The page pool over caller memory. See the [module docs](self).
pub struct Pool<'a> {
    storage: ManagedSlice<'a, u8>,
    page_shift: u32,
    total_pages: u32,
    free_pages: u32,
    free_head: u32,
}

impl fmt::Debug for Pool<'_> {
    // The storage itself would print megabytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("page_size", &self.page_size())
            .field("total_pages", &self.total_pages)
            .field("free_pages", &self.free_pages)
            .finish()
    }
}

impl<'a> Pool<'a> {
    /// Builds a pool over `storage` with pages of `page_size` bytes (a power
    /// of two, at least [`MIN_PAGE_SIZE`]). All pages start free. At most
    /// `u32::MAX - 1` pages are used; bytes past the last page stay unused.
    pub fn new(
        storage: impl Into<ManagedSlice<'a, u8>>,
        page_size: usize,
    ) -> Result<Pool<'a>, PoolError> {
        if !page_size.is_power_of_two() || page_size < MIN_PAGE_SIZE {
            return Err(PoolError::BadPageSize);
        }
        let mut storage = storage.into();
        let pages = usable_bytes(storage.len(), page_size) / page_size;
        let total_pages = pages.min(NIL as usize - 1) as u32;
        if total_pages == 0 {
            return Err(PoolError::BufferTooSmall);
        }
        // Thread the free list through the table in page order: i -> i + 1.
        let table_len = total_pages as usize * LINK_BYTES;
        for (i, link) in storage[..table_len]
            .chunks_exact_mut(LINK_BYTES)
            .enumerate()
        {
            let next = if i + 1 == total_pages as usize {
                NIL
            } else {
                i as u32 + 1
            };
            link.copy_from_slice(&next.to_le_bytes());
        }
        Ok(Pool {
            storage,
            page_shift: page_size.trailing_zeros(),
            total_pages,
            free_pages: total_pages,
            free_head: 0,
        })
    }

    /// Bytes per page.
    pub const fn page_size(&self) -> usize {
        1 << self.page_shift
    }

    /// Number of pages in the pool.
    pub const fn total_pages(&self) -> usize {
        self.total_pages as usize
    }

    /// Number of pages not held by any message.
    pub const fn free_pages(&self) -> usize {
        self.free_pages as usize
    }

    /// Message bytes the pool holds when empty: `total_pages * page_size`.
    pub const fn capacity_bytes(&self) -> usize {
        self.total_pages() << self.page_shift
    }

    /// Bytes in free pages. A message of `len` bytes fits iff
    /// `pages_for(len, page_size) <= free_pages()`.
    pub const fn free_bytes(&self) -> usize {
        self.free_pages() << self.page_shift
    }

    /// Takes the pages for a message of `len` bytes, all or none. Contents
    /// are whatever the pages held before.
    pub fn alloc(&mut self, len: usize) -> Result<MessageBuf, PoolError> {
        if len == 0 {
            return Err(PoolError::ZeroLength);
        }
        if len > MAX_MESSAGE_LEN {
            return Err(PoolError::TooLong);
        }
        // len <= 1_000_000, so the sum cannot overflow.
        let pages = (len + self.page_size() - 1) >> self.page_shift;
        if pages > self.free_pages() {
            return Err(PoolError::Exhausted);
        }
        // Find the last page first, so a (corrupt) short free list leaves the
        // pool unchanged.
        let first = self.free_head;
        let last = self.walk(first, pages - 1).ok_or(PoolError::Exhausted)?;
        self.free_head = self.link(last).unwrap_or(NIL);
        self.set_link(last, NIL);
        self.free_pages -= pages as u32;
        Ok(MessageBuf {
            first,
            // len is in 1..=1_000_000 and pages <= 15_625 (MIN_PAGE_SIZE).
            len: NonZeroU32::new(len as u32).ok_or(PoolError::ZeroLength)?,
            cursor_page: first,
            pages: pages as u16,
            cursor_ord: 0,
        })
    }

    /// Returns all pages of `buf` to the free list. A buffer whose chain is
    /// inconsistent (one from another pool) is dropped without touching the
    /// free list.
    pub fn free(&mut self, buf: MessageBuf) {
        let pages = buf.pages as u32;
        if pages > self.total_pages - self.free_pages {
            return;
        }
        let Some(last) = self.walk(buf.first, pages as usize - 1) else {
            return;
        };
        self.set_link(last, self.free_head);
        self.free_head = buf.first;
        self.free_pages += pages;
    }

    /// Copies `data` into `buf` at `offset`, across pages as needed.
    /// [`PoolError::OutOfRange`] if `offset + data.len() > buf.len()`.
    pub fn write_at(
        &mut self,
        buf: &mut MessageBuf,
        offset: usize,
        data: &[u8],
    ) -> Result<(), PoolError> {
        let range = checked_range(buf, offset, data.len())?;
        if let Some(page) = self.sole_page(buf) {
            self.storage
                .get_mut(page + range.start..page + range.end)
                .ok_or(PoolError::OutOfRange)?
                .copy_from_slice(data);
            return Ok(());
        }
        if range.is_empty() {
            return Ok(());
        }
        if let Some((ord, page, at)) = self.in_one_page(buf, range) {
            self.storage
                .get_mut(at)
                .ok_or(PoolError::OutOfRange)?
                .copy_from_slice(data);
            set_cursor(buf, ord, page);
            return Ok(());
        }
        self.write_across(buf, offset, data)
    }

    /// [`write_at`](Self::write_at) walking the links: a range over
    /// several pages, or one page away from the first and the cursor.
    /// Out of line, so the one-page path needs no large stack frame.
    #[cfg_attr(not(target_os = "none"), inline(never))]
    fn write_across(
        &mut self,
        buf: &mut MessageBuf,
        offset: usize,
        data: &[u8],
    ) -> Result<(), PoolError> {
        let page_size = self.page_size();
        let (mut ord, mut page) = self.locate(buf, offset >> self.page_shift)?;
        let mut in_page = offset & (page_size - 1);
        let mut rest = data;
        loop {
            let take = rest.len().min(page_size - in_page);
            let (now, later) = rest.split_at(take);
            let start = self.page_start(page)? + in_page;
            self.storage
                .get_mut(start..start + take)
                .ok_or(PoolError::OutOfRange)?
                .copy_from_slice(now);
            rest = later;
            if rest.is_empty() {
                break;
            }
            page = self.next_in(page)?;
            ord += 1;
            in_page = 0;
        }
        set_cursor(buf, ord, page);
        Ok(())
    }

    /// Calls `f(offset, piece)` for each contiguous page piece of `range` in
    /// `buf`, in order, with the piece writable in place: how a message is
    /// built in the pool without a copy. [`PoolError::OutOfRange`] if the
    /// range is reversed or reaches past the end.
    pub fn for_each_chunk_mut(
        &mut self,
        buf: &mut MessageBuf,
        range: Range<usize>,
        mut f: impl FnMut(usize, &mut [u8]),
    ) -> Result<(), PoolError> {
        let len = range
            .end
            .checked_sub(range.start)
            .ok_or(PoolError::OutOfRange)?;
        checked_range(buf, range.start, len)?;
        if len == 0 {
            return Ok(());
        }
        if let Some((ord, page, at)) = self.in_one_page(buf, range.clone()) {
            let piece = self.storage.get_mut(at).ok_or(PoolError::OutOfRange)?;
            f(range.start, piece);
            set_cursor(buf, ord, page);
            return Ok(());
        }
        let page_size = self.page_size();
        let (mut ord, mut page) = self.locate(buf, range.start >> self.page_shift)?;
        let mut in_page = range.start & (page_size - 1);
        let mut at = range.start;
        loop {
            let take = (range.end - at).min(page_size - in_page);
            let start = self.page_start(page)? + in_page;
            f(at, &mut self.storage[start..start + take]);
            at += take;
            if at == range.end {
                break;
            }
            page = self.next_in(page)?;
            ord += 1;
            in_page = 0;
        }
        set_cursor(buf, ord, page);
        Ok(())
    }

    /// Copies `out.len()` bytes of `buf` starting at `offset` into `out`.
    /// [`PoolError::OutOfRange`] if `offset + out.len() > buf.len()`.
    pub fn read_at(
        &self,
        buf: &mut MessageBuf,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), PoolError> {
        let range = checked_range(buf, offset, out.len())?;
        if let Some(page) = self.sole_page(buf) {
            out.copy_from_slice(
                self.storage
                    .get(page + range.start..page + range.end)
                    .ok_or(PoolError::OutOfRange)?,
            );
            return Ok(());
        }
        if range.is_empty() {
            return Ok(());
        }
        if let Some((ord, page, at)) = self.in_one_page(buf, range) {
            out.copy_from_slice(self.storage.get(at).ok_or(PoolError::OutOfRange)?);
            set_cursor(buf, ord, page);
            return Ok(());
        }
        self.read_across(buf, offset, out)
    }

    /// [`read_at`](Self::read_at) walking the links (see
    /// [`write_across`](Self::write_across)).
    #[cfg_attr(not(target_os = "none"), inline(never))]
    fn read_across(
        &self,
        buf: &mut MessageBuf,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), PoolError> {
        let (ord, page) = self.locate(buf, offset >> self.page_shift)?;
        let mut chunks = Chunks {
            pool: self,
            page,
            skip: offset & (self.page_size() - 1),
            remaining: out.len(),
        };
        let mut done = 0;
        let mut pieces = 0u16;
        for chunk in chunks.by_ref() {
            let Some(to) = out.get_mut(done..done + chunk.len()) else {
                break;
            };
            to.copy_from_slice(chunk);
            done += chunk.len();
            pieces += 1;
        }
        if done != out.len() {
            return Err(PoolError::InvalidBuffer);
        }
        // The last piece came from the page the iterator stopped on.
        set_cursor(buf, ord + (pieces - 1), chunks.page);
        Ok(())
    }

    /// Moves `buf`'s cursor to the page holding byte `offset`, so following
    /// [`chunks`](Self::chunks) calls at or after it start there instead of
    /// walking from the first page. `offset == buf.len()` is allowed and
    /// leaves the cursor alone.
    pub fn seek(&self, buf: &mut MessageBuf, offset: usize) -> Result<(), PoolError> {
        let range = checked_range(buf, offset, 0)?;
        if range.start == buf.len() {
            return Ok(());
        }
        let (ord, page) = self.locate(buf, offset >> self.page_shift)?;
        set_cursor(buf, ord, page);
        Ok(())
    }

    /// The bytes of `range` in `buf` as contiguous page pieces, in order,
    /// without copying: what the application reads a message through and
    /// what DATA frames are built from. Starts from the cursor when it is at
    /// or before `range.start` (see [`seek`](Self::seek)).
    /// [`PoolError::OutOfRange`] if the range is reversed or reaches past
    /// the end.
    pub fn chunks(&self, buf: &MessageBuf, range: Range<usize>) -> Result<Chunks<'_>, PoolError> {
        let len = range
            .end
            .checked_sub(range.start)
            .ok_or(PoolError::OutOfRange)?;
        checked_range(buf, range.start, len)?;
        if len == 0 {
            return Ok(Chunks {
                pool: self,
                page: NIL,
                skip: 0,
                remaining: 0,
            });
        }
        let (_, page) = self.locate(buf, range.start >> self.page_shift)?;
        Ok(Chunks {
            pool: self,
            page,
            skip: range.start & (self.page_size() - 1),
            remaining: len,
        })
    }

    /// A read-only view of one message, for handing to the application.
    pub fn message<'p>(&'p self, buf: &'p MessageBuf) -> MessageRef<'p> {
        MessageRef { pool: self, buf }
    }

    /// The page at ordinal `ord` of `buf`, walking from the cursor when it
    /// is not past `ord`, else from the first page.
    fn locate(&self, buf: &MessageBuf, ord: usize) -> Result<(u16, u32), PoolError> {
        if ord >= buf.page_count() {
            return Err(PoolError::OutOfRange);
        }
        let (from_ord, from_page) = if buf.cursor_ord as usize <= ord {
            (buf.cursor_ord as usize, buf.cursor_page)
        } else {
            (0, buf.first)
        };
        let page = self
            .walk(from_page, ord - from_ord)
            .ok_or(PoolError::InvalidBuffer)?;
        // ord < pages <= u16::MAX.
        Ok((ord as u16, page))
    }

    /// Where the only page of a one-page message starts in the storage:
    /// every byte in range lies in it, so a read or write within the
    /// message's length needs no page arithmetic, no link and no cursor
    /// (which stays on that page). `None` for a longer message, and on the
    /// firmware (see `ONE_PAGE_PATH`).
    #[inline(always)]
    fn sole_page(&self, buf: &MessageBuf) -> Option<usize> {
        if !ONE_PAGE_PATH || buf.pages != 1 || buf.first >= self.total_pages {
            return None;
        }
        Some(self.total_pages as usize * LINK_BYTES + ((buf.first as usize) << self.page_shift))
    }

    /// Where the nonempty `range` of `buf` sits in the storage, with its
    /// page's ordinal and index, when it lies within one page that is found
    /// without following a link: the first page or the cursor's. `None`
    /// sends the caller to the general walk. Most messages fit one page, and
    /// sequential access stays on the cursor's page, so this is the usual
    /// case.
    #[inline]
    fn in_one_page(
        &self,
        buf: &MessageBuf,
        range: Range<usize>,
    ) -> Option<(u16, u32, Range<usize>)> {
        if !ONE_PAGE_PATH {
            return None;
        }
        let ord = range.start >> self.page_shift;
        if (range.end - 1) >> self.page_shift != ord {
            return None;
        }
        let page = if ord == 0 {
            buf.first
        } else if ord == buf.cursor_ord as usize {
            buf.cursor_page
        } else {
            return None;
        };
        if page >= self.total_pages {
            return None;
        }
        let start = self.total_pages as usize * LINK_BYTES
            + ((page as usize) << self.page_shift)
            + (range.start & (self.page_size() - 1));
        // ord < pages <= u16::MAX.
        Some((ord as u16, page, start..start + (range.end - range.start)))
    }

    /// Follows `steps` links from `page`; `None` if the chain ends early or
    /// leaves the pool.
    fn walk(&self, mut page: u32, steps: usize) -> Option<u32> {
        if page >= self.total_pages {
            return None;
        }
        for _ in 0..steps {
            page = self.link(page)?;
        }
        Some(page)
    }

    /// The link of `page`, if `page` and the link both name pool pages.
    // Out of line on the firmware (smaller there); the compiler's choice on hosts.
    #[cfg_attr(target_os = "none", inline(never))]
    fn link(&self, page: u32) -> Option<u32> {
        if page >= self.total_pages {
            return None;
        }
        let at = page as usize * LINK_BYTES;
        let bytes = self.storage.get(at..at + LINK_BYTES)?;
        let next = u32::from_le_bytes(bytes.try_into().ok()?);
        (next < self.total_pages).then_some(next)
    }

    fn next_in(&self, page: u32) -> Result<u32, PoolError> {
        self.link(page).ok_or(PoolError::InvalidBuffer)
    }

    fn set_link(&mut self, page: u32, next: u32) {
        if page < self.total_pages {
            let at = page as usize * LINK_BYTES;
            if let Some(bytes) = self.storage.get_mut(at..at + LINK_BYTES) {
                bytes.copy_from_slice(&next.to_le_bytes());
            }
        }
    }

    /// Byte index of `page`'s first byte in the storage.
    fn page_start(&self, page: u32) -> Result<usize, PoolError> {
        if page >= self.total_pages {
            return Err(PoolError::InvalidBuffer);
        }
        let table = self.total_pages as usize * LINK_BYTES;
        Ok(table + ((page as usize) << self.page_shift))
    }

    fn page_bytes(&self, page: u32) -> Option<&[u8]> {
        let start = self.page_start(page).ok()?;
        self.storage.get(start..start + self.page_size())
    }
}

/// `offset..offset + len` if it lies within `buf`.
fn checked_range(buf: &MessageBuf, offset: usize, len: usize) -> Result<Range<usize>, PoolError> {
    match offset.checked_add(len) {
        Some(end) if end <= buf.len() => Ok(offset..end),
        _ => Err(PoolError::OutOfRange),
    }
}

fn set_cursor(buf: &mut MessageBuf, ord: u16, page: u32) {
    buf.cursor_ord = ord;
    buf.cursor_page = page;
}

/// Iterator over the contiguous page pieces of a message range, from
/// [`Pool::chunks`] or [`MessageRef::chunks`]. Every item is nonempty.
#[derive(Debug, Clone)]
pub struct Chunks<'p> {
    pool: &'p Pool<'p>,
    page: u32,
    skip: usize,
    remaining: usize,
}

impl<'p> Iterator for Chunks<'p> {
    type Item = &'p [u8];

    fn next(&mut self) -> Option<&'p [u8]> {
        if self.remaining == 0 {
            return None;
        }
        let Some(piece) = self
            .pool
            .page_bytes(self.page)
            .and_then(|bytes| bytes.get(self.skip..))
        else {
            // Only a foreign buffer gets here; end rather than panic.
            self.remaining = 0;
            return None;
        };
        let take = piece.len().min(self.remaining);
        self.remaining -= take;
        self.skip = 0;
        if self.remaining > 0 {
            match self.pool.link(self.page) {
                Some(next) => self.page = next,
                None => self.remaining = 0,
            }
        }
        Some(&piece[..take])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.remaining == 0 {
            (0, Some(0))
        } else {
            let page_size = self.pool.page_size();
            let first = page_size - self.skip;
            let pieces = 1 + pages_for(self.remaining.saturating_sub(first), page_size);
            (0, Some(pieces))
        }
    }
}

impl FusedIterator for Chunks<'_> {}

/// Write access to one message being built in the pool (see
/// `Endpoint::send_request_with`): its bytes are written in place, with no
/// copy through a buffer of the caller's.
pub struct MessageWriter<'p, 'a> {
    pool: &'p mut Pool<'a>,
    buf: &'p mut MessageBuf,
}

impl<'p, 'a> MessageWriter<'p, 'a> {
    /// A writer over `buf`'s pages in `pool`.
    pub fn new(pool: &'p mut Pool<'a>, buf: &'p mut MessageBuf) -> Self {
        MessageWriter { pool, buf }
    }

    /// The message length.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the message is empty (never, for a Homa message).
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 0
    }

    /// Copies `data` in at `offset`; [`PoolError::OutOfRange`] past the end.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> Result<(), PoolError> {
        self.pool.write_at(self.buf, offset, data)
    }

    /// Calls `f(offset, piece)` for every page piece of the message in
    /// order, each writable in place. The bytes start with whatever the
    /// pages held before: write all of them.
    pub fn for_each_chunk(&mut self, f: impl FnMut(usize, &mut [u8])) {
        let len = self.buf.len();
        // Cannot fail: the range is the whole message.
        let _ = self.pool.for_each_chunk_mut(self.buf, 0..len, f);
    }
}

/// A read-only view of one message in a pool: what the application gets
/// for a received request or response. Reading it never copies unless asked.
#[derive(Debug, Clone, Copy)]
pub struct MessageRef<'p> {
    pool: &'p Pool<'p>,
    buf: &'p MessageBuf,
}

impl<'p> MessageRef<'p> {
    /// Message length in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Always false: the pool has no zero-length messages.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The whole message as contiguous page pieces, in order.
    pub fn chunks(&self) -> Chunks<'p> {
        self.range(0..self.len()).unwrap_or(Chunks {
            pool: self.pool,
            page: NIL,
            skip: 0,
            remaining: 0,
        })
    }

    /// The bytes of `range` as page pieces; [`PoolError::OutOfRange`] if it
    /// is reversed or reaches past the end.
    pub fn range(&self, range: Range<usize>) -> Result<Chunks<'p>, PoolError> {
        self.pool.chunks(self.buf, range)
    }

    /// Copies the first `min(len(), out.len())` bytes into `out` and returns
    /// how many.
    pub fn copy_to(&self, out: &mut [u8]) -> usize {
        let n = self.len().min(out.len());
        if let Some(page) = self.pool.sole_page(self.buf) {
            if let (Some(to), Some(from)) =
                (out.get_mut(..n), self.pool.storage.get(page..page + n))
            {
                to.copy_from_slice(from);
                return n;
            }
        }
        if n == 0 {
            return 0;
        }
        if let Some((_, _, at)) = self.pool.in_one_page(self.buf, 0..n) {
            if let (Some(to), Some(from)) = (out.get_mut(..n), self.pool.storage.get(at)) {
                to.copy_from_slice(from);
                return n;
            }
        }
        self.copy_across(out)
    }

    /// [`copy_to`](Self::copy_to) over page pieces, out of line so the
    /// one-page path stays small.
    #[cfg_attr(not(target_os = "none"), inline(never))]
    fn copy_across(&self, out: &mut [u8]) -> usize {
        let mut done = 0;
        for chunk in self.chunks() {
            let take = chunk.len().min(out.len() - done);
            out[done..done + take].copy_from_slice(&chunk[..take]);
            done += take;
            if done == out.len() {
                break;
            }
        }
        done
    }

    /// Whether the message is exactly `bytes`.
    pub fn eq_bytes(&self, bytes: &[u8]) -> bool {
        if bytes.len() != self.len() {
            return false;
        }
        let mut rest = bytes;
        for chunk in self.chunks() {
            let Some((head, tail)) = rest.split_at_checked(chunk.len()) else {
                return false;
            };
            if head != chunk {
                return false;
            }
            rest = tail;
        }
        rest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn collect(chunks: Chunks<'_>) -> Vec<u8> {
        chunks.flat_map(|c| c.iter().copied()).collect()
    }

    #[test]
    fn new_rejects_page_size_not_power_of_two_or_below_64() {
        let mut mem = [0u8; 4096];
        for page_size in [0, 1, 32, 63, 96, 100, 3000] {
            assert_eq!(
                Pool::new(&mut mem[..], page_size).err(),
                Some(PoolError::BadPageSize),
                "page size {page_size}"
            );
        }
        assert!(Pool::new(&mut mem[..], 64).is_ok());
        assert!(Pool::new(&mut mem[..], 2048).is_ok());
    }

    #[test]
    fn new_rejects_buffer_smaller_than_one_page_plus_link() {
        let mut mem = [0u8; 64 + LINK_BYTES];
        assert_eq!(
            Pool::new(&mut mem[..64 + LINK_BYTES - 1], 64).err(),
            Some(PoolError::BufferTooSmall)
        );
        assert_eq!(
            Pool::new(&mut mem[..0], 64).err(),
            Some(PoolError::BufferTooSmall)
        );
        let pool = Pool::new(&mut mem[..], 64).unwrap();
        assert_eq!(pool.total_pages(), 1);
    }

    #[test]
    fn geometry_charges_four_bytes_per_page() {
        let mut mem = vec![0u8; buffer_len_for(10, 2048) + 2051];
        let pool = Pool::new(&mut mem[..], 2048).unwrap();
        assert_eq!(pool.page_size(), 2048);
        assert_eq!(pool.total_pages(), 10);
        assert_eq!(pool.free_pages(), 10);
        assert_eq!(pool.capacity_bytes(), 20480);
        assert_eq!(pool.free_bytes(), 20480);
        assert_eq!(usable_bytes(mem.len(), 2048), 20480);
        assert_eq!(buffer_len_for(10, 2048), 20520);
    }

    #[test]
    fn pages_for_rounds_up() {
        assert_eq!(pages_for(0, 64), 0);
        assert_eq!(pages_for(1, 64), 1);
        assert_eq!(pages_for(64, 64), 1);
        assert_eq!(pages_for(65, 64), 2);
        assert_eq!(pages_for(1_000_000, 2048), 489);
        assert_eq!(pages_for(1_000_000, 64), 15_625);
        assert_eq!(pages_for(5, 0), 0);
    }

    #[test]
    fn message_buf_is_16_bytes_with_or_without_option() {
        assert_eq!(core::mem::size_of::<MessageBuf>(), 16);
        assert_eq!(core::mem::size_of::<Option<MessageBuf>>(), 16);
    }

    #[test]
    fn alloc_and_free_account_pages() {
        let mut mem = vec![0u8; buffer_len_for(8, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        let a = pool.alloc(1).unwrap();
        assert_eq!((a.len(), a.page_count()), (1, 1));
        assert_eq!(pool.free_pages(), 7);
        let b = pool.alloc(64).unwrap();
        assert_eq!(b.page_count(), 1);
        assert_eq!(pool.free_pages(), 6);
        let c = pool.alloc(65).unwrap();
        assert_eq!(c.page_count(), 2);
        assert_eq!(pool.free_pages(), 4);
        assert_eq!(pool.free_bytes(), 256);
        pool.free(b);
        assert_eq!(pool.free_pages(), 5);
        pool.free(a);
        pool.free(c);
        assert_eq!(pool.free_pages(), 8);
        // The whole pool is usable again as one message.
        let all = pool.alloc(8 * 64).unwrap();
        assert_eq!(all.page_count(), 8);
        assert_eq!(pool.free_pages(), 0);
    }

    #[test]
    fn alloc_rejects_zero_length_and_too_long() {
        let mut mem = vec![0u8; buffer_len_for(2, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        assert_eq!(pool.alloc(0), Err(PoolError::ZeroLength));
        assert_eq!(pool.alloc(MAX_MESSAGE_LEN + 1), Err(PoolError::TooLong));
        assert_eq!(pool.alloc(usize::MAX), Err(PoolError::TooLong));
        assert_eq!(pool.free_pages(), 2);
    }

    #[test]
    fn exhaustion_takes_nothing_then_alloc_succeeds_after_free() {
        let mut mem = vec![0u8; buffer_len_for(4, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        let a = pool.alloc(3 * 64).unwrap();
        assert_eq!(pool.alloc(2 * 64), Err(PoolError::Exhausted));
        assert_eq!(pool.free_pages(), 1);
        let b = pool.alloc(64).unwrap();
        assert_eq!(pool.alloc(1), Err(PoolError::Exhausted));
        pool.free(a);
        let c = pool.alloc(2 * 64).unwrap();
        assert_eq!(c.page_count(), 2);
        assert_eq!(pool.free_pages(), 1);
        pool.free(b);
        pool.free(c);
        assert_eq!(pool.free_pages(), 4);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn write_and_read_span_pages_at_every_alignment() {
        const LEN: usize = 3 * 64 + 17;
        let mut mem = vec![0u8; buffer_len_for(4, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        let mut buf = pool.alloc(LEN).unwrap();
        let mut model = vec![0u8; LEN];
        pool.write_at(&mut buf, 0, &model).unwrap();
        for offset in 0..LEN {
            for len in 0..=LEN - offset {
                let data = pattern(len, (offset ^ len) as u8);
                pool.write_at(&mut buf, offset, &data).unwrap();
                model[offset..offset + len].copy_from_slice(&data);
                let mut out = vec![0u8; len];
                pool.read_at(&mut buf, offset, &mut out).unwrap();
                assert_eq!(out, data, "offset {offset} len {len}");
                assert_eq!(
                    collect(pool.chunks(&buf, offset..offset + len).unwrap()),
                    data
                );
            }
        }
        assert!(pool.message(&buf).eq_bytes(&model));
    }

    #[test]
    fn out_of_range_access_is_an_error() {
        let mut mem = vec![0u8; buffer_len_for(4, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        let mut buf = pool.alloc(100).unwrap();
        let e = Err(PoolError::OutOfRange);
        assert_eq!(pool.write_at(&mut buf, 99, &[1, 2]), e);
        assert_eq!(pool.write_at(&mut buf, 101, &[]), e);
        assert_eq!(pool.write_at(&mut buf, usize::MAX, &[1]), e);
        assert_eq!(pool.read_at(&mut buf, 1, &mut [0; 100]), e);
        assert_eq!(pool.read_at(&mut buf, usize::MAX, &mut [0; 2]), e);
        assert_eq!(pool.seek(&mut buf, 101), e);
        assert_eq!(pool.chunks(&buf, 0..101).err(), Some(PoolError::OutOfRange));
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 10..5;
        assert_eq!(
            pool.chunks(&buf, reversed).err(),
            Some(PoolError::OutOfRange)
        );
        assert_eq!(
            pool.message(&buf).range(50..101).err(),
            Some(PoolError::OutOfRange)
        );
        // The edges themselves are fine.
        assert_eq!(pool.write_at(&mut buf, 100, &[]), Ok(()));
        assert_eq!(pool.write_at(&mut buf, 99, &[7]), Ok(()));
        assert_eq!(pool.seek(&mut buf, 100), Ok(()));
        assert_eq!(pool.chunks(&buf, 100..100).unwrap().count(), 0);
    }

    #[test]
    fn chunks_are_page_pieces_that_concatenate_to_the_message() {
        let mut mem = vec![0u8; buffer_len_for(6, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        // Fragment the free list so the message's pages are not adjacent.
        let a = pool.alloc(64).unwrap();
        let b = pool.alloc(64).unwrap();
        let c = pool.alloc(64).unwrap();
        pool.free(b);
        pool.free(a);
        let data = pattern(250, 3);
        let mut buf = pool.alloc(data.len()).unwrap();
        pool.write_at(&mut buf, 0, &data).unwrap();
        let sizes: Vec<usize> = pool.message(&buf).chunks().map(<[u8]>::len).collect();
        assert_eq!(sizes, [64, 64, 64, 58]);
        let sizes: Vec<usize> = pool
            .chunks(&buf, 10..200)
            .unwrap()
            .map(<[u8]>::len)
            .collect();
        assert_eq!(sizes, [54, 64, 64, 8]);
        assert_eq!(collect(pool.message(&buf).chunks()), data);
        assert_eq!(collect(pool.chunks(&buf, 10..200).unwrap()), &data[10..200]);
        pool.free(c);
        pool.free(buf);
    }

    #[test]
    fn messages_do_not_overwrite_each_other() {
        let mut mem = vec![0u8; buffer_len_for(6, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        let (da, db) = (pattern(130, 1), pattern(190, 2));
        let mut a = pool.alloc(da.len()).unwrap();
        let mut b = pool.alloc(db.len()).unwrap();
        pool.write_at(&mut a, 0, &da).unwrap();
        pool.write_at(&mut b, 0, &db).unwrap();
        pool.free(a);
        let dc = pattern(192, 9);
        let mut c = pool.alloc(dc.len()).unwrap();
        pool.write_at(&mut c, 0, &dc).unwrap();
        assert!(pool.message(&b).eq_bytes(&db));
        assert!(pool.message(&c).eq_bytes(&dc));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn million_byte_message_on_2048_byte_pages() {
        let mut mem = vec![0u8; buffer_len_for(489, 2048)];
        let mut pool = Pool::new(&mut mem[..], 2048).unwrap();
        assert_eq!(pool.total_pages(), 489);
        let data = pattern(MAX_MESSAGE_LEN, 5);
        let mut buf = pool.alloc(MAX_MESSAGE_LEN).unwrap();
        assert_eq!(buf.page_count(), 489);
        assert_eq!(pool.free_pages(), 0);
        // Fill it the way DATA packets arrive: 1400-byte pieces, in order.
        for (i, piece) in data.chunks(1400).enumerate() {
            pool.write_at(&mut buf, i * 1400, piece).unwrap();
        }
        let view = pool.message(&buf);
        assert_eq!(view.len(), MAX_MESSAGE_LEN);
        assert_eq!(view.chunks().count(), 489);
        assert!(view.eq_bytes(&data));
        let mut copy = vec![0u8; MAX_MESSAGE_LEN];
        assert_eq!(view.copy_to(&mut copy), MAX_MESSAGE_LEN);
        assert_eq!(copy, data);
        let mut tail = [0u8; 3000];
        pool.read_at(&mut buf, MAX_MESSAGE_LEN - 3000, &mut tail)
            .unwrap();
        assert_eq!(&tail[..], &data[MAX_MESSAGE_LEN - 3000..]);
        pool.free(buf);
        assert_eq!(pool.free_pages(), 489);
    }

    /// A message of one page (read and written without the page walk)
    /// and its neighbours of several pages keep their own bytes, at the
    /// edges of the page and of the message.
    #[test]
    fn one_page_messages_read_and_write_only_their_page() {
        let mut mem = vec![0u8; buffer_len_for(6, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        let mut before = pool.alloc(100).unwrap();
        let mut one = pool.alloc(64).unwrap();
        let mut after = pool.alloc(128).unwrap();
        assert_eq!(one.page_count(), 1);
        let (db, da) = (pattern(100, 1), pattern(128, 2));
        pool.write_at(&mut before, 0, &db).unwrap();
        pool.write_at(&mut after, 0, &da).unwrap();
        let mut model = pattern(64, 3);
        pool.write_at(&mut one, 0, &model).unwrap();
        for (offset, len) in [(0, 1), (63, 1), (10, 54), (64, 0), (0, 0)] {
            let data = pattern(len, offset as u8);
            pool.write_at(&mut one, offset, &data).unwrap();
            model[offset..offset + len].copy_from_slice(&data);
            let mut out = vec![0u8; len];
            pool.read_at(&mut one, offset, &mut out).unwrap();
            assert_eq!(out, &model[offset..offset + len]);
        }
        assert_eq!(
            pool.write_at(&mut one, 63, &[0, 0]),
            Err(PoolError::OutOfRange)
        );
        assert_eq!(
            pool.read_at(&mut one, 65, &mut []),
            Err(PoolError::OutOfRange)
        );
        let mut out = [0u8; 80];
        assert_eq!(pool.message(&one).copy_to(&mut out), 64);
        assert_eq!(&out[..64], &model[..]);
        assert!(pool.message(&one).eq_bytes(&model));
        assert!(pool.message(&before).eq_bytes(&db));
        assert!(pool.message(&after).eq_bytes(&da));
        // A short message in a page of its own: only its length is in range.
        pool.free(one);
        let mut short = pool.alloc(5).unwrap();
        pool.write_at(&mut short, 0, b"hello").unwrap();
        assert_eq!(
            pool.write_at(&mut short, 5, b"!"),
            Err(PoolError::OutOfRange)
        );
        assert!(pool.message(&short).eq_bytes(b"hello"));
        assert!(pool.message(&before).eq_bytes(&db));
        assert!(pool.message(&after).eq_bytes(&da));
    }

    #[test]
    fn message_ref_copy_to_and_eq_bytes() {
        let mut mem = vec![0u8; buffer_len_for(4, 64)];
        let mut pool = Pool::new(&mut mem[..], 64).unwrap();
        let data = pattern(100, 7);
        let mut buf = pool.alloc(100).unwrap();
        pool.write_at(&mut buf, 0, &data).unwrap();
        let view = pool.message(&buf);
        let mut short = [0u8; 70];
        assert_eq!(view.copy_to(&mut short), 70);
        assert_eq!(&short[..], &data[..70]);
        let mut long = [0u8; 120];
        assert_eq!(view.copy_to(&mut long), 100);
        assert_eq!(&long[..100], &data[..]);
        assert!(view.eq_bytes(&data));
        assert!(!view.eq_bytes(&data[..99]));
        let mut other = data.clone();
        other[80] ^= 1;
        assert!(!view.eq_bytes(&other));
        other.push(0);
        assert!(!view.eq_bytes(&other));
    }

    #[test]
    fn buffer_from_another_pool_is_rejected_without_panic() {
        let mut big_mem = vec![0u8; buffer_len_for(16, 64)];
        let mut big = Pool::new(&mut big_mem[..], 64).unwrap();
        let _hold = big.alloc(10 * 64).unwrap();
        let mut foreign = big.alloc(3 * 64).unwrap();
        let mut small_mem = vec![0u8; buffer_len_for(4, 64)];
        let mut small = Pool::new(&mut small_mem[..], 64).unwrap();
        let _mine = small.alloc(3 * 64).unwrap();
        let e = Err(PoolError::InvalidBuffer);
        assert_eq!(small.write_at(&mut foreign, 0, &[1; 100]), e);
        assert_eq!(small.read_at(&mut foreign, 0, &mut [0; 100]), e);
        assert_eq!(
            small.chunks(&foreign, 0..10).err(),
            Some(PoolError::InvalidBuffer)
        );
        assert_eq!(small.message(&foreign).chunks().count(), 0);
        small.free(foreign);
        assert_eq!(small.free_pages(), 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(usize),
        Free(usize),
        Write(usize, usize, usize, u8),
        Read(usize, usize, usize),
        Seek(usize, usize),
        CopyTo(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1usize..700).prop_map(Op::Alloc),
            any::<usize>().prop_map(Op::Free),
            (any::<usize>(), any::<usize>(), 0usize..300, any::<u8>())
                .prop_map(|(m, o, l, s)| Op::Write(m, o, l, s)),
            (any::<usize>(), any::<usize>(), 0usize..300).prop_map(|(m, o, l)| Op::Read(m, o, l)),
            (any::<usize>(), any::<usize>()).prop_map(|(m, o)| Op::Seek(m, o)),
            (any::<usize>(), 0usize..800).prop_map(|(m, l)| Op::CopyTo(m, l)),
        ]
    }

    proptest! {
        /// Random allocations, frees, writes, reads and seeks agree with a
        /// model of one plain array per live message, and page accounting
        /// matches `pages_for` of the live lengths.
        #[test]
        fn pool_matches_array_model(
            shift in 6u32..9,
            pages in 1usize..24,
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let page_size = 1usize << shift;
            let mut mem = vec![0u8; buffer_len_for(pages, page_size)];
            let mut pool = Pool::new(&mut mem[..], page_size).unwrap();
            let mut live: Vec<(MessageBuf, Vec<u8>)> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(len) => {
                        let need = pages_for(len, page_size);
                        let before = pool.free_pages();
                        match pool.alloc(len) {
                            Ok(buf) => {
                                prop_assert!(need <= before);
                                prop_assert_eq!(buf.page_count(), need);
                                prop_assert_eq!(buf.len(), len);
                                let mut buf = buf;
                                // Fresh pages hold stale bytes; give the model a value.
                                let init = vec![0xAA; len];
                                pool.write_at(&mut buf, 0, &init).unwrap();
                                live.push((buf, init));
                            }
                            Err(e) => {
                                prop_assert_eq!(e, PoolError::Exhausted);
                                prop_assert!(need > before);
                                prop_assert_eq!(pool.free_pages(), before);
                            }
                        }
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (buf, _) = live.swap_remove(i % live.len());
                        pool.free(buf);
                    }
                    Op::Write(i, offset, len, seed) if !live.is_empty() => {
                        let n = live.len();
                        let (buf, model) = &mut live[i % n];
                        let offset = offset % (model.len() + 1);
                        let data = pattern(len, seed);
                        let r = pool.write_at(buf, offset, &data);
                        if offset + len <= model.len() {
                            prop_assert_eq!(r, Ok(()));
                            model[offset..offset + len].copy_from_slice(&data);
                        } else {
                            prop_assert_eq!(r, Err(PoolError::OutOfRange));
                        }
                    }
                    Op::Read(i, offset, len) if !live.is_empty() => {
                        let n = live.len();
                        let (buf, model) = &mut live[i % n];
                        let offset = offset % (model.len() + 1);
                        let mut out = vec![0u8; len];
                        let r = pool.read_at(buf, offset, &mut out);
                        if offset + len <= model.len() {
                            prop_assert_eq!(r, Ok(()));
                            prop_assert_eq!(&out[..], &model[offset..offset + len]);
                            let got = collect(pool.chunks(buf, offset..offset + len).unwrap());
                            prop_assert_eq!(&got[..], &model[offset..offset + len]);
                        } else {
                            prop_assert_eq!(r, Err(PoolError::OutOfRange));
                        }
                    }
                    Op::Seek(i, offset) if !live.is_empty() => {
                        let n = live.len();
                        let (buf, model) = &mut live[i % n];
                        let offset = offset % (model.len() + 1);
                        prop_assert_eq!(pool.seek(buf, offset), Ok(()));
                        // Chunks before and after the cursor still read right.
                        let got = collect(pool.chunks(buf, 0..model.len()).unwrap());
                        prop_assert_eq!(&got[..], &model[..]);
                        let got = collect(pool.chunks(buf, offset..model.len()).unwrap());
                        prop_assert_eq!(&got[..], &model[offset..]);
                    }
                    Op::CopyTo(i, len) if !live.is_empty() => {
                        let (buf, model) = &live[i % live.len()];
                        let mut out = vec![0u8; len];
                        let n = pool.message(buf).copy_to(&mut out);
                        prop_assert_eq!(n, len.min(model.len()));
                        prop_assert_eq!(&out[..n], &model[..n]);
                    }
                    _ => {}
                }
                let used: usize = live.iter().map(|(_, m)| pages_for(m.len(), page_size)).sum();
                prop_assert_eq!(pool.free_pages(), pool.total_pages() - used);
            }
            for (buf, model) in &live {
                prop_assert!(pool.message(buf).eq_bytes(model));
            }
        }
    }
}
