//! `read_into` hands the caller's buffer back whole when the device fails part of the
//! read: the direct runs are views of the caller's buffer (a `SplitBuffer`), and a failed
//! batch still reaps every view before the buffer is put back, so the caller keeps its
//! own pool buffer (same slot, same length) and can read into it again.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use flashpipe_device::{BufferPool, DeviceErrorKind, Operation, Request};
use flashpipe_fs::FileIoError;
use flashpipe_testkit::hooked::{io_failed, Hooks};
use support::{format_switched, pattern};

const FS_BLOCK_BYTES: usize = 4096;

/// While `failing` is set, refuses every read past the first one of each batch it sees
/// (so some views are in flight when the refusal comes).
struct FailingReads {
    failing: Arc<AtomicBool>,
    reads_accepted: usize,
}

impl Hooks for FailingReads {
    fn before_submit(&mut self, request: &Request) -> Result<(), DeviceErrorKind> {
        let is_read = matches!(request.operation, Operation::Read { .. });
        if is_read && self.failing.load(Ordering::SeqCst) && self.reads_accepted > 0 {
            return Err(io_failed("read refused by the test"));
        }
        if is_read {
            self.reads_accepted += 1;
        }
        Ok(())
    }

    fn after_wait(&mut self, in_flight: usize) {
        if in_flight == 0 {
            self.reads_accepted = 0;
        }
    }
}

#[test]
fn a_failed_read_into_gives_the_callers_buffer_back_whole() {
    let hooks_of = |failing| FailingReads {
        failing,
        reads_accepted: 0,
    };
    let (mut fs, failing) = format_switched(hooks_of, FS_BLOCK_BYTES as u32);
    let first = fs.create("first").unwrap();
    let second = fs.create("second").unwrap();
    let file = fs.create("fragmented").unwrap();
    for index in 0..8 {
        let block = pattern(FS_BLOCK_BYTES, index);
        fs.write(file, index * FS_BLOCK_BYTES as u64, &block)
            .unwrap();
        fs.write(first, index * 10, b"interleave").unwrap();
        fs.write(second, index * 10, b"fragments!").unwrap();
        fs.flush().unwrap();
    }
    let runs = fs.block_map(file, 0, 8 * FS_BLOCK_BYTES as u64).unwrap();
    assert!(runs.len() > 1, "the file lies in several runs: {runs:?}");

    let pool = BufferPool::new(1, 8 * FS_BLOCK_BYTES);
    let mut buffer = pool.try_take().unwrap();
    let slot = buffer.pool_slot();
    failing.store(true, Ordering::SeqCst);
    let error = fs.read_into(file, 0, &mut buffer).unwrap_err();
    assert!(matches!(error, FileIoError::Device(_)), "{error}");
    assert_eq!(buffer.len(), 8 * FS_BLOCK_BYTES);
    assert_eq!(
        buffer.pool_slot(),
        slot,
        "the caller's own buffer came back"
    );

    failing.store(false, Ordering::SeqCst);
    fs.read_into(file, 0, &mut buffer).unwrap();
    let expected: Vec<u8> = (0..8)
        .flat_map(|index| pattern(FS_BLOCK_BYTES, index))
        .collect();
    assert_eq!(&buffer[..], &expected[..]);
    drop(buffer);
    assert_eq!(pool.free_count(), 1);
}
