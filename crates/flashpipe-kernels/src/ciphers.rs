//! Block and stream cipher kernels: DES-ECB (parallel, RAD's kernel), DES-CBC (sequential: each
//! block depends on the previous ciphertext), both on the table-driven block function of
//! [`crate::des_block`], and AES-128-CTR (RustCrypto `aes` + `ctr`; parallel: the keystream is
//! seeked to each chunk's offset).
//!
//! DES uses PKCS#7 padding by default (as `openssl enc` does), so any file length works; with
//! `padding=none` the input must be a whole number of 8-byte blocks. Decryption checks and strips
//! the padding. CTR needs no padding: the output has the input's length.

use std::sync::{Arc, Mutex};

use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};

use crate::api::{
    Chunk, ChunkMapper, ChunkPart, FileInfo, FileJob, Kernel, OutputSink, PartReducer,
    SequentialJob, Summary,
};
use crate::des_block::DesBlockCipher;
use crate::error::{KernelError, KernelErrorKind, OptionsError};
use crate::options::{KernelOptions, OptionSpec};
use crate::records::{start_record_job, RecordKernel};

/// DES block size.
pub const DES_BLOCK_BYTES: usize = 8;

/// Encrypt or decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Plaintext in, ciphertext out.
    Encrypt,
    /// Ciphertext in, plaintext out.
    Decrypt,
}

/// Options shared by the DES kernels.
pub const DES_ECB_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required("key", "DES key, 16 hex digits"),
    OptionSpec::optional("direction", "encrypt", "encrypt or decrypt"),
    OptionSpec::optional(
        "padding",
        "pkcs7",
        "pkcs7 (any length) or none (whole 8-byte blocks only)",
    ),
];

/// Options of DES-CBC.
pub const DES_CBC_OPTIONS: &[OptionSpec] = &[
    DES_ECB_OPTIONS[0],
    OptionSpec::required("iv", "initialisation vector, 16 hex digits"),
    DES_ECB_OPTIONS[1],
    DES_ECB_OPTIONS[2],
];

/// Options of AES-128-CTR.
pub const AES_CTR_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required("key", "AES-128 key, 32 hex digits"),
    OptionSpec::required(
        "iv",
        "initial 128-bit counter block (big-endian counter), 32 hex digits",
    ),
];

/// Settings common to both DES modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DesSettings {
    /// The 8-byte key (parity bits ignored, as in DES).
    pub key: [u8; 8],
    /// Encrypt or decrypt.
    pub direction: Direction,
    /// Whether PKCS#7 padding is added/removed.
    pub pkcs7_padding: bool,
}

impl DesSettings {
    /// Parses `key`, `direction` and `padding`.
    pub fn from_options(options: &KernelOptions) -> Result<Self, OptionsError> {
        let key = options.hex_bytes("key", 8)?;
        let direction = match options.choice("direction", &["encrypt", "decrypt"])? {
            "encrypt" => Direction::Encrypt,
            _ => Direction::Decrypt,
        };
        let pkcs7_padding = options.choice("padding", &["pkcs7", "none"])? == "pkcs7";
        Ok(Self {
            key: key.try_into().expect("length checked by hex_bytes"),
            direction,
            pkcs7_padding,
        })
    }
}

/// Appends PKCS#7 padding to a final short block.
fn pkcs7_pad(short_block: &[u8]) -> [u8; DES_BLOCK_BYTES] {
    assert!(short_block.len() < DES_BLOCK_BYTES);
    let pad = (DES_BLOCK_BYTES - short_block.len()) as u8;
    let mut block = [pad; DES_BLOCK_BYTES];
    block[..short_block.len()].copy_from_slice(short_block);
    block
}

/// Returns the plaintext of a final decrypted block without its PKCS#7 padding.
fn pkcs7_unpad(block: &[u8]) -> Option<&[u8]> {
    let pad = *block.last()? as usize;
    if pad == 0
        || pad > block.len()
        || !block[block.len() - pad..]
            .iter()
            .all(|&byte| byte as usize == pad)
    {
        return None;
    }
    Some(&block[..block.len() - pad])
}

/// Checks a file length against the padding mode and direction before any chunk is read.
fn check_des_length(file: &FileInfo, settings: &DesSettings) -> Result<(), KernelError> {
    let remainder = file.size_bytes % DES_BLOCK_BYTES as u64;
    let needs_whole_blocks = !settings.pkcs7_padding || settings.direction == Direction::Decrypt;
    if needs_whole_blocks && remainder != 0 {
        return Err(file.error_at(
            file.size_bytes - remainder,
            KernelErrorKind::WrongLength(format!(
                "{} bytes is not a whole number of 8-byte DES blocks",
                file.size_bytes
            )),
        ));
    }
    if settings.direction == Direction::Decrypt && settings.pkcs7_padding && file.size_bytes == 0 {
        return Err(file.error_at(
            0,
            KernelErrorKind::WrongLength("padded ciphertext cannot be empty".into()),
        ));
    }
    Ok(())
}

/// DES in ECB mode: blocks are independent, so chunks run in parallel.
pub struct DesEcbKernel {
    settings: DesSettings,
    cipher: DesBlockCipher,
}

impl DesEcbKernel {
    /// A kernel with these settings.
    pub fn new(settings: DesSettings) -> Self {
        Self {
            cipher: DesBlockCipher::new(settings.key),
            settings,
        }
    }

    /// Builds from options.
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        Ok(Arc::new(Arc::new(Self::new(DesSettings::from_options(
            options,
        )?))))
    }

    fn transform(&self, records: &[u8]) -> Vec<u8> {
        assert_eq!(
            records.len() % DES_BLOCK_BYTES,
            0,
            "ECB is given whole blocks"
        );
        let mut output = Vec::with_capacity(records.len());
        for block in records.chunks_exact(DES_BLOCK_BYTES) {
            let value = u64::from_be_bytes(block.try_into().expect("eight bytes"));
            let transformed = match self.settings.direction {
                Direction::Encrypt => self.cipher.encrypt_block(value),
                Direction::Decrypt => self.cipher.decrypt_block(value),
            };
            output.extend_from_slice(&transformed.to_be_bytes());
        }
        output
    }
}

/// Per-file state of DES-ECB: the last decrypted block is held back until we know whether it is
/// the final (padded) one.
pub struct DesEcbAccumulator {
    held_back_block: Vec<u8>,
    output_bytes: u64,
}

impl RecordKernel for DesEcbKernel {
    type Partial = Vec<u8>;
    type Accumulator = DesEcbAccumulator;

    fn record_size_bytes(&self) -> usize {
        DES_BLOCK_BYTES
    }

    fn map_records(
        &self,
        _file: &FileInfo,
        _offset_bytes: u64,
        records: &[u8],
    ) -> Result<Vec<u8>, KernelError> {
        Ok(self.transform(records))
    }

    fn new_accumulator(&self, _file: &FileInfo) -> DesEcbAccumulator {
        DesEcbAccumulator {
            held_back_block: Vec::new(),
            output_bytes: 0,
        }
    }

    fn fold(
        &self,
        accumulator: &mut DesEcbAccumulator,
        output: Vec<u8>,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        let hold_back =
            self.settings.direction == Direction::Decrypt && self.settings.pkcs7_padding;
        if !hold_back {
            accumulator.output_bytes += output.len() as u64;
            return sink.write_output(&output);
        }
        let write_now = output.len() - DES_BLOCK_BYTES;
        sink.write_output(&accumulator.held_back_block)?;
        sink.write_output(&output[..write_now])?;
        accumulator.output_bytes += (accumulator.held_back_block.len() + write_now) as u64;
        accumulator.held_back_block = output[write_now..].to_vec();
        Ok(())
    }

    fn finish(
        &self,
        accumulator: DesEcbAccumulator,
        file: &FileInfo,
        offset_bytes: u64,
        short_record: &[u8],
        sink: &mut dyn OutputSink,
    ) -> Result<Summary, KernelError> {
        let mut output_bytes = accumulator.output_bytes;
        match (self.settings.direction, self.settings.pkcs7_padding) {
            (Direction::Encrypt, true) => {
                let block = self.transform(&pkcs7_pad(short_record));
                sink.write_output(&block)?;
                output_bytes += block.len() as u64;
            }
            (Direction::Decrypt, true) => {
                let plaintext = pkcs7_unpad(&accumulator.held_back_block).ok_or_else(|| {
                    file.error_at(
                        offset_bytes.saturating_sub(8),
                        KernelErrorKind::InvalidPadding,
                    )
                })?;
                sink.write_output(plaintext)?;
                output_bytes += plaintext.len() as u64;
            }
            (_, false) => assert!(short_record.is_empty(), "length checked at start"),
        }
        Ok(Summary::Stream { output_bytes })
    }
}

impl Kernel for Arc<DesEcbKernel> {
    fn name(&self) -> &'static str {
        "des-ecb"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        check_des_length(file, &self.settings)?;
        Ok(start_record_job(self, file))
    }
}

/// DES in CBC mode: sequential within a file.
pub struct DesCbcKernel {
    settings: DesSettings,
    iv: [u8; 8],
}

impl DesCbcKernel {
    /// A kernel with these settings and initialisation vector.
    pub fn new(settings: DesSettings, iv: [u8; 8]) -> Self {
        Self { settings, iv }
    }

    /// Builds from options.
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let settings = DesSettings::from_options(options)?;
        let iv = options
            .hex_bytes("iv", 8)?
            .try_into()
            .expect("length checked");
        Ok(Arc::new(Self::new(settings, iv)))
    }
}

impl Kernel for DesCbcKernel {
    fn name(&self) -> &'static str {
        "des-cbc"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        check_des_length(file, &self.settings)?;
        let mode = CbcChain {
            cipher: DesBlockCipher::new(self.settings.key),
            direction: self.settings.direction,
            previous_ciphertext: u64::from_be_bytes(self.iv),
        };
        Ok(FileJob::Sequential(Box::new(DesCbcJob {
            file: file.clone(),
            mode,
            pkcs7_padding: self.settings.pkcs7_padding,
            carry: Vec::with_capacity(DES_BLOCK_BYTES),
            held_back_block: Vec::new(),
            next_offset_bytes: 0,
            output_bytes: 0,
        })))
    }
}

/// CBC chaining over the DES block function: C_i = E(P_i xor C_i-1), P_i = D(C_i) xor C_i-1,
/// with C_0 the initialisation vector (NIST SP 800-38A 6.2).
struct CbcChain {
    cipher: DesBlockCipher,
    direction: Direction,
    previous_ciphertext: u64,
}

impl CbcChain {
    fn apply(&mut self, blocks_bytes: &mut [u8]) {
        assert_eq!(
            blocks_bytes.len() % DES_BLOCK_BYTES,
            0,
            "CBC is given whole blocks"
        );
        for block in blocks_bytes.chunks_exact_mut(DES_BLOCK_BYTES) {
            let value = u64::from_be_bytes((&*block).try_into().expect("eight bytes"));
            let transformed = match self.direction {
                Direction::Encrypt => {
                    let ciphertext = self.cipher.encrypt_block(value ^ self.previous_ciphertext);
                    self.previous_ciphertext = ciphertext;
                    ciphertext
                }
                Direction::Decrypt => {
                    let plaintext = self.cipher.decrypt_block(value) ^ self.previous_ciphertext;
                    self.previous_ciphertext = value;
                    plaintext
                }
            };
            block.copy_from_slice(&transformed.to_be_bytes());
        }
    }
}

struct DesCbcJob {
    file: FileInfo,
    mode: CbcChain,
    pkcs7_padding: bool,
    carry: Vec<u8>,
    held_back_block: Vec<u8>,
    next_offset_bytes: u64,
    output_bytes: u64,
}

impl DesCbcJob {
    fn emit(&mut self, mut output: Vec<u8>, sink: &mut dyn OutputSink) -> Result<(), KernelError> {
        let hold_back = self.mode.direction == Direction::Decrypt && self.pkcs7_padding;
        if hold_back && !output.is_empty() {
            let last = output.split_off(output.len() - DES_BLOCK_BYTES);
            let earlier = std::mem::replace(&mut self.held_back_block, last);
            sink.write_output(&earlier)?;
            self.output_bytes += earlier.len() as u64;
        }
        self.output_bytes += output.len() as u64;
        sink.write_output(&output)
    }
}

impl SequentialJob for DesCbcJob {
    fn process_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        chunk.advance_in_order(&mut self.next_offset_bytes);
        let total = self.carry.len() + chunk.data.len();
        let whole_length = total / DES_BLOCK_BYTES * DES_BLOCK_BYTES;
        let mut blocks = Vec::with_capacity(whole_length);
        let from_chunk = whole_length.saturating_sub(self.carry.len());
        if whole_length > 0 {
            blocks.extend_from_slice(&self.carry);
            blocks.extend_from_slice(&chunk.data[..from_chunk]);
            self.carry.clear();
            self.carry.extend_from_slice(&chunk.data[from_chunk..]);
        } else {
            self.carry.extend_from_slice(chunk.data);
        }
        self.mode.apply(&mut blocks);
        self.emit(blocks, sink)
    }

    fn finish(mut self: Box<Self>, sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        if self.mode.direction == Direction::Encrypt && self.pkcs7_padding {
            let mut block = pkcs7_pad(&self.carry).to_vec();
            self.mode.apply(&mut block);
            self.emit(block, sink)?;
        } else if self.pkcs7_padding {
            let plaintext = pkcs7_unpad(&self.held_back_block).ok_or_else(|| {
                self.file.error_at(
                    self.next_offset_bytes.saturating_sub(8),
                    KernelErrorKind::InvalidPadding,
                )
            })?;
            sink.write_output(plaintext)?;
            self.output_bytes += plaintext.len() as u64;
        }
        Ok(Summary::Stream {
            output_bytes: self.output_bytes,
        })
    }
}

/// AES-128 in CTR mode with a 128-bit big-endian counter: parallel, chunk keystreams are seeked to
/// the chunk's offset.
///
/// A chunk's output goes into a buffer reused from earlier chunks (the reducer hands each back
/// once the sink has taken its bytes), so no chunk allocates and faults in fresh pages; the
/// input is copied into it and encrypted in place a cache-sized piece at a time, while the piece
/// is still in the cache (one pass over memory instead of a copy, then an encryption).
pub struct Aes128CtrKernel {
    key: [u8; 16],
    iv: [u8; 16],
    spare_outputs: Mutex<Vec<Vec<u8>>>,
}

/// Most output buffers an AES kernel keeps for reuse. The buffers handed back are never more than
/// the chunks the pipeline holds between its workers and its reducer at once (memory it held
/// anyway), so the limit is only a backstop; one below that depth would free and fault in fresh
/// buffers again on every chunk past it.
const AES_SPARE_OUTPUTS_LIMIT: usize = 256;

/// Bytes copied and then encrypted in place at a time (well inside a core's L1/L2 cache).
const AES_PIECE_BYTES: usize = 16 * 1024;

type Aes128Ctr = ctr::Ctr128BE<aes::Aes128>;

impl Aes128CtrKernel {
    /// A kernel with this key and initial counter block.
    pub fn new(key: [u8; 16], iv: [u8; 16]) -> Self {
        Self {
            key,
            iv,
            spare_outputs: Mutex::new(Vec::new()),
        }
    }

    /// Builds from options.
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let key = options
            .hex_bytes("key", 16)?
            .try_into()
            .expect("length checked");
        let iv = options
            .hex_bytes("iv", 16)?
            .try_into()
            .expect("length checked");
        Ok(Arc::new(Arc::new(Self::new(key, iv))))
    }

    /// Encrypts (or decrypts: the same operation) `input` found at `offset_bytes` of the stream.
    pub fn apply_at(&self, offset_bytes: u64, input: &[u8]) -> Vec<u8> {
        let mut stream = Aes128Ctr::new(&self.key.into(), &self.iv.into());
        stream.seek(offset_bytes);
        let mut output = self.spare_output();
        output.reserve(input.len());
        for piece in input.chunks(AES_PIECE_BYTES) {
            let start = output.len();
            output.extend_from_slice(piece);
            stream.apply_keystream(&mut output[start..]);
        }
        assert_eq!(
            output.len(),
            input.len(),
            "CTR output has the input's length"
        );
        output
    }

    /// An empty output buffer: a spare one when there is one (its capacity kept), else new.
    fn spare_output(&self) -> Vec<u8> {
        let mut spare = self
            .spare_outputs
            .lock()
            .expect("nothing panics holding the spare outputs")
            .pop()
            .unwrap_or_default();
        spare.clear();
        spare
    }

    /// Keeps `output` for a later chunk (up to [`AES_SPARE_OUTPUTS_LIMIT`] buffers).
    fn give_back_output(&self, output: Vec<u8>) {
        let mut spares = self
            .spare_outputs
            .lock()
            .expect("nothing panics holding the spare outputs");
        if spares.len() < AES_SPARE_OUTPUTS_LIMIT {
            spares.push(output);
        }
    }
}

impl ChunkMapper for Arc<Aes128CtrKernel> {
    fn map_chunk(&self, chunk: &Chunk<'_>) -> Result<ChunkPart, KernelError> {
        Ok(ChunkPart::new(
            chunk,
            self.apply_at(chunk.offset_bytes, chunk.data),
        ))
    }
}

struct InOrderStreamReducer {
    file: FileInfo,
    output_bytes: u64,
    kernel: Arc<Aes128CtrKernel>,
}

impl PartReducer for InOrderStreamReducer {
    fn reduce_part(
        &mut self,
        part: ChunkPart,
        sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        let output: Vec<u8> = part.into_partial(&self.file)?;
        self.output_bytes += output.len() as u64;
        let written = sink.write_output(&output);
        self.kernel.give_back_output(output);
        written
    }

    fn finish(self: Box<Self>, _sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        Ok(Summary::Stream {
            output_bytes: self.output_bytes,
        })
    }
}

impl Kernel for Arc<Aes128CtrKernel> {
    fn name(&self) -> &'static str {
        "aes128-ctr"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        Ok(FileJob::Parallel {
            mapper: Arc::new(Arc::clone(self)),
            reducer: Box::new(InOrderStreamReducer {
                file: file.clone(),
                output_bytes: 0,
                kernel: Arc::clone(self),
            }),
        })
    }
}
