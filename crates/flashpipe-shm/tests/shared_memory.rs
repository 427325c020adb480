//! Shared memory across processes: the parent creates a region and writes into it, a
//! child process (this test binary run again with [`CHILD_SOCKET_VARIABLE`] set) receives
//! the descriptor over a Unix socket, maps it, checks what the parent wrote and writes an
//! answer the parent then sees in its own mapping.

mod child;

use child::{connect_to_parent, start_child_side, ChildSide};
use flashpipe_shm::{receive_with_fds, send_with_fds, MapAccess, SharedMapping, SharedMemory};

/// Set in the child: the socket path it connects to.
const CHILD_SOCKET_VARIABLE: &str = "FLASHPIPE_SHARED_MEMORY_CHILD_SOCKET";

const REGION_BYTES: usize = 64 * 1024;
const PARENT_OFFSET: usize = 40_000;
const CHILD_OFFSET: usize = 100;
const PARENT_BYTES: &[u8] = b"written by the parent";
const CHILD_BYTES: &[u8] = b"written by the child";

#[test]
fn a_child_process_maps_the_region_it_receives() {
    let memory = SharedMemory::create("test-child-process", REGION_BYTES).unwrap();
    // SAFETY: in bounds; no other borrow of the region exists in this process.
    unsafe {
        std::ptr::copy_nonoverlapping(
            PARENT_BYTES.as_ptr(),
            memory.as_mut_ptr().add(PARENT_OFFSET),
            PARENT_BYTES.len(),
        )
    };
    let ChildSide {
        stream, mut child, ..
    } = start_child_side(CHILD_SOCKET_VARIABLE);
    send_with_fds(&stream, b"region", &[memory.as_fd()]).unwrap();
    let mut answer = [0u8; 16];
    let (length, _) = receive_with_fds(&stream, &mut answer, 0).unwrap();
    assert!(child.wait().unwrap().success(), "the child failed");
    assert_eq!(&answer[..length], b"done");
    // SAFETY: in bounds; the child has exited, so nothing writes the region now.
    let seen = unsafe {
        std::slice::from_raw_parts(memory.as_mut_ptr().add(CHILD_OFFSET), CHILD_BYTES.len())
    };
    assert_eq!(seen, CHILD_BYTES);
}

/// The child's side; does nothing when run as an ordinary test.
#[test]
fn child_side() {
    let Some(stream) = connect_to_parent(CHILD_SOCKET_VARIABLE) else {
        return;
    };
    let mut buffer = [0u8; 16];
    let (length, mut fds) = receive_with_fds(&stream, &mut buffer, 1).unwrap();
    assert_eq!(&buffer[..length], b"region");
    assert_eq!(fds.len(), 1);
    let mut mapping =
        SharedMapping::map(fds.pop().unwrap(), REGION_BYTES, MapAccess::ReadWrite).unwrap();
    assert_eq!(
        mapping.bytes(PARENT_OFFSET, PARENT_BYTES.len()).unwrap(),
        PARENT_BYTES
    );
    mapping
        .bytes_mut(CHILD_OFFSET, CHILD_BYTES.len())
        .unwrap()
        .copy_from_slice(CHILD_BYTES);
    send_with_fds(&stream, b"done", &[]).unwrap();
}
