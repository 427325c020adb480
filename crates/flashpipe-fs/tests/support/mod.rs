//! Test helpers shared by the integration tests: a RAM disk that several owners can hold
//! at once (so a test can damage the image under a file system and mount it again), and
//! block-level peek and poke.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use flashpipe_device::{
    run_one, BlockDevice, Clock, Completion, DeviceError, DeviceInfo, IoBuf, Operation, RamDisk,
    Rejected, Request,
};

/// A RAM disk behind a mutex; clones share the image.
#[derive(Clone)]
pub struct SharedDisk {
    inner: Arc<Mutex<RamDisk>>,
    info: DeviceInfo,
}

impl SharedDisk {
    /// A zero-filled shared RAM disk.
    pub fn new(block_size_bytes: u32, block_count: u64) -> SharedDisk {
        let disk = RamDisk::new("shared0", block_size_bytes, block_count, 64).expect("RAM disk");
        let info = disk.info().clone();
        SharedDisk {
            inner: Arc::new(Mutex::new(disk)),
            info,
        }
    }

    /// A boxed handle on the same image.
    pub fn boxed(&self) -> Box<dyn BlockDevice> {
        Box::new(self.clone())
    }

    /// Reads `length` bytes at `byte_offset` (device-block aligned).
    pub fn peek(&self, byte_offset: u64, length: usize) -> Vec<u8> {
        let mut handle = self.clone();
        let block = byte_offset / u64::from(self.info.block_size_bytes);
        let completion = run_one(
            &mut handle,
            Operation::Read {
                first_block: block,
                buffer: IoBuf::zeroed(length),
            },
        )
        .expect("peek");
        completion.buffer.expect("buffer").to_vec()
    }

    /// Writes `bytes` at `byte_offset` (device-block aligned, whole blocks).
    pub fn poke(&self, byte_offset: u64, bytes: &[u8]) {
        let mut handle = self.clone();
        let block = byte_offset / u64::from(self.info.block_size_bytes);
        run_one(
            &mut handle,
            Operation::Write {
                first_block: block,
                buffer: IoBuf::from_slice(bytes),
            },
        )
        .expect("poke");
    }

    /// A copy of the whole image on a new, independent shared disk of `block_count`
    /// blocks (the copy is cut or zero-padded to fit).
    pub fn copy_to(&self, block_count: u64) -> SharedDisk {
        let copy = SharedDisk::new(self.info.block_size_bytes, block_count);
        let blocks = block_count.min(self.info.block_count);
        let bytes = self.peek(0, (blocks * u64::from(self.info.block_size_bytes)) as usize);
        copy.poke(0, &bytes);
        copy
    }
}

impl BlockDevice for SharedDisk {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.lock().expect("lock").clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        self.inner.lock().expect("lock").submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.inner
            .lock()
            .expect("lock")
            .poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.inner
            .lock()
            .expect("lock")
            .wait_completions(completions)
    }

    fn in_flight(&self) -> usize {
        self.inner.lock().expect("lock").in_flight()
    }
}

/// Deterministic test bytes.
pub fn pattern(length: usize, seed: u64) -> Vec<u8> {
    let mut generator = flashpipe_device::SplitMix64::new(seed);
    (0..length).map(|_| generator.next_u64() as u8).collect()
}
