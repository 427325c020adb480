//! Helpers shared by the flash model's tests: the small array most of them run on, one
//! command run to its acknowledgements, test pages, and the names of an image's companion
//! files.

#![allow(dead_code)] // each test file uses the helpers it needs

use std::path::{Path, PathBuf};

use flashpipe_flash::{
    Ack, FlashAddress, FlashArray, FlashCommand, FlashConfig, FlashOptions, FlashRequest,
    StorageMode,
};

/// A small array: 2 channels x 2 ways x 8 blocks x 8 pages of 4 KiB, no random failures.
pub fn small_config() -> FlashConfig {
    config_of("rad", [2, 2, 8, 8])
}

/// `preset` cut to `[channels, ways, blocks_per_plane, pages_per_block]`, with no bad
/// blocks from the factory and none grown.
pub fn config_of(preset: &str, shape: [u32; 4]) -> FlashConfig {
    let mut config = FlashConfig::preset(preset).unwrap();
    let geometry = &mut config.geometry;
    [
        geometry.channels,
        geometry.ways,
        geometry.blocks_per_plane,
        geometry.pages_per_block,
    ] = shape;
    config.reliability.factory_bad_block_fraction = 0.0;
    config.reliability.grown_bad_probability_at_rated = 0.0;
    config
}

/// Submits `command` with `tag` from host 0 and runs the array until idle; returns the
/// acknowledgements that came.
pub fn acks_of(array: &mut FlashArray, tag: u64, command: FlashCommand) -> Vec<Ack> {
    let request = FlashRequest {
        tag,
        host: 0,
        command,
    };
    array.submit(request).unwrap();
    let mut acks = Vec::new();
    array.run_until_idle(&mut acks);
    acks
}

/// A 4 KiB page of test bytes made from `byte`.
pub fn page_of(byte: u8) -> Vec<u8> {
    (0..4096).map(|index| byte ^ (index as u8)).collect()
}

/// `path` with `suffix` appended to its file name (`.meta`, `.journal`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Page `page` of block `block` on chip `chip` of bus `bus`, device 0.
pub fn address(bus: u32, chip: u32, block: u32, page: u32) -> FlashAddress {
    FlashAddress {
        device: 0,
        bus,
        chip,
        block,
        page,
    }
}

/// Submits `command` with `tag` and runs it to its one ack.
pub fn only_ack(array: &mut FlashArray, tag: u64, command: FlashCommand) -> Ack {
    let mut acks = acks_of(array, tag, command);
    assert_eq!(acks.len(), 1);
    acks.pop().unwrap()
}

/// An array of `config` on `storage`, seeded `seed`, 64 requests a host in flight.
pub fn array_of(config: FlashConfig, storage: StorageMode, seed: u64) -> FlashArray {
    FlashArray::new(
        config,
        FlashOptions {
            seed,
            storage,
            host_queue_depth: 64,
            ..FlashOptions::default()
        },
    )
    .unwrap()
}

/// A fresh, empty folder `flashpipe-flash-{name}-{pid}` under the temporary folder.
pub fn scratch(name: &str) -> PathBuf {
    let directory =
        std::env::temp_dir().join(format!("flashpipe-flash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}
