//! Golden layout of a file-backed array's `PATH.meta` (version 2) and journal header
//! (docs/flash-model.md, "Crash atomicity of the image"): a small array with one block
//! erased and three pages programmed is synced, and the files are read back with a decoder
//! written from the doc's table alone, field by field at the documented offsets; then an
//! erase and a program after the sync leave two journal records, read the same way.

use std::path::{Path, PathBuf};

use flashpipe_flash::{
    FlashAddress, FlashArray, FlashCommand, FlashConfig, FlashOptions, FlashRequest, StorageMode,
};

const SEED: u64 = 0x0102_0304_0506_0708;

fn small_config() -> FlashConfig {
    let mut config = FlashConfig::preset("rad").unwrap();
    config.geometry.channels = 2;
    config.geometry.ways = 2;
    config.geometry.blocks_per_plane = 8;
    config.geometry.pages_per_block = 8;
    config.reliability.factory_bad_block_fraction = 0.0;
    config.reliability.grown_bad_probability_at_rated = 0.0;
    config
}

fn scratch() -> PathBuf {
    let directory =
        std::env::temp_dir().join(format!("flashpipe-golden-meta-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn run(array: &mut FlashArray, command: FlashCommand) {
    array
        .submit(FlashRequest {
            tag: 1,
            host: 0,
            command,
        })
        .unwrap();
    let mut acks = Vec::new();
    array.run_until_idle(&mut acks);
    assert!(acks.pop().unwrap().status.is_ok());
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap())
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap())
}

/// One block's 24-byte entry in the table.
#[derive(Debug, PartialEq)]
struct BlockEntry {
    pe_cycles: u32,
    next_page: u32,
    reads_since_erase: u32,
    grown_bad: u32,
    programmed_at_ns: u64,
}

#[test]
fn the_meta_file_and_journal_have_the_documented_layout() {
    let folder = scratch();
    let image = folder.join("golden.img");
    let config = small_config();
    let mut array = FlashArray::new(
        config.clone(),
        FlashOptions {
            seed: SEED,
            storage: StorageMode::File(image.clone()),
            host_count: 1,
            host_queue_depth: 8,
        },
    )
    .unwrap();
    let at = |page| FlashAddress {
        device: 0,
        bus: 1,
        chip: 0,
        block: 3,
        page,
    };
    run(&mut array, FlashCommand::EraseBlock { address: at(0) });
    for page in 0..3 {
        run(
            &mut array,
            FlashCommand::WritePage {
                address: at(page),
                data: vec![page as u8; 4096],
                spare: vec![0xAB; 4],
            },
        );
    }
    array.sync().unwrap();
    let now_ns = array.now_ns();

    let meta = std::fs::read(with_suffix(&image, ".meta")).unwrap();
    assert_eq!(&meta[0..8], b"FPFLASH2", "0..8: magic");
    assert_eq!(u64_at(&meta, 8), SEED, "8..16: seed");
    assert_eq!(u64_at(&meta, 16), now_ns, "16..24: virtual time");
    assert!(u64_at(&meta, 24) > 0, "24..32: operation counter");
    let config_length = u64_at(&meta, 32) as usize;
    let config_text = std::str::from_utf8(&meta[40..40 + config_length]).unwrap();
    assert_eq!(config_text, config.to_toml(), "40..40+L: the configuration");
    let mut offset = 40 + config_length;
    let block_count = u64_at(&meta, offset);
    assert_eq!(block_count, config.total_blocks(), "B");
    offset += 8;
    let entries: Vec<BlockEntry> = (0..block_count as usize)
        .map(|index| {
            let at = offset + 24 * index;
            BlockEntry {
                pe_cycles: u32_at(&meta, at),
                next_page: u32_at(&meta, at + 4),
                reads_since_erase: u32_at(&meta, at + 8),
                grown_bad: u32_at(&meta, at + 12),
                programmed_at_ns: u64_at(&meta, at + 16),
            }
        })
        .collect();
    offset += 24 * block_count as usize;
    let programmed: Vec<&BlockEntry> = entries
        .iter()
        .filter(|entry| entry.next_page != 0)
        .collect();
    assert_eq!(programmed.len(), 1, "{entries:?}");
    assert_eq!(programmed[0].next_page, 3, "three pages programmed");
    assert_eq!(programmed[0].grown_bad, 0);
    assert_eq!(programmed[0].reads_since_erase, 0);
    assert!(programmed[0].pe_cycles >= 1, "erased once");
    assert!(programmed[0].programmed_at_ns > 0 && programmed[0].programmed_at_ns <= now_ns);
    assert!(entries.iter().all(|entry| entry.grown_bad <= 1));
    let generation = u64_at(&meta, offset);
    offset += 8;
    assert_eq!(
        u32_at(&meta, offset),
        crc32c::crc32c(&meta[..offset]),
        "CRC32C of every byte before it"
    );
    assert_eq!(meta.len(), offset + 4, "nothing after the CRC");

    let journal = std::fs::read(with_suffix(&image, ".journal")).unwrap();
    assert_eq!(
        journal.len(),
        24,
        "a freshly synced journal is its header alone"
    );
    assert_eq!(&journal[0..8], b"FPFJRNL1", "0..8: magic");
    assert_eq!(u64_at(&journal, 8), generation, "8..16: generation G");
    assert_eq!(
        u32_at(&journal, 16),
        crc32c::crc32c(&journal[..16]),
        "16..20: CRC32C of bytes 0..16"
    );
    assert_eq!(u32_at(&journal, 20), 0, "20..24: zero");

    // After the sync: an erase and a program of another block, then a death.
    let other = |page| FlashAddress {
        device: 0,
        bus: 0,
        chip: 1,
        block: 5,
        page,
    };
    run(&mut array, FlashCommand::EraseBlock { address: other(0) });
    run(
        &mut array,
        FlashCommand::WritePage {
            address: other(0),
            data: vec![0x11; 4096],
            spare: vec![0xCD; 4],
        },
    );
    let state = array.block_state(other(0)).unwrap();
    std::mem::forget(array);
    let journal = std::fs::read(with_suffix(&image, ".journal")).unwrap();
    assert_eq!(
        journal.len(),
        24 + 2 * 40,
        "the header and two 40-byte records"
    );
    let record = |index: usize| &journal[24 + 40 * index..24 + 40 * (index + 1)];
    let (erased, programmed) = (record(0), record(1));
    let block_index = u32_at(erased, 0);
    assert_eq!(u32_at(programmed, 0), block_index, "0..4: block index");
    assert_eq!(entries[block_index as usize].next_page, 0, "another block");
    assert_eq!(
        u32_at(erased, 4),
        entries[block_index as usize].pe_cycles + 1,
        "4..8: P/E cycles"
    );
    assert_eq!(u32_at(erased, 8), 0, "8..12: next page after the erase");
    assert_eq!(u32_at(programmed, 8), 1, "8..12: next page after a program");
    assert_eq!(u32_at(programmed, 8), state.next_page);
    assert_eq!(u32_at(programmed, 4), state.pe_cycles);
    for record in [erased, programmed] {
        assert_eq!(u32_at(record, 12), 0, "12..16: flags, good");
        assert_eq!(u32_at(record, 16), 0, "16..20: reads since erase");
        assert_eq!(
            u32_at(record, 36),
            crc32c::crc32c(&record[..36]),
            "36..40: CRC32C of bytes 0..36"
        );
    }
    let first_program_ns = u64_at(programmed, 20);
    assert!(
        first_program_ns > now_ns,
        "20..28: time of the first program"
    );
    assert!(
        u64_at(programmed, 28) >= first_program_ns,
        "28..36: record time"
    );
    assert!(u64_at(erased, 28) <= u64_at(programmed, 28));
    let _ = std::fs::remove_dir_all(&folder);
}
