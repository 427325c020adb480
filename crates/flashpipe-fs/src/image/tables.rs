//! The loader's checkpoint tables: the map chain walked, the name table, inode table and
//! free list blocks read in batches and parsed entry by entry (a damaged block costs only
//! what it describes), and the names resolved against the inodes.

use std::collections::HashMap;

use flashpipe_device::{BlockDevice, DeviceError};

use super::{DanglingName, LoadedFile, Loader, MapAndTables, NameEntry, TABLE_READ_BATCH_BLOCKS};
use crate::attributes::{inode_record_header_bytes, FileAttributes, ATTRIBUTE_FLAGS_OFFSET};
use crate::findings::Structure;
use crate::io::read_fs_blocks;
use crate::layout::{
    fixed_entries_per_block, open_metadata_block, pointer_entry_bytes, read_pointer_entry,
    read_u32, read_u64, MetadataHeader, MetadataKind, DIRECT_POINTER_COUNT, FREE_EXTENT_BYTES,
    INODE_RECORD_HEADER_BYTES, METADATA_HEADER_BYTES, NAME_ENTRY_HEADER_BYTES,
};
use crate::name::name_problem;

impl Loader {
    /// Walks the map chain; returns its blocks and the table addresses it lists.
    pub(super) fn load_map(
        &mut self,
        device: &mut dyn BlockDevice,
    ) -> Result<Option<MapAndTables>, DeviceError> {
        let super_block = self.super_block.clone();
        let mut map_blocks = Vec::new();
        let mut addresses = Vec::new();
        let mut block = super_block.map_head;
        let capacity = fixed_entries_per_block(self.geometry.fs_block_size_bytes, 8);
        for index in 0..super_block.map_block_count {
            if !self.in_range(block) || map_blocks.contains(&block) {
                let problem =
                    format!("map block {index} points at block {block}, out of range or a loop");
                self.find(Structure::CheckpointMap, Some(block), problem, false);
                return Ok(None);
            }
            let buffer = read_fs_blocks(device, &self.geometry, &[block])?.remove(0);
            let is_last = index + 1 == super_block.map_block_count;
            match open_metadata_block(&buffer, MetadataKind::Map, super_block.commit_sequence)
                .and_then(|header| check_map_header(&header, index, capacity, is_last))
            {
                Ok(header) => {
                    let entries = (0..header.entry_count as usize)
                        .map(|slot| read_u64(&buffer, METADATA_HEADER_BYTES + 8 * slot));
                    addresses.extend(entries);
                    map_blocks.push(block);
                    block = header.next_block;
                }
                Err(problem) => {
                    self.find(Structure::CheckpointMap, Some(block), problem, false);
                    return Ok(None);
                }
            }
        }
        let expected = super_block.name_table_block_count
            + super_block.inode_table_block_count
            + super_block.free_list_block_count
            + super_block.shared_table_block_count
            + super_block.log_region_block_count;
        let problem = if addresses.len() as u64 != expected {
            Some(format!(
                "map lists {} table blocks, the super block says {expected}",
                addresses.len()
            ))
        } else {
            addresses
                .iter()
                .find(|&&address| !self.in_range(address))
                .map(|bad| format!("map lists block {bad}, outside the file system"))
        };
        if let Some(problem) = problem {
            self.find(
                Structure::CheckpointMap,
                Some(super_block.map_head),
                problem,
                false,
            );
            return Ok(None);
        }
        Ok(Some((map_blocks, addresses)))
    }

    pub(super) fn load_tables(
        &mut self,
        device: &mut dyn BlockDevice,
        addresses: &[u64],
    ) -> Result<(), DeviceError> {
        let name_count = self.super_block.name_table_block_count as usize;
        let inode_count = self.super_block.inode_table_block_count as usize;
        let free_count = self.super_block.free_list_block_count as usize;
        let kinds: Vec<(MetadataKind, u64)> = (0..addresses.len())
            .map(|position| {
                if position < name_count {
                    (MetadataKind::NameTable, position as u64)
                } else if position < name_count + inode_count {
                    (MetadataKind::InodeTable, (position - name_count) as u64)
                } else if position < name_count + inode_count + free_count {
                    (
                        MetadataKind::FreeList,
                        (position - name_count - inode_count) as u64,
                    )
                } else {
                    (
                        MetadataKind::SharedTable,
                        (position - name_count - inode_count - free_count) as u64,
                    )
                }
            })
            .collect();
        for (chunk_index, chunk) in addresses.chunks(TABLE_READ_BATCH_BLOCKS).enumerate() {
            let buffers = read_fs_blocks(device, &self.geometry, chunk)?;
            for (offset, (buffer, &block)) in buffers.iter().zip(chunk).enumerate() {
                let (kind, index) = kinds[chunk_index * TABLE_READ_BATCH_BLOCKS + offset];
                self.load_table_block(buffer, block, kind, index);
            }
        }
        Ok(())
    }

    fn load_table_block(&mut self, buffer: &[u8], block: u64, kind: MetadataKind, index: u64) {
        let structure = structure_of(kind);
        let header = match open_metadata_block(buffer, kind, self.super_block.commit_sequence) {
            Ok(header) if header.owner == index && header.next_block == 0 => header,
            Ok(header) => {
                let problem = format!(
                    "header names index {} / next {}, expected index {index} / next 0",
                    header.owner, header.next_block
                );
                self.table_block_lost(structure, block, problem);
                return;
            }
            Err(problem) => {
                self.table_block_lost(structure, block, problem);
                return;
            }
        };
        let payload =
            &buffer[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + header.payload_bytes as usize];
        let outcome = match kind {
            MetadataKind::NameTable => self.parse_names(payload, header.entry_count, block),
            MetadataKind::InodeTable => self.parse_inodes(payload, header.entry_count, block),
            MetadataKind::SharedTable => self.parse_shared_extents(payload, header.entry_count),
            _ => self.parse_free_extents(payload, header.entry_count),
        };
        if let Err(problem) = outcome {
            self.table_block_lost(structure, block, problem);
        }
    }

    /// A table block that cannot be used: a free list block costs the free list (rebuilt
    /// by repair from the blocks in use); a name table block costs its files' names
    /// (they become orphans); an inode table block costs its files (their names dangle).
    fn table_block_lost(&mut self, structure: Structure, block: u64, problem: String) {
        if structure == Structure::SharedTable {
            self.shared_table_lost(block, problem);
            return;
        }
        let consequence = match structure {
            Structure::FreeList => {
                self.free_list_complete = false;
                "the free list is rebuilt from the blocks in use by `flashpipe fsck --repair`"
            }
            Structure::NameTable => {
                self.files_complete = false;
                self.lost_name_table_blocks.push(block);
                "the names it holds are lost; `flashpipe fsck --repair` keeps their files as lost+found.<inode>"
            }
            _ => {
                self.files_complete = false;
                self.lost_inode_table_blocks.push(block);
                "the files it describes are lost; `flashpipe fsck --repair` drops their names"
            }
        };
        self.find(
            structure,
            Some(block),
            format!("{problem}: {consequence}"),
            true,
        );
    }

    fn parse_names(&mut self, payload: &[u8], entry_count: u32, block: u64) -> Result<(), String> {
        let mut offset = 0;
        for entry in 0..entry_count {
            if offset + NAME_ENTRY_HEADER_BYTES > payload.len() {
                return Err(format!("entry {entry} runs past the payload"));
            }
            let inode_number = read_u64(payload, offset);
            let length = u16::from_le_bytes([payload[offset + 8], payload[offset + 9]]) as usize;
            let start = offset + NAME_ENTRY_HEADER_BYTES;
            let Some(bytes) = payload.get(start..start + length) else {
                return Err(format!(
                    "entry {entry}: name of {length} bytes runs past the payload"
                ));
            };
            let name = std::str::from_utf8(bytes)
                .map_err(|_| format!("entry {entry}: name is not UTF-8"))?;
            if let Some(reason) = name_problem(name) {
                return Err(format!("entry {entry}: bad name {name:?}: {reason}"));
            }
            self.name_entries.push(NameEntry {
                inode_number,
                name: name.into(),
                block,
            });
            offset = start + length;
        }
        (offset == payload.len())
            .then_some(())
            .ok_or_else(|| "entries do not fill the payload exactly".to_string())
    }

    fn parse_inodes(&mut self, payload: &[u8], entry_count: u32, block: u64) -> Result<(), String> {
        let mut offset = 0;
        for entry in 0..entry_count {
            let Some(header) = payload.get(offset..offset + INODE_RECORD_HEADER_BYTES) else {
                return Err(format!("record {entry} runs past the payload"));
            };
            let direct_count = read_u32(header, 32) as usize;
            let entry_bytes = pointer_entry_bytes(self.super_block.format_version);
            let end = offset
                + inode_record_header_bytes(read_u32(header, ATTRIBUTE_FLAGS_OFFSET))
                + entry_bytes * direct_count.min(DIRECT_POINTER_COUNT + 1);
            let Some(record) = payload.get(offset..end) else {
                return Err(format!("record {entry} runs past the payload"));
            };
            self.parse_inode_record(record, entry, block)?;
            offset = end;
        }
        (offset == payload.len())
            .then_some(())
            .ok_or_else(|| "records do not fill the payload exactly".to_string())
    }

    fn parse_inode_record(&mut self, record: &[u8], entry: u32, block: u64) -> Result<(), String> {
        let inode_number = read_u64(record, 0);
        let size_bytes = read_u64(record, 8);
        let indirect_head = read_u64(record, 16);
        let direct_count = read_u32(record, 32) as usize;
        let pointer_count = size_bytes.div_ceil(self.geometry.block_bytes());
        let context = format!("record {entry} (inode {inode_number})");
        if inode_number == 0 || inode_number >= self.super_block.next_inode_number {
            return Err(format!(
                "{context}: inode number outside 1..{}",
                self.super_block.next_inode_number
            ));
        }
        if size_bytes > self.geometry.capacity_bytes() {
            return Err(format!(
                "{context}: size {size_bytes} exceeds the file system"
            ));
        }
        if direct_count as u64 != pointer_count.min(DIRECT_POINTER_COUNT as u64) {
            return Err(format!(
                "{context}: {direct_count} direct pointers for a size of {size_bytes} bytes"
            ));
        }
        let version = self.super_block.format_version;
        let attributes = FileAttributes::decode(record, version)
            .map_err(|problem| format!("{context}: {problem}"))?;
        let header_bytes = inode_record_header_bytes(attributes.flags());
        let needs_chain = pointer_count > DIRECT_POINTER_COUNT as u64;
        if needs_chain != (indirect_head != 0) || (needs_chain && !self.in_range(indirect_head)) {
            return Err(format!(
                "{context}: indirect head {indirect_head} for {pointer_count} pointers"
            ));
        }
        let entry_bytes = pointer_entry_bytes(version);
        let mut pointers = Vec::with_capacity(direct_count);
        let mut checksums = Vec::with_capacity(direct_count);
        for slot in 0..direct_count {
            let offset = header_bytes + entry_bytes * slot;
            let (pointer, checksum) = read_pointer_entry(record, offset, version)
                .map_err(|problem| format!("{context}: direct pointer {slot}: {problem}"))?;
            if pointer != 0 && !self.in_range(pointer) {
                return Err(format!(
                    "{context}: direct pointer {slot} = {pointer} out of range"
                ));
            }
            pointers.push(pointer);
            checksums.push(checksum);
        }
        let file = LoadedFile {
            name: None,
            size_bytes,
            modified_clock_ns: read_u64(record, 24),
            pointers,
            checksums,
            indirect_head,
            indirect_chain: Vec::new(),
            attributes,
            listed_chain: None,
        };
        if self.files.insert(inode_number, file).is_some() {
            let problem = format!("inode {inode_number} has two records");
            self.find(Structure::InodeTable, Some(block), problem, false);
        }
        Ok(())
    }

    fn parse_free_extents(&mut self, payload: &[u8], entry_count: u32) -> Result<(), String> {
        if payload.len() != entry_count as usize * FREE_EXTENT_BYTES {
            return Err(format!(
                "{entry_count} extents in {} payload bytes",
                payload.len()
            ));
        }
        for entry in payload.chunks_exact(FREE_EXTENT_BYTES) {
            self.free_extents
                .push((read_u64(entry, 0), read_u64(entry, 8)));
        }
        Ok(())
    }

    /// Attaches names to inodes; reports duplicates, dangling names and orphans.
    pub(super) fn resolve_names(&mut self) {
        let mut seen: HashMap<Box<str>, u64> = HashMap::with_capacity(self.name_entries.len());
        for entry in std::mem::take(&mut self.name_entries) {
            if seen
                .insert(entry.name.clone(), entry.inode_number)
                .is_some()
            {
                let problem = format!("name {:?} appears twice", entry.name);
                self.find(Structure::NameTable, Some(entry.block), problem, false);
                continue;
            }
            match self.files.get_mut(&entry.inode_number) {
                None => {
                    let cause = if self.lost_inode_table_blocks.is_empty() {
                        ""
                    } else {
                        " (lost with a damaged inode table block)"
                    };
                    let problem = format!(
                        "name {:?} points at inode {}, which has no record{cause}",
                        entry.name, entry.inode_number
                    );
                    self.find(Structure::NameTable, Some(entry.block), problem, true);
                    self.dangling_names.push(DanglingName {
                        name: entry.name,
                        inode_number: entry.inode_number,
                        block: entry.block,
                    });
                }
                Some(file) if file.name.is_some() => {
                    let problem = format!(
                        "inode {} has a second name {:?}",
                        entry.inode_number, entry.name
                    );
                    self.find(Structure::NameTable, Some(entry.block), problem, false);
                }
                Some(file) => file.name = Some(entry.name),
            }
        }
        let orphans: Vec<u64> = self
            .files
            .iter()
            .filter(|(_, file)| file.name.is_none())
            .map(|(&inode, _)| inode)
            .collect();
        let cause = if self.lost_name_table_blocks.is_empty() {
            ""
        } else {
            " (its name may have been in a damaged name table block)"
        };
        for inode_number in orphans {
            let problem = format!("inode {inode_number} has no name (orphan){cause}");
            self.find(Structure::InodeTable, None, problem, true);
        }
    }
}

fn check_map_header(
    header: &MetadataHeader,
    index: u64,
    capacity: usize,
    is_last: bool,
) -> Result<MetadataHeader, String> {
    if header.owner != index {
        return Err(format!(
            "map block says index {}, expected {index}",
            header.owner
        ));
    }
    if header.entry_count as usize > capacity
        || u64::from(header.payload_bytes) != 8 * u64::from(header.entry_count)
    {
        return Err(format!(
            "{} entries in {} payload bytes",
            header.entry_count, header.payload_bytes
        ));
    }
    if is_last != (header.next_block == 0) {
        return Err(format!(
            "next block {} at chain index {index}",
            header.next_block
        ));
    }
    Ok(header.clone())
}

fn structure_of(kind: MetadataKind) -> Structure {
    match kind {
        MetadataKind::Map => Structure::CheckpointMap,
        MetadataKind::NameTable => Structure::NameTable,
        MetadataKind::InodeTable => Structure::InodeTable,
        MetadataKind::FreeList => Structure::FreeList,
        MetadataKind::Indirect => Structure::IndirectBlock,
        MetadataKind::Log => Structure::Log,
        MetadataKind::SharedTable => Structure::SharedTable,
    }
}
