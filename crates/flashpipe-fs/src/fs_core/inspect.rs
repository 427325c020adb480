//! Looking inside a mounted image, for fsck tests and tools that inspect images: which
//! block holds which structure of the last commit.

use crate::findings::Structure;

use super::FsCore;

impl FsCore {
    /// Every metadata block of the last commit with its structure: super block slots,
    /// checkpoint map, name table, inode table, free list, shared table, the log blocks in use (in log
    /// order), indirect blocks (for fsck tests and tools that inspect images).
    pub fn metadata_blocks(&self) -> Vec<(Structure, u64)> {
        let mut blocks = vec![(Structure::SuperBlock, 0), (Structure::SuperBlock, 1)];
        if let Some(super_block) = &self.state.committed.super_block {
            let kinds = [
                (Structure::NameTable, super_block.name_table_block_count),
                (Structure::InodeTable, super_block.inode_table_block_count),
                (Structure::FreeList, super_block.free_list_block_count),
                (Structure::SharedTable, super_block.shared_table_block_count),
                (Structure::CheckpointMap, super_block.map_block_count),
            ];
            let mut addresses = self.state.committed.blocks.iter().copied();
            for (structure, count) in kinds {
                blocks.extend(
                    addresses
                        .by_ref()
                        .take(count as usize)
                        .map(|block| (structure, block)),
                );
            }
            let log_blocks =
                &self.state.committed.log_region[..super_block.log_block_count as usize];
            blocks.extend(log_blocks.iter().map(|&block| (Structure::Log, block)));
        }
        for node in self.state.files.values() {
            if !node.map_changed {
                blocks.extend(
                    node.indirect_chain
                        .iter()
                        .map(|&block| (Structure::IndirectBlock, block)),
                );
            }
        }
        blocks
    }
}
