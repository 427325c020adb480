//! A truncation that must rewrite the tail of its new last block (copy-on-write, to a
//! new block when the old one is in the last commit) and whose write fails changes
//! nothing: the error says what failed, the file keeps its size and bytes, the block it
//! took is free again; the same truncation succeeds once the device works, and the image
//! passes fsck after a flush.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flashpipe_device::{DeviceErrorKind, Operation, Request};
use flashpipe_fs::FileIoError;
use flashpipe_testkit::hooked::{io_failed, Hooks};
use support::{format_switched, pattern};

const FS_BLOCK_BYTES: u64 = 4096;

/// Refuses every write while `failing` is set.
struct FailingWrites {
    failing: Arc<AtomicBool>,
}

impl Hooks for FailingWrites {
    fn before_submit(&mut self, request: &Request) -> Result<(), DeviceErrorKind> {
        let is_write = matches!(request.operation, Operation::Write { .. });
        if is_write && self.failing.load(Ordering::SeqCst) {
            return Err(io_failed("write refused by the test"));
        }
        Ok(())
    }
}

#[test]
fn a_failed_tail_write_leaves_the_file_and_the_free_space_as_they_were() {
    let hooks_of = |failing| FailingWrites { failing };
    let (mut fs, failing) = format_switched(hooks_of, FS_BLOCK_BYTES as u32);
    let file = fs.create("victim").unwrap();
    let contents = pattern(3 * FS_BLOCK_BYTES as usize, 7);
    fs.write(file, 0, &contents).unwrap();
    fs.flush().unwrap();
    let before = fs.stats();
    let new_size_bytes = FS_BLOCK_BYTES + 100;

    failing.store(true, Ordering::SeqCst);
    let error = fs.truncate(file, new_size_bytes).unwrap_err();
    assert!(matches!(error, FileIoError::Device(_)), "{error}");
    assert!(
        error.to_string().contains("write refused by the test"),
        "the error says what failed: {error}"
    );
    assert_eq!(fs.stat(file).unwrap().size_bytes, contents.len() as u64);
    assert_eq!(
        &fs.read(file, 0, contents.len() as u64).unwrap()[..],
        &contents[..]
    );
    let after_failure = fs.stats();
    assert_eq!(after_failure.used_blocks, before.used_blocks);
    assert_eq!(after_failure.free_blocks, before.free_blocks);

    failing.store(false, Ordering::SeqCst);
    fs.truncate(file, new_size_bytes).unwrap();
    let kept = fs.read(file, 0, new_size_bytes).unwrap();
    assert_eq!(&kept[..], &contents[..new_size_bytes as usize]);
    fs.truncate(file, 2 * FS_BLOCK_BYTES).unwrap();
    let tail = fs.read(file, new_size_bytes, FS_BLOCK_BYTES - 100).unwrap();
    assert!(
        tail.iter().all(|&byte| byte == 0),
        "the bytes past a shrunk size read as zeros after the file grows again"
    );
    fs.flush().unwrap();
    let report = fs.check().unwrap();
    assert!(report.findings.is_empty(), "{report}");
}
