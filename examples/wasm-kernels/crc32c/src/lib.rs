//! CRC32C (Castagnoli) as a flashpipe WebAssembly kernel (ABI version 1,
//! docs/wasm-kernels.md): chunks in order, a slice-by-8 table CRC, the file's result the
//! four bytes of the CRC in big-endian order, shown as a digest (the same hexadecimal as
//! the built-in `crc32c` kernel). `no_std`, no allocator, no imports.

#![no_std]

#[path = "../../ordered_abi.rs"]
mod ordered_abi;

/// The reflected Castagnoli polynomial.
const POLYNOMIAL: u32 = 0x82F6_3B78;

const fn make_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut index = 0;
    while index < 256 {
        let mut crc = index as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLYNOMIAL } else { crc >> 1 };
            bit += 1;
        }
        tables[0][index] = crc;
        index += 1;
    }
    let mut table = 1;
    while table < 8 {
        let mut index = 0;
        while index < 256 {
            let previous = tables[table - 1][index];
            tables[table][index] = (previous >> 8) ^ tables[0][(previous & 0xff) as usize];
            index += 1;
        }
        table += 1;
    }
    tables
}

static TABLES: [[u32; 256]; 8] = make_tables();

/// The running CRC (inverted, as the algorithm keeps it).
static mut STATE: u32 = !0;
/// The file's result.
static mut RESULT: [u8; 4] = [0; 4];

fn update(mut crc: u32, data: &[u8]) -> u32 {
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let low = u32::from_le_bytes([block[0], block[1], block[2], block[3]]) ^ crc;
        let high = u32::from_le_bytes([block[4], block[5], block[6], block[7]]);
        crc = TABLES[7][(low & 0xff) as usize]
            ^ TABLES[6][((low >> 8) & 0xff) as usize]
            ^ TABLES[5][((low >> 16) & 0xff) as usize]
            ^ TABLES[4][(low >> 24) as usize]
            ^ TABLES[3][(high & 0xff) as usize]
            ^ TABLES[2][((high >> 8) & 0xff) as usize]
            ^ TABLES[1][((high >> 16) & 0xff) as usize]
            ^ TABLES[0][(high >> 24) as usize];
    }
    for &byte in blocks.remainder() {
        crc = TABLES[0][((crc ^ u32::from(byte)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// 0: a digest.
#[no_mangle]
pub extern "C" fn flashpipe_result_kind() -> i32 {
    0
}

#[no_mangle]
pub extern "C" fn flashpipe_file_start(_size: i64) {
    // SAFETY: a single-threaded module; the statics are only touched by these exports.
    unsafe { STATE = !0 };
}

#[no_mangle]
pub extern "C" fn flashpipe_chunk(_offset: i64, length: i32) -> i32 {
    let data = ordered_abi::chunk(length);
    // SAFETY: as in `flashpipe_file_start`.
    unsafe { STATE = update(STATE, data) };
    0
}

#[no_mangle]
pub extern "C" fn flashpipe_file_end() -> i64 {
    // SAFETY: as in `flashpipe_file_start`.
    unsafe {
        RESULT = (!STATE).to_be_bytes();
        let pointer = core::ptr::addr_of!(RESULT) as usize as i64;
        (pointer << 32) | 4
    }
}
