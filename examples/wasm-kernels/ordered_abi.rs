//! The exports the Rust example kernels share (ABI version 1, docs/wasm-kernels.md): the
//! version, the in-order schedule, the input buffer the host writes each chunk into, and the
//! panic handler. Each example includes this file as a module (`#[path]`), so that it still
//! builds alone for `wasm32-unknown-unknown`.

use core::arch::wasm32;

/// The input buffer: pointer and capacity.
static mut BUFFER_POINTER: usize = 0;
static mut BUFFER_CAPACITY: usize = 0;

#[no_mangle]
pub extern "C" fn flashpipe_abi_version() -> i32 {
    1
}

/// 0: chunks in order.
#[no_mangle]
pub extern "C" fn flashpipe_schedule() -> i32 {
    0
}

/// A buffer of at least `length` bytes: fresh pages at the end of memory when the current
/// one is too small.
#[no_mangle]
pub extern "C" fn flashpipe_input_buffer(length: i32) -> i32 {
    let length = length as u32 as usize;
    // SAFETY: a single-threaded module; the statics are only touched by these exports.
    unsafe {
        if BUFFER_CAPACITY < length {
            let pages = length.div_ceil(65536);
            let first_page = wasm32::memory_grow(0, pages);
            if first_page == usize::MAX {
                wasm32::unreachable();
            }
            BUFFER_POINTER = first_page * 65536;
            BUFFER_CAPACITY = pages * 65536;
        }
        BUFFER_POINTER as i32
    }
}

/// The chunk the host wrote, `length` bytes at the buffer it asked for (the argument of
/// `flashpipe_chunk`).
pub fn chunk(length: i32) -> &'static [u8] {
    // SAFETY: the host wrote `length` bytes at the buffer it asked for first, and reads
    // nothing of it while the module runs.
    unsafe { core::slice::from_raw_parts(BUFFER_POINTER as *const u8, length as u32 as usize) }
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    wasm32::unreachable()
}
