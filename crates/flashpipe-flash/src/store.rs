//! Where the array keeps its pages and its block table: nowhere (timing only), in memory
//! (sparse), or in a sparse backing file with a metadata file beside it for reopening.
//!
//! The backing file holds raw pages (data, host spare, ECC parity) at
//! `page_index * raw_page_bytes`; pages never programmed are holes. The metadata file
//! (`<path>.meta`) holds the configuration, the seed, the virtual time, the operation
//! counter and the block table; it is written by `sync` and read by `open`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::config::{ConfigError, FlashConfig};

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
    Memory(HashMap<u64, Box<[u8]>>),
    File { file: File, path: PathBuf },
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
                }
            }
        })
    }

    pub(crate) fn reopen(path: &Path) -> Result<PageStore, FlashError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|error| io_error(path, error))?;
        Ok(PageStore::File {
            file,
            path: path.to_path_buf(),
        })
    }

    pub(crate) fn keeps_data(&self) -> bool {
        !matches!(self, PageStore::TimingOnly)
    }

    pub(crate) fn write_page(&mut self, page_index: u64, raw: &[u8]) -> Result<(), FlashError> {
        match self {
            PageStore::TimingOnly => Ok(()),
            PageStore::Memory(pages) => {
                pages.insert(page_index, raw.into());
                Ok(())
            }
            PageStore::File { file, path } => file
                .write_all_at(raw, page_index * raw.len() as u64)
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
            PageStore::File { file, path } => file
                .read_exact_at(raw, page_index * raw.len() as u64)
                .map_err(|error| io_error(path, error)),
        }
    }

    pub(crate) fn erase_block(&mut self, first_page: u64, page_count: u64) {
        if let PageStore::Memory(pages) = self {
            for page_index in first_page..first_page + page_count {
                pages.remove(&page_index);
            }
        }
    }

    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            PageStore::File { path, .. } => Some(path),
            _ => None,
        }
    }

    pub(crate) fn sync_data(&self) -> Result<(), FlashError> {
        if let PageStore::File { file, path } = self {
            file.sync_data().map_err(|error| io_error(path, error))?;
        }
        Ok(())
    }
}

const METADATA_MAGIC: &[u8; 8] = b"FPFLASH1";

/// Everything besides page contents that a reopen needs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metadata {
    pub config: FlashConfig,
    pub seed: u64,
    pub now_ns: u64,
    pub operation_counter: u64,
    pub blocks: Vec<BlockState>,
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
    let meta_path = metadata_path(path);
    let temporary = meta_path.with_extension("meta.tmp");
    let mut file = File::create(&temporary).map_err(|error| io_error(&temporary, error))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(|error| io_error(&temporary, error))?;
    std::fs::rename(&temporary, &meta_path).map_err(|error| io_error(&meta_path, error))
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
    if reader.take(8)? != METADATA_MAGIC {
        return Err(corrupt("wrong magic".to_string()));
    }
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
    Ok(Metadata {
        config,
        seed,
        now_ns,
        operation_counter,
        blocks,
    })
}
