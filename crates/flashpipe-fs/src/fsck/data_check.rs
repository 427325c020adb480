//! `fsck --data`: every checksummed data block of the image read back, in bounded
//! batches with the device queue full, and checked against the checksum its pointer
//! carries; each damaged block a finding (the first thousand listed, then a summary).

use flashpipe_device::BlockDevice;

use crate::data::verify_data_block;
use crate::error::FsckError;
use crate::findings::{Finding, Structure};
use crate::image::LoadedImage;
use crate::io::read_fs_blocks;

/// Most data blocks read in one batch, and most bytes.
const DATA_READ_BATCH_BLOCKS: usize = 1024;
const DATA_READ_BATCH_BYTES: u64 = 64 << 20;
/// Most damaged data blocks listed one by one (then one summary finding).
const MAX_DATA_FINDINGS: usize = 1000;

/// One data block to verify: its file's index in the name list, its offset in the file,
/// its FS block and the checksum its pointer carries.
struct DataBlockToVerify {
    file_index: usize,
    offset_bytes: u64,
    fs_block: u64,
    checksum: u32,
}

/// Damaged data blocks found so far: the first [`MAX_DATA_FINDINGS`] as findings.
#[derive(Default)]
struct DataDamage {
    findings: Vec<Finding>,
    damaged_blocks: usize,
}

/// Reads every checksummed data block of the image, in batches with the device queue full
/// (streamed: memory stays bounded by one batch), and returns a finding per damaged block.
pub(super) fn check_data_blocks(
    device: &mut dyn BlockDevice,
    image: &LoadedImage,
) -> Result<Vec<Finding>, FsckError> {
    let block_bytes = image.geometry.block_bytes();
    let batch_blocks =
        DATA_READ_BATCH_BLOCKS.min((DATA_READ_BATCH_BYTES / block_bytes).max(1) as usize);
    let file_names: Vec<String> = image
        .files
        .iter()
        .map(|(inode_number, file)| match &file.name {
            Some(name) => name.to_string(),
            None => format!("(orphan inode {inode_number})"),
        })
        .collect();
    let mut damage = DataDamage::default();
    let mut batch = Vec::with_capacity(batch_blocks);
    for (file_index, file) in image.files.values().enumerate() {
        let checked_blocks = file.pointers.iter().zip(&file.checksums).enumerate();
        for (index, (&fs_block, &checksum)) in checked_blocks {
            let Some(checksum) = checksum else {
                continue;
            };
            batch.push(DataBlockToVerify {
                file_index,
                offset_bytes: index as u64 * block_bytes,
                fs_block,
                checksum,
            });
            if batch.len() == batch_blocks {
                verify_data_batch(device, image, &file_names, &batch, &mut damage)?;
                batch.clear();
            }
        }
    }
    verify_data_batch(device, image, &file_names, &batch, &mut damage)?;
    let DataDamage {
        mut findings,
        damaged_blocks,
    } = damage;
    if damaged_blocks > MAX_DATA_FINDINGS {
        findings.push(Finding::new(
            Structure::DataBlock,
            None,
            format!(
                "{} more damaged data block(s) not listed",
                damaged_blocks - MAX_DATA_FINDINGS
            ),
            false,
        ));
    }
    Ok(findings)
}

/// Reads one batch of data blocks and records each one whose checksum does not match.
fn verify_data_batch(
    device: &mut dyn BlockDevice,
    image: &LoadedImage,
    file_names: &[String],
    batch: &[DataBlockToVerify],
    damage: &mut DataDamage,
) -> Result<(), FsckError> {
    let addresses: Vec<u64> = batch.iter().map(|block| block.fs_block).collect();
    let buffers = read_fs_blocks(device, &image.geometry, &addresses)?;
    for (block, buffer) in batch.iter().zip(&buffers) {
        let verified = verify_data_block(
            &file_names[block.file_index],
            block.offset_bytes,
            block.fs_block,
            Some(block.checksum),
            buffer,
        );
        if let Err(error) = verified {
            damage.damaged_blocks += 1;
            if damage.damaged_blocks <= MAX_DATA_FINDINGS {
                damage.findings.push(Finding::new(
                    Structure::DataBlock,
                    Some(block.fs_block),
                    error.to_string(),
                    false,
                ));
            }
        }
    }
    Ok(())
}
