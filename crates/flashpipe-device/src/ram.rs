//! The RAM disk (the HWFS thesis's RAM Disk, ch. 3.2.2): blocks held in memory.
//!
//! Requests are carried out at submission (one `memcpy`) and their completions wait in a
//! bounded ready queue until reaped, so the queue-depth contract holds as for any device.
//! Its clock is real by default; a virtual clock may be given so that it can sit beside
//! simulated devices (it then takes zero virtual time).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::batch::hand_over;
use crate::clock::{Clock, RealClock};
use crate::error::{DeviceError, DeviceErrorKind, Rejected};
use crate::request::{check_queue_depth, BlockDevice, Completion, DeviceInfo, Operation, Request};

/// A block device in memory.
pub struct RamDisk {
    info: DeviceInfo,
    clock: Arc<dyn Clock>,
    bytes: Vec<u8>,
    ready: VecDeque<Completion>,
}

impl RamDisk {
    /// A zero-filled RAM disk on the real clock.
    pub fn new(
        name: &str,
        block_size_bytes: u32,
        block_count: u64,
        queue_depth: u32,
    ) -> Result<RamDisk, DeviceError> {
        RamDisk::with_clock(
            name,
            block_size_bytes,
            block_count,
            queue_depth,
            RealClock::shared(),
        )
    }

    /// A zero-filled RAM disk on `clock`.
    pub fn with_clock(
        name: &str,
        block_size_bytes: u32,
        block_count: u64,
        queue_depth: u32,
        clock: Arc<dyn Clock>,
    ) -> Result<RamDisk, DeviceError> {
        let name: Arc<str> = Arc::from(name);
        check_queue_depth(&name, queue_depth)?;
        let size_bytes = check_geometry(&name, block_size_bytes, block_count)?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(size_bytes).map_err(|_| {
            DeviceError::new(
                &name,
                DeviceErrorKind::Open {
                    detail: format!("cannot allocate {size_bytes} bytes of memory"),
                },
            )
        })?;
        bytes.resize(size_bytes, 0);
        Ok(RamDisk {
            info: DeviceInfo {
                name,
                block_size_bytes,
                block_count,
                queue_depth,
            },
            clock,
            bytes,
            ready: VecDeque::with_capacity(queue_depth as usize),
        })
    }

    fn execute(&mut self, operation: &mut Operation) {
        let block_size_bytes = self.info.block_size_bytes as usize;
        match operation {
            Operation::Read {
                first_block,
                buffer,
            } => {
                let start = *first_block as usize * block_size_bytes;
                let length = buffer.len();
                buffer.copy_from_slice(&self.bytes[start..start + length]);
            }
            Operation::Write {
                first_block,
                buffer,
            } => {
                let start = *first_block as usize * block_size_bytes;
                self.bytes[start..start + buffer.len()].copy_from_slice(buffer);
            }
            Operation::Trim {
                first_block,
                block_count,
            } => {
                let start = *first_block as usize * block_size_bytes;
                let end = start + *block_count as usize * block_size_bytes;
                self.bytes[start..end].fill(0);
            }
            Operation::Flush => {}
            Operation::CopyByReference { .. } => {
                panic!("RamDisk::submit refuses copy by reference before executing")
            }
        }
    }
}

/// Checks that a device geometry is usable: block size a power of two of 512 bytes or
/// more, at least one block, and a size that fits in memory. Returns the size in bytes.
pub fn check_geometry(
    name: &Arc<str>,
    block_size_bytes: u32,
    block_count: u64,
) -> Result<usize, DeviceError> {
    let open_error = |detail: String| DeviceError::new(name, DeviceErrorKind::Open { detail });
    if block_size_bytes < 512 || !block_size_bytes.is_power_of_two() {
        return Err(open_error(format!(
            "block size {block_size_bytes} is not a power of two of at least 512 bytes"
        )));
    }
    if block_count == 0 {
        return Err(open_error("a device needs at least one block".to_string()));
    }
    block_count
        .checked_mul(u64::from(block_size_bytes))
        .and_then(|size| usize::try_from(size).ok())
        .ok_or_else(|| open_error(format!("{block_count} blocks do not fit in memory")))
}

impl BlockDevice for RamDisk {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if self.ready.len() >= self.info.queue_depth as usize {
            return Err(self.info.queue_full(request));
        }
        if let Err(error) = self.info.validate(&request.operation) {
            return Err(Rejected { request, error });
        }
        let mut request = self.info.refuse_copy_by_reference(request)?;
        self.execute(&mut request.operation);
        self.ready.push_back(Completion {
            tag: request.tag,
            status: Ok(()),
            buffer: request.into_buffer(),
        });
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        hand_over(&mut self.ready, completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        match self.poll_completions(completions) {
            0 => Err(self.info.nothing_in_flight()),
            count => Ok(count),
        }
    }

    fn in_flight(&self) -> usize {
        self.ready.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;

    #[test]
    fn ram_disk_passes_the_conformance_suite() {
        conformance::check_all(&mut |queue_depth| {
            Box::new(RamDisk::new("ram0", 512, 4096, queue_depth).unwrap())
        });
    }

    #[test]
    fn bad_geometry_is_refused_with_the_device_name() {
        for (block_size_bytes, block_count, queue_depth) in [
            (0, 8, 1),
            (1000, 8, 1),
            (512, 0, 1),
            (512, 8, 0),
            (512, 8, 5000),
        ] {
            let error = RamDisk::new("ramX", block_size_bytes, block_count, queue_depth)
                .err()
                .unwrap();
            assert_eq!(&*error.device, "ramX");
            assert!(matches!(error.kind, DeviceErrorKind::Open { .. }));
        }
    }
}
