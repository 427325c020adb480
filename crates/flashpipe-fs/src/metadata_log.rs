//! The metadata log of format version 3 (docs/format.md, "Metadata log"): one record per
//! commit since the last checkpoint, written into the checkpoint's log region. A record
//! holds the files the commit created or changed (each as its inode record and name), the
//! inode numbers it removed, the block extents it took from and gave back to the free
//! list, and the totals after it.
//!
//! Pure encoding and decoding over byte slices, no I/O: `commit.rs` writes records,
//! `image.rs` reads and replays them. Every block is a metadata block (kind `LOGR`) whose
//! header carries the record's commit sequence and the block's index in the region (and,
//! in version 9 of the flash-aware layout, its checkpoint's sequence as the region tag).

use crate::attributes::{
    inode_record_header_bytes, FileAttributes, ATTRIBUTE_FIELDS_OFFSET, ATTRIBUTE_FLAGS_OFFSET,
};
use crate::layout::{
    open_metadata_block, read_pointer_entry, read_u32, read_u64, seal_metadata_block,
    write_pointer_entry, write_u32, write_u64, MetadataHeader, MetadataKind, DIRECT_POINTER_COUNT,
    FORMAT_VERSION, METADATA_HEADER_BYTES, POINTER_ENTRY_BYTES,
};

/// Tag of the entry that starts a record (the first entry of its first block).
pub const LOG_ENTRY_RECORD_START: u8 = 1;
/// Tag of a file entry (a created or changed file: inode record and name).
pub const LOG_ENTRY_FILE: u8 = 2;
/// Tag of a removed inode.
pub const LOG_ENTRY_REMOVED: u8 = 3;
/// Tag of an extent taken from the free list by the commit.
pub const LOG_ENTRY_ALLOCATED: u8 = 4;
/// Tag of an extent given back to the free list by the commit.
pub const LOG_ENTRY_FREED: u8 = 5;
/// Tag of a shared-count entry (version 5): the reference count of an extent of blocks
/// after the commit.
pub const LOG_ENTRY_SHARED: u8 = 6;
/// Tag of the record start of version 5, which also counts shared-count entries.
pub const LOG_ENTRY_SHARED_RECORD_START: u8 = 7;
/// Bytes of the record start entry.
pub const LOG_RECORD_START_BYTES: usize = 48;
/// Bytes of the version-5 record start entry (tag 7).
pub const LOG_SHARED_RECORD_START_BYTES: usize = 56;
/// Bytes of a file entry before its inode record.
pub const LOG_FILE_ENTRY_HEADER_BYTES: usize = 4;
/// Bytes of a removed-inode entry.
pub const LOG_REMOVED_ENTRY_BYTES: usize = 16;
/// Bytes of an allocated or freed extent entry.
pub const LOG_EXTENT_ENTRY_BYTES: usize = 24;
/// Tag of a chain entry (version 8, the flash-aware layout): the blocks of a file's
/// indirect chain in order, for a chain whose blocks were rewritten one by one (their
/// `next_block` fields are then stale).
pub const LOG_ENTRY_CHAIN: u8 = 8;
/// Bytes of a chain entry before its block addresses.
pub const LOG_CHAIN_ENTRY_HEADER_BYTES: usize = 16;
/// Most blocks a chain entry lists (longer chains are rewritten whole, linked).
pub const MAX_LOGGED_CHAIN_BLOCKS: usize = 256;
/// Bytes of the largest chain entry.
pub const LOG_LARGEST_CHAIN_ENTRY_BYTES: usize =
    LOG_CHAIN_ENTRY_HEADER_BYTES + 8 * MAX_LOGGED_CHAIN_BLOCKS;

/// One created or changed file as a log record holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Its inode number.
    pub inode_number: u64,
    /// Its name (after the commit).
    pub name: Box<str>,
    /// Its length.
    pub size_bytes: u64,
    /// First block of its indirect chain, 0 if none.
    pub indirect_head: u64,
    /// Device clock at its last change.
    pub modified_clock_ns: u64,
    /// Its first `min(pointer_count, 12)` block pointers (0: a hole).
    pub direct_pointers: Vec<u64>,
    /// The data checksum beside each direct pointer (`None`: hole or unchecked).
    pub direct_checksums: Vec<Option<u32>>,
}

/// One commit's changes since the commit before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRecord {
    /// The commit this record belongs to.
    pub commit_sequence: u64,
    /// The inode number the next created file gets, after the commit.
    pub next_inode_number: u64,
    /// Files after the commit.
    pub file_count: u64,
    /// Free blocks after the commit.
    pub free_block_count: u64,
    /// Inodes the commit removed (deleted files).
    pub removed: Vec<u64>,
    /// Files the commit created or changed, whole.
    pub files: Vec<LogFile>,
    /// Extents `(first_block, block_count)` the commit took from the free list.
    pub allocated: Vec<(u64, u64)>,
    /// Extents the commit gave back to the free list.
    pub freed: Vec<(u64, u64)>,
    /// Version 5: extents `(first_block, block_count, reference_count)` whose counts the
    /// commit changed, with their counts after it (1: no longer shared or freed); `None`
    /// for a record of version 3 or 4 (its start entry is tag 1).
    pub shared: Option<Vec<(u64, u64, u32)>>,
    /// Version 8 (flash-aware layout): `(inode number, chain blocks in order)` of files
    /// of this record whose indirect chain is not linked by its `next_block` fields.
    pub chains: Vec<(u64, Vec<u64>)>,
}

/// Writes the inode record (docs/format.md, "Inode table") of a file to `entry`: the
/// version-5 layout when `attributes` is [`FileAttributes::NONE`], else with the
/// attribute fields of version 6 before the direct pointers.
pub fn encode_inode_record(
    entry: &mut Vec<u8>,
    inode_number: u64,
    size_bytes: u64,
    indirect_head: u64,
    modified_clock_ns: u64,
    attributes: &FileAttributes,
    direct: (&[u64], &[Option<u32>]),
) {
    let (pointers, checksums) = direct;
    assert_eq!(pointers.len(), checksums.len());
    assert!(pointers.len() <= DIRECT_POINTER_COUNT);
    entry.extend_from_slice(&inode_number.to_le_bytes());
    entry.extend_from_slice(&size_bytes.to_le_bytes());
    entry.extend_from_slice(&indirect_head.to_le_bytes());
    entry.extend_from_slice(&modified_clock_ns.to_le_bytes());
    entry.extend_from_slice(&(pointers.len() as u32).to_le_bytes());
    entry.extend_from_slice(&attributes.flags().to_le_bytes());
    attributes.append_fields(entry);
    let mut pointer_entry = [0u8; POINTER_ENTRY_BYTES];
    for (&pointer, &checksum) in pointers.iter().zip(checksums) {
        write_pointer_entry(&mut pointer_entry, 0, pointer, checksum);
        entry.extend_from_slice(&pointer_entry);
    }
}

impl LogRecord {
    /// The record's entries, each as its bytes, record start first (its block count
    /// field still zero); `attributes` is empty (nothing set) or one per file.
    fn entries(&self, attributes: &[FileAttributes]) -> Vec<Vec<u8>> {
        assert!(
            attributes.is_empty() || attributes.len() == self.files.len(),
            "attributes for every file of the record or for none"
        );
        let mut entries = Vec::with_capacity(
            1 + self.removed.len() + self.files.len() + self.allocated.len() + self.freed.len(),
        );
        let (start_tag, start_bytes) = match &self.shared {
            None => (LOG_ENTRY_RECORD_START, LOG_RECORD_START_BYTES),
            Some(_) => (LOG_ENTRY_SHARED_RECORD_START, LOG_SHARED_RECORD_START_BYTES),
        };
        let mut start = vec![0u8; start_bytes];
        start[0] = start_tag;
        if let Some(shared) = &self.shared {
            write_u32(&mut start, 48, shared.len() as u32);
            write_u32(&mut start, 52, self.chains.len() as u32);
        }
        write_u32(&mut start, 8, self.removed.len() as u32);
        write_u32(&mut start, 12, self.files.len() as u32);
        write_u32(&mut start, 16, self.allocated.len() as u32);
        write_u32(&mut start, 20, self.freed.len() as u32);
        write_u64(&mut start, 24, self.next_inode_number);
        write_u64(&mut start, 32, self.file_count);
        write_u64(&mut start, 40, self.free_block_count);
        entries.push(start);
        for &inode_number in &self.removed {
            let mut entry = vec![0u8; LOG_REMOVED_ENTRY_BYTES];
            entry[0] = LOG_ENTRY_REMOVED;
            write_u64(&mut entry, 8, inode_number);
            entries.push(entry);
        }
        for (index, file) in self.files.iter().enumerate() {
            let mut entry = vec![LOG_ENTRY_FILE, 0];
            entry.extend_from_slice(&(file.name.len() as u16).to_le_bytes());
            encode_inode_record(
                &mut entry,
                file.inode_number,
                file.size_bytes,
                file.indirect_head,
                file.modified_clock_ns,
                attributes.get(index).unwrap_or(&FileAttributes::NONE),
                (&file.direct_pointers, &file.direct_checksums),
            );
            entry.extend_from_slice(file.name.as_bytes());
            entries.push(entry);
        }
        for (tag, extents) in [
            (LOG_ENTRY_ALLOCATED, &self.allocated),
            (LOG_ENTRY_FREED, &self.freed),
        ] {
            for &(first_block, block_count) in extents {
                let mut entry = vec![0u8; LOG_EXTENT_ENTRY_BYTES];
                entry[0] = tag;
                write_u64(&mut entry, 8, first_block);
                write_u64(&mut entry, 16, block_count);
                entries.push(entry);
            }
        }
        for &(first_block, block_count, reference_count) in self.shared.iter().flatten() {
            let mut entry = vec![0u8; LOG_EXTENT_ENTRY_BYTES];
            entry[0] = LOG_ENTRY_SHARED;
            write_u32(&mut entry, 4, reference_count);
            write_u64(&mut entry, 8, first_block);
            write_u64(&mut entry, 16, block_count);
            entries.push(entry);
        }
        for (inode_number, blocks) in &self.chains {
            assert!(self.shared.is_some() && blocks.len() <= MAX_LOGGED_CHAIN_BLOCKS);
            let mut entry = vec![0u8; LOG_CHAIN_ENTRY_HEADER_BYTES];
            entry[0] = LOG_ENTRY_CHAIN;
            write_u32(&mut entry, 4, blocks.len() as u32);
            write_u64(&mut entry, 8, *inode_number);
            for block in blocks {
                entry.extend_from_slice(&block.to_le_bytes());
            }
            entries.push(entry);
        }
        entries
    }

    /// Blocks of `block_size_bytes` the record fills (entries never straddle blocks).
    pub fn block_count(&self, block_size_bytes: u32) -> u64 {
        self.block_count_with_attributes(block_size_bytes, &[])
    }

    /// [`LogRecord::block_count`] of the record whose files carry `attributes` (one per
    /// file, or none).
    pub fn block_count_with_attributes(
        &self,
        block_size_bytes: u32,
        attributes: &[FileAttributes],
    ) -> u64 {
        pack_entries(&self.entries(attributes), block_size_bytes as usize).len() as u64
    }

    /// The record as sealed `LOGR` blocks, the first at index `first_index` of the log
    /// region; its files carry no attributes.
    pub fn encode(&self, block_size_bytes: u32, first_index: u64) -> Vec<Vec<u8>> {
        self.encode_with_attributes(block_size_bytes, first_index, &[])
    }

    /// [`LogRecord::encode`] with the attributes of its files (one per file in order, or
    /// none for "nothing set"): version-6 inode records in the file entries of the files
    /// that have some.
    pub fn encode_with_attributes(
        &self,
        block_size_bytes: u32,
        first_index: u64,
        attributes: &[FileAttributes],
    ) -> Vec<Vec<u8>> {
        self.encode_in_region(block_size_bytes, first_index, 0, attributes)
    }

    /// [`LogRecord::encode_with_attributes`] with `region_tag` in every block header's
    /// `next_block` field: 0 before version 9; in version 9 (the flash-aware layout) the
    /// sequence of the checkpoint whose region the record is in, so that a mount reading
    /// the region forward takes no block of any other region ([`open_region_log_block`]).
    pub fn encode_in_region(
        &self,
        block_size_bytes: u32,
        first_index: u64,
        region_tag: u64,
        attributes: &[FileAttributes],
    ) -> Vec<Vec<u8>> {
        let block_size = block_size_bytes as usize;
        let mut entries = self.entries(attributes);
        let block_count = pack_entries(&entries, block_size).len();
        write_u32(&mut entries[0], 4, block_count as u32);
        pack_entries(&entries, block_size)
            .into_iter()
            .enumerate()
            .map(|(index, range)| {
                let mut block = vec![0u8; block_size];
                let mut payload_bytes = 0;
                for entry in &entries[range.clone()] {
                    let start = METADATA_HEADER_BYTES + payload_bytes;
                    block[start..start + entry.len()].copy_from_slice(entry);
                    payload_bytes += entry.len();
                }
                let header = MetadataHeader {
                    kind: MetadataKind::Log,
                    commit_sequence: self.commit_sequence,
                    next_block: region_tag,
                    entry_count: range.len() as u32,
                    payload_bytes: payload_bytes as u32,
                    owner: first_index + index as u64,
                };
                seal_metadata_block(&mut block, &header);
                block
            })
            .collect()
    }
}

/// Groups entries into blocks in order: the entry index range of each block.
fn pack_entries(entries: &[Vec<u8>], block_size: usize) -> Vec<std::ops::Range<usize>> {
    let capacity = block_size - METADATA_HEADER_BYTES;
    let mut blocks = Vec::new();
    let mut start = 0;
    let mut used = 0;
    for (index, entry) in entries.iter().enumerate() {
        assert!(entry.len() <= capacity, "log entry larger than a block");
        if used + entry.len() > capacity {
            blocks.push(start..index);
            start = index;
            used = 0;
        }
        used += entry.len();
    }
    blocks.push(start..entries.len());
    blocks
}

/// One log block opened: its header, checked for kind, checksum, sequence and index.
pub fn open_log_block(
    block: &[u8],
    index: u64,
    newest_sequence: u64,
) -> Result<MetadataHeader, String> {
    open_region_log_block(block, index, newest_sequence, 0)
}

/// [`open_log_block`] for a block whose header must carry `region_tag` in its
/// `next_block` field (version 9: its checkpoint's sequence; 0 before).
pub fn open_region_log_block(
    block: &[u8],
    index: u64,
    newest_sequence: u64,
    region_tag: u64,
) -> Result<MetadataHeader, String> {
    let header = open_metadata_block(block, MetadataKind::Log, newest_sequence)?;
    if header.owner != index || header.next_block != region_tag {
        return Err(format!(
            "header names region index {} / next {}, expected index {index} / next {region_tag}",
            header.owner, header.next_block
        ));
    }
    Ok(header)
}

/// Decodes a record from its blocks (each already opened with [`open_log_block`], all
/// of one commit sequence, in region order). Checks the entry layout and counts, not
/// what the entries mean (the loader does). The attributes of its files are dropped
/// ([`decode_record_with_attributes`] keeps them).
pub fn decode_record(blocks: &[&[u8]]) -> Result<LogRecord, String> {
    decode_record_with_attributes(blocks).map(|(record, _)| record)
}

/// [`decode_record`] with the attributes of the record's files, one per file in order
/// ([`FileAttributes::NONE`] for a version-5 inode record).
pub fn decode_record_with_attributes(
    blocks: &[&[u8]],
) -> Result<(LogRecord, Vec<FileAttributes>), String> {
    let mut record = LogRecord::default();
    let mut attributes = Vec::new();
    let mut counts = None;
    for (position, block) in blocks.iter().enumerate() {
        let entry_count = read_u32(block, 24);
        let payload_bytes = read_u32(block, 28) as usize;
        record.commit_sequence = read_u64(block, 8);
        let payload = &block[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + payload_bytes];
        let mut offset = 0;
        for entry in 0..entry_count {
            let context = format!("block {position} of the record, entry {entry}");
            let first = position == 0 && entry == 0;
            let mut target = (&mut record, &mut attributes);
            offset += decode_entry(&payload[offset..], first, &mut target, &mut counts)
                .map_err(|problem| format!("{context}: {problem}"))?;
        }
        if offset != payload.len() {
            return Err(format!(
                "block {position} of the record: entries do not fill the payload exactly"
            ));
        }
    }
    let Some((block_count, removed, files, allocated, freed, shared, chains)) = counts else {
        return Err("the record has no start entry".to_string());
    };
    if record.chains.len() != chains {
        return Err(format!(
            "the start entry announces {chains} chain entries; found {}",
            record.chains.len()
        ));
    }
    let shared_found = record.shared.as_ref().map(Vec::len);
    if shared_found != shared {
        return Err(format!(
            "the start entry announces {} shared-count entries; found {}",
            shared.map_or("no".to_string(), |count| count.to_string()),
            shared_found.map_or("none".to_string(), |count| count.to_string())
        ));
    }
    let found = (
        blocks.len(),
        record.removed.len(),
        record.files.len(),
        record.allocated.len(),
        record.freed.len(),
    );
    if found != (block_count, removed, files, allocated, freed) {
        return Err(format!(
            "the start entry announces {block_count} blocks, {removed} removed, {files} files, \
             {allocated} allocated and {freed} freed extents; found {} blocks, {} removed, {} \
             files, {} allocated and {} freed extents",
            found.0, found.1, found.2, found.3, found.4
        ));
    }
    assert_eq!(attributes.len(), record.files.len());
    Ok((record, attributes))
}

/// Counts a record start announces: blocks, removed, files, allocated, freed, (tag 7)
/// shared-count entries and (tag 7, version 8) chain entries.
type AnnouncedCounts = (usize, usize, usize, usize, usize, Option<usize>, usize);

/// Decodes one entry at the start of `bytes` into a record and the attributes of its
/// files; returns its length.
fn decode_entry(
    bytes: &[u8],
    first: bool,
    target: &mut (&mut LogRecord, &mut Vec<FileAttributes>),
    counts: &mut Option<AnnouncedCounts>,
) -> Result<usize, String> {
    let (record, attributes) = target;
    let tag = *bytes.first().ok_or("runs past the payload")?;
    let is_start = tag == LOG_ENTRY_RECORD_START || tag == LOG_ENTRY_SHARED_RECORD_START;
    if first != is_start {
        return Err(format!(
            "tag {tag}: a record starts with its start entry (tag 1 or 7), and only there"
        ));
    }
    let fixed = |length: usize| -> Result<&[u8], String> {
        let entry = bytes.get(..length).ok_or("runs past the payload")?;
        let reserved_end = if is_start || tag == LOG_ENTRY_SHARED {
            4
        } else {
            8
        };
        if entry[1..reserved_end].iter().any(|&byte| byte != 0) {
            return Err("reserved bytes are not zero".to_string());
        }
        Ok(entry)
    };
    match tag {
        LOG_ENTRY_RECORD_START => {
            let entry = fixed(LOG_RECORD_START_BYTES)?;
            let field = |offset| read_u32(entry, offset) as usize;
            *counts = Some((field(4), field(8), field(12), field(16), field(20), None, 0));
            record.next_inode_number = read_u64(entry, 24);
            record.file_count = read_u64(entry, 32);
            record.free_block_count = read_u64(entry, 40);
            Ok(LOG_RECORD_START_BYTES)
        }
        LOG_ENTRY_SHARED_RECORD_START => {
            let entry = fixed(LOG_SHARED_RECORD_START_BYTES)?;
            let field = |offset| read_u32(entry, offset) as usize;
            *counts = Some((
                field(4),
                field(8),
                field(12),
                field(16),
                field(20),
                Some(field(48)),
                field(52),
            ));
            record.next_inode_number = read_u64(entry, 24);
            record.file_count = read_u64(entry, 32);
            record.free_block_count = read_u64(entry, 40);
            record.shared = Some(Vec::new());
            Ok(LOG_SHARED_RECORD_START_BYTES)
        }
        LOG_ENTRY_SHARED => {
            let entry = fixed(LOG_EXTENT_ENTRY_BYTES)?;
            let Some(shared) = record.shared.as_mut() else {
                return Err(
                    "a shared-count entry (tag 6) in a record whose start (tag 1) has none"
                        .to_string(),
                );
            };
            let reference_count = read_u32(entry, 4);
            let block_count = read_u64(entry, 16);
            if reference_count == 0 || block_count == 0 {
                return Err(format!(
                    "shared-count entry of {block_count} blocks with count {reference_count} (both must be at least 1)"
                ));
            }
            shared.push((read_u64(entry, 8), block_count, reference_count));
            Ok(LOG_EXTENT_ENTRY_BYTES)
        }
        LOG_ENTRY_REMOVED => {
            let entry = fixed(LOG_REMOVED_ENTRY_BYTES)?;
            record.removed.push(read_u64(entry, 8));
            Ok(LOG_REMOVED_ENTRY_BYTES)
        }
        LOG_ENTRY_ALLOCATED | LOG_ENTRY_FREED => {
            let entry = fixed(LOG_EXTENT_ENTRY_BYTES)?;
            let extent = (read_u64(entry, 8), read_u64(entry, 16));
            if tag == LOG_ENTRY_ALLOCATED {
                record.allocated.push(extent);
            } else {
                record.freed.push(extent);
            }
            Ok(LOG_EXTENT_ENTRY_BYTES)
        }
        LOG_ENTRY_CHAIN => {
            let (chain, length) = decode_chain_entry(bytes)?;
            record.chains.push(chain);
            Ok(length)
        }
        LOG_ENTRY_FILE => {
            let (file, file_attributes, length) = decode_file_entry(bytes)?;
            record.files.push(file);
            attributes.push(file_attributes);
            Ok(length)
        }
        other => Err(format!("unknown entry tag {other}")),
    }
}

/// Decodes a chain entry: tag, 3 reserved zero bytes, block count (1 to
/// [`MAX_LOGGED_CHAIN_BLOCKS`]), inode number, the blocks.
fn decode_chain_entry(bytes: &[u8]) -> Result<((u64, Vec<u64>), usize), String> {
    let header = bytes
        .get(..LOG_CHAIN_ENTRY_HEADER_BYTES)
        .ok_or("runs past the payload")?;
    if header[1..4].iter().any(|&byte| byte != 0) {
        return Err("reserved bytes are not zero".to_string());
    }
    let count = read_u32(header, 4) as usize;
    if !(1..=MAX_LOGGED_CHAIN_BLOCKS).contains(&count) {
        return Err(format!(
            "a chain entry of {count} blocks (1 to {MAX_LOGGED_CHAIN_BLOCKS})"
        ));
    }
    let length = LOG_CHAIN_ENTRY_HEADER_BYTES + 8 * count;
    let entry = bytes.get(..length).ok_or("runs past the payload")?;
    let blocks = (0..count)
        .map(|index| read_u64(entry, LOG_CHAIN_ENTRY_HEADER_BYTES + 8 * index))
        .collect();
    Ok(((read_u64(header, 8), blocks), length))
}

/// Decodes a file entry: tag, reserved byte, name length, inode record (its attributes
/// checked as version 6 reads them; replay refuses attributes in an older log), name.
fn decode_file_entry(bytes: &[u8]) -> Result<(LogFile, FileAttributes, usize), String> {
    let prefix = bytes
        .get(..LOG_FILE_ENTRY_HEADER_BYTES + ATTRIBUTE_FIELDS_OFFSET)
        .ok_or("runs past the payload")?;
    if prefix[1] != 0 {
        return Err("reserved byte is not zero".to_string());
    }
    let name_length = u16::from_le_bytes([prefix[2], prefix[3]]) as usize;
    let direct_count = read_u32(prefix, LOG_FILE_ENTRY_HEADER_BYTES + 32) as usize;
    if direct_count > DIRECT_POINTER_COUNT {
        return Err(format!("{direct_count} direct pointers"));
    }
    let flags = read_u32(prefix, LOG_FILE_ENTRY_HEADER_BYTES + ATTRIBUTE_FLAGS_OFFSET);
    let header_end = LOG_FILE_ENTRY_HEADER_BYTES + inode_record_header_bytes(flags);
    let header = bytes.get(..header_end).ok_or("runs past the payload")?;
    let record = &header[LOG_FILE_ENTRY_HEADER_BYTES..];
    let attributes = FileAttributes::decode(record, FORMAT_VERSION)
        .map_err(|problem| format!("inode {}: {problem}", read_u64(record, 0)))?;
    let pointers_end = header_end + POINTER_ENTRY_BYTES * direct_count;
    let end = pointers_end + name_length;
    let entry = bytes.get(..end).ok_or("runs past the payload")?;
    let mut direct_pointers = Vec::with_capacity(direct_count);
    let mut direct_checksums = Vec::with_capacity(direct_count);
    for slot in 0..direct_count {
        let offset = header_end + POINTER_ENTRY_BYTES * slot;
        let (pointer, checksum) = read_pointer_entry(entry, offset, 3)
            .map_err(|problem| format!("direct pointer {slot}: {problem}"))?;
        direct_pointers.push(pointer);
        direct_checksums.push(checksum);
    }
    let name = std::str::from_utf8(&entry[pointers_end..end])
        .map_err(|_| "the name is not UTF-8".to_string())?;
    let file = LogFile {
        inode_number: read_u64(record, 0),
        name: name.into(),
        size_bytes: read_u64(record, 8),
        indirect_head: read_u64(record, 16),
        modified_clock_ns: read_u64(record, 24),
        direct_pointers,
        direct_checksums,
    };
    Ok((file, attributes, end))
}

/// What a log block (possibly damaged, possibly of a damaged record) still tells: the
/// files its entries create or change `(inode number, name)` and the inodes they remove,
/// read entry by entry until the first one that does not parse. For reports only.
pub fn salvage_changes(block: &[u8]) -> (Vec<(u64, String)>, Vec<u64>) {
    let mut files = Vec::new();
    let mut removed = Vec::new();
    if read_u32(block, 0) != MetadataKind::Log.code() {
        return (files, removed);
    }
    let payload_bytes =
        (read_u32(block, 28) as usize).min(block.len().saturating_sub(METADATA_HEADER_BYTES));
    let payload = &block[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + payload_bytes];
    let mut record = LogRecord::default();
    let mut attributes = Vec::new();
    let mut counts = None;
    let mut offset = 0;
    while offset < payload.len() {
        let first = payload[offset] == LOG_ENTRY_RECORD_START
            || payload[offset] == LOG_ENTRY_SHARED_RECORD_START;
        let mut target = (&mut record, &mut attributes);
        match decode_entry(&payload[offset..], first, &mut target, &mut counts) {
            Ok(length) => offset += length,
            Err(_) => break,
        }
    }
    files.extend(
        record
            .files
            .into_iter()
            .map(|file| (file.inode_number, file.name.to_string())),
    );
    removed.extend(record.removed);
    (files, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_record() -> LogRecord {
        LogRecord {
            commit_sequence: 9,
            next_inode_number: 12,
            file_count: 4,
            free_block_count: 300,
            removed: vec![3],
            files: vec![LogFile {
                inode_number: 11,
                name: "new.bin".into(),
                size_bytes: 5000,
                indirect_head: 0,
                modified_clock_ns: 77,
                direct_pointers: vec![40, 0],
                direct_checksums: vec![Some(0xAABB_CCDD), None],
            }],
            allocated: vec![(40, 1)],
            freed: vec![(30, 2)],
            shared: None,
            chains: Vec::new(),
        }
    }

    #[test]
    fn a_version_5_record_carries_shared_counts() {
        let record = LogRecord {
            shared: Some(vec![(40, 3, 2), (50, 1, 1)]),
            ..sample_record()
        };
        let blocks = record.encode(4096, 0);
        assert_eq!(
            blocks[0][METADATA_HEADER_BYTES],
            LOG_ENTRY_SHARED_RECORD_START
        );
        assert_eq!(read_u32(&blocks[0], METADATA_HEADER_BYTES + 48), 2);
        let views: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
        assert_eq!(decode_record(&views), Ok(record.clone()));
        let empty = LogRecord {
            shared: Some(Vec::new()),
            ..sample_record()
        };
        let chained = LogRecord {
            shared: Some(Vec::new()),
            chains: vec![(11, vec![90, 41, 77])],
            ..sample_record()
        };
        let blocks = chained.encode(4096, 0);
        assert_eq!(read_u32(&blocks[0], METADATA_HEADER_BYTES + 52), 1);
        let views: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
        assert_eq!(decode_record(&views), Ok(chained));
        let blocks = empty.encode(4096, 0);
        let views: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
        assert_eq!(decode_record(&views), Ok(empty));
    }

    #[test]
    fn a_record_round_trips() {
        let record = sample_record();
        let blocks = record.encode(4096, 5);
        assert_eq!(blocks.len(), 1);
        let header = open_log_block(&blocks[0], 5, 9).unwrap();
        assert_eq!(header.entry_count, 5);
        let views: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
        assert_eq!(decode_record(&views), Ok(record));
        assert!(open_log_block(&blocks[0], 6, 9).is_err(), "wrong index");
        assert!(
            open_log_block(&blocks[0], 5, 8).is_err(),
            "newer than the super block"
        );
    }

    #[test]
    fn a_long_record_spans_blocks_and_counts_them() {
        let mut record = sample_record();
        record.removed = (1..=600).collect();
        let blocks = record.encode(4096, 0);
        assert_eq!(blocks.len() as u64, record.block_count(4096));
        assert_eq!(blocks.len(), 3);
        let views: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
        assert_eq!(decode_record(&views), Ok(record));
        assert!(
            decode_record(&views[..2]).is_err(),
            "a missing block is seen"
        );
        assert!(
            decode_record(&views[1..]).is_err(),
            "a missing start is seen"
        );
    }
}
