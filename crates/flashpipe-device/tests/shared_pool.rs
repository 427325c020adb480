//! A buffer pool in shared memory (`BufferPool::in_shared_memory`) serving a file device:
//! the device layer's side of the regions `flashpipe-shm` creates and maps.

use flashpipe_shm::{MapAccess, SharedMapping};

/// A pool in shared memory serves a file device like a heap pool: registered as io_uring
/// fixed buffers where the kernel allows, read into with `O_DIRECT`, and the bytes show
/// in a second mapping.
#[test]
fn a_file_device_reads_into_a_shared_pool() {
    use flashpipe_device::file::{FileDevice, FileDeviceConfig, FileEngine};
    use flashpipe_device::{run_one, BufferPool, Operation};

    let folder = tempfile::tempdir().unwrap();
    let mut config = FileDeviceConfig::new(folder.path().join("shared-pool.img"));
    config.create_size_bytes = Some(1 << 20);
    config.engine = FileEngine::Auto;
    let mut device = FileDevice::open(config).unwrap();
    let pool = BufferPool::in_shared_memory("test-file-device-pool", 2, 8192).unwrap();
    let registered = device.register_buffer_pool(&pool);
    let mut written = pool.try_take().unwrap();
    written.fill(0xA5);
    run_one(
        &mut device,
        Operation::Write {
            first_block: 4,
            buffer: written,
        },
    )
    .unwrap();
    let read = run_one(
        &mut device,
        Operation::Read {
            first_block: 4,
            buffer: pool.try_take().unwrap(),
        },
    )
    .unwrap()
    .buffer
    .unwrap();
    let (_, slot) = read.pool_slot().unwrap();
    let memory = pool.shared_memory().unwrap();
    let fd = memory.as_fd().try_clone_to_owned().unwrap();
    let mapping = SharedMapping::map(fd, memory.size_bytes(), MapAccess::ReadOnly).unwrap();
    let seen = mapping.bytes(slot as usize * 8192, 8192).unwrap();
    assert!(seen.iter().all(|&byte| byte == 0xA5));
    if let (Ok(()), Some(counters)) = (registered, device.uring_counters()) {
        assert_eq!(counters.fixed_buffer_requests, 2, "{counters:?}");
    }
}
