//! On-flash formats of the FTL, byte by byte (docs/ftl.md repeats them): the spare-area
//! record every programmed page carries, the log records of trims and copies, and the
//! checkpoint image; plus the arithmetic between physical page numbers and flash
//! addresses.

use flashpipe_flash::{FlashAddress, FlashConfig};

/// Host spare bytes of the full spare record (format 1), used whenever a page has them.
pub const SPARE_RECORD_BYTES: usize = 36;
/// Host spare bytes of the compact spare record (format 2), used on pages whose host
/// spare is too small for the full one (the rad preset: 20 bytes); the fewest the FTL
/// needs.
pub const COMPACT_SPARE_RECORD_BYTES: usize = 20;
/// Version of the compact spare record (carried in its kind byte).
pub const COMPACT_SPARE_FORMAT_VERSION: u16 = 2;
/// Largest value of a 40-bit field of the compact spare record.
const COMPACT_FIELD_MAX: u64 = (1 << 40) - 1;
/// Largest checkpoint part index or count in the compact spare record (20 bits each).
const COMPACT_PART_MAX: u64 = (1 << 20) - 1;
/// Version of the spare, log and checkpoint formats.
pub const FORMAT_VERSION: u16 = 1;
/// First bytes of a checkpoint image.
pub const CHECKPOINT_MAGIC: &[u8; 8] = b"FPFTLCK1";
/// Bytes of one log record.
pub const LOG_RECORD_BYTES: usize = 33;
/// Bytes of the checkpoint header.
pub const CHECKPOINT_HEADER_BYTES: usize = 40;

/// Checks, before any array is made, that the pages of `config` leave the FTL room for
/// its spare record: the FTL validates its own spare layout, so a store or a tool asks
/// here instead of comparing against [`SPARE_RECORD_BYTES`] itself. The error names the
/// preset, what its pages hold and what the FTL needs.
pub fn check_spare_layout(config: &FlashConfig) -> Result<(), String> {
    let host_spare_bytes = config.host_spare_bytes() as usize;
    if host_spare_bytes < COMPACT_SPARE_RECORD_BYTES {
        return Err(format!(
            "the pages of {} have {host_spare_bytes} host spare bytes; the FTL needs at least {COMPACT_SPARE_RECORD_BYTES} (its compact spare record; {SPARE_RECORD_BYTES} for the full one)",
            config.name
        ));
    }
    Ok(())
}

/// Whether pages with `host_spare_bytes` of host spare carry the compact spare record.
pub fn uses_compact_spare(host_spare_bytes: usize) -> bool {
    host_spare_bytes < SPARE_RECORD_BYTES
}

/// What a programmed page holds (spare byte 0; never 0x00, the factory bad mark, nor 0xFF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    /// One logical page of host data.
    Data,
    /// Part of a checkpoint image.
    Checkpoint,
    /// A page of trim and copy records.
    Log,
}

impl PageKind {
    fn byte(self) -> u8 {
        match self {
            PageKind::Data => 0xD7,
            PageKind::Checkpoint => 0xC7,
            PageKind::Log => 0x17,
        }
    }

    fn from_byte(byte: u8) -> Option<PageKind> {
        match byte {
            0xD7 => Some(PageKind::Data),
            0xC7 => Some(PageKind::Checkpoint),
            0x17 => Some(PageKind::Log),
            _ => None,
        }
    }

    /// Byte 0 of a compact record: the kind, format 2 and (data) the poisoned flag.
    fn compact_byte(self, poisoned: bool) -> u8 {
        match (self, poisoned) {
            (PageKind::Data, false) => 0xD2,
            (PageKind::Data, true) => 0xD3,
            (PageKind::Checkpoint, _) => 0xC2,
            (PageKind::Log, _) => 0x12,
        }
    }

    fn from_compact_byte(byte: u8) -> Option<(PageKind, bool)> {
        match byte {
            0xD2 => Some((PageKind::Data, false)),
            0xD3 => Some((PageKind::Data, true)),
            0xC2 => Some((PageKind::Checkpoint, false)),
            0x12 => Some((PageKind::Log, false)),
            _ => None,
        }
    }
}

/// The decoded spare area of a page.
///
/// Layout (little endian): byte 0 kind; byte 1 flags (bit 0: poisoned data); bytes 2..4
/// format version; bytes 4..12 `field_a` (data: logical page; checkpoint: part index in
/// the low 32 bits, part count in the high 32; log: record count); bytes 12..20
/// `field_b` (data: version sequence; checkpoint: checkpoint sequence; log: 0); bytes
/// 20..28 program sequence; bytes 28..32 erase count of the block; bytes 32..36 CRC32C
/// of bytes 0..32 followed by the page data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpareRecord {
    /// What the page holds.
    pub kind: PageKind,
    /// The data could not be read back when garbage collection moved it.
    pub poisoned: bool,
    /// Logical page, part index/count, or record count (see the layout).
    pub field_a: u64,
    /// Version sequence or checkpoint sequence.
    pub field_b: u64,
    /// Sequence number of this program (grows with every program).
    pub program_sequence: u64,
    /// Erase count of the block when the page was programmed.
    pub erase_count: u32,
}

impl SpareRecord {
    /// The spare bytes for this record over `data`.
    pub fn encode(&self, data: &[u8]) -> Vec<u8> {
        let mut spare = vec![0u8; SPARE_RECORD_BYTES];
        spare[0] = self.kind.byte();
        spare[1] = u8::from(self.poisoned);
        spare[2..4].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        spare[4..12].copy_from_slice(&self.field_a.to_le_bytes());
        spare[12..20].copy_from_slice(&self.field_b.to_le_bytes());
        spare[20..28].copy_from_slice(&self.program_sequence.to_le_bytes());
        spare[28..32].copy_from_slice(&self.erase_count.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&spare[..32]), data);
        spare[32..36].copy_from_slice(&crc.to_le_bytes());
        spare
    }

    /// The spare bytes for this record over `data` on pages with `host_spare_bytes` of
    /// host spare: the full record when it fits, the compact one otherwise.
    pub fn encode_for(&self, data: &[u8], host_spare_bytes: usize) -> Vec<u8> {
        if uses_compact_spare(host_spare_bytes) {
            self.encode_compact(data)
        } else {
            self.encode(data)
        }
    }

    /// The compact spare bytes (format 2, [`COMPACT_SPARE_RECORD_BYTES`]) for this record
    /// over `data`. Layout (little endian): byte 0 kind, format and flag (0xD2 data, 0xD3
    /// poisoned data, 0xC2 checkpoint, 0x12 log); bytes 1..6 `field_a` (40 bits; a
    /// checkpoint's part index in the low 20 bits, its part count in the high 20); bytes
    /// 6..11 `field_b` (40 bits); bytes 11..16 program sequence (40 bits); bytes 16..20
    /// CRC32C of bytes 0..16 followed by the page data. The block's erase count is not
    /// carried (it decodes as 0; checkpoints keep wear).
    pub fn encode_compact(&self, data: &[u8]) -> Vec<u8> {
        let field_a = if self.kind == PageKind::Checkpoint {
            let part = self.field_a & 0xFFFF_FFFF;
            let count = self.field_a >> 32;
            assert!(
                part <= COMPACT_PART_MAX && count <= COMPACT_PART_MAX,
                "checkpoint part {part} of {count}: past the compact record's 20 bits"
            );
            part | count << 20
        } else {
            self.field_a
        };
        for (what, value) in [
            ("field a", field_a),
            ("field b", self.field_b),
            ("program sequence", self.program_sequence),
        ] {
            assert!(
                value <= COMPACT_FIELD_MAX,
                "{what} {value}: past the compact spare record's 40 bits"
            );
        }
        let mut spare = vec![0u8; COMPACT_SPARE_RECORD_BYTES];
        spare[0] = self.kind.compact_byte(self.poisoned);
        spare[1..6].copy_from_slice(&field_a.to_le_bytes()[..5]);
        spare[6..11].copy_from_slice(&self.field_b.to_le_bytes()[..5]);
        spare[11..16].copy_from_slice(&self.program_sequence.to_le_bytes()[..5]);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&spare[..16]), data);
        spare[16..20].copy_from_slice(&crc.to_le_bytes());
        spare
    }

    fn decode_compact(spare: &[u8], data: &[u8]) -> Option<SpareRecord> {
        if spare.len() < COMPACT_SPARE_RECORD_BYTES {
            return None;
        }
        let (kind, poisoned) = PageKind::from_compact_byte(spare[0])?;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&spare[..16]), data);
        if crc.to_le_bytes() != spare[16..20] {
            return None;
        }
        let read_u40 = |offset: usize| {
            let mut bytes = [0u8; 8];
            bytes[..5].copy_from_slice(&spare[offset..offset + 5]);
            u64::from_le_bytes(bytes)
        };
        let mut field_a = read_u40(1);
        if kind == PageKind::Checkpoint {
            field_a = (field_a & COMPACT_PART_MAX) | (field_a >> 20) << 32;
        }
        Some(SpareRecord {
            kind,
            poisoned,
            field_a,
            field_b: read_u40(6),
            program_sequence: read_u40(11),
            erase_count: 0,
        })
    }

    /// Decodes a spare area read with `data`, full (format 1) or compact (format 2);
    /// None for erased, foreign or damaged pages.
    pub fn decode(spare: &[u8], data: &[u8]) -> Option<SpareRecord> {
        if spare
            .first()
            .is_some_and(|&byte| PageKind::from_compact_byte(byte).is_some())
        {
            return SpareRecord::decode_compact(spare, data);
        }
        if spare.len() < SPARE_RECORD_BYTES {
            return None;
        }
        let kind = PageKind::from_byte(spare[0])?;
        if u16::from_le_bytes([spare[2], spare[3]]) != FORMAT_VERSION {
            return None;
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&spare[..32]), data);
        if crc.to_le_bytes() != spare[32..36] {
            return None;
        }
        Some(SpareRecord {
            kind,
            poisoned: spare[1] & 1 != 0,
            field_a: read_u64(spare, 4),
            field_b: read_u64(spare, 12),
            program_sequence: read_u64(spare, 20),
            erase_count: read_u32(spare, 28),
        })
    }
}

/// True when a page-0 spare carries the factory bad-block mark (byte 0 is 0x00).
pub fn is_factory_bad_mark(spare: &[u8]) -> bool {
    spare.first() == Some(&0x00)
}

/// A durable change of the map that no data page records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogRecord {
    /// Unmap `count` logical pages from `first`.
    Trim {
        /// Operation sequence.
        sequence: u64,
        /// First logical page.
        first: u64,
        /// Pages.
        count: u64,
    },
    /// Make `count` logical pages from `destination` refer to the data of those from `source`
    /// (memmove semantics).
    Copy {
        /// Operation sequence.
        sequence: u64,
        /// First source page.
        source: u64,
        /// First destination page.
        destination: u64,
        /// Pages.
        count: u64,
    },
}

impl LogRecord {
    /// The record's operation sequence.
    pub fn sequence(&self) -> u64 {
        match *self {
            LogRecord::Trim { sequence, .. } | LogRecord::Copy { sequence, .. } => sequence,
        }
    }

    /// Appends the 33-byte form: kind (1 trim, 2 copy), sequence, source or first,
    /// destination (0 for trims), count, all u64 little endian.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let (kind, sequence, first, destination, count) = match *self {
            LogRecord::Trim {
                sequence,
                first,
                count,
            } => (1u8, sequence, first, 0, count),
            LogRecord::Copy {
                sequence,
                source,
                destination,
                count,
            } => (2u8, sequence, source, destination, count),
        };
        out.push(kind);
        for value in [sequence, first, destination, count] {
            out.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// Decodes the `count` records at the start of a log page.
    pub fn decode_page(data: &[u8], count: u64) -> Option<Vec<LogRecord>> {
        let mut records = Vec::new();
        for index in 0..count as usize {
            let bytes = data.get(index * LOG_RECORD_BYTES..(index + 1) * LOG_RECORD_BYTES)?;
            let sequence = read_u64(bytes, 1);
            let first = read_u64(bytes, 9);
            let destination = read_u64(bytes, 17);
            let count = read_u64(bytes, 25);
            records.push(match bytes[0] {
                1 => LogRecord::Trim {
                    sequence,
                    first,
                    count,
                },
                2 => LogRecord::Copy {
                    sequence,
                    source: first,
                    destination,
                    count,
                },
                _ => return None,
            });
        }
        Some(records)
    }
}

/// A snapshot of the map and block table taken with nothing in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointImage {
    /// Every operation with a sequence up to this one is in the image, none after it.
    pub sequence: u64,
    /// Version sequence of each logical page (0: unmapped).
    pub versions: Vec<u64>,
    /// Erase count of each block.
    pub erase_counts: Vec<u32>,
    /// Bad state of each block (0 good, 1 factory bad, 2 grown bad).
    pub bad_states: Vec<u8>,
    /// Pages per block of the array it was written on.
    pub pages_per_block: u32,
}

impl CheckpointImage {
    /// The image as bytes: magic (8), sequence u64, logical page count u64, block count
    /// u64, pages per block u32, 4 zero bytes; versions (u64 each); erase counts (u32
    /// each); bad states (u8 each); CRC32C of everything before it (u32).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            CHECKPOINT_HEADER_BYTES + self.versions.len() * 8 + self.erase_counts.len() * 5 + 4,
        );
        out.extend_from_slice(CHECKPOINT_MAGIC);
        out.extend_from_slice(&self.sequence.to_le_bytes());
        out.extend_from_slice(&(self.versions.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.erase_counts.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.pages_per_block.to_le_bytes());
        out.extend_from_slice(&[0u8; 4]);
        for version in &self.versions {
            out.extend_from_slice(&version.to_le_bytes());
        }
        for count in &self.erase_counts {
            out.extend_from_slice(&count.to_le_bytes());
        }
        out.extend_from_slice(&self.bad_states);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes an image; None when the bytes are not a whole, intact image.
    pub fn decode(bytes: &[u8]) -> Option<CheckpointImage> {
        if bytes.len() < CHECKPOINT_HEADER_BYTES || &bytes[..8] != CHECKPOINT_MAGIC {
            return None;
        }
        let logical = usize::try_from(read_u64(bytes, 16)).ok()?;
        let block_count = usize::try_from(read_u64(bytes, 24)).ok()?;
        let body = logical
            .checked_mul(8)?
            .checked_add(block_count.checked_mul(5)?)?;
        let end = CHECKPOINT_HEADER_BYTES.checked_add(body)?;
        if bytes.len() < end + 4 || crc32c::crc32c(&bytes[..end]) != read_u32(bytes, end) {
            return None;
        }
        let mut offset = CHECKPOINT_HEADER_BYTES;
        let versions = (0..logical)
            .map(|index| read_u64(bytes, offset + index * 8))
            .collect();
        offset += logical * 8;
        let erase_counts = (0..block_count)
            .map(|index| read_u32(bytes, offset + index * 4))
            .collect();
        offset += block_count * 4;
        Some(CheckpointImage {
            sequence: read_u64(bytes, 8),
            versions,
            erase_counts,
            bad_states: bytes[offset..offset + block_count].to_vec(),
            pages_per_block: read_u32(bytes, 32),
        })
    }
}

fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_le_bytes(word)
}

fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(word)
}

/// The array's shape as the FTL numbers it: blocks numbered like the array's block table
/// ((device, bus, chip) major, then block), physical page = block x pages + page, and
/// dies in an order that alternates channels first.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// Erase blocks in the array.
    pub block_count: u32,
    /// Data bytes per page.
    pub page_bytes: usize,
    /// Independent dies.
    pub die_count: u32,
    channels_total: u32,
    ways: u32,
    dies_per_way: u32,
    blocks_per_way: u32,
    blocks_per_die: u32,
    channels: u32,
}

impl Shape {
    /// The shape of `config`.
    pub fn new(config: &FlashConfig) -> Shape {
        let geometry = &config.geometry;
        let blocks_per_way = config.blocks_per_way();
        let block_count = config.total_blocks();
        assert!(
            config.total_pages() < u64::from(u32::MAX),
            "the FTL numbers physical pages in 32 bits"
        );
        Shape {
            pages_per_block: geometry.pages_per_block,
            block_count: block_count as u32,
            page_bytes: geometry.page_data_bytes as usize,
            die_count: geometry.devices * geometry.channels * geometry.ways * geometry.dies,
            channels_total: geometry.devices * geometry.channels,
            ways: geometry.ways,
            dies_per_way: geometry.dies,
            blocks_per_way,
            blocks_per_die: blocks_per_way / geometry.dies,
            channels: geometry.channels,
        }
    }

    /// Pages in the array.
    pub fn page_count(&self) -> u32 {
        self.block_count * self.pages_per_block
    }

    /// The flash address of page `page` of block `block`.
    pub fn address(&self, block: u32, page: u32) -> FlashAddress {
        let way_index = block / self.blocks_per_way;
        let channel_index = way_index / self.ways;
        FlashAddress {
            device: channel_index / self.channels,
            bus: channel_index % self.channels,
            chip: way_index % self.ways,
            block: block % self.blocks_per_way,
            page,
        }
    }

    /// The block of a physical page.
    pub fn block_of(&self, physical_page: u32) -> u32 {
        physical_page / self.pages_per_block
    }

    /// The physical page number of page `page` of `block`.
    pub fn physical_page(&self, block: u32, page: u32) -> u32 {
        block * self.pages_per_block + page
    }

    /// The die of a block, numbered so that consecutive dies sit on different channels.
    pub fn die_of(&self, block: u32) -> u32 {
        let way_index = block / self.blocks_per_way;
        let channel_index = way_index / self.ways;
        let chip = way_index % self.ways;
        let die_in_way = (block % self.blocks_per_way) / self.blocks_per_die;
        (die_in_way * self.ways + chip) * self.channels_total + channel_index
    }

    /// Blocks of one die.
    pub fn blocks_of_die(&self, die: u32) -> impl Iterator<Item = u32> + '_ {
        let channel_index = die % self.channels_total;
        let chip = (die / self.channels_total) % self.ways;
        let die_in_way = die / (self.channels_total * self.ways);
        let way_index = channel_index * self.ways + chip;
        let first = way_index * self.blocks_per_way + die_in_way * self.blocks_per_die;
        first..first + self.blocks_per_die
    }

    /// Dies per chip (for reports).
    pub fn dies_per_way(&self) -> u32 {
        self.dies_per_way
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_round_trips_and_rejects_damage() {
        let data = vec![7u8; 512];
        let record = SpareRecord {
            kind: PageKind::Data,
            poisoned: false,
            field_a: 42,
            field_b: 99,
            program_sequence: 100,
            erase_count: 3,
        };
        let spare = record.encode(&data);
        assert_eq!(SpareRecord::decode(&spare, &data), Some(record));
        let mut damaged = data.clone();
        damaged[3] ^= 1;
        assert_eq!(SpareRecord::decode(&spare, &damaged), None);
        assert_eq!(SpareRecord::decode(&[0xFF; 40], &data), None);
    }

    #[test]
    fn checkpoint_round_trips() {
        let image = CheckpointImage {
            sequence: 77,
            versions: vec![0, 5, 9],
            erase_counts: vec![1, 2],
            bad_states: vec![0, 2],
            pages_per_block: 16,
        };
        let bytes = image.encode();
        assert_eq!(CheckpointImage::decode(&bytes), Some(image));
        assert_eq!(CheckpointImage::decode(&bytes[..bytes.len() - 1]), None);
    }

    #[test]
    fn log_records_round_trip() {
        let records = [
            LogRecord::Trim {
                sequence: 3,
                first: 10,
                count: 2,
            },
            LogRecord::Copy {
                sequence: 4,
                source: 1,
                destination: 8,
                count: 5,
            },
        ];
        let mut bytes = Vec::new();
        records
            .iter()
            .for_each(|record| record.encode_into(&mut bytes));
        assert_eq!(LogRecord::decode_page(&bytes, 2), Some(records.to_vec()));
    }

    #[test]
    fn dies_partition_the_blocks() {
        let config = FlashConfig::preset("minflash").expect("preset");
        let shape = Shape::new(&config);
        for die in [0, 1, 7, 8, 63] {
            for block in shape.blocks_of_die(die).step_by(1000) {
                assert_eq!(shape.die_of(block), die);
            }
        }
        assert_eq!(shape.die_of(0), 0);
        assert_ne!(
            shape.address(shape.blocks_of_die(1).next().unwrap(), 0).bus,
            0
        );
    }
}
