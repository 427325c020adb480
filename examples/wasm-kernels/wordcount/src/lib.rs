//! A word count as a flashpipe WebAssembly kernel (ABI version 1, docs/wasm-kernels.md):
//! chunks in order; the file's result is the text `LINES WORDS BYTES`, where a line is a
//! newline byte and a word a maximal run of bytes that are not ASCII white space (Rust's
//! `split_ascii_whitespace`). `no_std`, no allocator, no imports.

#![no_std]

#[path = "../../ordered_abi.rs"]
mod ordered_abi;

static mut LINES: u64 = 0;
static mut WORDS: u64 = 0;
static mut BYTES: u64 = 0;
static mut IN_WORD: bool = false;
/// The result text: three numbers of up to 20 digits and two spaces.
static mut RESULT: [u8; 64] = [0; 64];

/// 1: UTF-8 text.
#[no_mangle]
pub extern "C" fn flashpipe_result_kind() -> i32 {
    1
}

#[no_mangle]
pub extern "C" fn flashpipe_file_start(_size: i64) {
    // SAFETY: a single-threaded module; the statics are only touched by these exports.
    unsafe {
        LINES = 0;
        WORDS = 0;
        BYTES = 0;
        IN_WORD = false;
    }
}

#[no_mangle]
pub extern "C" fn flashpipe_chunk(_offset: i64, length: i32) -> i32 {
    let data = ordered_abi::chunk(length);
    // SAFETY: as in `flashpipe_file_start`.
    unsafe {
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
    // SAFETY: as in `flashpipe_file_start`.
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
