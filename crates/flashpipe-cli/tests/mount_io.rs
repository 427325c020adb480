//! Large writes and reads through `flashpipe mount`: a descriptor opened for writing only
//! bypasses the kernel's page cache (`FOPEN_DIRECT_IO`, docs/mount.md "Speed"), so these
//! check what a program can see of that: a reader holding the file's pages cached sees the
//! bytes a write-only descriptor wrote, without reopening; files show 1 MiB as their
//! preferred I/O size (`st_blksize`); sizes grow as they should
//! (writes past the end, `O_APPEND`, small unaligned writes); a write-only descriptor cannot
//! be mapped, as on any file system; everything written is in the store after the unmount.
//! 1 MiB writes from buffers off a page (split by the kernel in two requests, the first kept
//! back by the mount) land whole; a write kept back is read at once through another
//! descriptor and committed by another file's fsync (a SIGKILL after it loses nothing).
//! SIGTERM with a file open detaches the mount lazily (a plain unmount is refused while in
//! use): the open file is written on, and its close ends the mount with everything committed.
//! Writes past a full store are answered, and the store's refusal fails the next fsync
//! (`ENOSPC`) with the other files intact. `posix_fallocate` past the end extends the size
//! over zeros, a range larger than the free space is refused (`ENOSPC`, size unchanged), and
//! punching a hole is refused (`EOPNOTSUPP`); the size is in the store after the unmount.
//! With `--direct-reads` (descriptors opened for reading only bypass the page cache too):
//! reads of any size and place give the file's bytes (also 1 MiB reads in order into
//! buffers off a page, which the kernel splits in two requests each), see a write made through another
//! descriptor at once, and a shared map of the file shows its bytes.
//!
//! They need /dev/fuse and `fusermount3` (Debian fuse3): without them each test prints why
//! and returns, and fails instead under `FLASHPIPE_REQUIRE_TOOLS=1`.

mod common;
mod mount_support;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};

use common::{fresh_folder, succeed, succeed_bytes, text};
use mount_support::{fuse_available, store_and_mount_point, Mounted};

/// `length` bytes of a pattern that differs at every offset of a 251-byte cycle.
fn pattern(length: usize, salt: u8) -> Vec<u8> {
    (0..length)
        .map(|index| ((index % 251) as u8).wrapping_add(salt))
        .collect()
}

#[test]
fn a_reader_with_cached_pages_sees_what_a_write_only_descriptor_wrote() {
    if !fuse_available("write-only descriptors and cached readers") {
        return;
    }
    let folder = fresh_folder("mount-io-coherence");
    let (store, directory) = store_and_mount_point(folder.path());
    let mount = Mounted::start(&store, &directory, &[]);
    let path = directory.join("f");
    let mut expected = pattern(4 << 20, 0);
    std::fs::write(&path, &expected).expect("write through the mount");
    // the reader reads the whole file: its pages are in the page cache from now on
    let mut reader = std::fs::File::open(&path).expect("open for reading");
    let mut seen = Vec::new();
    reader.read_to_end(&mut seen).expect("read");
    assert_eq!(seen, expected);
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open for writing only");
    let changed = 1_000_001..2_500_003;
    writer
        .write_all_at(&vec![b'X'; changed.len()], changed.start as u64)
        .expect("write in the middle");
    expected[changed.clone()].fill(b'X');
    // past the end: the file grows, with the hole between read as zeros
    let tail = pattern(70_000, 7);
    let tail_at = (5usize << 20) + 3;
    writer
        .write_all_at(&tail, tail_at as u64)
        .expect("write past the end");
    expected.resize(tail_at, 0);
    expected.extend_from_slice(&tail);
    drop(writer);
    let metadata = std::fs::metadata(&path).expect("stat");
    assert_eq!(metadata.len(), expected.len() as u64);
    // buffered writers (stdio, Python, cp) size their buffers by it: 1 MiB, the largest
    // write the mount takes, not 4 KiB
    assert_eq!(metadata.blksize(), 1 << 20);
    // the same descriptor, not reopened: its cached pages of the changed range are gone
    let mut again = vec![0u8; expected.len()];
    reader.read_exact_at(&mut again, 0).expect("read again");
    assert!(
        again == expected,
        "the reader sees the write-only descriptor's bytes"
    );
    drop(reader);
    mount.stop(libc::SIGTERM);
    let fetched = folder.path().join("fetched");
    succeed(&["get", text(&store), "f", text(&fetched)]);
    assert!(std::fs::read(&fetched).expect("fetched") == expected);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}

#[test]
fn small_appends_and_unaligned_writes_through_write_only_descriptors_land_in_place() {
    if !fuse_available("small writes through write-only descriptors") {
        return;
    }
    let folder = fresh_folder("mount-io-small");
    let (store, directory) = store_and_mount_point(folder.path());
    let mount = Mounted::start(&store, &directory, &[]);
    let path = directory.join("log");
    let mut expected = Vec::new();
    for round in 0..50u8 {
        let mut appender = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .expect("open for appending");
        let line = format!("line {round} {}\n", "y".repeat(usize::from(round) * 37));
        appender.write_all(line.as_bytes()).expect("append");
        expected.extend_from_slice(line.as_bytes());
    }
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .expect("open for writing only");
    for (offset, bytes) in [(3u64, &b"abc"[..]), (4_095, b"zz"), (17, b"")] {
        writer.seek(SeekFrom::Start(offset)).expect("seek");
        writer.write_all(bytes).expect("small write");
        let start = offset as usize;
        expected[start..start + bytes.len()].copy_from_slice(bytes);
    }
    writer.sync_all().expect("fsync of a write-only descriptor");
    // mmap needs a descriptor that may read, here as on any file system
    use std::os::fd::AsRawFd;
    // SAFETY: a mapping request with a null hint and an open descriptor; nothing is mapped
    // when it fails, and a mapping made is unmapped at once.
    let mapped = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            writer.as_raw_fd(),
            0,
        )
    };
    let refused = mapped == libc::MAP_FAILED;
    if !refused {
        // SAFETY: the mapping just made, of 4096 bytes.
        unsafe { libc::munmap(mapped, 4096) };
    }
    assert!(refused, "a write-only descriptor cannot be mapped");
    drop(writer);
    assert!(std::fs::read(&path).expect("read through the mount") == expected);
    mount.stop(libc::SIGTERM);
    assert!(succeed_bytes(&["cat", text(&store), "log"]) == expected);
}

/// Maps `length` bytes of `file` shared and read-only; the bytes, or the errno of a refusal.
fn mapped_bytes(file: &std::fs::File, length: usize) -> Result<Vec<u8>, i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: a mapping request with a null hint and an open descriptor; the mapping made
    // is read while the descriptor is open, copied, then unmapped.
    unsafe {
        let mapped = libc::mmap(
            std::ptr::null_mut(),
            length,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if mapped == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let bytes = std::slice::from_raw_parts(mapped as *const u8, length).to_vec();
        libc::munmap(mapped, length);
        Ok(bytes)
    }
}

#[test]
fn direct_reads_give_the_files_bytes_in_any_piece_size_and_see_every_write() {
    if !fuse_available("--direct-reads") {
        return;
    }
    let folder = fresh_folder("mount-io-direct-reads");
    let (store, directory) = store_and_mount_point(folder.path());
    let mount = Mounted::start(&store, &directory, &["--direct-reads"]);
    let path = directory.join("f");
    let mut expected = pattern((3 << 20) + 12_345, 3);
    std::fs::write(&path, &expected).expect("write through the mount");
    let mut reader = std::fs::File::open(&path).expect("open for reading only");
    // whole 1 MiB reads in order (the mount reads ahead), then small ones at odd places
    let mut whole = Vec::new();
    let mut piece = vec![0u8; 1 << 20];
    loop {
        let read = reader.read(&mut piece).expect("read");
        if read == 0 {
            break;
        }
        whole.extend_from_slice(&piece[..read]);
    }
    assert!(whole == expected, "1 MiB reads give the file");
    // 1 MiB reads in order into buffers that do not start on a page (as `malloc` gives):
    // the kernel splits each into a request a page short and a small one, and the mount's
    // reads ahead serve both
    for skew in [16usize, 4_000, 1] {
        let mut backing = vec![0u8; (1 << 20) + 8192];
        let page_start = (4096 - backing.as_ptr() as usize % 4096) % 4096;
        let buffer = &mut backing[page_start + skew..page_start + skew + (1 << 20)];
        reader.seek(SeekFrom::Start(0)).expect("seek");
        let mut position = 0usize;
        loop {
            let read = reader.read(buffer).expect("read into a skewed buffer");
            if read == 0 {
                break;
            }
            assert!(
                buffer[..read] == expected[position..position + read],
                "skew {skew}, at {position}"
            );
            position += read;
        }
        assert_eq!(position, expected.len(), "skew {skew}");
    }
    for (offset, length) in [(0usize, 1usize), (4_095, 4_097), (1_000_003, 65_536)] {
        let mut small = vec![0u8; length];
        reader
            .read_exact_at(&mut small, offset as u64)
            .expect("small read");
        assert!(small == expected[offset..offset + length], "at {offset}");
    }
    let mut past = [0u8; 16];
    assert_eq!(
        reader
            .read_at(&mut past, expected.len() as u64 + 10)
            .expect("read past the end"),
        0
    );
    // a write through another descriptor, then the same reader, not reopened
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open for writing only");
    writer
        .write_all_at(&[b'Q'; 5_000], 2_000_000)
        .expect("write");
    expected[2_000_000..2_005_000].fill(b'Q');
    drop(writer);
    let mut again = vec![0u8; expected.len()];
    reader.read_exact_at(&mut again, 0).expect("read again");
    assert!(again == expected, "a direct read sees the write");
    match mapped_bytes(&reader, 1 << 20) {
        Ok(bytes) => assert!(bytes == expected[..1 << 20], "a shared map shows the file"),
        // kernels before 6.6 cannot map files read directly (the mount says so at its start)
        Err(errno) => assert_eq!(errno, libc::ENODEV),
    }
    drop(reader);
    mount.stop(libc::SIGTERM);
    assert!(succeed_bytes(&["cat", text(&store), "f"]) == expected);
}

#[test]
fn writes_from_buffers_off_a_page_land_whole_and_a_write_kept_back_is_seen_and_committed() {
    if !fuse_available("writes from skewed buffers") {
        return;
    }
    let folder = fresh_folder("mount-io-skewed-writes");
    let (store, directory) = store_and_mount_point(folder.path());
    let mount = Mounted::start(&store, &directory, &[]);
    let expected = pattern((5 << 20) + 777, 11);
    // 1 MiB writes from buffers off a page: the kernel splits each in two requests (the
    // mount keeps the first back and sends both as one chunk)
    for skew in [16usize, 4_000, 1] {
        let path = directory.join(format!("skew{skew}"));
        let mut backing = vec![0u8; (1 << 20) + 8192];
        let page_start = (4096 - backing.as_ptr() as usize % 4096) % 4096;
        let mut writer = std::fs::File::create(&path).expect("create");
        for chunk in expected.chunks(1 << 20) {
            let buffer = &mut backing[page_start + skew..page_start + skew + chunk.len()];
            buffer.copy_from_slice(chunk);
            writer.write_all(buffer).expect("write");
        }
        writer.sync_all().expect("fsync");
        drop(writer);
        assert!(
            std::fs::read(&path).expect("read") == expected,
            "skew {skew}"
        );
    }
    // a write of 1 MiB less 16 bytes alone (kept back): another descriptor reads it at once
    let path = directory.join("short");
    let short = &expected[..(1 << 20) - 16];
    let writer = std::fs::File::create(&path).expect("create");
    writer.write_all_at(short, 0).expect("write");
    assert!(std::fs::read(&path).expect("read while open") == short);
    // then one more write elsewhere, kept back too, and the fsync of another file: every
    // change so far is committed, so a SIGKILL of the mount loses none of it
    writer
        .write_all_at(&expected[..(1 << 20) - 100], 3 << 20)
        .expect("write");
    let mut tail = short.to_vec();
    tail.resize(3 << 20, 0);
    tail.extend_from_slice(&expected[..(1 << 20) - 100]);
    let other = std::fs::File::create(directory.join("other")).expect("create");
    other.write_all_at(b"other", 0).expect("write");
    other.sync_all().expect("fsync of another file");
    mount.kill();
    drop((writer, other));
    assert!(succeed_bytes(&["cat", text(&store), "short"]) == tail);
    assert!(succeed_bytes(&["cat", text(&store), "skew16"]) == expected);
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}

#[test]
fn sigterm_detaches_a_mount_in_use_lazily_and_the_open_file_finishes() {
    if !fuse_available("a lazy detach") {
        return;
    }
    let folder = fresh_folder("mount-io-lazy-detach");
    let (store, directory) = store_and_mount_point(folder.path());
    let mut mount = Mounted::start(&store, &directory, &[]);
    let writer = std::fs::File::create(directory.join("open")).expect("create");
    writer
        .write_all_at(b"before the signal ", 0)
        .expect("write");
    let mut child = mount.child.take().expect("running");
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill with a valid pid and signal has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    // a plain unmount fails while the file is open (EBUSY): the mount is detached lazily
    let mounted_here = || {
        std::fs::read_to_string("/proc/self/mountinfo")
            .expect("mountinfo")
            .contains(text(&directory))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while mounted_here() {
        assert!(
            std::time::Instant::now() < deadline,
            "the mount is detached"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "still serving"
    );
    writer
        .write_all_at(b"and after it", 18)
        .expect("write through the detached mount");
    drop(writer);
    let status = mount_support::wait_with_deadline(&mut child, std::time::Duration::from_secs(60));
    assert!(status.success(), "the mount exited with {status}");
    assert_eq!(
        succeed(&["cat", text(&store), "open"]),
        "before the signal and after it"
    );
}

#[test]
fn writes_past_a_full_store_are_answered_and_fail_the_next_fsync() {
    if !fuse_available("a full store") {
        return;
    }
    let folder = fresh_folder("mount-io-full");
    let (store, directory) = store_and_mount_point(folder.path());
    let mount = Mounted::start(&store, &directory, &[]);
    std::fs::write(directory.join("kept"), b"kept before").expect("write a small file");
    let piece = pattern(1 << 20, 5);
    let mut first = std::fs::File::create(directory.join("first")).expect("create");
    for _ in 0..200 {
        first.write_all(&piece).expect("200 MiB fit");
    }
    first.sync_all().expect("200 MiB fit");
    drop(first);
    // the store holds 256 MiB: writes are answered once the mount has them, and the store's
    // refusal comes back at the fsync (each file stays below the store's size, so the
    // refusal is for space, never for a file larger than the store)
    let mut writer = std::fs::File::create(directory.join("big")).expect("create");
    let mut failed_early = None;
    for _ in 0..120 {
        if let Err(error) = writer.write_all(&piece) {
            failed_early = Some(error);
            break;
        }
    }
    let failure = failed_early
        .or_else(|| writer.sync_all().err())
        .expect("a full store fails the fsync");
    assert_eq!(failure.raw_os_error(), Some(libc::ENOSPC), "{failure}");
    drop(writer);
    assert_eq!(
        std::fs::read(directory.join("kept")).expect("read"),
        b"kept before"
    );
    mount.stop(libc::SIGTERM);
    assert_eq!(succeed(&["cat", text(&store), "kept"]), "kept before");
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}

/// `fallocate(2)` of `file` with `mode`; the errno of a refusal.
fn fallocate(file: &std::fs::File, mode: i32, offset: i64, length: i64) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate only reads its arguments; the descriptor is open for the call.
    let done = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, length) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

#[test]
fn fallocate_extends_the_size_over_zeros_and_refuses_what_it_cannot_promise() {
    if !fuse_available("fallocate") {
        return;
    }
    let folder = fresh_folder("mount-io-fallocate");
    let (store, directory) = store_and_mount_point(folder.path());
    let mount = Mounted::start(&store, &directory, &[]);
    let path = directory.join("space");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create");
    file.write_all_at(b"head", 0).expect("write");
    assert_eq!(fallocate(&file, 0, 0, 12 << 20), Ok(()));
    assert_eq!(file.metadata().expect("stat").len(), 12 << 20);
    assert_eq!(fallocate(&file, 0, 0, 1 << 30), Err(libc::ENOSPC));
    let hole = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    assert_eq!(fallocate(&file, hole, 0, 4096), Err(libc::EOPNOTSUPP));
    assert_eq!(
        fallocate(&file, libc::FALLOC_FL_KEEP_SIZE, 12 << 20, 4096),
        Ok(())
    );
    assert_eq!(file.metadata().expect("stat").len(), 12 << 20);
    file.sync_all().expect("fsync");
    let mut tail = vec![1u8; 4096];
    file.read_exact_at(&mut tail, (12 << 20) - 4096)
        .expect("read the allocated range");
    assert!(tail.iter().all(|&byte| byte == 0));
    drop(file);
    mount.stop(libc::SIGTERM);
    let stored = succeed_bytes(&["cat", text(&store), "space"]);
    assert_eq!(stored.len(), 12 << 20);
    assert_eq!(&stored[..4], b"head");
    assert!(stored[4..].iter().all(|&byte| byte == 0));
    assert!(succeed(&["fsck", text(&store)]).contains("clean"));
}
