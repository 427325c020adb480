//! A word count as a flashpipe WebAssembly kernel (ABI version 1, docs/wasm-kernels.md):
//! chunks in order; the file's result is the text `LINES WORDS BYTES`, where a line is a
//! newline byte and a word a maximal run of bytes that are not ASCII white space (Rust's
//! `split_ascii_whitespace`). `no_std`, no allocator, no imports.

#![no_std]

use core::arch::wasm32;

static mut LINES: u64 = 0;
static mut WORDS: u64 = 0;
static mut BYTES: u64 = 0;
static mut IN_WORD: bool = false;
static mut BUFFER_POINTER: usize = 0;
static mut BUFFER_CAPACITY: usize = 0;
/// The result text: three numbers of up to 20 digits and two spaces.
static mut RESULT: [u8; 64] = [0; 64];

#[no_mangle]
pub extern "C" fn flashpipe_abi_version() -> i32 {
    1
}

/// 0: chunks in order.
#[no_mangle]
pub extern "C" fn flashpipe_schedule() -> i32 {
    0
}

/// 1: UTF-8 text.
#[no_mangle]
pub extern "C" fn flashpipe_result_kind() -> i32 {
    1
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

#[no_mangle]
pub extern "C" fn flashpipe_file_start(_size: i64) {
    // SAFETY: as above.
    unsafe {
        LINES = 0;
        WORDS = 0;
        BYTES = 0;
        IN_WORD = false;
    }
}

#[no_mangle]
pub extern "C" fn flashpipe_chunk(_offset: i64, length: i32) -> i32 {
    // SAFETY: the host wrote `length` bytes at the buffer it asked for first.
    unsafe {
        let data = core::slice::from_raw_parts(BUFFER_POINTER as *const u8, length as u32 as usize);
        let (mut lines, mut words, mut in_word) = (0u64, 0u64, IN_WORD);
        for &byte in data {
            lines += u64::from(byte == b'\n');
            let space = byte.is_ascii_whitespace();
            words += u64::from(!space && !in_word);
            in_word = !space;
        }
        LINES += lines;
        WORDS += words;
        BYTES += data.len() as u64;
        IN_WORD = in_word;
    }
    0
}

/// Writes `value` in decimal at `at`; returns the position after it.
fn write_decimal(buffer: &mut [u8; 64], mut at: usize, value: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut count = 0;
    let mut rest = value;
    loop {
        digits[count] = b'0' + (rest % 10) as u8;
        count += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    while count > 0 {
        count -= 1;
        buffer[at] = digits[count];
        at += 1;
    }
    at
}

#[no_mangle]
pub extern "C" fn flashpipe_file_end() -> i64 {
    // SAFETY: as above.
    unsafe {
        let result = &mut *core::ptr::addr_of_mut!(RESULT);
        let mut at = write_decimal(result, 0, LINES);
        result[at] = b' ';
        at = write_decimal(result, at + 1, WORDS);
        result[at] = b' ';
        at = write_decimal(result, at + 1, BYTES);
        let pointer = result.as_ptr() as usize as i64;
        (pointer << 32) | at as i64
    }
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    wasm32::unreachable()
}
