//! The FTL as a [`BlockDevice`] (one logical block = one flash page), including
//! [`Operation::CopyByReference`], which it carries out by remapping; `submit_copy` and
//! `copy` offer the same with the FTL's own error type.

use std::sync::Arc;

use flashpipe_device::{
    wait_in_steps, BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo,
    Operation, Rejected, Request,
};

use crate::ftl::{Ftl, HostKind};
use crate::FtlError;

impl Ftl {
    /// Queues `copy(source, destination, count)`: the destination pages come to refer to
    /// the source's data without moving it (overlapping ranges behave as memmove). It
    /// completes, with `tag`, through `poll_completions`/`wait_completions` once its log
    /// record is durable. The FTL always copies by reference: no page is programmed.
    pub fn submit_copy(
        &mut self,
        tag: u64,
        source: u64,
        destination: u64,
        count: u64,
    ) -> Result<(), FtlError> {
        let block_count = self.info.block_count;
        for (first, what) in [(source, "source"), (destination, "destination")] {
            if first.checked_add(count).is_none_or(|end| end > block_count) {
                return Err(FtlError::OutOfRange {
                    detail: format!(
                        "copy {what} {first}..{} past the {block_count} logical blocks",
                        first.saturating_add(count)
                    ),
                });
            }
        }
        if self.host_in_flight() >= self.info.queue_depth as usize {
            return Err(FtlError::QueueFull);
        }
        self.open_host_op(tag, HostKind::Copy, destination, count, source, None);
        self.pump();
        Ok(())
    }

    /// Copies by reference and waits for it; needs no other host request in flight.
    pub fn copy(&mut self, source: u64, destination: u64, count: u64) -> Result<(), FtlError> {
        if self.host_in_flight() > 0 {
            return Err(FtlError::Busy);
        }
        self.submit_copy(u64::MAX, source, destination, count)?;
        let mut completions = Vec::new();
        while completions.is_empty() {
            self.wait_completions(&mut completions)?;
        }
        let completion = completions.pop().expect("one completion");
        completion.status.map_err(FtlError::Device)
    }

    /// Writes a checkpoint and hands the array back (a clean unmount); a read-only mount
    /// writes nothing.
    pub fn unmount(mut self) -> Box<dyn crate::FlashBackend> {
        self.run_until_quiet();
        if self.read_only {
            return self.into_backend();
        }
        self.checkpoint_now();
        self.run_until_quiet();
        self.into_backend()
    }
}

impl Ftl {
    /// True when mounted with [`Ftl::mount_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// What a read-only mount refuses, named for the error.
    fn refused_when_read_only(&self, operation: &Operation) -> Option<&'static str> {
        if !self.read_only {
            return None;
        }
        match operation {
            Operation::Write { .. } => Some("write (the flash device is mounted read-only)"),
            Operation::Trim { .. } => Some("trim (the flash device is mounted read-only)"),
            Operation::CopyByReference { .. } => {
                Some("copy by reference (the flash device is mounted read-only)")
            }
            Operation::Read { .. } | Operation::Flush => None,
        }
    }
}

impl BlockDevice for Ftl {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.backend.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        let request = self.info.admit(self.host_in_flight(), request)?;
        if let Some(operation) = self.refused_when_read_only(&request.operation) {
            let error =
                DeviceError::new(&self.info.name, DeviceErrorKind::Unsupported { operation });
            return Err(Rejected { request, error });
        }
        let block_bytes = self.info.block_size_bytes as usize;
        let tag = request.tag;
        match request.operation {
            Operation::Read {
                first_block,
                buffer,
            } => {
                let count = (buffer.len() / block_bytes) as u64;
                self.open_host_op(tag, HostKind::Read, first_block, count, 0, Some(buffer));
            }
            Operation::Write {
                first_block,
                buffer,
            } => {
                let count = (buffer.len() / block_bytes) as u64;
                self.open_host_op(tag, HostKind::Write, first_block, count, 0, Some(buffer));
            }
            Operation::Trim {
                first_block,
                block_count,
            } => self.open_host_op(tag, HostKind::Trim, first_block, block_count, 0, None),
            Operation::Flush => self.open_host_op(tag, HostKind::Flush, 0, 0, 0, None),
            Operation::CopyByReference {
                source_first_block,
                destination_first_block,
                block_count,
            } => self.open_host_op(
                tag,
                HostKind::Copy,
                destination_first_block,
                block_count,
                source_first_block,
                None,
            ),
        }
        self.pump();
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.pump();
        let count = self.host.ready.len();
        completions.append(&mut self.host.ready);
        count
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        wait_in_steps(self, completions, |ftl| {
            if ftl.wait_and_pump() || !ftl.host.ready.is_empty() {
                return Ok(());
            }
            Err(DeviceError::new(
                &ftl.info.name,
                DeviceErrorKind::OutOfSpace {
                    detail: format!(
                        "host requests wait for free space that garbage collection \
                         cannot make: {}",
                        ftl.describe_state()
                    ),
                },
            ))
        })
    }

    fn in_flight(&self) -> usize {
        self.host_in_flight()
    }

    fn copies_by_reference(&self) -> bool {
        true
    }
}
