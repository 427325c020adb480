//! Tests of the file backend: the conformance suite on both engines, registered
//! buffers, error paths and the fallback from io_uring and `O_DIRECT`.

use std::path::Path;

use super::*;
use crate::batch::run_one;
use crate::buffer::IoBuf;
use crate::conformance;
use crate::error::TransferDirection;
use crate::request::{BlockDevice, Operation};
use crate::split::SplitBuffer;

const TEST_BLOCK_COUNT: u64 = 2048;

fn config(path: &Path, engine: FileEngine, queue_depth: u32) -> FileDeviceConfig {
    FileDeviceConfig {
        path: path.to_path_buf(),
        block_size_bytes: DEFAULT_BLOCK_SIZE_BYTES,
        queue_depth,
        create_size_bytes: Some(TEST_BLOCK_COUNT * u64::from(DEFAULT_BLOCK_SIZE_BYTES)),
        preallocate: true,
        engine,
        direct_io: true,
        read_only: false,
    }
}

fn check_conformance(engine: FileEngine, direct_io: bool) {
    let folder = tempfile::tempdir().unwrap();
    let mut created = 0;
    conformance::check_all(&mut |queue_depth| {
        created += 1;
        let path = folder.path().join(format!("device-{created}.img"));
        let device = FileDevice::open(FileDeviceConfig {
            direct_io,
            ..config(&path, engine, queue_depth)
        })
        .unwrap();
        assert_eq!(device.engine_in_use(), engine);
        assert_eq!(device.direct_io_in_use(), direct_io);
        Box::new(device)
    });
}

#[test]
fn io_uring_engine_passes_the_conformance_suite() {
    check_conformance(FileEngine::IoUring, true);
}

#[test]
fn thread_pool_engine_passes_the_conformance_suite() {
    check_conformance(FileEngine::ThreadPool, true);
}

#[test]
fn buffered_io_uring_passes_the_conformance_suite() {
    check_conformance(FileEngine::IoUring, false);
}

#[test]
fn pool_buffers_use_registered_fixed_buffers() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("fixed.img");
    let mut device = FileDevice::open(config(&path, FileEngine::IoUring, 8)).unwrap();
    let pool = BufferPool::new(4, 2 * DEFAULT_BLOCK_SIZE_BYTES as usize);
    device.register_buffer_pool(&pool).unwrap();
    device.register_buffer_pool(&pool).unwrap();
    let mut written = pool.try_take().unwrap();
    written.fill(0x5A);
    run_one(
        &mut device,
        Operation::Write {
            first_block: 6,
            buffer: written,
        },
    )
    .unwrap();
    let completion = run_one(
        &mut device,
        Operation::Read {
            first_block: 6,
            buffer: pool.try_take().unwrap(),
        },
    )
    .unwrap();
    assert!(completion.buffer.unwrap().iter().all(|&byte| byte == 0x5A));
    run_one(
        &mut device,
        Operation::Read {
            first_block: 0,
            buffer: IoBuf::zeroed(DEFAULT_BLOCK_SIZE_BYTES as usize),
        },
    )
    .unwrap();
    let counters = device.uring_counters().unwrap();
    assert_eq!(counters.fixed_buffer_requests, 2);
    assert_eq!(counters.plain_buffer_requests, 1);
    assert_eq!(pool.free_count(), 4, "pool buffers come back");
}

#[test]
fn views_of_a_registered_pool_buffer_use_fixed_buffers() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("views.img");
    let mut device = FileDevice::open(config(&path, FileEngine::IoUring, 8)).unwrap();
    let block = DEFAULT_BLOCK_SIZE_BYTES as usize;
    let pool = BufferPool::new(2, 4 * block);
    BlockDevice::register_buffer_pool(&mut device, &pool).unwrap();
    let mut source = pool.try_take().unwrap();
    for (index, byte) in source.iter_mut().enumerate() {
        *byte = (index / block) as u8 + 1;
    }
    let mut written = SplitBuffer::new(source);
    for (position, first_block) in [(block, 10), (3 * block, 11)] {
        let view = written.view(position, block).unwrap();
        let completion = run_one(
            &mut device,
            Operation::Write {
                first_block,
                buffer: view,
            },
        );
        written
            .return_view(completion.unwrap().buffer.unwrap())
            .unwrap();
    }
    drop(written.into_parent());
    let mut read = SplitBuffer::new(pool.try_take().unwrap());
    let view = read.view(2 * block, 2 * block).unwrap();
    let completion = run_one(
        &mut device,
        Operation::Read {
            first_block: 10,
            buffer: view,
        },
    );
    let view = completion.unwrap().buffer.unwrap();
    assert!(view[..block].iter().all(|&byte| byte == 2));
    assert!(view[block..].iter().all(|&byte| byte == 4));
    read.return_view(view).unwrap();
    drop(read.into_parent());
    let mut heap = SplitBuffer::new(IoBuf::zeroed(2 * block));
    let view = heap.view(block, block).unwrap();
    let completion = run_one(
        &mut device,
        Operation::Read {
            first_block: 11,
            buffer: view,
        },
    );
    let view = completion.unwrap().buffer.unwrap();
    assert!(view.iter().all(|&byte| byte == 4));
    heap.return_view(view).unwrap();
    let counters = device.uring_counters().unwrap();
    assert_eq!(counters.fixed_buffer_requests, 3, "the pool's views");
    assert_eq!(counters.plain_buffer_requests, 1, "the heap buffer's view");
    assert_eq!(pool.free_count(), 2, "pool buffers come back");
}

#[test]
fn a_second_pool_is_registered_beside_the_first() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("two-pools.img");
    let mut device = FileDevice::open(config(&path, FileEngine::IoUring, 4)).unwrap();
    let first_pool = BufferPool::new(2, 4096);
    let second_pool = BufferPool::new(3, 4096);
    device.register_buffer_pool(&first_pool).unwrap();
    device.register_buffer_pool(&second_pool).unwrap();
    for pool in [&first_pool, &second_pool] {
        let buffer = pool.try_take().unwrap();
        run_one(
            &mut device,
            Operation::Read {
                first_block: 1,
                buffer,
            },
        )
        .unwrap();
    }
    assert_eq!(device.uring_counters().unwrap().fixed_buffer_requests, 2);
}

/// Opens with `adjust` applied to a default config and expects an open error naming
/// the path whose text contains `expected_text`.
fn check_open_error(
    case: &str,
    prepare: impl FnOnce(&Path),
    adjust: impl FnOnce(&mut FileDeviceConfig),
    expected_text: &str,
) {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("device.img");
    prepare(&path);
    let mut asked = config(&path, FileEngine::Auto, 4);
    adjust(&mut asked);
    let error = FileDevice::open(asked)
        .err()
        .unwrap_or_else(|| panic!("{case}: open should fail"));
    assert_eq!(&*error.device, path.display().to_string(), "{case}");
    assert!(
        matches!(error.kind, DeviceErrorKind::Open { .. }),
        "{case}: {error}"
    );
    assert!(
        error.to_string().contains(expected_text),
        "{case}: {error} lacks {expected_text:?}"
    );
}

#[test]
fn bad_configurations_are_refused_with_the_path() {
    let nothing = |_: &Path| {};
    let odd_sized_file = |path: &Path| std::fs::write(path, vec![0u8; 5000]).unwrap();
    check_open_error(
        "missing file",
        nothing,
        |asked| asked.create_size_bytes = None,
        "No such file",
    );
    check_open_error(
        "size not a multiple of the block",
        odd_sized_file,
        |asked| asked.create_size_bytes = None,
        "not a positive multiple",
    );
    check_open_error(
        "existing file of another size",
        odd_sized_file,
        |_| {},
        "not the 8388608 bytes asked for",
    );
    check_open_error(
        "size to create not a multiple",
        nothing,
        |asked| asked.create_size_bytes = Some(4097),
        "size to create 4097",
    );
    for block_size_bytes in [0, 256, 1000, 4095] {
        check_open_error(
            "unsupported block size",
            nothing,
            |asked| asked.block_size_bytes = block_size_bytes,
            "not a power of two",
        );
    }
    for queue_depth in [0, MAX_QUEUE_DEPTH_PLUS_ONE] {
        check_open_error(
            "queue depth",
            nothing,
            |asked| asked.queue_depth = queue_depth,
            "queue depth",
        );
    }
}

const MAX_QUEUE_DEPTH_PLUS_ONE: u32 = crate::request::MAX_QUEUE_DEPTH + 1;

#[test]
fn a_refused_open_leaves_no_file_behind() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("huge.img");
    let mut asked = config(&path, FileEngine::Auto, 4);
    asked.create_size_bytes = Some(1 << 62);
    let error = FileDevice::open(asked).err().unwrap();
    assert!(error.to_string().contains("cannot allocate"), "{error}");
    assert!(!path.exists(), "the file it created is removed");
}

#[test]
fn block_size_below_what_direct_io_needs_is_refused() {
    let geometry = Geometry {
        is_block_device: true,
        size_bytes: 1 << 20,
        minimum_block_size_bytes: 4096,
    };
    let mut asked = FileDeviceConfig::new("/dev/fake");
    asked.block_size_bytes = 512;
    let error = check_geometry(&asked, &geometry, true).unwrap_err();
    assert!(error.contains("below the 4096 bytes"), "{error}");
    assert_eq!(check_geometry(&asked, &geometry, false), Ok(2048));
    asked.block_size_bytes = 8192;
    assert_eq!(check_geometry(&asked, &geometry, true), Ok(128));
}

#[test]
fn the_deepest_queue_opens_and_runs() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("deep.img");
    let mut device = FileDevice::open(config(
        &path,
        FileEngine::IoUring,
        crate::request::MAX_QUEUE_DEPTH,
    ))
    .unwrap();
    for tag in 0..TEST_BLOCK_COUNT {
        device
            .submit(Request::read(tag, tag, IoBuf::zeroed(4096)))
            .unwrap();
    }
    let mut completions = Vec::new();
    while device.in_flight() > 0 {
        device.wait_completions(&mut completions).unwrap();
    }
    assert_eq!(completions.len(), TEST_BLOCK_COUNT as usize);
}

#[test]
fn io_errors_name_the_path_on_both_engines() {
    for engine in [FileEngine::IoUring, FileEngine::ThreadPool] {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("shrinking.img");
        let mut device = FileDevice::open(config(&path, engine, 4)).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let error = run_one(
            &mut device,
            Operation::Read {
                first_block: 10,
                buffer: IoBuf::zeroed(4096),
            },
        )
        .unwrap_err();
        assert_eq!(&*error.device, path.display().to_string());
        assert!(
            matches!(
                error.kind,
                DeviceErrorKind::ShortTransfer {
                    direction: TransferDirection::Read,
                    moved_bytes: 0,
                    expected_bytes: 4096,
                    ..
                }
            ),
            "{engine:?}: {error}"
        );
    }
}

fn refuse_io_uring(_entries: u32) -> io::Result<IoUring> {
    Err(io::Error::from_raw_os_error(libc::EPERM))
}

fn refuse_direct_io(path: &Path, flags: OpenFlags) -> io::Result<File> {
    if flags.direct_io {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    open::open_read_write(path, flags)
}

/// Opens with `system_calls` and the given engine; returns the device or the error text.
fn open_refused(
    system_calls: SystemCalls,
    engine: FileEngine,
) -> (tempfile::TempDir, Result<FileDevice, String>) {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("refused.img");
    let opened = FileDevice::open_with(config(&path, engine, 4), system_calls)
        .map_err(|error| error.to_string());
    (folder, opened)
}

#[test]
fn auto_falls_back_to_worker_threads_where_io_uring_is_refused() {
    let system_calls = SystemCalls {
        setup_ring: refuse_io_uring,
        ..REAL_SYSTEM_CALLS
    };
    let (_folder, opened) = open_refused(system_calls, FileEngine::Auto);
    let mut device = opened.unwrap();
    assert_eq!(device.engine_in_use(), FileEngine::ThreadPool);
    assert!(device.direct_io_in_use());
    assert!(device
        .fallback_reason()
        .unwrap()
        .contains("io_uring refused"));
    run_one(&mut device, Operation::Flush).unwrap();
    let (_folder, opened) = open_refused(system_calls, FileEngine::IoUring);
    assert!(opened.err().unwrap().contains("io_uring refused"));
}

#[test]
fn auto_falls_back_to_buffered_worker_threads_where_direct_io_is_refused() {
    let system_calls = SystemCalls {
        open_file: refuse_direct_io,
        ..REAL_SYSTEM_CALLS
    };
    let (_folder, opened) = open_refused(system_calls, FileEngine::Auto);
    let device = opened.unwrap();
    assert_eq!(device.engine_in_use(), FileEngine::ThreadPool);
    assert!(!device.direct_io_in_use());
    assert!(device
        .fallback_reason()
        .unwrap()
        .contains("O_DIRECT refused"));
    for engine in [FileEngine::IoUring, FileEngine::ThreadPool] {
        let (_folder, opened) = open_refused(system_calls, engine);
        assert!(opened.err().unwrap().contains("refuses O_DIRECT"));
    }
}

#[test]
fn auto_uses_io_uring_where_the_kernel_allows() {
    let (_folder, opened) = open_refused(REAL_SYSTEM_CALLS, FileEngine::Auto);
    let device = opened.unwrap();
    assert_eq!(device.engine_in_use(), FileEngine::IoUring);
    assert_eq!(device.fallback_reason(), None);
}

#[test]
fn registering_with_requests_in_flight_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("busy.img");
    let mut device = FileDevice::open(config(&path, FileEngine::IoUring, 4)).unwrap();
    device
        .submit(Request::read(1, 0, IoBuf::zeroed(4096)))
        .unwrap();
    let error = device
        .register_buffer_pool(&BufferPool::new(1, 4096))
        .unwrap_err();
    assert!(error.to_string().contains("nothing in flight"), "{error}");
    let mut completions = Vec::new();
    device.wait_completions(&mut completions).unwrap();
}

/// The conformance suite on a real block device, when one is named in
/// `FLASHPIPE_TEST_BLOCK_DEVICE` (its contents are destroyed; e.g. a loop device made with
/// `losetup -f --show scratch.img`). Skipped otherwise.
#[test]
fn a_named_block_device_passes_the_conformance_suite() {
    let Some(path) = std::env::var_os("FLASHPIPE_TEST_BLOCK_DEVICE") else {
        return;
    };
    for engine in [FileEngine::IoUring, FileEngine::ThreadPool] {
        conformance::check_all(&mut |queue_depth| {
            let mut device = FileDevice::open(FileDeviceConfig {
                queue_depth,
                engine,
                ..FileDeviceConfig::new(&path)
            })
            .unwrap();
            assert!(device.is_block_device());
            zero_first_blocks(&mut device);
            Box::new(device)
        });
    }
}

/// The conformance suite expects a zero-filled device; zero the blocks it uses.
fn zero_first_blocks(device: &mut FileDevice) {
    let blocks = device.info().block_count.min(TEST_BLOCK_COUNT);
    let block_size_bytes = device.info().block_size_bytes as usize;
    for first_block in (0..blocks).step_by(256) {
        let count = (blocks - first_block).min(256) as usize;
        run_one(
            device,
            Operation::Write {
                first_block,
                buffer: IoBuf::zeroed(count * block_size_bytes),
            },
        )
        .unwrap();
    }
}

/// Where the reflink test runs: `FLASHPIPE_REFLINK_DIR`, a folder on XFS (`reflink=1`) or
/// btrfs; `scripts/reflink-test` makes such a folder on a loop device and runs the test.
fn reflink_folder() -> PathBuf {
    std::env::var_os("FLASHPIPE_REFLINK_DIR")
        .map(PathBuf::from)
        .expect(
            "FLASHPIPE_REFLINK_DIR names a folder on XFS or btrfs (scripts/reflink-test makes one)",
        )
}

#[test]
fn copies_by_reference_are_refused_where_the_file_system_cannot_clone() {
    let scratch = tempfile::tempdir().unwrap();
    let plain_path = scratch.path().join("plain.img");
    let plain = FileDevice::open(config(&plain_path, FileEngine::Auto, 4)).unwrap();
    let clones = reflink::file_system_clones_ranges(&File::open(&plain_path).unwrap());
    assert_eq!(plain.copies_by_reference(), clones);
    if !clones {
        let mut plain = plain;
        let refused = plain
            .submit(Request::copy_by_reference(1, 0, 8, 4))
            .expect_err("a file system that cannot clone refuses copies by reference");
        assert!(matches!(
            refused.error.kind,
            DeviceErrorKind::Unsupported { .. }
        ));
    }
}

#[test]
#[ignore = "needs a folder on XFS or btrfs: scripts/reflink-test runs it"]
fn copies_by_reference_clone_ranges_where_the_file_system_can() {
    let folder = tempfile::tempdir_in(reflink_folder()).unwrap();
    let mut created = 0;
    for engine in [FileEngine::IoUring, FileEngine::ThreadPool] {
        conformance::check_all(&mut |queue_depth| {
            created += 1;
            let path = folder.path().join(format!("reflink-{created}.img"));
            let device = FileDevice::open(config(&path, engine, queue_depth)).unwrap();
            assert!(
                device.copies_by_reference(),
                "{} clones ranges",
                path.display()
            );
            Box::new(device)
        });
    }
}

/// A read-only open reads what is there and refuses every change with
/// [`DeviceErrorKind::ReadOnly`]; a flush completes; the file's bytes never change.
#[test]
fn a_read_only_device_reads_and_refuses_every_change() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("read-only.img");
    let block_bytes = DEFAULT_BLOCK_SIZE_BYTES as usize;
    let written: Vec<u8> = (0..2 * block_bytes)
        .map(|index| (index % 251) as u8)
        .collect();
    {
        let mut device = FileDevice::open(config(&path, FileEngine::Auto, 4)).unwrap();
        let buffer = IoBuf::from_slice(&written);
        run_one(
            &mut device,
            Operation::Write {
                first_block: 3,
                buffer,
            },
        )
        .unwrap();
        run_one(&mut device, Operation::Flush).unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&path, permissions).unwrap();
    for engine in [
        FileEngine::IoUring,
        FileEngine::ThreadPool,
        FileEngine::Auto,
    ] {
        let mut device = FileDevice::open(FileDeviceConfig {
            read_only: true,
            create_size_bytes: None,
            ..config(&path, engine, 4)
        })
        .unwrap();
        assert!(device.is_read_only());
        let completion = run_one(
            &mut device,
            Operation::Read {
                first_block: 3,
                buffer: IoBuf::zeroed(2 * block_bytes),
            },
        )
        .unwrap();
        assert!(completion.buffer.unwrap()[..] == written[..]);
        let refused = [
            Operation::Write {
                first_block: 0,
                buffer: IoBuf::zeroed(block_bytes),
            },
            Operation::Trim {
                first_block: 0,
                block_count: 1,
            },
            Operation::CopyByReference {
                source_first_block: 3,
                destination_first_block: 0,
                block_count: 1,
            },
        ];
        for operation in refused {
            let rejected = device
                .submit(Request { tag: 7, operation })
                .expect_err("a read-only device refuses changes");
            assert!(
                matches!(rejected.error.kind, DeviceErrorKind::ReadOnly { .. }),
                "{}",
                rejected.error
            );
            assert!(rejected.error.to_string().contains("read-only"));
        }
        run_one(&mut device, Operation::Flush).unwrap();
        assert_eq!(device.in_flight(), 0);
    }
    assert!(std::fs::read(&path).unwrap() == before, "the file changed");
    let error = FileDevice::open(FileDeviceConfig {
        read_only: true,
        ..config(&folder.path().join("new.img"), FileEngine::Auto, 4)
    })
    .err()
    .unwrap();
    assert!(error.to_string().contains("read-only"), "{error}");
    assert!(!folder.path().join("new.img").exists());
}

/// Bytes the file system has allocated to `path` (`st_blocks` counts 512-byte units).
fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn created_files_are_sparse_unless_preallocated() {
    let folder = tempfile::tempdir().unwrap();
    let size_bytes = TEST_BLOCK_COUNT * u64::from(DEFAULT_BLOCK_SIZE_BYTES);
    let sparse = folder.path().join("sparse.img");
    let mut device = FileDevice::open(FileDeviceConfig {
        preallocate: false,
        ..config(&sparse, FileEngine::Auto, 4)
    })
    .unwrap();
    assert_eq!(std::fs::metadata(&sparse).unwrap().len(), size_bytes);
    assert!(
        allocated_bytes(&sparse) < size_bytes / 8,
        "a sparse file allocates nothing at creation: {} bytes",
        allocated_bytes(&sparse)
    );
    let completion = run_one(
        &mut device,
        Operation::Read {
            first_block: TEST_BLOCK_COUNT - 1,
            buffer: IoBuf::zeroed(DEFAULT_BLOCK_SIZE_BYTES as usize),
        },
    )
    .unwrap();
    completion.status.unwrap();
    assert!(completion.buffer.unwrap().iter().all(|&byte| byte == 0));
    drop(device);
    let full = folder.path().join("full.img");
    let device = FileDevice::open(config(&full, FileEngine::Auto, 4)).unwrap();
    drop(device);
    assert_eq!(std::fs::metadata(&full).unwrap().len(), size_bytes);
    // A file system that cannot preallocate falls back to a sparse file (tmpfs and ext4,
    // where tests run, can).
    assert!(
        allocated_bytes(&full) >= size_bytes,
        "a preallocated file has every block: {} of {size_bytes} bytes",
        allocated_bytes(&full)
    );
}
