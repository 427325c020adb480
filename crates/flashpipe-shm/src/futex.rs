//! The futex calls of the frame ring: a wait and a wake on a 32-bit word in shared memory,
//! without `FUTEX_PRIVATE_FLAG` (the word is shared between processes, so the kernel must
//! key the wait by the page, not by this process's address space).

use std::sync::atomic::AtomicU32;

/// Sleeps while `word` holds `expected`, until woken or `timeout_us` passes (never, for
/// `None`). Returns at once when the word already differs; spurious returns happen, so
/// callers re-check their condition.
pub(crate) fn wait_while_equal(word: &AtomicU32, expected: u32, timeout_us: Option<u64>) {
    let timeout = timeout_us.map(|timeout_us| libc::timespec {
        tv_sec: (timeout_us / 1_000_000) as libc::time_t,
        tv_nsec: ((timeout_us % 1_000_000) * 1000) as libc::c_long,
    });
    let timeout_pointer = timeout
        .as_ref()
        .map_or(std::ptr::null(), |timeout| timeout as *const libc::timespec);
    // SAFETY: `word` is a live, aligned 32-bit atomic (in a mapping that outlives the
    // call); FUTEX_WAIT only reads it and the timeout, which lives across the call. The
    // result (woken, EAGAIN, ETIMEDOUT, EINTR) needs no handling: callers re-check.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            timeout_pointer,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes one waiter sleeping on `word` (in any process mapping its page).
pub(crate) fn wake_one(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            1u32,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every waiter sleeping on `word` (a doorbell has one consumer; waking all keeps
/// a second one, should a caller ever share a doorbell, from sleeping through a ring).
pub(crate) fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE touches no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}
