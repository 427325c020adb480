//! Writes in two stages (`FsCore::plan_write`, then `finish_write`), driven here as the
//! engine drives them, with the core and its device held apart: whole blocks of
//! a block-aligned write go to the device as views of the caller's buffer, which comes
//! back whole; partial edge blocks keep the bytes around the write; a failed write
//! installs nothing and releases its blocks; the checksums written are the ones a read
//! verifies; a flush with a write pending is a programming error. Checksums computed by
//! the caller (`plan_checksummed_write`) are the ones stored when they describe the
//! buffer, and ignored (computed again) when they do not.

use flashpipe_device::{
    run_batch, BlockDevice, DeviceError, DeviceErrorKind, IoBuf, Operation, RamDisk,
};
use flashpipe_fs::{
    BlockChecksums, FileId, FileIoError, Filesystem, FsCore, PlannedWrite, WriteCopy,
};
use flashpipe_testkit::formatted::format_fs;

const BLOCK_BYTES: usize = 16384;

/// A freshly formatted file system's core and its device, apart.
fn core_and_device() -> (FsCore, Box<dyn BlockDevice>) {
    let disk = RamDisk::new("ram0", 4096, 8192, 32).expect("ram disk");
    format_fs(Box::new(disk), BLOCK_BYTES as u32).into_parts()
}

/// Creates the file "f" holding `pattern(length, seed)`; the file and those bytes.
fn write_f(
    core: &mut FsCore,
    device: &mut dyn BlockDevice,
    length: usize,
    seed: u8,
) -> (FileId, Vec<u8>) {
    let file = core.create("f").expect("create");
    let bytes = pattern(length, seed);
    core.write(device, file, 0, &bytes).expect("write");
    (file, bytes)
}

/// Puts the two back together, unmounts, mounts again and checks the image is clean.
fn remount_clean(core: FsCore, device: Box<dyn BlockDevice>) -> Filesystem {
    let unmounted = Filesystem::from_parts(core, device).unmount();
    let mut remounted = Filesystem::mount(unmounted.expect("unmount")).expect("mount");
    assert!(remounted.check().expect("fsck").is_clean());
    remounted
}

fn pattern(length: usize, seed: u8) -> Vec<u8> {
    (0..length)
        .map(|index| (index as u8).wrapping_mul(31) ^ seed ^ (index >> 9) as u8)
        .collect()
}

/// Issues a planned write's requests, gives their buffers back and finishes it.
fn run_planned(
    core: &mut FsCore,
    device: &mut dyn BlockDevice,
    mut planned: PlannedWrite,
) -> (IoBuf, Result<(), FileIoError>) {
    let operations = planned.take_operations();
    let completions = run_batch(device, operations).expect("device writes");
    for completion in completions {
        planned.take_back(completion.buffer.expect("a write hands its buffer back"));
    }
    core.finish_write(planned, Ok(()))
}

fn contents(core: &mut FsCore, device: &mut dyn BlockDevice, file: FileId) -> Vec<u8> {
    let size = core.stat(file).expect("stat").size_bytes;
    core.read(device, file, 0, size).expect("read").to_vec()
}

#[test]
fn whole_blocks_go_from_the_callers_buffer_and_the_buffer_comes_back() {
    let (mut core, mut device) = core_and_device();
    let (file, old) = write_f(&mut core, &mut *device, 12 * BLOCK_BYTES, 1);
    core.flush(&mut *device).expect("flush");
    let new = pattern(9 * BLOCK_BYTES + 100, 2);
    let data = IoBuf::from_slice(&new);
    let address = data.as_ptr();
    let mut planned = core
        .plan_write(
            &mut *device,
            file,
            BLOCK_BYTES as u64,
            data,
            WriteCopy::ZeroCopy,
        )
        .expect("plan");
    assert_eq!(planned.zero_copy_blocks(), 9);
    assert_eq!(core.writes_pending(), 1);
    assert_eq!(
        contents(&mut core, &mut *device, file),
        old,
        "nothing is installed before the write finishes"
    );
    let operations = planned.take_operations();
    let Operation::Write { buffer, .. } = &operations[0] else {
        panic!("a write plans writes")
    };
    assert_eq!(
        buffer.as_ptr(),
        address,
        "the first request is a view of the caller's buffer"
    );
    assert!(
        operations.iter().any(|operation| matches!(
            operation,
            Operation::Write { buffer, .. } if buffer.len() == BLOCK_BYTES && buffer[..100] == new[9 * BLOCK_BYTES..]
        )),
        "the partial last block goes through a bounce buffer of its own"
    );
    let completions = run_batch(&mut *device, operations).expect("device writes");
    for completion in completions {
        planned.take_back(completion.buffer.expect("buffer back"));
    }
    let (buffer, result) = core.finish_write(planned, Ok(()));
    result.expect("write");
    assert_eq!(
        buffer.as_ptr(),
        address,
        "the caller's own buffer comes back"
    );
    assert!(buffer[..] == new[..], "and it is untouched");
    assert_eq!(core.writes_pending(), 0);
    let mut expected = old.clone();
    expected[BLOCK_BYTES..BLOCK_BYTES + new.len()].copy_from_slice(&new);
    assert!(
        contents(&mut core, &mut *device, file) == expected,
        "the bytes after the partial last block are the old ones"
    );
    core.flush(&mut *device).expect("flush");
    let mut remounted = remount_clean(core, device);
    let size_bytes = remounted.stat(file).expect("stat").size_bytes;
    assert_eq!(size_bytes, expected.len() as u64);
    assert!(
        remounted
            .read(file, 0, expected.len() as u64)
            .expect("read")[..]
            == expected[..],
        "checksums verify"
    );
}

#[test]
fn unaligned_and_copying_writes_copy_and_keep_both_edges() {
    let (mut core, mut device) = core_and_device();
    let (file, old) = write_f(&mut core, &mut *device, 6 * BLOCK_BYTES, 3);
    let mut expected = old.clone();
    for (offset, length, copy, seed) in [
        (100, 3 * BLOCK_BYTES, WriteCopy::ZeroCopy, 4),
        (2 * BLOCK_BYTES as u64, BLOCK_BYTES, WriteCopy::Copy, 5),
        (
            5 * BLOCK_BYTES as u64 + 7,
            2 * BLOCK_BYTES,
            WriteCopy::ZeroCopy,
            6,
        ),
        (9 * BLOCK_BYTES as u64, 10, WriteCopy::ZeroCopy, 7),
    ] {
        let new = pattern(length, seed);
        let planned = core
            .plan_write(&mut *device, file, offset, IoBuf::from_slice(&new), copy)
            .expect("plan");
        let aligned_whole_blocks = copy == WriteCopy::ZeroCopy && offset % BLOCK_BYTES as u64 == 0;
        assert_eq!(
            planned.zero_copy_blocks(),
            if aligned_whole_blocks {
                (length / BLOCK_BYTES) as u64
            } else {
                0
            }
        );
        let (buffer, result) = run_planned(&mut core, &mut *device, planned);
        result.expect("write");
        assert!(buffer[..] == new[..]);
        let end = offset as usize + length;
        if expected.len() < end {
            expected.resize(end, 0);
        }
        expected[offset as usize..end].copy_from_slice(&new);
        assert!(
            contents(&mut core, &mut *device, file) == expected,
            "write at {offset}+{length}"
        );
    }
}

#[test]
fn a_failed_write_installs_nothing_and_releases_its_blocks() {
    let (mut core, mut device) = core_and_device();
    let (file, old) = write_f(&mut core, &mut *device, 3 * BLOCK_BYTES, 8);
    core.flush(&mut *device).expect("flush");
    let free_before = core.stats().free_blocks;
    let new = pattern(8 * BLOCK_BYTES, 9);
    let mut planned = core
        .plan_write(
            &mut *device,
            file,
            0,
            IoBuf::from_slice(&new),
            WriteCopy::ZeroCopy,
        )
        .expect("plan");
    assert_eq!(core.stats().free_blocks, free_before - 8);
    // The requests never reach the device: as if every one failed.
    for operation in planned.take_operations() {
        if let Operation::Write { buffer, .. } = operation {
            planned.take_back(buffer);
        }
    }
    let failure = DeviceError::new(
        &"ram0".into(),
        DeviceErrorKind::IoFailed {
            detail: "injected".to_string(),
        },
    );
    let (buffer, result) = core.finish_write(planned, Err(failure));
    assert!(result.is_err());
    assert!(
        buffer[..] == new[..],
        "the caller's buffer comes back whole"
    );
    assert_eq!(core.stats().free_blocks, free_before);
    assert_eq!(contents(&mut core, &mut *device, file), old);
    core.flush(&mut *device).expect("flush");
    remount_clean(core, device);
}

#[test]
#[should_panic(expected = "planned writes not finished")]
fn a_flush_with_a_write_pending_is_refused() {
    let (mut core, mut device) = core_and_device();
    let file = core.create("f").expect("create");
    let _planned = core
        .plan_write(
            &mut *device,
            file,
            0,
            IoBuf::from_slice(&[1; 100]),
            WriteCopy::ZeroCopy,
        )
        .expect("plan");
    let _ = core.flush(&mut *device);
}

/// Plans `data` at 0 into a new file "c" with `checksums`, runs it, flushes; the file.
fn write_checksummed(
    core: &mut FsCore,
    device: &mut dyn BlockDevice,
    data: &[u8],
    checksums: Option<BlockChecksums>,
) -> FileId {
    let file = core.create("c").expect("create");
    let planned = core
        .plan_checksummed_write(
            device,
            file,
            0,
            IoBuf::from_slice(data),
            checksums,
            WriteCopy::ZeroCopy,
        )
        .expect("plan");
    let (_, result) = run_planned(core, device, planned);
    result.expect("write");
    core.flush(device).expect("flush");
    file
}

#[test]
fn checksums_computed_by_the_caller_are_stored_and_verify() {
    let (mut core, mut device) = core_and_device();
    let data = pattern(5 * BLOCK_BYTES + 700, 7);
    let checksums = BlockChecksums::compute(&data, BLOCK_BYTES as u64);
    assert_eq!(checksums.checksums().len(), 5, "whole blocks only");
    let file = write_checksummed(&mut core, &mut *device, &data, Some(checksums));
    assert_eq!(contents(&mut core, &mut *device, file), data);
    remount_clean(core, device);
}

#[test]
fn checksums_that_do_not_describe_the_buffer_are_computed_again() {
    let data = pattern(4 * BLOCK_BYTES, 9);
    let other_block_size = BlockChecksums::compute(&data, 4096);
    let other_length = BlockChecksums::compute(&data[..3 * BLOCK_BYTES], BLOCK_BYTES as u64);
    for checksums in [other_block_size, other_length] {
        let (mut core, mut device) = core_and_device();
        let file = write_checksummed(&mut core, &mut *device, &data, Some(checksums));
        assert_eq!(contents(&mut core, &mut *device, file), data);
        remount_clean(core, device);
    }
}

#[test]
fn a_wrong_checksum_from_the_caller_is_caught_by_the_read() {
    let (mut core, mut device) = core_and_device();
    let data = pattern(2 * BLOCK_BYTES, 3);
    let wrong = BlockChecksums::compute(&pattern(2 * BLOCK_BYTES, 4), BLOCK_BYTES as u64);
    let file = write_checksummed(&mut core, &mut *device, &data, Some(wrong));
    let read = core.read(&mut *device, file, 0, data.len() as u64);
    assert!(
        matches!(read, Err(FileIoError::DataChecksumMismatch { .. })),
        "the stored checksum is the caller's, and a read checks every block"
    );
}
