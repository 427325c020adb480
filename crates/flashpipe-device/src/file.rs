//! Files and block devices through io_uring with `O_DIRECT`, with a thread-pool
//! fallback (being written for issue #2).
