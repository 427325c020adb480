//! [`SplitBuffer`]: one parent [`IoBuf`] handed to devices as disjoint views, without a
//! copy, and given back whole once every view has come back.
//!
//! Striping splits a request's buffer into one piece per member, the engine reads the
//! runs of a file straight into their places in one pool buffer, and the file system
//! reads whole blocks straight into a caller's buffer: each hands out several device
//! requests whose buffers are windows of one parent buffer. This module is the one place
//! where that is done, so that the `unsafe` and its proof are written once.
//!
//! # Use
//! [`SplitBuffer::new`] takes the parent; [`SplitBuffer::view`] hands out a view of
//! `offset_bytes..offset_bytes + length_bytes` as an ordinary [`IoBuf`], which goes to a
//! device in a request and comes back in the completion like any buffer. A view has
//! "returned" when it is dropped (or given to [`SplitBuffer::return_view`], which also
//! checks it is one of this split's). [`SplitBuffer::try_into_parent`] gives the parent
//! back, whole and with every byte the views wrote, only when no view is alive; while
//! one is, it hands the split back unchanged.
//!
//! # Safety argument (the only one; every view is built in [`SplitBuffer::view`])
//! A view is an [`IoBuf`] whose pointer lies inside the parent's region and which holds
//! an `Arc` of the split's shared part, itself the owner of the parent `IoBuf`. Then:
//! 1. *In range*: `view` refuses any window not inside `0..parent.len()` (checked in
//!    release builds, with overflow checked), so a view never reaches outside the
//!    parent's region.
//! 2. *Disjoint*: the split records every window it handed out (ordered by start) and
//!    refuses one that overlaps any of them, even after that view was dropped, so two
//!    views never alias a byte. Empty windows are refused (a view's pointer must point at
//!    a byte of the parent).
//! 3. *Nobody else touches the parent's bytes*: the parent `IoBuf` is moved into the
//!    shared part and no code path reads or writes it through that `IoBuf` while any
//!    view lives; it leaves the shared part only through `Arc::try_unwrap`, which
//!    succeeds only when the split's own handle is the last one, i.e. every view has
//!    been dropped. The `Arc`'s release/acquire ordering makes every write a view made
//!    on any thread visible to the one that gets the parent back.
//! 4. *The region outlives every view*: each view holds an `Arc` of the shared part, so
//!    the parent's region (heap allocation or pool slot) is freed or returned to its
//!    pool only when the split and every view are gone, in whatever order they go. A
//!    view dropped without being returned, a split dropped while views are still at a
//!    device, or a device that leaks a view: none frees the region under a view; a leaked
//!    view leaks the parent with it (no undefined behaviour).
//! 5. *The pointer stays valid when values move*: an [`IoBuf`]'s region does not move
//!    when the `IoBuf` value moves (heap allocation or pool slot), so pointers taken
//!    before the parent moved into the shared part stay valid.
//!
//! A view reports no pool slot of its own (`IoBuf::pool_slot` is `None`: it is no pool
//! buffer to give back), but `IoBuf::pool_region` names the pool slot whose memory holds
//! it when the parent (or its parent, for a view of a view) is a pool buffer, so a device
//! that registered that pool with the kernel may use registered-buffer I/O on the view:
//! the view lies inside the slot (point 1), and the device keeps the pool's memory for as
//! long as the registration lasts.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::buffer::IoBuf;

/// A view asked of a [`SplitBuffer`] that it refuses to hand out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewRefused {
    /// The window is empty.
    #[error("view at byte {offset_bytes} refused: a view holds at least one byte")]
    Empty {
        /// Where the window starts in the parent.
        offset_bytes: usize,
    },
    /// The window reaches past the end of the parent buffer.
    #[error(
        "view of bytes {offset_bytes}..+{length_bytes} refused: the parent buffer holds \
         {parent_length_bytes} bytes"
    )]
    OutOfRange {
        /// Where the window starts in the parent.
        offset_bytes: usize,
        /// Its length.
        length_bytes: usize,
        /// The parent's length.
        parent_length_bytes: usize,
    },
    /// The window overlaps one already handed out.
    #[error(
        "view of bytes {offset_bytes}..{end_bytes} refused: it overlaps the view of bytes \
         {other_offset_bytes}..{other_end_bytes} already handed out"
    )]
    Overlaps {
        /// Where the window starts in the parent.
        offset_bytes: usize,
        /// One past its last byte.
        end_bytes: usize,
        /// Where the view it overlaps starts.
        other_offset_bytes: usize,
        /// One past that view's last byte.
        other_end_bytes: usize,
    },
}

/// A buffer given to [`SplitBuffer::return_view`] that is not one of its views.
#[derive(Debug, thiserror::Error)]
#[error("a buffer of {} bytes returned to a split buffer that did not hand it out", .buffer.len())]
pub struct NotAView {
    /// The buffer, handed back untouched.
    pub buffer: IoBuf,
}

/// What every view of one split shares: the parent, untouched while views live.
pub(crate) struct SplitParent {
    parent: IoBuf,
}

impl SplitParent {
    /// The pool slot whose memory holds the parent ([`IoBuf::pool_region`]).
    pub(crate) fn pool_region(&self) -> Option<(u64, u32)> {
        self.parent.pool_region()
    }
}

/// A parent [`IoBuf`] handed out as disjoint views (see the module doc).
pub struct SplitBuffer {
    shared: Arc<SplitParent>,
    /// The parent region's first byte, taken before the parent moved into `shared`.
    base: NonNull<u8>,
    length_bytes: usize,
    /// Every window handed out, start -> end, pairwise disjoint.
    windows: BTreeMap<usize, usize>,
}

// SAFETY: `base` is only used to build views inside `view`, under `&mut self`; the rest
// (an `Arc` of an `IoBuf`, which is `Send + Sync`, and plain data) is `Send`.
unsafe impl Send for SplitBuffer {}

impl SplitBuffer {
    /// Takes `parent` to hand it out as views; its length (`parent.len()`) is the range
    /// views may cover.
    pub fn new(mut parent: IoBuf) -> SplitBuffer {
        let length_bytes = parent.len();
        let base = NonNull::new(parent.as_mut_ptr()).expect("an IoBuf's pointer is never null");
        SplitBuffer {
            shared: Arc::new(SplitParent { parent }),
            base,
            length_bytes,
            windows: BTreeMap::new(),
        }
    }

    /// Length of the parent buffer in bytes.
    pub fn len(&self) -> usize {
        self.length_bytes
    }

    /// True when the parent holds no bytes (no view can be handed out).
    pub fn is_empty(&self) -> bool {
        self.length_bytes == 0
    }

    /// Views handed out and not yet returned (dropped).
    pub fn views_out(&self) -> usize {
        Arc::strong_count(&self.shared) - 1
    }

    /// A view of bytes `offset_bytes..offset_bytes + length_bytes` of the parent, as an
    /// [`IoBuf`] to put in a device request. Refused when the window is empty, reaches
    /// past the parent, or overlaps a window handed out before (returned or not).
    pub fn view(&mut self, offset_bytes: usize, length_bytes: usize) -> Result<IoBuf, ViewRefused> {
        let end_bytes = self.check_window(offset_bytes, length_bytes)?;
        self.windows.insert(offset_bytes, end_bytes);
        assert!(end_bytes <= self.length_bytes && offset_bytes < end_bytes);
        // SAFETY: `offset_bytes < end_bytes <= length_bytes` (checked in `check_window`
        // and asserted above), so the pointer and the `length_bytes` after it lie inside
        // the parent's region (point 1 of the module doc); the window overlaps no other
        // (point 2); nothing else touches the parent's bytes while the view lives (point
        // 3); the view's `Arc` keeps the region alive as long as the view (point 4).
        let view = unsafe {
            IoBuf::view_of_split(
                self.base.as_ptr().add(offset_bytes),
                length_bytes,
                Arc::clone(&self.shared),
            )
        };
        Ok(view)
    }

    /// Takes back a view of this split (dropping it), or hands back a buffer that is not
    /// one of its views.
    pub fn return_view(&mut self, view: IoBuf) -> Result<(), NotAView> {
        match view.split_parent() {
            Some(shared) if Arc::ptr_eq(shared, &self.shared) => Ok(()),
            _ => Err(NotAView { buffer: view }),
        }
    }

    /// The parent, whole, with everything the views wrote, when every view has returned;
    /// the split itself, unchanged, while some view is still out.
    pub fn try_into_parent(self) -> Result<IoBuf, SplitBuffer> {
        let SplitBuffer {
            shared,
            base,
            length_bytes,
            windows,
        } = self;
        match Arc::try_unwrap(shared) {
            Ok(SplitParent { parent }) => {
                assert_eq!(parent.as_ptr(), base.as_ptr().cast_const());
                assert_eq!(parent.len(), length_bytes);
                Ok(parent)
            }
            Err(shared) => Err(SplitBuffer {
                shared,
                base,
                length_bytes,
                windows,
            }),
        }
    }

    /// The parent, whole, once every view has returned.
    ///
    /// # Panics
    /// When a view is still out: the caller broke its own rule that every view comes
    /// back first (a device completes every request exactly once and hands its buffer
    /// back), a programming error.
    pub fn into_parent(self) -> IoBuf {
        self.try_into_parent().unwrap_or_else(|split| {
            panic!(
                "split buffer of {} bytes taken back with {} views still out",
                split.length_bytes,
                split.views_out()
            )
        })
    }

    /// Checks a window against the parent and the windows handed out; its end.
    fn check_window(&self, offset_bytes: usize, length_bytes: usize) -> Result<usize, ViewRefused> {
        if length_bytes == 0 {
            return Err(ViewRefused::Empty { offset_bytes });
        }
        let end_bytes = offset_bytes
            .checked_add(length_bytes)
            .filter(|&end_bytes| end_bytes <= self.length_bytes)
            .ok_or(ViewRefused::OutOfRange {
                offset_bytes,
                length_bytes,
                parent_length_bytes: self.length_bytes,
            })?;
        let before = self.windows.range(..end_bytes).next_back();
        if let Some((&other_offset_bytes, &other_end_bytes)) = before {
            if other_end_bytes > offset_bytes {
                return Err(ViewRefused::Overlaps {
                    offset_bytes,
                    end_bytes,
                    other_offset_bytes,
                    other_end_bytes,
                });
            }
        }
        Ok(end_bytes)
    }
}

impl std::fmt::Debug for SplitBuffer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SplitBuffer")
            .field("len", &self.length_bytes)
            .field("views_handed_out", &self.windows.len())
            .field("views_out", &self.views_out())
            .finish()
    }
}

#[cfg(test)]
mod tests;
