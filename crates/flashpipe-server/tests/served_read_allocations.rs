//! A served 4 KiB read by reference through the rings allocates no more on the engine
//! thread than an in-process read does, and nothing on the connection's threads, once
//! warm (docs/design/27-served-path.md, "Allocations of a
//! served read"); an in-process read allocates at most what its read plan and pool
//! buffer split take today. A counting global allocator keeps one counter per thread (by
//! kernel thread id, in a fixed table: counting itself never allocates); the tests find
//! the server's threads by name in `/proc/self/task` and read their counters before and
//! after a window of reads. A count over its bound fails: an allocation came back.
//!
//! `FLASHPIPE_ALLOC_BACKTRACE=1` prints where each allocation on a watched thread in the
//! window came from (a backtrace each, the first [`MAX_BACKTRACES`]).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

use common::{connect_with, pattern, ram_store, start_server};
use flashpipe_api::{Command, TransportExt};
use flashpipe_client::{ClientTransport, Reply, Request, Response};
use flashpipe_device::IoBuf;
use flashpipe_engine::Reply as EngineReply;

/// Threads the table can count (a test process has a few dozen).
const THREAD_SLOTS: usize = 1024;
/// Reads before the window: every buffer, queue and table reaches its steady size.
const WARM_UP_READS: u64 = 1_000;
/// Reads in the window.
const MEASURED_READS: u64 = 1_000;
/// Time for the connection's threads to reach their steady waits after the warm-up
/// (well past the answering thread's 10 ms look for rings).
const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);
/// Backtraces kept when they are asked for.
const MAX_BACKTRACES: usize = 400;
/// Allocations of an in-process 4 KiB read on the engine thread, in crates below the
/// engine: the file system's read plan (its runs, the mapped runs, each run's checksums,
/// the file name kept for a checksum error) and the pool buffer's split (its shared part
/// and its table of windows).
const ENGINE_READ_ALLOCATIONS: u64 = 6;
/// Allocations of a QD1 read by reference on the client's thread (this test's): the
/// request's name (the test's own) and the read view's hold of its handle
/// (docs/design/27-served-path.md).
const CLIENT_READ_ALLOCATIONS: u64 = 2;
/// The client's thread also allocates now and then, outside the read path (about 1 in
/// 100 reads measured): at most one in this many reads.
const CLIENT_READS_PER_OCCASIONAL_ALLOCATION: u64 = 20;
/// The variable that asks for backtraces.
const BACKTRACE_VARIABLE: &str = "FLASHPIPE_ALLOC_BACKTRACE";

/// Counts each thread's allocations (`alloc`, `alloc_zeroed`, `realloc`), then allocates
/// with the system's allocator.
struct Counting;

#[global_allocator]
static COUNTING: Counting = Counting;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_TID: AtomicI32 = AtomicI32::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO_COUNT: AtomicU64 = AtomicU64::new(0);
/// The thread id owning each slot (0: free), claimed once, never given back.
static THREAD_IDS: [AtomicI32; THREAD_SLOTS] = [EMPTY_TID; THREAD_SLOTS];
/// The allocations counted for the thread of the same slot.
static COUNTS: [AtomicU64; THREAD_SLOTS] = [ZERO_COUNT; THREAD_SLOTS];
/// Thread ids whose allocations get a backtrace while [`TRACING`] is set.
static TRACED: [AtomicI32; 8] = [EMPTY_TID; 8];
static TRACING: AtomicBool = AtomicBool::new(false);
static BACKTRACES: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Held by each test for its whole run: one engine thread in the process at a time.
static ONE_ENGINE_AT_A_TIME: Mutex<()> = Mutex::new(());

thread_local! {
    /// This thread's kernel id (0 until first asked).
    static THREAD_ID: Cell<i32> = const { Cell::new(0) };
    /// True while this thread takes a backtrace (whose own allocations are not counted).
    static IN_BACKTRACE: Cell<bool> = const { Cell::new(false) };
}

fn current_thread_id() -> i32 {
    THREAD_ID.with(|id| {
        if id.get() == 0 {
            // SAFETY: gettid has no preconditions and cannot fail.
            id.set(unsafe { libc::gettid() });
        }
        id.get()
    })
}

/// The slot of thread `tid`, claimed on first use; `None` once the table is full.
fn slot_of(tid: i32) -> Option<usize> {
    let start = tid.unsigned_abs() as usize % THREAD_SLOTS;
    (0..THREAD_SLOTS)
        .map(|step| (start + step) % THREAD_SLOTS)
        .find(|&slot| {
            let owner = THREAD_IDS[slot].load(Ordering::Acquire);
            owner == tid
                || (owner == 0
                    && match THREAD_IDS[slot].compare_exchange(
                        0,
                        tid,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => true,
                        Err(now) => now == tid,
                    })
        })
}

fn count_allocation() {
    if IN_BACKTRACE.with(Cell::get) {
        return;
    }
    let tid = current_thread_id();
    if let Some(slot) = slot_of(tid) {
        COUNTS[slot].fetch_add(1, Ordering::Relaxed);
    }
    if TRACING.load(Ordering::Acquire) && TRACED.iter().any(|t| t.load(Ordering::Relaxed) == tid) {
        IN_BACKTRACE.with(|flag| flag.set(true));
        let trace = std::backtrace::Backtrace::force_capture().to_string();
        if let Ok(mut kept) = BACKTRACES.lock() {
            if kept.len() < MAX_BACKTRACES {
                kept.push(trace);
            }
        }
        IN_BACKTRACE.with(|flag| flag.set(false));
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches
// only atomics and const thread-locals, never the heap (a backtrace's own allocations
// are made with counting off for the thread).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The allocations counted so far for thread `tid`.
fn count_of(tid: i32) -> u64 {
    slot_of(tid).map_or(0, |slot| COUNTS[slot].load(Ordering::Acquire))
}

/// This process's threads whose name starts with `prefix` (names as the kernel keeps
/// them, 15 bytes at most), by id.
fn threads_named(prefix: &str) -> Vec<i32> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task readable");
    let mut found: Vec<i32> = tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let tid: i32 = task.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
            name.trim_end().starts_with(prefix).then_some(tid)
        })
        .collect();
    found.sort_unstable();
    found
}

/// Counts each thread of `watched` over `reads` (run after the counters are read), with
/// backtraces when [`BACKTRACE_VARIABLE`] asks for them; the allocations by thread name.
fn allocations_during(watched: &[(&str, i32)], reads: impl FnOnce()) -> BTreeMap<String, u64> {
    let tracing = std::env::var_os(BACKTRACE_VARIABLE).is_some();
    for (slot, (_, tid)) in TRACED.iter().zip(watched) {
        slot.store(*tid, Ordering::Relaxed);
    }
    let before: Vec<u64> = watched.iter().map(|(_, tid)| count_of(*tid)).collect();
    TRACING.store(tracing, Ordering::Release);
    reads();
    TRACING.store(false, Ordering::Release);
    let counted = watched
        .iter()
        .zip(before)
        .map(|((name, tid), before)| (format!("{name} (thread {tid})"), count_of(*tid) - before))
        .collect();
    for trace in BACKTRACES.lock().expect("backtraces").drain(..) {
        eprintln!("allocation on a watched thread:\n{trace}");
    }
    counted
}

/// Fails when a thread of `counted` allocated more over `reads` than `bound` allows it
/// for that many reads.
fn assert_at_most(
    counted: &BTreeMap<String, u64>,
    bound: &dyn Fn(&str, u64) -> u64,
    reads: u64,
    what: &str,
) {
    let over: Vec<String> = counted
        .iter()
        .filter(|(thread, count)| **count > bound(thread, reads))
        .map(|(thread, count)| format!("{thread}: {count}, at most {}", bound(thread, reads)))
        .collect();
    assert!(
        over.is_empty(),
        "{what}: {reads} reads allocated more than they may on {} (run with \
         {BACKTRACE_VARIABLE}=1 for where)",
        over.join("; ")
    );
}

/// What a served read's threads may allocate over `reads`: the engine's per read, the
/// client's per read and its occasional ones, nothing on the connection's threads.
fn served_bound(thread: &str, reads: u64) -> u64 {
    if thread.starts_with("engine") {
        ENGINE_READ_ALLOCATIONS * reads
    } else if thread.starts_with("client") {
        CLIENT_READ_ALLOCATIONS * reads + reads / CLIENT_READS_PER_OCCASIONAL_ALLOCATION
    } else {
        0
    }
}

fn read_request() -> Request {
    Request::Read {
        name: "kept".to_string(),
        offset_bytes: 0,
        length_bytes: 4096,
    }
}

#[test]
fn a_served_4_kib_read_by_reference_adds_nothing_to_an_engine_read_s_allocations() {
    let _alone = ONE_ENGINE_AT_A_TIME.lock();
    let test = start_server("served-read-allocations", |_| {});
    let mut client = connect_with(&test.socket, true, ClientTransport::RingsWhenMapped);
    assert!(client.uses_rings(), "a mapping client moves into rings");
    client.create("kept").expect("create");
    client.write("kept", 0, &pattern(4096, 7)).expect("write");
    let expected = pattern(4096, 7);
    let read = |client: &mut flashpipe_client::Client| {
        let response = client.call(read_request()).expect("read");
        let Response::Reply(Reply::Data(view)) = response else {
            panic!("a read answered without data");
        };
        assert_eq!(&*view, &expected[..]);
    };
    (0..WARM_UP_READS).for_each(|_| read(&mut client));
    // The answering thread looks for the rings every 10 ms before it first parks on
    // both its queues (which registers it with each once): let it get there.
    std::thread::sleep(SETTLE);
    let mut watched: Vec<(&str, i32)> = vec![];
    for (name, prefix) in [
        ("engine", "flashpipe-engin"),
        ("answering", "flashpipe-answe"),
        ("watcher", "flashpipe-watch"),
    ] {
        watched.extend(threads_named(prefix).into_iter().map(|tid| (name, tid)));
    }
    assert_eq!(
        threads_named("flashpipe-engin").len(),
        1,
        "one engine thread"
    );
    watched.push(("client", current_thread_id()));
    let counted = allocations_during(&watched, || {
        (0..MEASURED_READS).for_each(|_| read(&mut client));
    });
    assert_at_most(
        &counted,
        &served_bound,
        MEASURED_READS,
        "served reads by reference",
    );
}

#[test]
fn an_in_process_4_kib_read_allocates_only_its_plan_and_split_on_the_engine_thread() {
    let _alone = ONE_ENGINE_AT_A_TIME.lock();
    let store = ram_store();
    let mut engine = store.engine.client(4);
    engine.create("kept").expect("create");
    engine
        .write("kept", 0, IoBuf::from_slice(&pattern(4096, 9)))
        .expect("write");
    let expected = pattern(4096, 9);
    let mut read = || {
        let reply = engine
            .call(Command::Read {
                name: "kept".to_string(),
                offset_bytes: 0,
                length_bytes: 4096,
            })
            .expect("read");
        let EngineReply::Data(data) = reply else {
            panic!("a read answered without data");
        };
        assert_eq!(data.bytes(), &expected[..]);
    };
    (0..WARM_UP_READS).for_each(|_| read());
    let engine_thread = threads_named("flashpipe-engin");
    assert_eq!(engine_thread.len(), 1, "one engine thread");
    let counted = allocations_during(&[("engine", engine_thread[0])], || {
        (0..MEASURED_READS).for_each(|_| read());
    });
    let bound = |_: &str, reads: u64| ENGINE_READ_ALLOCATIONS * reads;
    assert_at_most(&counted, &bound, MEASURED_READS, "in-process reads");
}
