//! Block I/O helpers over a [`BlockDevice`]: FS-block geometry, batched reads and writes
//! that keep the device queue full, and a batch runner that never leaves a buffer with
//! the device after an error.

use flashpipe_device::{run_batch, BlockDevice, Completion, DeviceError, IoBuf, Operation};

/// Largest single request the file system issues, in bytes (bigger transfers become
/// several requests in flight at once).
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// How FS blocks map onto device blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// FS block size `B`.
    pub fs_block_size_bytes: u32,
    /// FS blocks in the file system.
    pub fs_block_count: u64,
    /// Device blocks per FS block.
    pub device_blocks_per_fs_block: u64,
}

impl Geometry {
    /// The geometry of `fs_block_size_bytes` blocks over a device with
    /// `device_block_size_bytes` blocks.
    pub fn new(
        fs_block_size_bytes: u32,
        fs_block_count: u64,
        device_block_size_bytes: u32,
    ) -> Geometry {
        assert_eq!(fs_block_size_bytes % device_block_size_bytes, 0);
        Geometry {
            fs_block_size_bytes,
            fs_block_count,
            device_blocks_per_fs_block: u64::from(fs_block_size_bytes / device_block_size_bytes),
        }
    }

    /// `B` as a u64.
    pub fn block_bytes(&self) -> u64 {
        u64::from(self.fs_block_size_bytes)
    }

    /// The first device block of FS block `fs_block`.
    pub fn device_block(&self, fs_block: u64) -> u64 {
        assert!(
            fs_block < self.fs_block_count,
            "FS block {fs_block} out of range"
        );
        fs_block * self.device_blocks_per_fs_block
    }

    /// Most FS blocks in one request.
    pub fn max_blocks_per_request(&self) -> u64 {
        (MAX_REQUEST_BYTES / self.block_bytes()).max(1)
    }

    /// Capacity in bytes: the largest possible file.
    pub fn capacity_bytes(&self) -> u64 {
        self.fs_block_count * self.block_bytes()
    }
}

/// Like [`run_batch`], but when it fails, waits for every request still in flight so
/// that no buffer (in particular a view of a caller's buffer) stays with the device.
pub fn run_operations(
    device: &mut dyn BlockDevice,
    operations: Vec<Operation>,
) -> Result<Vec<Completion>, DeviceError> {
    if operations.is_empty() {
        return Ok(Vec::new());
    }
    let result = run_batch(device, operations);
    if result.is_err() {
        let mut discarded = Vec::new();
        while device.in_flight() > 0 {
            if device.wait_completions(&mut discarded).is_err() {
                break;
            }
            discarded.clear();
        }
    }
    result
}

/// Reads whole FS blocks (one request each, all in flight together) and returns their
/// buffers in the order given.
pub fn read_fs_blocks(
    device: &mut dyn BlockDevice,
    geometry: &Geometry,
    blocks: &[u64],
) -> Result<Vec<IoBuf>, DeviceError> {
    let operations = blocks
        .iter()
        .map(|&block| Operation::Read {
            first_block: geometry.device_block(block),
            buffer: IoBuf::zeroed(geometry.fs_block_size_bytes as usize),
        })
        .collect();
    let completions = run_operations(device, operations)?;
    Ok(completions
        .into_iter()
        .map(|completion| completion.buffer.expect("a read hands its buffer back"))
        .collect())
}

/// Writes whole FS blocks (`(block, buffer of B bytes)`), all in flight together.
pub fn write_fs_blocks(
    device: &mut dyn BlockDevice,
    geometry: &Geometry,
    writes: Vec<(u64, IoBuf)>,
) -> Result<(), DeviceError> {
    run_operations(device, block_writes(geometry, writes)).map(|_| ())
}

/// The writes of whole FS blocks `(block, buffer of B bytes)`, in the order given.
pub(crate) fn block_writes(geometry: &Geometry, writes: Vec<(u64, IoBuf)>) -> Vec<Operation> {
    writes
        .into_iter()
        .map(|(block, buffer)| {
            assert_eq!(buffer.len() as u64 % geometry.block_bytes(), 0);
            Operation::Write {
                first_block: geometry.device_block(block),
                buffer,
            }
        })
        .collect()
}

/// Makes every completed write durable.
pub fn flush_device(device: &mut dyn BlockDevice) -> Result<(), DeviceError> {
    run_operations(device, vec![Operation::Flush]).map(|_| ())
}

/// Spare request buffers kept between writes, so that a stream of writes does not
/// allocate (and page-fault) a fresh buffer for every request.
#[derive(Debug, Default)]
pub struct BufferRecycler {
    spare: Vec<IoBuf>,
}

/// Most spare buffers kept (each at most [`MAX_REQUEST_BYTES`] long).
const MAX_SPARE_BUFFERS: usize = 32;

impl BufferRecycler {
    /// A buffer of `length_bytes` (at most [`MAX_REQUEST_BYTES`]) with unspecified
    /// contents: the caller writes every byte.
    pub fn take(&mut self, length_bytes: usize) -> IoBuf {
        assert!(length_bytes as u64 <= MAX_REQUEST_BYTES);
        let fitting = self
            .spare
            .iter()
            .position(|buffer| buffer.capacity() >= length_bytes);
        let mut buffer = match fitting {
            Some(position) => self.spare.swap_remove(position),
            None => IoBuf::zeroed(length_bytes.next_power_of_two()),
        };
        buffer.set_len(length_bytes);
        buffer
    }

    /// Keeps a heap buffer for a later `take`.
    pub fn give_back(&mut self, buffer: IoBuf) {
        let recyclable =
            buffer.capacity() as u64 <= MAX_REQUEST_BYTES && buffer.pool_slot().is_none();
        if recyclable && self.spare.len() < MAX_SPARE_BUFFERS {
            self.spare.push(buffer);
        }
    }
}
