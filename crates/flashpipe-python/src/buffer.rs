//! [`ReadBuffer`]: bytes read from a store, exported to Python through the buffer protocol
//! (read-only), so `memoryview(buffer)` and `numpy.frombuffer(buffer, dtype)` see them
//! without a copy.
//!
//! Through a server that maps its shared memory, the bytes are a [`ReadView`]: a window
//! of the server's read pool mapped into this process. The view holds its mapping (an
//! `Arc` of the mapped region) and the server's read handle; both are released when the
//! `ReadBuffer` is freed, which Python does when the last object using it (an array, a
//! memoryview) dies. The mapping outlives the store's session and the server itself: a
//! killed server's memory stays mapped here until this buffer goes (the kernel keeps the
//! pages of a mapped memfd). In process, or where a read cannot be one view, the bytes
//! are owned here (one copy): a large read's into a [`Region`] mapped for it, which this
//! buffer unmaps when it is freed.

use std::ffi::c_int;

use flashpipe_client::ReadView;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::region::Region;
use crate::served_region::RegionBytes;

/// Where a buffer's bytes live.
pub enum Bytes {
    /// A window of the server's shared read pool (by reference).
    View(ReadView),
    /// Memory of this process.
    Owned(Vec<u8>),
    /// Memory of this process mapped for one large read.
    Mapped(Region),
    /// A window of a region of this process's memory the server read into.
    Region(RegionBytes),
}

/// Bytes read from a store, exported read-only through the buffer protocol. The bytes
/// stay valid, and never change, for as long as this object lives.
#[pyclass(module = "flashpipe._flashpipe", frozen)]
pub struct ReadBuffer {
    bytes: Bytes,
}

impl ReadBuffer {
    /// A buffer over `bytes`.
    pub fn new(bytes: Bytes) -> ReadBuffer {
        ReadBuffer { bytes }
    }

    fn as_slice(&self) -> &[u8] {
        match &self.bytes {
            Bytes::View(view) => view,
            Bytes::Owned(bytes) => bytes,
            Bytes::Mapped(region) => region.as_slice(),
            Bytes::Region(region) => region.as_slice(),
        }
    }
}

#[pymethods]
impl ReadBuffer {
    /// True when the bytes are the server's shared memory mapped here (no copy was made).
    #[getter]
    fn by_reference(&self) -> bool {
        matches!(&self.bytes, Bytes::View(view) if view.is_shared())
    }

    fn __len__(&self) -> usize {
        self.as_slice().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<flashpipe ReadBuffer of {} bytes, {}>",
            self.as_slice().len(),
            match &self.bytes {
                Bytes::Region(_) => "read into this process's region",
                _ if self.by_reference() => "by reference",
                _ => "copied",
            }
        )
    }

    /// Exports the bytes read-only; a request for a writable buffer is refused
    /// (`BufferError`).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let bytes = slf.get().as_slice();
        let length = ffi::Py_ssize_t::try_from(bytes.len())
            .expect("a buffer is smaller than isize::MAX bytes (Rust allocations are)");
        // SAFETY: `view` is the Py_buffer the interpreter passed to this slot, valid for
        // writes. The pointer and length describe `bytes`, which live as long as this
        // frozen object (never mutated: the class has no method that changes them, and a
        // ReadView's mapping and window are fixed); PyBuffer_FillInfo takes a new
        // reference to the object (`obj`), which the interpreter drops when the buffer is
        // released, so the bytes outlive every consumer. `readonly = 1`: a writable
        // request fails with BufferError and nothing is filled.
        let status = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr().cast_mut().cast(),
                length,
                1,
                flags,
            )
        };
        if status == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}
