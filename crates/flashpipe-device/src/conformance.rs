//! The conformance suite every backend's tests run: the [`BlockDevice`] contract checked
//! against a plain in-memory model.
//!
//! A backend's test calls [`check_all`] with a factory that builds a fresh, zero-filled
//! device for a given queue depth. Each check is deterministic (a fixed-seed generator)
//! and panics with the check's name and the seed on the first difference.

use crate::buffer::IoBuf;
use crate::error::DeviceErrorKind;
pub use crate::random::SplitMix64;
use crate::request::{BlockDevice, Completion, Operation, Request};

/// Builds a fresh, zero-filled device with the given queue depth.
pub type DeviceFactory<'a> = dyn FnMut(u32) -> Box<dyn BlockDevice> + 'a;

/// Runs every check of the suite.
pub fn check_all(factory: &mut DeviceFactory<'_>) {
    for queue_depth in [1, 2, 7, 32, 256] {
        check_read_after_write(factory, queue_depth, 0x5eed + u64::from(queue_depth));
    }
    check_tags_complete_once(factory);
    check_queue_full_hands_request_back(factory);
    check_bad_requests_are_rejected(factory);
    check_wait_with_nothing_in_flight(factory);
    check_trim_reads_zeros(factory);
    check_copy_by_reference(factory);
}

fn fill_pattern(buffer: &mut [u8], seed: u64) {
    let mut generator = SplitMix64::new(seed);
    for chunk in buffer.chunks_mut(8) {
        let bytes = generator.next_u64().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

fn reap_all(device: &mut dyn BlockDevice, completions: &mut Vec<Completion>) {
    while device.in_flight() > 0 {
        device
            .wait_completions(completions)
            .expect("wait while requests are in flight");
    }
}

/// Random writes and reads of random sizes at random offsets, many in flight, compared
/// with a model after every batch.
pub fn check_read_after_write(factory: &mut DeviceFactory<'_>, queue_depth: u32, seed: u64) {
    let mut device = factory(queue_depth);
    let block_size = device.info().block_size_bytes as usize;
    let block_count = device.info().block_count.min(2048);
    let mut model = vec![0u8; block_count as usize * block_size];
    let mut generator = SplitMix64::new(seed);
    let mut completions = Vec::new();
    for round in 0..24 {
        // A batch of non-overlapping writes (so the model does not depend on order).
        let mut written_ranges: Vec<(u64, u64)> = Vec::new();
        for index in 0..queue_depth.min(16) {
            let blocks = 1 + generator.below(8.min(block_count));
            let first = generator.below(block_count - blocks + 1);
            if written_ranges
                .iter()
                .any(|&(start, end)| first < end && start < first + blocks)
            {
                continue;
            }
            written_ranges.push((first, first + blocks));
            let mut buffer = IoBuf::zeroed(blocks as usize * block_size);
            fill_pattern(&mut buffer, seed ^ (round << 16) ^ u64::from(index));
            let start = first as usize * block_size;
            model[start..start + buffer.len()].copy_from_slice(&buffer);
            submit_or_reap(
                &mut *device,
                Request::write(u64::from(index), first, buffer),
                &mut completions,
            );
        }
        reap_all(&mut *device, &mut completions);
        for completion in completions.drain(..) {
            assert!(
                completion.status.is_ok(),
                "write failed (seed {seed}): {:?}",
                completion.status
            );
        }
        check_reads_match(&mut *device, &model, &mut generator, seed);
    }
}

fn submit_or_reap(
    device: &mut dyn BlockDevice,
    request: Request,
    completions: &mut Vec<Completion>,
) {
    let mut request = request;
    loop {
        match device.submit(request) {
            Ok(()) => return,
            Err(rejected) if matches!(rejected.error.kind, DeviceErrorKind::QueueFull { .. }) => {
                request = rejected.request;
                device
                    .wait_completions(completions)
                    .expect("queue full means something is in flight");
            }
            Err(rejected) => panic!("unexpected rejection: {rejected}"),
        }
    }
}

fn check_reads_match(
    device: &mut dyn BlockDevice,
    model: &[u8],
    generator: &mut SplitMix64,
    seed: u64,
) {
    let block_size = device.info().block_size_bytes as usize;
    let block_count = (model.len() / block_size) as u64;
    let mut expected = Vec::new();
    let mut completions = Vec::new();
    for tag in 0..32u64 {
        let blocks = 1 + generator.below(16.min(block_count));
        let first = generator.below(block_count - blocks + 1);
        expected.push(first);
        let buffer = IoBuf::zeroed(blocks as usize * block_size);
        submit_or_reap(device, Request::read(tag, first, buffer), &mut completions);
    }
    reap_all(device, &mut completions);
    assert_eq!(
        completions.len(),
        expected.len(),
        "one completion per read (seed {seed})"
    );
    for completion in completions {
        assert!(
            completion.status.is_ok(),
            "read failed (seed {seed}): {:?}",
            completion.status
        );
        let buffer = completion.buffer.expect("reads hand their buffer back");
        let start = expected[completion.tag as usize] as usize * block_size;
        assert!(
            buffer[..] == model[start..start + buffer.len()],
            "read of tag {} at block {} differs from the model (seed {seed})",
            completion.tag,
            expected[completion.tag as usize]
        );
    }
}

/// Every accepted tag completes exactly once, whatever the order.
pub fn check_tags_complete_once(factory: &mut DeviceFactory<'_>) {
    let mut device = factory(32);
    let block_size = device.info().block_size_bytes as usize;
    let block_count = device.info().block_count;
    let mut completions = Vec::new();
    let tags: Vec<u64> = (0..32).map(|index| 1000 + index * 7).collect();
    for (index, &tag) in tags.iter().enumerate() {
        let operation = match index % 3 {
            0 => Operation::Write {
                first_block: index as u64 % block_count,
                buffer: IoBuf::zeroed(block_size),
            },
            1 => Operation::Read {
                first_block: index as u64 % block_count,
                buffer: IoBuf::zeroed(block_size),
            },
            _ => Operation::Flush,
        };
        device
            .submit(Request { tag, operation })
            .expect("within queue depth");
    }
    assert_eq!(device.in_flight(), 32);
    reap_all(&mut *device, &mut completions);
    let mut seen: Vec<u64> = completions
        .iter()
        .map(|completion| completion.tag)
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, tags, "each tag completes exactly once");
}

/// Submitting past the queue depth is refused and the request comes back intact.
pub fn check_queue_full_hands_request_back(factory: &mut DeviceFactory<'_>) {
    let mut device = factory(4);
    let block_size = device.info().block_size_bytes as usize;
    for tag in 0..4 {
        device
            .submit(Request::read(tag, 0, IoBuf::zeroed(block_size)))
            .expect("within depth");
    }
    let rejected = device
        .submit(Request::read(99, 0, IoBuf::zeroed(block_size)))
        .expect_err("the fifth request exceeds queue depth 4");
    assert!(matches!(
        rejected.error.kind,
        DeviceErrorKind::QueueFull { queue_depth: 4 }
    ));
    assert_eq!(rejected.error.device, device.info().name);
    assert_eq!(rejected.request.tag, 99);
    assert_eq!(
        rejected.request.into_buffer().map(|buffer| buffer.len()),
        Some(block_size)
    );
    let mut completions = Vec::new();
    reap_all(&mut *device, &mut completions);
    assert_eq!(completions.len(), 4);
}

/// Out-of-range and misaligned requests are refused synchronously and name the device.
pub fn check_bad_requests_are_rejected(factory: &mut DeviceFactory<'_>) {
    let mut device = factory(8);
    let block_size = device.info().block_size_bytes as usize;
    let block_count = device.info().block_count;
    let bad_requests = [
        Request::read(1, block_count, IoBuf::zeroed(block_size)),
        Request::write(2, block_count - 1, IoBuf::zeroed(2 * block_size)),
        Request::read(3, u64::MAX, IoBuf::zeroed(block_size)),
        Request::trim(4, block_count, 1),
        Request::read(5, 0, IoBuf::zeroed(block_size + 1)),
        Request::write(6, 0, IoBuf::zeroed(0)),
    ];
    for request in bad_requests {
        let tag = request.tag;
        let rejected = device
            .submit(request)
            .expect_err("bad request must be refused");
        assert_eq!(rejected.request.tag, tag);
        assert_eq!(rejected.error.device, device.info().name);
        assert!(
            matches!(
                rejected.error.kind,
                DeviceErrorKind::OutOfRange { .. } | DeviceErrorKind::Misaligned { .. }
            ),
            "tag {tag}: {}",
            rejected.error
        );
    }
    assert_eq!(device.in_flight(), 0, "refused requests are not in flight");
}

/// Waiting with nothing in flight is an error, not a hang.
pub fn check_wait_with_nothing_in_flight(factory: &mut DeviceFactory<'_>) {
    let mut device = factory(1);
    let error = device
        .wait_completions(&mut Vec::new())
        .expect_err("nothing to wait for");
    assert_eq!(error.kind, DeviceErrorKind::NothingInFlight);
}

/// Trimmed blocks read back as zeros; neighbours are untouched.
pub fn check_trim_reads_zeros(factory: &mut DeviceFactory<'_>) {
    let mut device = factory(4);
    let block_size = device.info().block_size_bytes as usize;
    let mut completions = Vec::new();
    device
        .submit(Request::write(
            1,
            0,
            IoBuf::from_slice(&vec![0xAB; 4 * block_size]),
        ))
        .unwrap();
    reap_all(&mut *device, &mut completions);
    match device.submit(Request::trim(2, 1, 2)) {
        Ok(()) => {}
        Err(rejected) if matches!(rejected.error.kind, DeviceErrorKind::Unsupported { .. }) => {
            return
        }
        Err(rejected) => panic!("trim refused: {rejected}"),
    }
    reap_all(&mut *device, &mut completions);
    device
        .submit(Request::read(3, 0, IoBuf::zeroed(4 * block_size)))
        .unwrap();
    completions.clear();
    reap_all(&mut *device, &mut completions);
    let buffer = completions.pop().unwrap().buffer.unwrap();
    assert!(buffer[..block_size].iter().all(|&byte| byte == 0xAB));
    assert!(buffer[block_size..3 * block_size]
        .iter()
        .all(|&byte| byte == 0));
    assert!(buffer[3 * block_size..].iter().all(|&byte| byte == 0xAB));
}

/// Submits one request and reaps it; `Err` when the device refused it.
fn run_single(
    device: &mut dyn BlockDevice,
    request: Request,
) -> Result<Completion, crate::error::Rejected> {
    device.submit(request)?;
    let mut completions = Vec::new();
    reap_all(device, &mut completions);
    assert_eq!(completions.len(), 1, "one request, one completion");
    Ok(completions.pop().expect("one completion"))
}

fn read_blocks(device: &mut dyn BlockDevice, first_block: u64, block_count: u64) -> Vec<u8> {
    let block_size = device.info().block_size_bytes as usize;
    let buffer = IoBuf::zeroed(block_count as usize * block_size);
    let completion = run_single(device, Request::read(90, first_block, buffer))
        .unwrap_or_else(|rejected| panic!("read refused: {rejected}"));
    assert!(
        completion.status.is_ok(),
        "read failed: {:?}",
        completion.status
    );
    completion
        .buffer
        .expect("reads hand their buffer back")
        .to_vec()
}

fn write_blocks(device: &mut dyn BlockDevice, first_block: u64, data: &[u8]) {
    let completion = run_single(
        device,
        Request::write(91, first_block, IoBuf::from_slice(data)),
    )
    .unwrap_or_else(|rejected| panic!("write refused: {rejected}"));
    assert!(
        completion.status.is_ok(),
        "write failed: {:?}",
        completion.status
    );
}

/// Copy by reference: either refused with `Unsupported` (devices that cannot remap; the
/// caller never gets a silent byte copy) or exact memmove semantics, with later writes to
/// either side leaving the other intact.
pub fn check_copy_by_reference(factory: &mut DeviceFactory<'_>) {
    let mut device = factory(4);
    let block_size = device.info().block_size_bytes as usize;
    let mut model = vec![0u8; 12 * block_size];
    fill_pattern(&mut model, 0xc0b1);
    write_blocks(&mut *device, 0, &model);
    let copy = run_single(&mut *device, Request::copy_by_reference(1, 0, 6, 3));
    if !device.copies_by_reference() {
        let rejected = copy.expect_err("a device that cannot remap refuses a copy by reference");
        assert!(matches!(
            rejected.error.kind,
            DeviceErrorKind::Unsupported { .. }
        ));
        return;
    }
    let completion =
        copy.unwrap_or_else(|rejected| panic!("copy by reference refused: {rejected}"));
    assert!(
        completion.status.is_ok(),
        "copy failed: {:?}",
        completion.status
    );
    model.copy_within(0..3 * block_size, 6 * block_size);
    assert!(
        read_blocks(&mut *device, 0, 12) == model,
        "copy by reference"
    );
    let overwrite = vec![0x5A; block_size];
    write_blocks(&mut *device, 1, &overwrite);
    model[block_size..2 * block_size].copy_from_slice(&overwrite);
    write_blocks(&mut *device, 8, &overwrite);
    model[8 * block_size..9 * block_size].copy_from_slice(&overwrite);
    assert!(
        read_blocks(&mut *device, 0, 12) == model,
        "writes to either side after a copy"
    );
    let completion = run_single(&mut *device, Request::copy_by_reference(2, 2, 4, 5))
        .unwrap_or_else(|rejected| panic!("overlapping copy refused: {rejected}"));
    assert!(
        completion.status.is_ok(),
        "overlapping copy failed: {:?}",
        completion.status
    );
    model.copy_within(2 * block_size..7 * block_size, 4 * block_size);
    assert!(
        read_blocks(&mut *device, 0, 12) == model,
        "overlapping copy behaves as memmove"
    );
    let outside = device.info().block_count;
    let rejected = device
        .submit(Request::copy_by_reference(3, outside, 0, 1))
        .expect_err("a copy from past the end is refused");
    assert!(matches!(
        rejected.error.kind,
        DeviceErrorKind::OutOfRange { .. }
    ));
}
