//! Tests of shared regions, mappings and descriptor passing within one process (the
//! cross-process test is `tests/shared_memory.rs`).

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use super::*;

fn duplicate(memory: &SharedMemory) -> OwnedFd {
    memory.as_fd().try_clone_to_owned().unwrap()
}

fn write_owner_bytes(memory: &SharedMemory, offset: usize, bytes: &[u8]) {
    assert!(offset + bytes.len() <= memory.size_bytes());
    // SAFETY: in bounds (asserted) and no other borrow of these bytes exists in the test.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), memory.as_mut_ptr().add(offset), bytes.len())
    };
}

#[test]
fn a_second_mapping_sees_the_first_ones_writes() {
    let memory = SharedMemory::create("test-second-mapping", 3 * 4096).unwrap();
    write_owner_bytes(&memory, 5000, b"by reference");
    let mut writer =
        SharedMapping::map(duplicate(&memory), 3 * 4096, MapAccess::ReadWrite).unwrap();
    assert_eq!(writer.bytes(5000, 12).unwrap(), b"by reference");
    writer.bytes_mut(100, 3).unwrap().copy_from_slice(b"abc");
    let reader = SharedMapping::map(duplicate(&memory), 4096, MapAccess::ReadOnly).unwrap();
    assert_eq!(reader.bytes(100, 3).unwrap(), b"abc");
    assert!(
        reader.name().contains("test-second-mapping"),
        "{}",
        reader.name()
    );
}

#[test]
fn a_read_only_mapping_refuses_writable_bytes() {
    let memory = SharedMemory::create("test-read-only", 4096).unwrap();
    let mut mapping = SharedMapping::map(duplicate(&memory), 4096, MapAccess::ReadOnly).unwrap();
    let error = mapping.bytes_mut(0, 1).unwrap_err();
    assert!(
        matches!(error, SharedMemoryError::ReadOnly { .. }),
        "{error}"
    );
}

#[test]
fn windows_outside_the_mapping_are_refused() {
    let memory = SharedMemory::create("test-bounds", 4096).unwrap();
    let mut mapping = SharedMapping::map(duplicate(&memory), 4096, MapAccess::ReadWrite).unwrap();
    assert_eq!(mapping.bytes(4096, 0).unwrap().len(), 0);
    for (offset, length) in [(4096, 1), (4000, 97), (usize::MAX, 2), (1, usize::MAX)] {
        let error = mapping.bytes(offset, length).unwrap_err();
        assert!(
            matches!(
                error,
                SharedMemoryError::OutOfBounds {
                    size_bytes: 4096,
                    ..
                }
            ),
            "{error}"
        );
        assert!(mapping.bytes_mut(offset, length).is_err());
    }
}

#[test]
fn a_region_smaller_than_expected_is_refused() {
    let memory = SharedMemory::create("test-too-small", 4096).unwrap();
    let error = SharedMapping::map(duplicate(&memory), 8192, MapAccess::ReadOnly).unwrap_err();
    assert!(
        matches!(
            error,
            SharedMemoryError::TooSmall {
                actual_bytes: 4096,
                expected_bytes: 8192,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn an_unsealed_file_is_refused() {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&[0u8; 4096]).unwrap();
    let error = SharedMapping::map(OwnedFd::from(file), 4096, MapAccess::ReadOnly).unwrap_err();
    assert!(
        matches!(
            error,
            SharedMemoryError::System {
                operation: "F_GET_SEALS",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_memfd_without_seals_is_refused() {
    let name = c"test-unsealed";
    // SAFETY: a valid C string; the descriptor is owned at once.
    let raw_fd =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    assert!(raw_fd >= 0);
    // SAFETY: fresh descriptor.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw_fd) };
    std::fs::File::from(fd.try_clone().unwrap())
        .set_len(4096)
        .unwrap();
    let error = SharedMapping::map(fd, 4096, MapAccess::ReadOnly).unwrap_err();
    match error {
        SharedMemoryError::SealsMissing { missing_seals, .. } => {
            assert_eq!(missing_seals, REQUIRED_SEALS)
        }
        other => panic!("expected SealsMissing, got {other}"),
    }
}

#[test]
fn bad_names_and_sizes_are_refused() {
    assert!(matches!(
        SharedMemory::create("a\0b", 4096),
        Err(SharedMemoryError::NameInvalid { .. })
    ));
    assert!(matches!(
        SharedMemory::create(&"n".repeat(MAX_MEMFD_NAME_BYTES + 1), 4096),
        Err(SharedMemoryError::NameInvalid { .. })
    ));
    for size_bytes in [0, MAX_SHARED_MEMORY_BYTES + 1] {
        let error = SharedMemory::create("test-size", size_bytes).unwrap_err();
        assert!(
            matches!(error, SharedMemoryError::SizeInvalid { .. }),
            "{error}"
        );
    }
}

#[test]
fn descriptors_round_trip_over_a_socket_pair() {
    let (left, right) = UnixStream::pair().unwrap();
    let memory = SharedMemory::create("test-round-trip", 4096).unwrap();
    write_owner_bytes(&memory, 0, b"sent");
    let other = SharedMemory::create("test-round-trip-2", 4096).unwrap();
    send_with_fds(&left, b"two regions", &[memory.as_fd(), other.as_fd()]).unwrap();
    let mut buffer = [0u8; 64];
    let (length, fds) = receive_with_fds(&right, &mut buffer, 4).unwrap();
    assert_eq!(&buffer[..length], b"two regions");
    assert_eq!(fds.len(), 2);
    let mut fds = fds.into_iter();
    let mapping = SharedMapping::map(fds.next().unwrap(), 4096, MapAccess::ReadOnly).unwrap();
    assert_eq!(mapping.bytes(0, 4).unwrap(), b"sent");
    // SAFETY: F_GETFD only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(AsRawFd::as_raw_fd(&fds.next().unwrap()), libc::F_GETFD) };
    assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
}

#[test]
fn too_many_descriptors_are_refused_and_truncation_closes_what_came() {
    let (left, right) = UnixStream::pair().unwrap();
    let memory = SharedMemory::create("test-truncated", 4096).unwrap();
    let too_many = vec![memory.as_fd(); MAX_FDS_PER_MESSAGE + 1];
    assert!(send_with_fds(&left, b"x", &too_many).is_err());
    assert!(send_with_fds(&left, b"", &[memory.as_fd()]).is_err());
    let mut buffer = [0u8; 8];
    assert!(receive_with_fds(&right, &mut buffer, MAX_FDS_PER_MESSAGE + 1).is_err());

    send_with_fds(&left, b"three", &[memory.as_fd(); 3]).unwrap();
    let error = receive_with_fds(&right, &mut buffer, 1).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");

    send_with_fds(&left, b"plain", &[]).unwrap();
    let (length, fds) = receive_with_fds(&right, &mut buffer, 1).unwrap();
    assert_eq!(&buffer[..length], b"plain");
    assert!(fds.is_empty());
}
