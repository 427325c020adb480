//! A request resolved to byte offsets, as both engines carry it out, and the rule that
//! turns a system call's result into a completion status.

use std::io;
use std::sync::Arc;

use crate::buffer::IoBuf;
use crate::error::{DeviceError, DeviceErrorKind, TransferDirection};
use crate::request::{Completion, Operation, Tag};

/// What to do, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read the buffer's length at `offset_bytes`.
    Read {
        /// Where in the file.
        offset_bytes: u64,
    },
    /// Write the buffer at `offset_bytes`.
    Write {
        /// Where in the file.
        offset_bytes: u64,
    },
    /// `fsync`.
    Flush,
    /// Punch a hole in a regular file.
    PunchHole {
        /// Start of the range.
        offset_bytes: u64,
        /// Length of the range.
        length_bytes: u64,
    },
    /// `BLKDISCARD` on a block device.
    Discard {
        /// Start of the range.
        offset_bytes: u64,
        /// Length of the range.
        length_bytes: u64,
    },
}

impl Action {
    /// The operation's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Read { .. } => "read",
            Action::Write { .. } => "write",
            Action::Flush => "flush",
            Action::PunchHole { .. } | Action::Discard { .. } => "trim",
        }
    }

    fn offset_bytes(&self) -> u64 {
        match *self {
            Action::Read { offset_bytes }
            | Action::Write { offset_bytes }
            | Action::PunchHole { offset_bytes, .. }
            | Action::Discard { offset_bytes, .. } => offset_bytes,
            Action::Flush => 0,
        }
    }
}

/// One accepted request, owned by an engine until it completes.
#[derive(Debug)]
pub struct Job {
    /// The client's tag.
    pub tag: Tag,
    /// What to do.
    pub action: Action,
    /// The request's buffer (reads and writes).
    pub buffer: Option<IoBuf>,
}

impl Job {
    /// Resolves a validated operation into a job.
    pub fn from_operation(
        tag: Tag,
        operation: Operation,
        block_size_bytes: u32,
        is_block_device: bool,
    ) -> Job {
        let block_size_bytes = u64::from(block_size_bytes);
        let (action, buffer) = match operation {
            Operation::Read {
                first_block,
                buffer,
            } => (
                Action::Read {
                    offset_bytes: first_block * block_size_bytes,
                },
                Some(buffer),
            ),
            Operation::Write {
                first_block,
                buffer,
            } => (
                Action::Write {
                    offset_bytes: first_block * block_size_bytes,
                },
                Some(buffer),
            ),
            Operation::Flush => (Action::Flush, None),
            Operation::CopyByReference { .. } => {
                panic!("FileDevice::submit refuses copy by reference before building a job")
            }
            Operation::Trim {
                first_block,
                block_count,
            } => {
                let offset_bytes = first_block * block_size_bytes;
                let length_bytes = block_count * block_size_bytes;
                let action = if is_block_device {
                    Action::Discard {
                        offset_bytes,
                        length_bytes,
                    }
                } else {
                    Action::PunchHole {
                        offset_bytes,
                        length_bytes,
                    }
                };
                (action, None)
            }
        };
        Job {
            tag,
            action,
            buffer,
        }
    }

    /// Bytes a successful read or write must move (0 for the others).
    pub fn expected_bytes(&self) -> usize {
        self.buffer.as_ref().map_or(0, |buffer| buffer.len())
    }

    /// The completion for this job given the system call's result (bytes moved).
    pub fn complete(self, device_name: &Arc<str>, result: io::Result<usize>) -> Completion {
        let status = check_result(device_name, &self.action, self.expected_bytes(), result);
        Completion {
            tag: self.tag,
            status,
            buffer: self.buffer,
        }
    }
}

/// A failed system call becomes [`DeviceErrorKind::IoFailed`] ([`DeviceErrorKind::OutOfSpace`]
/// for ENOSPC, EDQUOT and EFBIG), a short read [`DeviceErrorKind::ShortTransfer`]. A short
/// write is [`DeviceErrorKind::OutOfSpace`]
/// saying what stops a write part-way on Linux (the file system holding the file is full,
/// the user's quota or the file size limit is reached): a sparse image takes its space as
/// it is written, so that is where a full file system is found out.
fn is_out_of_space(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
    )
}

fn check_result(
    device_name: &Arc<str>,
    action: &Action,
    expected_bytes: usize,
    result: io::Result<usize>,
) -> Result<(), DeviceError> {
    let kind = match (result, action) {
        (Ok(moved_bytes), _) if moved_bytes == expected_bytes => return Ok(()),
        (Ok(moved_bytes), Action::Write { .. }) => DeviceErrorKind::OutOfSpace {
            detail: format!(
                "write of {expected_bytes} bytes at offset {} stopped after {moved_bytes} bytes: the file system holding it is full or a quota or file size limit is reached (a sparse image takes its space as it is written; free space, or make images with mkfs --preallocate)",
                action.offset_bytes()
            ),
        },
        (Ok(moved_bytes), Action::Read { .. }) => DeviceErrorKind::ShortTransfer {
            direction: TransferDirection::Read,
            moved_bytes: moved_bytes as u64,
            expected_bytes: expected_bytes as u64,
        },
        (Ok(moved_bytes), _) => DeviceErrorKind::IoFailed {
            detail: format!(
                "{}: {moved_bytes} of {expected_bytes} bytes at offset {}",
                action.name(),
                action.offset_bytes()
            ),
        },
        (Err(error), _) if is_out_of_space(&error) => DeviceErrorKind::OutOfSpace {
            detail: format!(
                "{} of {expected_bytes} bytes at offset {}: {error} (a sparse image takes its space as it is written; free space, or make images with mkfs --preallocate)",
                action.name(),
                action.offset_bytes()
            ),
        },
        (Err(error), _) => DeviceErrorKind::IoFailed {
            detail: format!(
                "{} of {expected_bytes} bytes at offset {}: {error}",
                action.name(),
                action.offset_bytes()
            ),
        },
    };
    Err(DeviceError::new(device_name, kind))
}
