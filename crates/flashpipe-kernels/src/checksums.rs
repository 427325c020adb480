//! Checksum kernels: CRC32C (parallel: chunk CRCs are combined in order with
//! `crc32c::crc32c_combine`) and SHA-256 (sequential: the digest state is a chain).

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::api::{
    Chunk, ChunkMapper, ChunkPart, FileInfo, FileJob, Kernel, OutputSink, PartReducer,
    SequentialJob, Summary,
};
use crate::error::{KernelError, OptionsError};
use crate::options::{encode_hex, KernelOptions};

/// CRC32C (Castagnoli) of each file.
#[derive(Debug, Default)]
pub struct Crc32cKernel;

impl Crc32cKernel {
    /// Builds from (empty) options.
    pub fn from_options(_options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        Ok(Arc::new(Self))
    }
}

struct Crc32cMapper;

impl ChunkMapper for Crc32cMapper {
    fn map_chunk(&self, chunk: &Chunk<'_>) -> Result<ChunkPart, KernelError> {
        Ok(ChunkPart::new(chunk, crc32c::crc32c(chunk.data)))
    }
}

struct Crc32cReducer {
    file: FileInfo,
    combined: u32,
    reduced_bytes: u64,
}

impl PartReducer for Crc32cReducer {
    fn reduce_part(
        &mut self,
        part: ChunkPart,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        let length_bytes = part.length_bytes;
        let chunk_crc: u32 = part.into_partial(&self.file)?;
        // The CRC of the first part is the running CRC: combining with the empty prefix
        // would give it back at about 25 us a call, a cost that dominated many small files.
        self.combined = if self.reduced_bytes == 0 {
            chunk_crc
        } else {
            crc32c::crc32c_combine(self.combined, chunk_crc, length_bytes)
        };
        self.reduced_bytes += length_bytes as u64;
        Ok(())
    }

    fn finish(self: Box<Self>, _sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        Ok(Summary::Digest {
            algorithm: "crc32c".into(),
            hex: format!("{:08x}", self.combined),
        })
    }
}

impl Kernel for Crc32cKernel {
    fn name(&self) -> &'static str {
        "crc32c"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        Ok(FileJob::Parallel {
            mapper: Arc::new(Crc32cMapper),
            reducer: Box::new(Crc32cReducer {
                file: file.clone(),
                combined: 0,
                reduced_bytes: 0,
            }),
        })
    }
}

/// SHA-256 of each file.
#[derive(Debug, Default)]
pub struct Sha256Kernel;

impl Sha256Kernel {
    /// Builds from (empty) options.
    pub fn from_options(_options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        Ok(Arc::new(Self))
    }
}

struct Sha256Job {
    hasher: Sha256,
}

impl SequentialJob for Sha256Job {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        self.hasher.update(chunk.data);
        Ok(())
    }

    fn finish(self: Box<Self>, _sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        Ok(Summary::Digest {
            algorithm: "sha256".into(),
            hex: encode_hex(&self.hasher.finalize()),
        })
    }
}

impl Kernel for Sha256Kernel {
    fn name(&self) -> &'static str {
        "sha256"
    }

    fn start_file(&self, _file: &FileInfo) -> Result<FileJob, KernelError> {
        Ok(FileJob::Sequential(Box::new(Sha256Job {
            hasher: Sha256::new(),
        })))
    }
}
