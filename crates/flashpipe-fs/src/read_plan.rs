//! Read planning for a caller that issues its own device reads (the engine): which
//! device blocks fill which bytes of the caller's buffer, and the checksum check once
//! they are in memory. The file system plans and checks; the caller owns the buffers,
//! the request tags and the completions, so a read stays zero-copy (each piece a view of
//! the caller's buffer) and many reads stay in flight.
//!
//! A planned read spans whole FS blocks: its buffer holds file blocks
//! `first_file_block..` from byte 0, the bytes asked for start at
//! [`ReadPlan::window_start`]. Each [`ReadPiece`] is one run of blocks contiguous on the
//! device (one request) or a hole (zero-filled by the caller). [`ReadCheck::verify`]
//! checks every block read against the CRC32C its pointer carries; a damaged block is
//! [`FileIoError::DataChecksumMismatch`] naming the file, the offset and the FS block.
//!
//! Planning allocates only the block map itself (one `Vec` of runs) and the file's name
//! for the error; the pieces are computed from the runs when the caller walks them.

use crate::data::{block_map, MappedRun};
use crate::error::FileIoError;
use crate::state::State;

/// Plans a read of bytes `offset..offset + length` of inode `inode_number`, named
/// `file_name` in a checksum error: the range is checked as [`block_map`] checks it.
pub(crate) fn plan_read(
    state: &State,
    inode_number: u64,
    file_name: &str,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<ReadPlan, FileIoError> {
    let block_bytes = state.geometry.block_bytes();
    let runs = block_map(state, inode_number, offset_bytes, length_bytes)?;
    let first_file_block = offset_bytes / block_bytes;
    let span_bytes = read_span_bytes(block_bytes, offset_bytes, length_bytes)
        .expect("a range inside a file lies below the largest offset")
        as usize;
    let window_start = (offset_bytes - first_file_block * block_bytes) as usize;
    let check = ReadCheck::new(file_name, runs, first_file_block, block_bytes);
    Ok(ReadPlan::new(span_bytes, window_start, check))
}

/// Plans a read of the first `size_bytes` of inode `inode_number` (a whole file): its
/// check, whose pieces lay the file out from byte 0.
pub(crate) fn plan_file_read(
    state: &State,
    inode_number: u64,
    file_name: &str,
    size_bytes: u64,
) -> Result<ReadCheck, FileIoError> {
    let block_bytes = state.geometry.block_bytes();
    let runs = block_map(state, inode_number, 0, size_bytes)?;
    Ok(ReadCheck::new(file_name, runs, 0, block_bytes))
}

/// Bytes of the whole FS blocks (of `block_bytes`) that bytes `offset..offset + length`
/// of a file touch: the buffer a read of that range needs (an empty range inside a block
/// still spans that block, as the engine's reads always have). `None` when the range
/// runs past the largest byte offset (no file reaches it: the file system refuses such a
/// read as past the end).
pub fn read_span_bytes(block_bytes: u64, offset_bytes: u64, length_bytes: u64) -> Option<u64> {
    assert!(block_bytes > 0, "an FS block holds bytes");
    let aligned_start = offset_bytes / block_bytes * block_bytes;
    let aligned_end = offset_bytes
        .checked_add(length_bytes)?
        .div_ceil(block_bytes)
        .checked_mul(block_bytes)?;
    Some(aligned_end - aligned_start)
}

/// One piece of a planned read: `length_bytes` at `position_bytes` of the read's buffer,
/// read from the device from `first_device_block` on, or a hole (`None`) that reads as
/// zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadPiece {
    /// Where the piece lies in the read's buffer.
    pub position_bytes: usize,
    /// Its length: whole FS blocks.
    pub length_bytes: usize,
    /// Its first device block, or `None` for a hole.
    pub first_device_block: Option<u64>,
}

/// What a read checks once its blocks are in memory: the runs read (with their
/// checksums) and the file's name for the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadCheck {
    file_name: String,
    runs: Vec<MappedRun>,
    first_file_block: u64,
    block_bytes: u64,
}

impl ReadCheck {
    pub(crate) fn new(
        file_name: &str,
        runs: Vec<MappedRun>,
        first_file_block: u64,
        block_bytes: u64,
    ) -> ReadCheck {
        assert!(
            runs.iter()
                .all(|run| run.first_file_block >= first_file_block),
            "a read's runs start at or after its first block"
        );
        ReadCheck {
            file_name: file_name.to_string(),
            runs,
            first_file_block,
            block_bytes,
        }
    }

    /// The runs the read covers, in file order.
    pub fn runs(&self) -> &[MappedRun] {
        &self.runs
    }

    /// The pieces of the read: each run at its place in a buffer that holds the read's
    /// first file block from byte 0.
    pub fn pieces(&self) -> impl Iterator<Item = ReadPiece> + '_ {
        self.runs.iter().map(move |run| ReadPiece {
            position_bytes: ((run.first_file_block - self.first_file_block) * self.block_bytes)
                as usize,
            length_bytes: (run.block_count * self.block_bytes) as usize,
            first_device_block: run.first_device_block,
        })
    }

    /// Verifies every block of every run read (holes carry no checksum). `blocks` holds
    /// the read's first file block from byte 0, as [`ReadCheck::pieces`] laid them out.
    pub fn verify(&self, blocks: &[u8]) -> Result<(), FileIoError> {
        for (run, piece) in self.runs.iter().zip(self.pieces()) {
            if run.first_fs_block.is_none() {
                continue;
            }
            let end = piece.position_bytes + piece.length_bytes;
            assert!(end <= blocks.len(), "a read's blocks lie in its buffer");
            run.verify(
                &self.file_name,
                self.block_bytes,
                &blocks[piece.position_bytes..end],
            )?;
        }
        Ok(())
    }

    /// When the whole read lies in one physically contiguous run of FS blocks (no hole,
    /// no fragment): (first FS block, its first device block, FS block count).
    /// Contiguity is judged in FS blocks: an FS block spans several device blocks when it
    /// is larger than the device's.
    pub fn contiguous_extent(&self) -> Option<(u64, u64, u64)> {
        let first = self.runs.first()?;
        let (first_fs_block, first_device_block) =
            (first.first_fs_block?, first.first_device_block?);
        let mut next_fs_block = first_fs_block;
        for run in &self.runs {
            if run.first_fs_block != Some(next_fs_block) {
                return None;
            }
            next_fs_block += run.block_count;
        }
        Some((
            first_fs_block,
            first_device_block,
            next_fs_block - first_fs_block,
        ))
    }
}

/// A read of a byte range, planned: the buffer it needs, where the bytes asked for lie in
/// it, the device reads that fill it, and their check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPlan {
    span_bytes: usize,
    window_start: usize,
    check: ReadCheck,
}

impl ReadPlan {
    pub(crate) fn new(span_bytes: usize, window_start: usize, check: ReadCheck) -> ReadPlan {
        assert!(
            check
                .pieces()
                .all(|piece| piece.position_bytes + piece.length_bytes <= span_bytes),
            "a read's pieces lie inside its span"
        );
        ReadPlan {
            span_bytes,
            window_start,
            check,
        }
    }

    /// Bytes of the buffer the read needs (whole FS blocks).
    pub fn span_bytes(&self) -> usize {
        self.span_bytes
    }

    /// Where the bytes asked for start in the buffer.
    pub fn window_start(&self) -> usize {
        self.window_start
    }

    /// The device reads (and holes) that fill the buffer; disjoint, inside the span.
    pub fn pieces(&self) -> impl Iterator<Item = ReadPiece> + '_ {
        self.check.pieces()
    }

    /// The check to run once every piece is back.
    pub fn into_check(self) -> ReadCheck {
        self.check
    }
}

/// Of `extents` (first FS block, FS block count), sorted by first block, the group
/// starting at index `start` whose extents touch one another and span at most
/// `max_blocks` together (at least the first extent): (index past the group, FS block
/// past its end). A caller coalesces each group into one device request.
pub fn touching_group(extents: &[(u64, u64)], start: usize, max_blocks: u64) -> (usize, u64) {
    let (first_block, first_count) = extents[start];
    let mut end_block = first_block + first_count;
    let mut end = start + 1;
    while let Some(&(next_block, next_count)) = extents.get(end) {
        let touches = next_block == end_block;
        if !touches || end_block + next_count - first_block > max_blocks {
            break;
        }
        end_block += next_count;
        end += 1;
    }
    (end, end_block)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first_file_block: u64, block_count: u64, first_fs_block: Option<u64>) -> MappedRun {
        MappedRun {
            first_file_block,
            block_count,
            first_device_block: first_fs_block.map(|block| block * 2),
            first_fs_block,
            checksums: vec![None; block_count as usize],
        }
    }

    #[test]
    fn the_span_covers_the_whole_blocks_touched() {
        assert_eq!(read_span_bytes(4096, 0, 1), Some(4096));
        assert_eq!(read_span_bytes(4096, 4095, 2), Some(8192));
        assert_eq!(read_span_bytes(4096, 4096, 4096), Some(4096));
        assert_eq!(read_span_bytes(4096, 4096, 0), Some(0));
        assert_eq!(read_span_bytes(4096, 10, 0), Some(4096));
        assert_eq!(read_span_bytes(4096, u64::MAX - 10, 100), None);
        assert_eq!(read_span_bytes(4096, u64::MAX - 10, 5), None);
    }

    #[test]
    fn pieces_lie_at_their_file_block_in_the_buffer() {
        let check = ReadCheck::new("f", vec![run(3, 2, Some(40)), run(5, 1, None)], 3, 4096);
        let pieces: Vec<ReadPiece> = check.pieces().collect();
        assert_eq!(
            pieces,
            vec![
                ReadPiece {
                    position_bytes: 0,
                    length_bytes: 8192,
                    first_device_block: Some(80)
                },
                ReadPiece {
                    position_bytes: 8192,
                    length_bytes: 4096,
                    first_device_block: None
                },
            ]
        );
        assert_eq!(check.contiguous_extent(), None);
    }

    #[test]
    fn a_damaged_block_names_its_file_and_offset() {
        let mut damaged = run(1, 2, Some(10));
        damaged.checksums = vec![
            Some(crate::layout::data_block_checksum(&[0u8; 512])),
            Some(7),
        ];
        let check = ReadCheck::new("victim", vec![damaged], 1, 512);
        match check.verify(&[0u8; 1024]) {
            Err(FileIoError::DataChecksumMismatch {
                file_name,
                offset_bytes,
                fs_block,
                ..
            }) => {
                assert_eq!(file_name, "victim");
                assert_eq!(offset_bytes, 1024);
                assert_eq!(fs_block, 11);
            }
            other => panic!("expected a checksum mismatch, got {other:?}"),
        }
    }

    #[test]
    fn contiguous_runs_make_one_extent() {
        let check = ReadCheck::new("f", vec![run(0, 2, Some(9)), run(2, 3, Some(11))], 0, 4096);
        assert_eq!(check.contiguous_extent(), Some((9, 18, 5)));
    }

    #[test]
    fn touching_extents_group_up_to_the_limit() {
        let extents = [(10, 2), (12, 3), (15, 1), (20, 1)];
        assert_eq!(touching_group(&extents, 0, 100), (3, 16));
        assert_eq!(touching_group(&extents, 0, 5), (2, 15));
        assert_eq!(touching_group(&extents, 3, 1), (4, 21));
        assert_eq!(touching_group(&extents, 0, 1), (1, 12));
    }
}
