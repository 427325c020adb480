//! A file system formatted for a test: the `Filesystem::format` call with a block size and
//! no store identity that most file-system, engine, FTL and pipeline tests start from.

use flashpipe_device::BlockDevice;
use flashpipe_fs::{Filesystem, FormatOptions};

/// Formats `device` with FS blocks of `fs_block_size_bytes` and no store identity; panics
/// (failing the test) when formatting fails.
pub fn format_fs(device: Box<dyn BlockDevice>, fs_block_size_bytes: u32) -> Filesystem {
    let options = FormatOptions {
        fs_block_size_bytes,
        store_identity: None,
    };
    Filesystem::format(device, &options)
        .unwrap_or_else(|error| panic!("format with {fs_block_size_bytes}-byte blocks: {error}"))
}
