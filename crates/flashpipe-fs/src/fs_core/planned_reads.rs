//! Reads planned for a caller that issues the device reads itself (the engine): the
//! plan comes from the file system's block map, the caller's buffers and requests carry
//! it out, and the plan's check verifies the blocks ([`crate::read_plan`]).

use super::{FileId, FsCore};
use crate::error::FileIoError;
use crate::read_plan::{self, ReadCheck, ReadPlan};

impl FsCore {
    /// Plans a read of bytes `offset_bytes..offset_bytes + length_bytes` of `file`
    /// (named `file_name` in a checksum error): the buffer it needs, where the bytes lie
    /// in it, the device reads that fill it and their check. Refuses a stale handle or a
    /// range past the end, as [`FsCore::block_map`] does. Nothing is issued.
    pub fn plan_read(
        &self,
        file: FileId,
        file_name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<ReadPlan, FileIoError> {
        read_plan::plan_read(&self.state, file.0, file_name, offset_bytes, length_bytes)
    }

    /// Plans a read of the first `size_bytes` of `file` (the whole file, for a batch of
    /// files): its check, whose pieces lay the file out from byte 0.
    pub fn plan_file_read(
        &self,
        file: FileId,
        file_name: &str,
        size_bytes: u64,
    ) -> Result<ReadCheck, FileIoError> {
        read_plan::plan_file_read(&self.state, file.0, file_name, size_bytes)
    }
}
