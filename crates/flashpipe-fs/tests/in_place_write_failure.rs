//! A write that overwrites blocks in place (blocks written since the last flush) and
//! fails may have left them holding any bytes, bytes the failed write never covered
//! included, while their pointers keep the checksums of their earlier content. The mount
//! must not commit that: the next flush fails with `Unusable`, and a remount finds the
//! last commit whole. (Found by the flashpipe-vopr campaign, seed 2361: the flush after
//! such a failure was acknowledged and the file's block failed its checksum after a
//! power loss.)

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flashpipe_device::{BlockDevice, Completion, DeviceError, IoBuf, Operation, Request, Tag};
use flashpipe_fs::{FileId, FileIoError, Filesystem, FlushError};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::hooked::{io_failed, Hooked, Hooks, Served};
use support::{pattern, SharedDisk};

const FS_BLOCK_BYTES: u64 = 4096;

/// The hooks of a shared disk whose writes, while `failing` is set, land as garbage and
/// complete with an I/O error: a device that fails part-way through a write.
struct TearsWrites {
    device_name: Arc<str>,
    failing: Arc<AtomicBool>,
    torn: HashMap<Tag, IoBuf>,
}

impl Hooks for TearsWrites {
    fn serve(&mut self, device: &mut dyn BlockDevice, request: Request) -> Served {
        let Request { tag, operation } = request;
        let operation = match operation {
            Operation::Write {
                first_block,
                buffer,
            } if self.failing.load(Ordering::SeqCst) => {
                let garbage = IoBuf::from_slice(&vec![0xEE; buffer.len()]);
                self.torn.insert(tag, buffer);
                Operation::Write {
                    first_block,
                    buffer: garbage,
                }
            }
            other => other,
        };
        device.submit(Request { tag, operation }).map(|()| None)
    }

    fn reaped(&mut self, completions: &mut [Completion]) {
        for completion in completions {
            if let Some(original) = self.torn.remove(&completion.tag) {
                completion.buffer = Some(original);
                completion.status = Err(DeviceError::new(
                    &self.device_name,
                    io_failed("write torn by the test"),
                ));
            }
        }
    }
}

/// A file system formatted on a [`TearsWrites`] disk, the shared image beside it, and the
/// switch that makes its writes tear.
fn formatted_tearing_disk() -> (Filesystem, SharedDisk, Arc<AtomicBool>) {
    let shared = SharedDisk::new(512, 4096);
    let failing = Arc::new(AtomicBool::new(false));
    let hooks = TearsWrites {
        device_name: Arc::clone(&shared.info().name),
        failing: Arc::clone(&failing),
        torn: HashMap::new(),
    };
    let fs = format_fs(
        Box::new(Hooked::new(shared.clone(), hooks)),
        FS_BLOCK_BYTES as u32,
    );
    (fs, shared, failing)
}

/// The file "victim" holding two blocks of `pattern(_, seed)`, flushed; the file and its
/// bytes.
fn committed_victim(fs: &mut Filesystem, seed: u64) -> (FileId, Vec<u8>) {
    let file = fs.create("victim").unwrap();
    let committed = pattern(2 * FS_BLOCK_BYTES as usize, seed);
    fs.write(file, 0, &committed).unwrap();
    fs.flush().unwrap();
    (file, committed)
}

#[test]
fn a_failed_in_place_write_makes_the_next_flush_fail_and_the_last_commit_survives() {
    let (mut fs, shared, failing) = formatted_tearing_disk();
    let (file, committed) = committed_victim(&mut fs, 3);

    let rewritten = pattern(FS_BLOCK_BYTES as usize, 9);
    fs.write(file, 0, &rewritten).unwrap();
    failing.store(true, Ordering::SeqCst);
    let error = fs.write(file, 100, &[1u8; 200]).unwrap_err();
    assert!(matches!(error, FileIoError::Device(_)), "{error}");
    failing.store(false, Ordering::SeqCst);

    let flushed = fs.flush().unwrap_err();
    assert!(matches!(flushed, FlushError::Unusable { .. }), "{flushed}");
    assert!(
        flushed.to_string().contains("write torn by the test"),
        "the error says what failed: {flushed}"
    );
    drop(fs);

    let mut remounted = Filesystem::mount(shared.boxed()).expect("remount");
    let file = remounted.open("victim").unwrap();
    let read = remounted.read(file, 0, committed.len() as u64).unwrap();
    assert_eq!(&read[..], &committed[..], "the last commit is whole");
    let report = remounted.check().unwrap();
    assert!(report.findings.is_empty(), "{report}");
}

#[test]
fn a_failed_write_into_fresh_blocks_leaves_the_mount_usable() {
    let (mut fs, shared, failing) = formatted_tearing_disk();
    let (file, committed) = committed_victim(&mut fs, 5);

    failing.store(true, Ordering::SeqCst);
    fs.write(file, 0, &[7u8; FS_BLOCK_BYTES as usize])
        .unwrap_err();
    failing.store(false, Ordering::SeqCst);
    fs.flush()
        .expect("nothing was overwritten in place, so the flush goes on");
    let read = fs.read(file, 0, committed.len() as u64).unwrap();
    assert_eq!(&read[..], &committed[..]);
    drop(fs);

    let mut remounted = Filesystem::mount(shared.boxed()).expect("remount");
    let file = remounted.open("victim").unwrap();
    let read = remounted.read(file, 0, committed.len() as u64).unwrap();
    assert_eq!(
        &read[..],
        &committed[..],
        "the flush after the failure kept the file"
    );
    let report = remounted.check().unwrap();
    assert!(report.findings.is_empty(), "{report}");
}
