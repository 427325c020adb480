//! The on-disk format, byte for byte (docs/format.md): constants, the super block, and
//! the 40-byte header every other metadata block starts with, with their checksums.
//!
//! Everything here is pure encoding and decoding over byte slices; no I/O.

mod ring;

pub use ring::{
    RingRecordKind, FLASH_RESERVED_ERASE_BLOCKS, FLASH_TOTALS_OFFSET, MAX_PAGES_PER_ERASE_BLOCK,
    PAGES_PER_ERASE_BLOCK_OFFSET, RECORD_KIND_OFFSET, RESERVED_OFFSET_WITH_FLASH,
    RING_SEQUENCE_OFFSET,
};

/// ASCII magic at offset 0 of a super block.
pub const MAGIC: [u8; 8] = *b"FLASHPFS";
/// The format version this code writes (and the newest it reads): version 3 adds the
/// metadata log (docs/format.md, "Metadata log"), version 4 the store identity in the
/// super block, version 5 shared blocks, version 6 file attributes in the inode record
/// (`crate::attributes`).
pub const FORMAT_VERSION: u32 = 6;
/// The first format version with a metadata log (the super block's log fields at
/// offsets 112..136, `LOGR` blocks).
pub const FIRST_LOGGED_FORMAT_VERSION: u32 = 3;
/// The first format version whose super block holds the store identity (offsets
/// 136..152).
pub const FIRST_IDENTIFIED_FORMAT_VERSION: u32 = 4;
/// The first format version with shared blocks (the shared table, super block fields at
/// offsets 152..176, log entries of reference counts).
pub const FIRST_SHARED_FORMAT_VERSION: u32 = 5;
/// The format version of the flash-aware layout (docs/format.md, "Flash-aware layout"):
/// version 6's super block with the erase block size at offset 176, written as the
/// next page of a commit ring on raw flash pages. Only that layout writes it.
pub const FLASH_AWARE_FORMAT_VERSION: u32 = 7;
/// The format version the flash-aware layout writes since its log region (docs/format.md,
/// "Flash-aware layout"): version 7's records, whose checkpoints may carry a log region
/// of whole erase blocks that later commits fill with log records. Version 7 images are
/// still read (they have no region: their first commit is a checkpoint that takes one).
pub const FLASH_LOG_FORMAT_VERSION: u32 = 8;
/// The format version the flash-aware layout writes since log commits stopped writing a
/// commit-ring record (docs/format.md, "Flash-aware layout"): a ring record names a
/// checkpoint and the log records known when it was written; the log's end is found by
/// reading the region forward, and each log block carries its checkpoint's sequence.
/// Version 8 images are still read (their first read-write commit is a checkpoint that
/// writes version 9).
pub const FLASH_SCAN_FORMAT_VERSION: u32 = 9;
/// The newest format version this code reads.
pub const NEWEST_READABLE_FORMAT_VERSION: u32 = FLASH_SCAN_FORMAT_VERSION;
/// The oldest format version this code reads: version 1, whose block pointers carry no
/// data checksum (docs/format.md, "Versioning").
pub const OLDEST_READABLE_FORMAT_VERSION: u32 = 1;
/// Bytes of one block pointer entry (inode direct pointers, indirect blocks) in version 2:
/// the block number (u64) and the CRC32C of the block's data (u32).
pub const POINTER_ENTRY_BYTES: usize = 12;
/// Bytes of one block pointer entry in version 1: the block number only.
pub const VERSION_1_POINTER_ENTRY_BYTES: usize = 8;
/// Bit 63 of a version-2 pointer entry's block number: the block's data checksum is not
/// known (a block inherited from a version-1 image and not rewritten since); its checksum
/// field is zero and reads of the block are not verified. Block numbers never reach this
/// bit (`fs_block_count * B` fits a u64 and `B` is at least 4096, so block numbers stay
/// below 2^52).
pub const UNCHECKED_BLOCK_FLAG: u64 = 1 << 63;
/// Bytes of a super block at the start of blocks 0 and 1.
pub const SUPER_BLOCK_SIZE_BYTES: usize = 512;
/// Bytes of the header of every non-super metadata block.
pub const METADATA_HEADER_BYTES: usize = 40;
/// Direct block pointers held in an inode record.
pub const DIRECT_POINTER_COUNT: usize = 12;
/// Smallest FS block size mkfs accepts.
pub const MIN_FS_BLOCK_SIZE_BYTES: u32 = 4096;
/// Largest FS block size mkfs accepts.
pub const MAX_FS_BLOCK_SIZE_BYTES: u32 = 1 << 20;
/// The first block that may be allocated (0 and 1 are the super block slots).
pub const FIRST_ALLOCATABLE_BLOCK: u64 = 2;
/// Fewest FS blocks a file system may have: two super blocks and room for a checkpoint.
pub const MIN_FS_BLOCK_COUNT: u64 = 8;
/// Bytes of a name table entry before the name.
pub const NAME_ENTRY_HEADER_BYTES: usize = 10;
/// Longest name in bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// Bytes of an inode record before its direct pointers.
pub const INODE_RECORD_HEADER_BYTES: usize = 40;
/// Bytes of one free list extent.
pub const FREE_EXTENT_BYTES: usize = 16;
/// Offset of the super block's reserved bytes in format versions 1 and 2.
pub const RESERVED_OFFSET_BEFORE_LOG: usize = 112;
/// Offset of the super block's reserved bytes in format version 3 (after the log
/// fields).
pub const RESERVED_OFFSET_WITH_LOG: usize = 136;
/// Offset of the super block's store identity from format version 4 on.
pub const STORE_IDENTITY_OFFSET: usize = 136;
/// Bytes of the store identity.
pub const STORE_IDENTITY_BYTES: usize = 16;
/// Offset of the super block's reserved bytes from format version 4 on (after the store
/// identity).
pub const RESERVED_OFFSET_WITH_IDENTITY: usize = 152;
/// Offset of the super block's reserved bytes from format version 5 on (after the shared
/// table fields).
pub const RESERVED_OFFSET_WITH_SHARED: usize = 176;
/// Bytes of one shared table entry: first block (u64), block count (u32), reference
/// count (u32).
pub const SHARED_EXTENT_BYTES: usize = 16;

const SUPER_CHECKSUM_OFFSET: usize = 12;
const METADATA_CHECKSUM_OFFSET: usize = 4;

/// Kinds of metadata blocks, each with its four-character `kind` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataKind {
    /// Checkpoint map chain (`CMAP`).
    Map,
    /// Name table (`NTBL`).
    NameTable,
    /// Inode table (`INOD`).
    InodeTable,
    /// Free list (`FREE`).
    FreeList,
    /// Single-indirect pointer chain (`INDR`).
    Indirect,
    /// Metadata log block (`LOGR`, version 3).
    Log,
    /// Shared table: reference counts of shared data blocks (`SHRD`, version 5).
    SharedTable,
}

impl MetadataKind {
    /// The `kind` field value: four ASCII characters read as a little-endian u32.
    pub fn code(self) -> u32 {
        let characters = match self {
            MetadataKind::Map => b"CMAP",
            MetadataKind::NameTable => b"NTBL",
            MetadataKind::InodeTable => b"INOD",
            MetadataKind::FreeList => b"FREE",
            MetadataKind::Indirect => b"INDR",
            MetadataKind::Log => b"LOGR",
            MetadataKind::SharedTable => b"SHRD",
        };
        u32::from_le_bytes(*characters)
    }

    /// Human name for findings and errors.
    pub fn name(self) -> &'static str {
        match self {
            MetadataKind::Map => "checkpoint map",
            MetadataKind::NameTable => "name table",
            MetadataKind::InodeTable => "inode table",
            MetadataKind::FreeList => "free list",
            MetadataKind::Indirect => "indirect block",
            MetadataKind::Log => "metadata log",
            MetadataKind::SharedTable => "shared table",
        }
    }
}

/// Reads a little-endian u32 at `offset`.
pub fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

/// Reads a little-endian u64 at `offset`.
pub fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

/// Writes a little-endian u32 at `offset`.
pub fn write_u32(bytes: &mut [u8], offset: usize, value: u32) {
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

/// Writes a little-endian u64 at `offset`.
pub fn write_u64(bytes: &mut [u8], offset: usize, value: u64) {
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

/// CRC32C of `bytes` as if the 4-byte field at `field_offset` were zero.
pub fn checksum_with_field_zeroed(bytes: &[u8], field_offset: usize) -> u32 {
    let before = crc32c::crc32c(&bytes[..field_offset]);
    let with_zero_field = crc32c::crc32c_append(before, &[0u8; 4]);
    crc32c::crc32c_append(with_zero_field, &bytes[field_offset + 4..])
}

/// Is `value` a block size mkfs accepts?
pub fn is_valid_fs_block_size(value: u32) -> bool {
    value.is_power_of_two() && (MIN_FS_BLOCK_SIZE_BYTES..=MAX_FS_BLOCK_SIZE_BYTES).contains(&value)
}

/// The super block's fields (docs/format.md, "Super block").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperBlock {
    /// The format version of the commit: [`FORMAT_VERSION`] for every commit this code
    /// writes, possibly [`OLDEST_READABLE_FORMAT_VERSION`] for an image read from disk.
    pub format_version: u32,
    /// FS block size `B`.
    pub fs_block_size_bytes: u32,
    /// FS blocks in the file system.
    pub fs_block_count: u64,
    /// Number of the commit this super block records.
    pub commit_sequence: u64,
    /// Inode number of the next created file.
    pub next_inode_number: u64,
    /// Files in the name table.
    pub file_count: u64,
    /// Blocks in the free list.
    pub free_block_count: u64,
    /// First block of the checkpoint map chain.
    pub map_head: u64,
    /// Blocks in the checkpoint map chain.
    pub map_block_count: u64,
    /// Name table blocks in the map.
    pub name_table_block_count: u64,
    /// Inode table blocks in the map.
    pub inode_table_block_count: u64,
    /// Free list blocks in the map.
    pub free_list_block_count: u64,
    /// Extents in the free list.
    pub free_extent_count: u64,
    /// Blocks of the log region, listed in the map after the free list (version 3; 0
    /// before).
    pub log_region_block_count: u64,
    /// Region blocks holding log records, from the region's start (version 3).
    pub log_block_count: u64,
    /// Log records (commits since the checkpoint) in those blocks (version 3).
    pub log_record_count: u64,
    /// The identity of the store the image belongs to (version 4; all zero on disk means
    /// none, as in every older image).
    pub store_identity: Option<[u8; STORE_IDENTITY_BYTES]>,
    /// Shared table blocks, listed in the map after the free list (version 5; 0 before).
    pub shared_table_block_count: u64,
    /// Extents in the shared table (version 5).
    pub shared_extent_count: u64,
    /// Blocks those extents cover: data blocks referenced more than once (version 5).
    pub shared_block_count: u64,
    /// FS blocks (flash pages) per erase block in the flash-aware layout (version 7);
    /// 0 in every other layout.
    pub pages_per_erase_block: u64,
    /// The flash-aware layout's count of commit-ring records up to this one (version 7;
    /// the newest record has the largest); 0 in every other layout.
    pub ring_sequence: u64,
    /// What this commit-ring record says (version 7); `Commit` in every other layout.
    pub record_kind: RingRecordKind,
    /// The flash-aware layout's counters over the store's life, as of this record
    /// (version 7); zero in every other layout.
    pub flash_totals: FlashTotals,
}

/// The flash-aware layout's counters over a store's life (version 7, offsets 196..220).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlashTotals {
    /// Pages the file system handed out (each programmed once: data, indirect and
    /// checkpoint blocks); ring records are counted by `ring_sequence`.
    pub pages_allocated: u64,
    /// Erase blocks the file system erased (mkfs's erase of every block included).
    pub erases: u64,
    /// Live pages its collection moved.
    pub pages_moved: u64,
}

impl SuperBlock {
    /// The commit that wrote the checkpoint (map and tables): the log holds one record
    /// per later commit.
    pub fn checkpoint_sequence(&self) -> u64 {
        self.commit_sequence - self.log_record_count
    }

    /// Offset of the reserved (zero) bytes for this super block's version.
    pub fn reserved_offset(&self) -> usize {
        reserved_offset_of_version(self.format_version)
    }
}

/// Offset of the reserved (zero) bytes of a super block of format `version`.
pub fn reserved_offset_of_version(version: u32) -> usize {
    if version >= FLASH_AWARE_FORMAT_VERSION {
        RESERVED_OFFSET_WITH_FLASH
    } else if version >= FIRST_SHARED_FORMAT_VERSION {
        RESERVED_OFFSET_WITH_SHARED
    } else if version >= FIRST_IDENTIFIED_FORMAT_VERSION {
        RESERVED_OFFSET_WITH_IDENTITY
    } else if version >= FIRST_LOGGED_FORMAT_VERSION {
        RESERVED_OFFSET_WITH_LOG
    } else {
        RESERVED_OFFSET_BEFORE_LOG
    }
}

/// Why a super block slot cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuperBlockProblem {
    /// No `FLASHPFS` magic: never formatted, or overwritten.
    NoMagic,
    /// Written by a newer format version.
    NewerVersion(u32),
    /// The checksum does not match.
    ChecksumMismatch,
    /// A field holds an impossible value.
    BadField(String),
}

impl std::fmt::Display for SuperBlockProblem {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SuperBlockProblem::NoMagic => write!(formatter, "no FLASHPFS magic"),
            SuperBlockProblem::NewerVersion(version) => write!(
                formatter,
                "format version {version} is newer than the supported {NEWEST_READABLE_FORMAT_VERSION}"
            ),
            SuperBlockProblem::ChecksumMismatch => write!(formatter, "checksum mismatch"),
            SuperBlockProblem::BadField(detail) => write!(formatter, "bad field: {detail}"),
        }
    }
}

impl SuperBlock {
    /// Encodes into the 512-byte on-disk form, checksum included.
    pub fn encode(&self) -> [u8; SUPER_BLOCK_SIZE_BYTES] {
        let mut bytes = [0u8; SUPER_BLOCK_SIZE_BYTES];
        bytes[0..8].copy_from_slice(&MAGIC);
        write_u32(&mut bytes, 8, self.format_version);
        write_u32(&mut bytes, 16, self.fs_block_size_bytes);
        write_u32(&mut bytes, 20, SUPER_BLOCK_SIZE_BYTES as u32);
        write_u64(&mut bytes, 24, self.fs_block_count);
        write_u64(&mut bytes, 32, self.commit_sequence);
        write_u64(&mut bytes, 40, self.next_inode_number);
        write_u64(&mut bytes, 48, self.file_count);
        write_u64(&mut bytes, 56, self.free_block_count);
        write_u64(&mut bytes, 64, self.map_head);
        write_u64(&mut bytes, 72, self.map_block_count);
        write_u64(&mut bytes, 80, self.name_table_block_count);
        write_u64(&mut bytes, 88, self.inode_table_block_count);
        write_u64(&mut bytes, 96, self.free_list_block_count);
        write_u64(&mut bytes, 104, self.free_extent_count);
        if self.format_version >= FIRST_LOGGED_FORMAT_VERSION {
            write_u64(&mut bytes, 112, self.log_region_block_count);
            write_u64(&mut bytes, 120, self.log_block_count);
            write_u64(&mut bytes, 128, self.log_record_count);
        }
        if self.format_version >= FIRST_IDENTIFIED_FORMAT_VERSION {
            if let Some(identity) = &self.store_identity {
                bytes[STORE_IDENTITY_OFFSET..STORE_IDENTITY_OFFSET + STORE_IDENTITY_BYTES]
                    .copy_from_slice(identity);
            }
        }
        if self.format_version >= FIRST_SHARED_FORMAT_VERSION {
            write_u64(&mut bytes, 152, self.shared_table_block_count);
            write_u64(&mut bytes, 160, self.shared_extent_count);
            write_u64(&mut bytes, 168, self.shared_block_count);
        }
        if self.format_version >= FLASH_AWARE_FORMAT_VERSION {
            write_u64(
                &mut bytes,
                PAGES_PER_ERASE_BLOCK_OFFSET,
                self.pages_per_erase_block,
            );
            write_u64(&mut bytes, RING_SEQUENCE_OFFSET, self.ring_sequence);
            write_u32(&mut bytes, RECORD_KIND_OFFSET, self.record_kind.code());
            let totals = &self.flash_totals;
            write_u64(&mut bytes, FLASH_TOTALS_OFFSET, totals.pages_allocated);
            write_u64(&mut bytes, FLASH_TOTALS_OFFSET + 8, totals.erases);
            write_u64(&mut bytes, FLASH_TOTALS_OFFSET + 16, totals.pages_moved);
        }
        let checksum = checksum_with_field_zeroed(&bytes, SUPER_CHECKSUM_OFFSET);
        write_u32(&mut bytes, SUPER_CHECKSUM_OFFSET, checksum);
        let decoded = SuperBlock::decode(&bytes);
        assert_eq!(decoded.as_ref(), Ok(self), "super block round trip");
        bytes
    }

    /// Decodes and validates the first 512 bytes of `bytes`. The version is checked
    /// before the checksum, so a newer format is named as such.
    pub fn decode(bytes: &[u8]) -> Result<SuperBlock, SuperBlockProblem> {
        let bytes = &bytes[..SUPER_BLOCK_SIZE_BYTES];
        if bytes[0..8] != MAGIC {
            return Err(SuperBlockProblem::NoMagic);
        }
        let version = read_u32(bytes, 8);
        if version > NEWEST_READABLE_FORMAT_VERSION {
            return Err(SuperBlockProblem::NewerVersion(version));
        }
        if read_u32(bytes, SUPER_CHECKSUM_OFFSET)
            != checksum_with_field_zeroed(bytes, SUPER_CHECKSUM_OFFSET)
        {
            return Err(SuperBlockProblem::ChecksumMismatch);
        }
        if version < OLDEST_READABLE_FORMAT_VERSION {
            return Err(SuperBlockProblem::BadField(format!(
                "format version {version}"
            )));
        }
        let super_block = SuperBlock {
            format_version: version,
            fs_block_size_bytes: read_u32(bytes, 16),
            fs_block_count: read_u64(bytes, 24),
            commit_sequence: read_u64(bytes, 32),
            next_inode_number: read_u64(bytes, 40),
            file_count: read_u64(bytes, 48),
            free_block_count: read_u64(bytes, 56),
            map_head: read_u64(bytes, 64),
            map_block_count: read_u64(bytes, 72),
            name_table_block_count: read_u64(bytes, 80),
            inode_table_block_count: read_u64(bytes, 88),
            free_list_block_count: read_u64(bytes, 96),
            free_extent_count: read_u64(bytes, 104),
            log_region_block_count: 0,
            log_block_count: 0,
            log_record_count: 0,
            store_identity: None,
            shared_table_block_count: 0,
            shared_extent_count: 0,
            shared_block_count: 0,
            pages_per_erase_block: 0,
            ring_sequence: 0,
            record_kind: RingRecordKind::Commit,
            flash_totals: FlashTotals::default(),
        };
        let mut super_block = super_block;
        if version >= FIRST_LOGGED_FORMAT_VERSION {
            super_block.log_region_block_count = read_u64(bytes, 112);
            super_block.log_block_count = read_u64(bytes, 120);
            super_block.log_record_count = read_u64(bytes, 128);
        }
        if version >= FIRST_IDENTIFIED_FORMAT_VERSION {
            let identity: [u8; STORE_IDENTITY_BYTES] = bytes
                [STORE_IDENTITY_OFFSET..STORE_IDENTITY_OFFSET + STORE_IDENTITY_BYTES]
                .try_into()
                .expect("16 bytes");
            super_block.store_identity = identity.iter().any(|&byte| byte != 0).then_some(identity);
        }
        if version >= FIRST_SHARED_FORMAT_VERSION {
            super_block.shared_table_block_count = read_u64(bytes, 152);
            super_block.shared_extent_count = read_u64(bytes, 160);
            super_block.shared_block_count = read_u64(bytes, 168);
        }
        if version >= FLASH_AWARE_FORMAT_VERSION {
            super_block.pages_per_erase_block = read_u64(bytes, PAGES_PER_ERASE_BLOCK_OFFSET);
            super_block.ring_sequence = read_u64(bytes, RING_SEQUENCE_OFFSET);
            let code = read_u32(bytes, RECORD_KIND_OFFSET);
            super_block.record_kind = RingRecordKind::from_code(code).ok_or_else(|| {
                SuperBlockProblem::BadField(format!("commit-ring record kind {code}"))
            })?;
            super_block.flash_totals = FlashTotals {
                pages_allocated: read_u64(bytes, FLASH_TOTALS_OFFSET),
                erases: read_u64(bytes, FLASH_TOTALS_OFFSET + 8),
                pages_moved: read_u64(bytes, FLASH_TOTALS_OFFSET + 16),
            };
        }
        let reserved = &bytes[reserved_offset_of_version(version)..];
        super_block.check_fields(read_u32(bytes, 20), reserved)?;
        Ok(super_block)
    }

    fn check_fields(
        &self,
        super_block_size_bytes: u32,
        reserved: &[u8],
    ) -> Result<(), SuperBlockProblem> {
        let bad = |detail: String| Err(SuperBlockProblem::BadField(detail));
        if super_block_size_bytes as usize != SUPER_BLOCK_SIZE_BYTES {
            return bad(format!("super block size {super_block_size_bytes}"));
        }
        if reserved.iter().any(|&byte| byte != 0) {
            return bad("reserved bytes are not zero".to_string());
        }
        if !is_valid_fs_block_size(self.fs_block_size_bytes) {
            return bad(format!("block size {}", self.fs_block_size_bytes));
        }
        if self.fs_block_count < MIN_FS_BLOCK_COUNT
            || self
                .fs_block_count
                .checked_mul(u64::from(self.fs_block_size_bytes))
                .is_none()
        {
            return bad(format!("block count {}", self.fs_block_count));
        }
        self.check_flash_fields()?;
        if self.commit_sequence == 0 || self.next_inode_number == 0 {
            return bad("commit sequence or next inode number is zero".to_string());
        }
        let in_range = |block: u64| (FIRST_ALLOCATABLE_BLOCK..self.fs_block_count).contains(&block);
        if !in_range(self.map_head) || self.map_block_count == 0 {
            return bad(format!(
                "checkpoint map at {} of {} blocks",
                self.map_head, self.map_block_count
            ));
        }
        let table_blocks = self
            .name_table_block_count
            .checked_add(self.inode_table_block_count)
            .and_then(|sum| sum.checked_add(self.free_list_block_count))
            .and_then(|sum| sum.checked_add(self.map_block_count))
            .and_then(|sum| sum.checked_add(self.log_region_block_count))
            .and_then(|sum| sum.checked_add(self.shared_table_block_count));
        match table_blocks {
            Some(total) if total < self.fs_block_count => {}
            _ => return bad("checkpoint block counts exceed the file system".to_string()),
        }
        if self.free_block_count >= self.fs_block_count
            || self.free_extent_count > self.free_block_count
        {
            return bad(format!(
                "free block count {} / extent count {}",
                self.free_block_count, self.free_extent_count
            ));
        }
        if self.shared_extent_count > self.shared_block_count
            || self.shared_block_count >= self.fs_block_count
        {
            return bad(format!(
                "shared table of {} extents covering {} blocks",
                self.shared_extent_count, self.shared_block_count
            ));
        }
        if self.log_block_count > self.log_region_block_count
            || self.log_record_count > self.log_block_count
            || (self.log_record_count == 0) != (self.log_block_count == 0)
            || self.log_record_count >= self.commit_sequence
        {
            return bad(format!(
                "log of {} records in {} of {} region blocks at commit {}",
                self.log_record_count,
                self.log_block_count,
                self.log_region_block_count,
                self.commit_sequence
            ));
        }
        Ok(())
    }
}

/// The header of a non-super metadata block (docs/format.md, "Metadata blocks").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataHeader {
    /// What the block holds.
    pub kind: MetadataKind,
    /// The commit that wrote it.
    pub commit_sequence: u64,
    /// Next block of the chain, or 0.
    pub next_block: u64,
    /// Entries in the payload.
    pub entry_count: u32,
    /// Payload bytes in use.
    pub payload_bytes: u32,
    /// Owning inode (indirect blocks) or index in the table (others).
    pub owner: u64,
}

/// Writes `header` into `block` and seals it with its checksum. The payload (from
/// offset 40) must already be in place, zero past `payload_bytes`.
pub fn seal_metadata_block(block: &mut [u8], header: &MetadataHeader) {
    assert!(METADATA_HEADER_BYTES + header.payload_bytes as usize <= block.len());
    write_u32(block, 0, header.kind.code());
    write_u64(block, 8, header.commit_sequence);
    write_u64(block, 16, header.next_block);
    write_u32(block, 24, header.entry_count);
    write_u32(block, 28, header.payload_bytes);
    write_u64(block, 32, header.owner);
    let checksum = checksum_with_field_zeroed(block, METADATA_CHECKSUM_OFFSET);
    write_u32(block, METADATA_CHECKSUM_OFFSET, checksum);
}

/// Checks a metadata block's kind, checksum and sequence and returns its header, or says
/// what is wrong.
pub fn open_metadata_block(
    block: &[u8],
    expected_kind: MetadataKind,
    newest_sequence: u64,
) -> Result<MetadataHeader, String> {
    let kind_code = read_u32(block, 0);
    if kind_code != expected_kind.code() {
        return Err(format!(
            "kind {kind_code:#010x} where {} ({:#010x}) was expected",
            expected_kind.name(),
            expected_kind.code()
        ));
    }
    let stored = read_u32(block, METADATA_CHECKSUM_OFFSET);
    let computed = checksum_with_field_zeroed(block, METADATA_CHECKSUM_OFFSET);
    if stored != computed {
        return Err(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        ));
    }
    let header = MetadataHeader {
        kind: expected_kind,
        commit_sequence: read_u64(block, 8),
        next_block: read_u64(block, 16),
        entry_count: read_u32(block, 24),
        payload_bytes: read_u32(block, 28),
        owner: read_u64(block, 32),
    };
    if header.commit_sequence == 0 || header.commit_sequence > newest_sequence {
        return Err(format!(
            "commit sequence {} outside 1..={newest_sequence}",
            header.commit_sequence
        ));
    }
    if METADATA_HEADER_BYTES + header.payload_bytes as usize > block.len() {
        return Err(format!(
            "payload of {} bytes overflows the block",
            header.payload_bytes
        ));
    }
    Ok(header)
}

/// Entries of `entry_bytes` bytes that fit in one block's payload.
pub fn fixed_entries_per_block(fs_block_size_bytes: u32, entry_bytes: usize) -> usize {
    (fs_block_size_bytes as usize - METADATA_HEADER_BYTES) / entry_bytes
}

/// Bytes of one block pointer entry in format `version`.
pub fn pointer_entry_bytes(version: u32) -> usize {
    if version >= 2 {
        POINTER_ENTRY_BYTES
    } else {
        VERSION_1_POINTER_ENTRY_BYTES
    }
}

/// Block pointers one indirect block holds (current format).
pub fn pointers_per_indirect_block(fs_block_size_bytes: u32) -> usize {
    pointers_per_indirect_block_in_version(fs_block_size_bytes, FORMAT_VERSION)
}

/// Block pointers one indirect block of format `version` holds.
pub fn pointers_per_indirect_block_in_version(fs_block_size_bytes: u32, version: u32) -> usize {
    fixed_entries_per_block(fs_block_size_bytes, pointer_entry_bytes(version))
}

/// Indirect blocks a file with `pointer_count` block pointers needs (current format).
pub fn indirect_block_count(fs_block_size_bytes: u32, pointer_count: u64) -> u64 {
    indirect_block_count_in_version(fs_block_size_bytes, pointer_count, FORMAT_VERSION)
}

/// Indirect blocks a file with `pointer_count` block pointers needs in format `version`.
pub fn indirect_block_count_in_version(
    fs_block_size_bytes: u32,
    pointer_count: u64,
    version: u32,
) -> u64 {
    let beyond_direct = pointer_count.saturating_sub(DIRECT_POINTER_COUNT as u64);
    let per_block = pointers_per_indirect_block_in_version(fs_block_size_bytes, version) as u64;
    beyond_direct.div_ceil(per_block)
}

/// Bytes of the inode record of a file with `pointer_count` pointers (current format).
pub fn inode_record_bytes(pointer_count: u64) -> usize {
    INODE_RECORD_HEADER_BYTES
        + POINTER_ENTRY_BYTES * (pointer_count.min(DIRECT_POINTER_COUNT as u64) as usize)
}

/// The CRC32C a version-2 pointer entry stores for a data block of `block` bytes (the whole
/// FS block, including the zeros past a file's end in its last block).
pub fn data_block_checksum(block: &[u8]) -> u32 {
    crc32c::crc32c(block)
}

/// Writes a version-2 pointer entry at `offset`: `block` (0: a hole) and its data
/// checksum (`None`: not known, written as the [`UNCHECKED_BLOCK_FLAG`] and a zero
/// checksum field; holes always have `None`).
pub fn write_pointer_entry(bytes: &mut [u8], offset: usize, block: u64, checksum: Option<u32>) {
    assert!(
        block & UNCHECKED_BLOCK_FLAG == 0,
        "block number {block} reaches the unchecked flag"
    );
    assert!(
        block != 0 || checksum.is_none(),
        "a hole carries no checksum"
    );
    let (stored_block, stored_checksum) = match checksum {
        Some(checksum) => (block, checksum),
        None if block == 0 => (0, 0),
        None => (block | UNCHECKED_BLOCK_FLAG, 0),
    };
    write_u64(bytes, offset, stored_block);
    write_u32(bytes, offset + 8, stored_checksum);
}

/// Reads a pointer entry of format `version` at `offset`: the block number (0: a hole)
/// and its data checksum (`None` for holes, for version 1, and for blocks flagged
/// unchecked), or what is wrong with the entry.
pub fn read_pointer_entry(
    bytes: &[u8],
    offset: usize,
    version: u32,
) -> Result<(u64, Option<u32>), String> {
    let stored_block = read_u64(bytes, offset);
    if version < 2 {
        return Ok((stored_block, None));
    }
    let stored_checksum = read_u32(bytes, offset + 8);
    let block = stored_block & !UNCHECKED_BLOCK_FLAG;
    let unchecked = stored_block & UNCHECKED_BLOCK_FLAG != 0;
    match (block, unchecked) {
        (0, true) => Err("a hole flagged unchecked".to_string()),
        (0, false) if stored_checksum != 0 => Err(format!(
            "a hole with checksum {stored_checksum:#010x} (must be 0)"
        )),
        (0, false) => Ok((0, None)),
        (_, true) if stored_checksum != 0 => Err(format!(
            "block {block} flagged unchecked with checksum {stored_checksum:#010x} (must be 0)"
        )),
        (_, true) => Ok((block, None)),
        (_, false) => Ok((block, Some(stored_checksum))),
    }
}

#[cfg(test)]
mod tests;
