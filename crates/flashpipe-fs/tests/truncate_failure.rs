//! A truncation that must rewrite the tail of its new last block (copy-on-write, to a
//! new block when the old one is in the last commit) and whose write fails changes
//! nothing: the error says what failed, the file keeps its size and bytes, the block it
//! took is free again; the same truncation succeeds once the device works, and the image
//! passes fsck after a flush.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, Operation, Rejected,
    Request,
};
use flashpipe_fs::{FileIoError, Filesystem, FormatOptions};
use support::{pattern, SharedDisk};

const FS_BLOCK_BYTES: u64 = 4096;

/// A shared disk that refuses every write while `failing` is set.
#[derive(Clone)]
struct FailingWritesDisk {
    disk: SharedDisk,
    failing: Arc<AtomicBool>,
}

impl BlockDevice for FailingWritesDisk {
    fn info(&self) -> &DeviceInfo {
        self.disk.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.disk.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        let is_write = matches!(request.operation, Operation::Write { .. });
        if is_write && self.failing.load(Ordering::SeqCst) {
            let error = DeviceError::new(
                &self.disk.info().name,
                DeviceErrorKind::IoFailed {
                    detail: "write refused by the test".to_string(),
                },
            );
            return Err(Rejected { request, error });
        }
        self.disk.submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.disk.poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.disk.wait_completions(completions)
    }

    fn in_flight(&self) -> usize {
        self.disk.in_flight()
    }
}

#[test]
fn a_failed_tail_write_leaves_the_file_and_the_free_space_as_they_were() {
    let failing = Arc::new(AtomicBool::new(false));
    let disk = FailingWritesDisk {
        disk: SharedDisk::new(512, 4096),
        failing: Arc::clone(&failing),
    };
    let mut fs = Filesystem::format(
        Box::new(disk),
        &FormatOptions {
            fs_block_size_bytes: FS_BLOCK_BYTES as u32,
            store_identity: None,
        },
    )
    .expect("mkfs");
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
