//! Byte ranges to logical pages (wrapping at the capacity, partial pages counted), a
//! bitmap of written pages, and the shelf of buffers reused between requests.

use flashpipe_device::IoBuf;
use flashpipe_flash::workload::TraceRequest;

use crate::Ftl;

/// The FTL device's page size and capacity, and how a byte range maps to its pages.
#[derive(Debug, Clone, Copy)]
pub(super) struct PageLayout {
    pub(super) page_bytes: u64,
    pub(super) logical_pages: u64,
}

/// The pages one request covers.
#[derive(Debug, Clone, Copy)]
pub(super) struct PageRange {
    pub(super) first: u64,
    pub(super) count: u64,
    pub(super) wrapped: bool,
    pub(super) partial: bool,
}

impl PageLayout {
    pub(super) fn of(ftl: &Ftl) -> PageLayout {
        let info = ftl.info();
        PageLayout {
            page_bytes: u64::from(info.block_size_bytes),
            logical_pages: info.block_count,
        }
    }

    pub(super) fn pages_of(&self, request: &TraceRequest) -> PageRange {
        let first = request.offset_bytes / self.page_bytes;
        let end = (request.offset_bytes + request.length_bytes).div_ceil(self.page_bytes);
        let count = (end - first).clamp(1, self.logical_pages);
        let partial = request.offset_bytes % self.page_bytes != 0
            || request.length_bytes % self.page_bytes != 0;
        if first + count <= self.logical_pages {
            return PageRange {
                first,
                count,
                wrapped: false,
                partial,
            };
        }
        let wrapped_first = (first % self.logical_pages).min(self.logical_pages - count);
        PageRange {
            first: wrapped_first,
            count,
            wrapped: true,
            partial,
        }
    }
}

/// One bit per logical page.
pub(super) struct PageBitmap {
    pub(super) words: Vec<u64>,
}

impl PageBitmap {
    pub(super) fn new(pages: u64) -> PageBitmap {
        PageBitmap {
            words: vec![0; pages.div_ceil(64) as usize],
        }
    }
    pub(super) fn get(&self, page: u64) -> bool {
        self.words[(page / 64) as usize] >> (page % 64) & 1 == 1
    }
    pub(super) fn set(&mut self, page: u64) {
        self.words[(page / 64) as usize] |= 1 << (page % 64);
    }
    pub(super) fn clear(&mut self, page: u64) {
        self.words[(page / 64) as usize] &= !(1 << (page % 64));
    }
}

/// Buffers handed back by completions, reused for the next requests.
#[derive(Default)]
pub(super) struct BufferShelf {
    pub(super) free: Vec<IoBuf>,
}

impl BufferShelf {
    /// Most buffers kept for reuse.
    pub(super) const KEPT_MAX: usize = 1024;

    pub(super) fn take(&mut self, length_bytes: usize) -> IoBuf {
        match self.free.pop() {
            Some(mut buffer) if buffer.capacity() >= length_bytes => {
                buffer.set_len(length_bytes);
                buffer
            }
            _ => IoBuf::zeroed(length_bytes),
        }
    }

    pub(super) fn give_back(&mut self, buffer: Option<IoBuf>) {
        if let Some(buffer) = buffer.filter(|buffer| buffer.capacity() > 0) {
            if self.free.len() < Self::KEPT_MAX {
                self.free.push(buffer);
            }
        }
    }
}
