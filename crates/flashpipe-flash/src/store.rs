//! Where the array keeps its pages and its block table: nowhere (timing only), in memory
//! (sparse), or in a sparse backing file with a metadata file beside it for reopening.
//!
//! The backing file holds raw pages (data, host spare, ECC parity) at
//! `page_index * raw_page_bytes`; pages never programmed are holes. The metadata file
//! (`<path>.meta`) holds the configuration, the seed, the virtual time, the operation
//! counter, the block table and the journal generation; it is replaced whole (write,
//! fsync, rename) by `sync` and read by `open`. Between syncs every change of a block's
//! state (a program, an erase, a failure) is appended to the journal
//! (`<path>.journal`) after the page it concerns is written: an erase's or a failure's
//! record at once, a program's held with the others until the next acknowledgement leaves
//! the array (or the next erase, or sync), then all written in one call. So the image,
//! the `.meta` and the journal together always describe a prefix of the array's
//! operations that includes every acknowledged one, whatever instant the process dies at
//! (docs/flash-model.md, "Crash atomicity of the image").

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::{ConfigError, FlashConfig};
use crate::pool::PagePool;

/// How the array keeps page contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageMode {
    /// No contents: block state, rules and timing only (fastest; reads return no data).
    TimingOnly,
    /// Contents in memory, only for programmed pages.
    Memory,
    /// Contents in a sparse file at this path, plus `<path>.meta`; survives reopening.
    File(PathBuf),
}

/// Why the array could not be created, opened or synced.
#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A file operation failed.
    #[error("{path}: {detail}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        detail: String,
    },
    /// The metadata file is not one this crate wrote, or is damaged.
    #[error("{path}: corrupt flash metadata: {detail}")]
    CorruptMetadata {
        /// The metadata file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// An option is out of range.
    #[error("invalid option: {detail}")]
    InvalidOption {
        /// What is wrong.
        detail: String,
    },
    /// The array was opened read-only and something tried to change or sync it.
    #[error("{path}: the flash image is opened read-only: {operation} refused")]
    ReadOnly {
        /// The backing file.
        path: String,
        /// What was refused.
        operation: &'static str,
    },
}

/// The persistent state of one erase block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockState {
    /// Program/erase cycles.
    pub pe_cycles: u32,
    /// The next page that may be programmed (pages below it are programmed).
    pub next_page: u32,
    /// Reads since the last erase.
    pub reads_since_erase: u32,
    /// The block failed a program or erase.
    pub grown_bad: bool,
    /// Virtual time of the first program since the last erase.
    pub programmed_at_ns: u64,
}

/// Page contents.
pub(crate) enum PageStore {
    TimingOnly,
    /// Programmed pages by index, each in a pooled buffer (given back on erase and
    /// overwrite).
    Memory(HashMap<u64, Vec<u8>>),
    /// A backing file; `journal` is `None` when it is opened read-only.
    File {
        file: File,
        path: PathBuf,
        journal: Option<Journal>,
    },
}

/// The block-table journal of a file-backed array, open for appending.
pub(crate) struct Journal {
    file: File,
    path: PathBuf,
    generation: u64,
    /// The first append that failed: the next sync reports it.
    failure: Option<String>,
    /// Program records not yet written: [`Journal::write_pending`] writes them in one call
    /// before an acknowledgement leaves the array, before an erase's record and at sync.
    pending: Vec<u8>,
}

/// Program records held before one write (a bound, so a run without acks stays small).
const JOURNAL_PENDING_LIMIT_BYTES: usize = 64 * JOURNAL_RECORD_BYTES;

const JOURNAL_MAGIC: &[u8; 8] = b"FPFJRNL1";
/// Journal header: magic, generation, CRC32C of the first 16 bytes, 4 bytes zero.
pub(crate) const JOURNAL_HEADER_BYTES: usize = 24;
/// One journal record: block index, P/E cycles, next page, flags, reads since erase,
/// programmed-at time, virtual time, CRC32C of the first 36 bytes.
pub(crate) const JOURNAL_RECORD_BYTES: usize = 40;

pub(crate) fn journal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".journal");
    PathBuf::from(name)
}

fn journal_header(generation: u64) -> [u8; JOURNAL_HEADER_BYTES] {
    let mut header = [0u8; JOURNAL_HEADER_BYTES];
    header[..8].copy_from_slice(JOURNAL_MAGIC);
    header[8..16].copy_from_slice(&generation.to_le_bytes());
    let crc = crc32c::crc32c(&header[..16]);
    header[16..20].copy_from_slice(&crc.to_le_bytes());
    header
}

fn encode_journal_record(
    block_index: u64,
    block: &BlockState,
    now_ns: u64,
) -> [u8; JOURNAL_RECORD_BYTES] {
    let mut record = [0u8; JOURNAL_RECORD_BYTES];
    let block_index = u32::try_from(block_index).expect("block indices fit in 32 bits");
    record[0..4].copy_from_slice(&block_index.to_le_bytes());
    record[4..8].copy_from_slice(&block.pe_cycles.to_le_bytes());
    record[8..12].copy_from_slice(&block.next_page.to_le_bytes());
    record[12..16].copy_from_slice(&u32::from(block.grown_bad).to_le_bytes());
    record[16..20].copy_from_slice(&block.reads_since_erase.to_le_bytes());
    record[20..28].copy_from_slice(&block.programmed_at_ns.to_le_bytes());
    record[28..36].copy_from_slice(&now_ns.to_le_bytes());
    let crc = crc32c::crc32c(&record[..36]);
    record[36..40].copy_from_slice(&crc.to_le_bytes());
    record
}

/// One decoded journal record: (block index, its state, virtual time).
fn decode_journal_record(record: &[u8]) -> Option<(u64, BlockState, u64)> {
    let word = |at: usize| u32::from_le_bytes(record[at..at + 4].try_into().expect("4 bytes"));
    let double = |at: usize| u64::from_le_bytes(record[at..at + 8].try_into().expect("8 bytes"));
    if crc32c::crc32c(&record[..36]) != word(36) || word(12) > 1 {
        return None;
    }
    let block = BlockState {
        pe_cycles: word(4),
        next_page: word(8),
        grown_bad: word(12) == 1,
        reads_since_erase: word(16),
        programmed_at_ns: double(20),
    };
    Some((u64::from(word(0)), block, double(28)))
}

impl Journal {
    /// Opens (creating it if missing) the journal of the image at `path` for appending,
    /// emptied and stamped with `generation`.
    fn start(path: &Path, generation: u64) -> Result<Journal, FlashError> {
        let journal_path = journal_path(path);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&journal_path)
            .map_err(|error| io_error(&journal_path, error))?;
        file.set_len(0)
            .and_then(|()| file.write_all(&journal_header(generation)))
            .map_err(|error| io_error(&journal_path, error))?;
        Ok(Journal {
            file,
            path: journal_path,
            generation,
            failure: None,
            pending: Vec::with_capacity(JOURNAL_PENDING_LIMIT_BYTES),
        })
    }

    /// Empties the journal and stamps it with `generation` (the `.meta` just written
    /// holds every record it had).
    fn restart(&mut self, generation: u64) -> Result<(), FlashError> {
        assert!(
            self.pending.is_empty(),
            "a sync wrote the held records before it restarts the journal"
        );
        self.file
            .set_len(0)
            .and_then(|()| self.file.write_all(&journal_header(generation)))
            .map_err(|error| io_error(&self.path, error))?;
        self.generation = generation;
        self.failure = None;
        Ok(())
    }

    /// Adds a record; `write_now` (an erase or a failure) writes it and every held record
    /// at once, a program's record may wait for [`Journal::write_pending`].
    fn append(&mut self, record: &[u8; JOURNAL_RECORD_BYTES], write_now: bool) {
        if self.failure.is_some() {
            return;
        }
        self.pending.extend_from_slice(record);
        if write_now || self.pending.len() >= JOURNAL_PENDING_LIMIT_BYTES {
            self.write_pending();
        }
    }

    /// Writes the held records in one call (in the order they were added).
    fn write_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if self.failure.is_none() {
            if let Err(error) = self.file.write_all(&self.pending) {
                self.failure = Some(error.to_string());
            }
        }
        self.pending.clear();
    }
}

impl Drop for Journal {
    /// Writes the held records, best effort (they belong to operations whose acks were
    /// never seen; the image is a prefix of the operations with or without them).
    fn drop(&mut self) {
        self.write_pending();
    }
}

fn io_error(path: &Path, error: std::io::Error) -> FlashError {
    FlashError::Io {
        path: path.display().to_string(),
        detail: error.to_string(),
    }
}

impl PageStore {
    pub(crate) fn create(mode: &StorageMode) -> Result<PageStore, FlashError> {
        Ok(match mode {
            StorageMode::TimingOnly => PageStore::TimingOnly,
            StorageMode::Memory => PageStore::Memory(HashMap::new()),
            StorageMode::File(path) => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)
                    .map_err(|error| io_error(path, error))?;
                PageStore::File {
                    file,
                    path: path.clone(),
                    journal: Some(Journal::start(path, 0)?),
                }
            }
        })
    }

    /// Reopens the image at `path` for reading and writing. `metadata` (read with its
    /// journal replayed) is made durable as a new `.meta` of the next generation first
    /// (image synced, `.meta` replaced), and only then is the journal emptied, so a death
    /// at any instant in between loses nothing.
    pub(crate) fn reopen(path: &Path, metadata: &mut Metadata) -> Result<PageStore, FlashError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|error| io_error(path, error))?;
        file.sync_data().map_err(|error| io_error(path, error))?;
        metadata.journal_generation += 1;
        write_metadata(path, metadata)?;
        Ok(PageStore::File {
            file,
            path: path.to_path_buf(),
            journal: Some(Journal::start(path, metadata.journal_generation)?),
        })
    }

    /// Reopens the image at `path` for reading only: nothing is ever written to it, its
    /// `.meta` or its journal.
    pub(crate) fn reopen_read_only(path: &Path) -> Result<PageStore, FlashError> {
        let file = File::open(path).map_err(|error| io_error(path, error))?;
        Ok(PageStore::File {
            file,
            path: path.to_path_buf(),
            journal: None,
        })
    }

    /// True when the store refuses writes (a file opened read-only).
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self, PageStore::File { journal: None, .. })
    }

    /// Appends a block's new state to the journal (file storage; a no-op otherwise). Called
    /// after the page a program concerns is written, so a process that dies between the
    /// two leaves the page unprogrammed.
    /// `write_now`: the record (an erase's, a failure's) is written at once with every held
    /// one; a program's record may be held until [`PageStore::write_journal`] (before its
    /// acknowledgement leaves the array).
    pub(crate) fn journal_block(
        &mut self,
        block_index: u64,
        block: &BlockState,
        now_ns: u64,
        write_now: bool,
    ) {
        if let PageStore::File {
            journal: Some(journal),
            ..
        } = self
        {
            journal.append(
                &encode_journal_record(block_index, block, now_ns),
                write_now,
            );
        }
    }

    /// Writes the journal records held so far (file storage; a no-op otherwise).
    pub(crate) fn write_journal(&mut self) {
        if let PageStore::File {
            journal: Some(journal),
            ..
        } = self
        {
            journal.write_pending();
        }
    }

    /// The journal generation a `.meta` written now must carry to supersede the journal.
    pub(crate) fn next_journal_generation(&self) -> u64 {
        match self {
            PageStore::File {
                journal: Some(journal),
                ..
            } => journal.generation + 1,
            _ => 0,
        }
    }

    /// After a `.meta` carrying `generation` is durable: empties the journal.
    pub(crate) fn restart_journal(&mut self, generation: u64) -> Result<(), FlashError> {
        match self {
            PageStore::File {
                journal: Some(journal),
                ..
            } => journal.restart(generation),
            _ => Ok(()),
        }
    }

    /// True when stored pages carry their ECC parity: an image file does (its format holds
    /// it); memory does not (it lives only in this process, and the parity of a page is a
    /// function of its stored message, which the decoder recomputes when it needs it).
    pub(crate) fn stores_parity(&self) -> bool {
        matches!(self, PageStore::File { .. })
    }

    pub(crate) fn keeps_data(&self) -> bool {
        !matches!(self, PageStore::TimingOnly)
    }

    /// Stores `raw` as the page at `page_index`; hands back a buffer free for reuse (the
    /// written one for an image, the page it replaced in memory) or the error.
    pub(crate) fn write_page(
        &mut self,
        page_index: u64,
        raw: Vec<u8>,
    ) -> Result<Option<Vec<u8>>, FlashError> {
        match self {
            PageStore::TimingOnly => Ok(Some(raw)),
            PageStore::Memory(pages) => Ok(pages.insert(page_index, raw)),
            PageStore::File {
                journal: None,
                path,
                ..
            } => Err(FlashError::ReadOnly {
                path: path.display().to_string(),
                operation: "a page program",
            }),
            PageStore::File { file, path, .. } => file
                .write_all_at(&raw, page_index * raw.len() as u64)
                .map(|()| Some(raw))
                .map_err(|error| io_error(path, error)),
        }
    }

    /// Reads a programmed page into `raw`.
    pub(crate) fn read_page(&self, page_index: u64, raw: &mut [u8]) -> Result<(), FlashError> {
        match self {
            PageStore::TimingOnly => {
                raw.fill(0xFF);
                Ok(())
            }
            PageStore::Memory(pages) => {
                let stored = pages
                    .get(&page_index)
                    .expect("a programmed page is in the store");
                raw.copy_from_slice(stored);
                Ok(())
            }
            PageStore::File { file, path, .. } => file
                .read_exact_at(raw, page_index * raw.len() as u64)
                .map_err(|error| io_error(path, error)),
        }
    }

    /// Forgets the pages of an erased block, their buffers given back to `pool`.
    pub(crate) fn erase_block(&mut self, first_page: u64, page_count: u64, pool: &mut PagePool) {
        if let PageStore::Memory(pages) = self {
            for page_index in first_page..first_page + page_count {
                if let Some(buffer) = pages.remove(&page_index) {
                    pool.give(buffer);
                }
            }
        }
    }

    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            PageStore::File { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Makes the pages written so far durable; fails on a read-only store and when a
    /// journal append failed since the last sync.
    pub(crate) fn sync_data(&mut self) -> Result<(), FlashError> {
        self.write_journal();
        match self {
            PageStore::File {
                journal: None,
                path,
                ..
            } => Err(FlashError::ReadOnly {
                path: path.display().to_string(),
                operation: "a sync",
            }),
            PageStore::File {
                file,
                path,
                journal: Some(journal),
            } => {
                if let Some(detail) = &journal.failure {
                    return Err(FlashError::Io {
                        path: journal.path.display().to_string(),
                        detail: detail.clone(),
                    });
                }
                file.sync_data().map_err(|error| io_error(path, error))
            }
            _ => Ok(()),
        }
    }
}

/// Version 1: no journal generation, no checksum (read, never written).
const METADATA_MAGIC_VERSION_1: &[u8; 8] = b"FPFLASH1";
/// Version 2: the journal generation after the block table, then a CRC32C of every byte
/// before it.
const METADATA_MAGIC: &[u8; 8] = b"FPFLASH2";

/// Everything besides page contents that a reopen needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metadata {
    pub config: FlashConfig,
    pub seed: u64,
    pub now_ns: u64,
    pub operation_counter: u64,
    pub blocks: Vec<BlockState>,
    /// The journal generation that continues this `.meta` (0 for version 1).
    pub journal_generation: u64,
}

pub(crate) fn metadata_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".meta");
    PathBuf::from(name)
}

pub(crate) fn write_metadata(path: &Path, metadata: &Metadata) -> Result<(), FlashError> {
    let config_text = metadata.config.to_toml();
    let mut bytes = Vec::with_capacity(64 + config_text.len() + metadata.blocks.len() * 24);
    bytes.extend_from_slice(METADATA_MAGIC);
    for value in [
        metadata.seed,
        metadata.now_ns,
        metadata.operation_counter,
        config_text.len() as u64,
    ] {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    bytes.extend_from_slice(config_text.as_bytes());
    bytes.extend_from_slice(&(metadata.blocks.len() as u64).to_le_bytes());
    for block in &metadata.blocks {
        for value in [
            block.pe_cycles,
            block.next_page,
            block.reads_since_erase,
            u32::from(block.grown_bad),
        ] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes.extend_from_slice(&block.programmed_at_ns.to_le_bytes());
    }
    bytes.extend_from_slice(&metadata.journal_generation.to_le_bytes());
    let crc = crc32c::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    let meta_path = metadata_path(path);
    let temporary = meta_path.with_extension("meta.tmp");
    // The new `.meta` keeps the old one's mode (mkfs makes it 0600 or `--mode`), never
    // the umask's: it holds the array's state, readable by its owner alone by default.
    let mode = std::fs::metadata(&meta_path)
        .map(|metadata| metadata.permissions().mode() & 0o777)
        .unwrap_or(0o600);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(|error| io_error(&temporary, error))?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|error| io_error(&temporary, error))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(|error| io_error(&temporary, error))?;
    std::fs::rename(&temporary, &meta_path).map_err(|error| io_error(&meta_path, error))?;
    sync_parent_folder(&meta_path)
}

/// Makes a rename in the folder of `path` durable (a machine crash would otherwise be
/// free to forget it).
fn sync_parent_folder(path: &Path) -> Result<(), FlashError> {
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    File::open(folder)
        .and_then(|folder_file| folder_file.sync_all())
        .map_err(|error| io_error(folder, error))
}

struct MetadataReader<'a> {
    bytes: &'a [u8],
    offset: usize,
    path: &'a Path,
}

impl MetadataReader<'_> {
    fn take(&mut self, length: usize) -> Result<&[u8], FlashError> {
        let end = self
            .offset
            .checked_add(length)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| FlashError::CorruptMetadata {
            path: self.path.display().to_string(),
            detail: format!("truncated at byte {}", self.offset),
        })?;
        let slice = &self.bytes[self.offset..end];
        self.offset = end;
        Ok(slice)
    }

    fn u64(&mut self) -> Result<u64, FlashError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32, FlashError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
}

/// The operations (reads, programs, erases) the array kept in `path` has admitted since it
/// was made, as of its last sync (its `.meta`; the journal does not count them): the
/// difference across a run that ends with a sync is the flash operations of that run.
pub fn synced_operation_count(path: &Path) -> Result<u64, FlashError> {
    Ok(read_metadata(path)?.operation_counter)
}

pub(crate) fn read_metadata(path: &Path) -> Result<Metadata, FlashError> {
    let meta_path = metadata_path(path);
    let mut bytes = Vec::new();
    File::open(&meta_path)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .map_err(|error| io_error(&meta_path, error))?;
    let corrupt = |detail: String| FlashError::CorruptMetadata {
        path: meta_path.display().to_string(),
        detail,
    };
    let mut reader = MetadataReader {
        bytes: &bytes,
        offset: 0,
        path: &meta_path,
    };
    let version = match reader.take(8)? {
        magic if magic == METADATA_MAGIC_VERSION_1 => 1,
        magic if magic == METADATA_MAGIC => 2,
        _ => return Err(corrupt("wrong magic".to_string())),
    };
    let seed = reader.u64()?;
    let now_ns = reader.u64()?;
    let operation_counter = reader.u64()?;
    let config_length = reader.u64()? as usize;
    let config_text = std::str::from_utf8(reader.take(config_length)?)
        .map_err(|_| corrupt("configuration is not UTF-8".to_string()))?;
    let config = FlashConfig::from_toml(config_text, &meta_path.display().to_string())?;
    let block_count = reader.u64()?;
    if block_count != config.total_blocks() {
        return Err(corrupt(format!(
            "{block_count} blocks recorded, the geometry has {}",
            config.total_blocks()
        )));
    }
    let mut blocks = Vec::with_capacity(block_count as usize);
    for _ in 0..block_count {
        blocks.push(BlockState {
            pe_cycles: reader.u32()?,
            next_page: reader.u32()?,
            reads_since_erase: reader.u32()?,
            grown_bad: reader.u32()? != 0,
            programmed_at_ns: reader.u64()?,
        });
    }
    let journal_generation = if version == 1 {
        0
    } else {
        let generation = reader.u64()?;
        let checked_bytes = reader.offset;
        let crc = reader.u32()?;
        if crc32c::crc32c(&bytes[..checked_bytes]) != crc {
            return Err(corrupt("checksum mismatch".to_string()));
        }
        generation
    };
    let mut metadata = Metadata {
        config,
        seed,
        now_ns,
        operation_counter,
        blocks,
        journal_generation,
    };
    replay_journal(path, &mut metadata)?;
    Ok(metadata)
}

/// Applies the journal's records to `metadata` when the journal continues it (same
/// generation), up to the first torn or damaged record (the last append of a process
/// that died); a missing, empty or older journal adds nothing.
fn replay_journal(path: &Path, metadata: &mut Metadata) -> Result<(), FlashError> {
    let journal_path = journal_path(path);
    let bytes = match std::fs::read(&journal_path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io_error(&journal_path, error)),
    };
    if bytes.len() < JOURNAL_HEADER_BYTES
        || bytes[..JOURNAL_HEADER_BYTES] != journal_header(metadata.journal_generation)
    {
        return Ok(());
    }
    let pages_per_block = metadata.config.geometry.pages_per_block;
    for record in bytes[JOURNAL_HEADER_BYTES..].chunks_exact(JOURNAL_RECORD_BYTES) {
        let Some((block_index, block, now_ns)) = decode_journal_record(record) else {
            break;
        };
        let Some(slot) = metadata.blocks.get_mut(block_index as usize) else {
            break;
        };
        if block.next_page > pages_per_block {
            break;
        }
        *slot = block;
        metadata.now_ns = metadata.now_ns.max(now_ns);
    }
    Ok(())
}
