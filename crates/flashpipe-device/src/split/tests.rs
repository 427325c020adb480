//! Tests of [`SplitBuffer`]: views in range and disjoint, the parent back only after
//! every view, views written and read through a RAM disk, views outliving their split.
//! They run under Miri too (the RAM disk on a virtual clock, so no system call is made):
//! `cargo +nightly miri test -p flashpipe-device --lib split`.

use super::*;
use crate::batch::run_batch;
use crate::buffer::BufferPool;
use crate::clock::VirtualClock;
use crate::ram::RamDisk;
use crate::request::Operation;

fn numbered_buffer(length_bytes: usize) -> IoBuf {
    let mut buffer = IoBuf::zeroed(length_bytes);
    for (index, byte) in buffer.iter_mut().enumerate() {
        *byte = (index % 251) as u8;
    }
    buffer
}

#[test]
fn views_are_windows_of_the_parent() {
    let mut split = SplitBuffer::new(numbered_buffer(4096));
    let view = split.view(1000, 24).unwrap();
    assert_eq!(view.len(), 24);
    assert_eq!(&view[..], &numbered_buffer(4096)[1000..1024]);
    assert_eq!(view.pool_slot(), None);
}

#[test]
fn overlapping_views_are_refused() {
    let mut split = SplitBuffer::new(IoBuf::zeroed(8192));
    let _first = split.view(1024, 1024).unwrap();
    let _second = split.view(4096, 1024).unwrap();
    for (offset, length) in [(1024, 1), (0, 1025), (2047, 1), (1500, 3000), (0, 8192)] {
        let refused = split.view(offset, length).unwrap_err();
        assert!(
            matches!(refused, ViewRefused::Overlaps { .. }),
            "{offset}+{length}: {refused}"
        );
    }
    assert!(split.view(0, 1024).is_ok());
    assert!(split.view(2048, 2048).is_ok());
    assert!(split.view(5120, 3072).is_ok());
}

#[test]
fn a_returned_window_is_not_handed_out_again() {
    let mut split = SplitBuffer::new(IoBuf::zeroed(4096));
    drop(split.view(0, 512).unwrap());
    assert_eq!(split.views_out(), 0);
    assert!(matches!(
        split.view(0, 512),
        Err(ViewRefused::Overlaps { .. })
    ));
}

#[test]
fn out_of_range_and_empty_views_are_refused() {
    let mut split = SplitBuffer::new(IoBuf::zeroed(4096));
    assert_eq!(
        split.view(4000, 97).unwrap_err(),
        ViewRefused::OutOfRange {
            offset_bytes: 4000,
            length_bytes: 97,
            parent_length_bytes: 4096,
        }
    );
    assert!(matches!(
        split.view(usize::MAX, 2),
        Err(ViewRefused::OutOfRange { .. })
    ));
    assert!(matches!(
        split.view(4096, 1),
        Err(ViewRefused::OutOfRange { .. })
    ));
    assert_eq!(
        split.view(10, 0).unwrap_err(),
        ViewRefused::Empty { offset_bytes: 10 }
    );
    assert!(split.view(4000, 96).is_ok());
}

#[test]
fn the_parent_comes_back_only_after_every_view() {
    let mut split = SplitBuffer::new(IoBuf::zeroed(4096));
    let mut first = split.view(0, 2048).unwrap();
    let mut second = split.view(2048, 2048).unwrap();
    first.fill(1);
    second.fill(2);
    assert_eq!(split.views_out(), 2);
    let mut split = split.try_into_parent().unwrap_err();
    split.return_view(first).unwrap();
    assert_eq!(split.views_out(), 1);
    let split = split.try_into_parent().unwrap_err();
    drop(second);
    let parent = split.try_into_parent().unwrap();
    assert!(parent[..2048].iter().all(|&byte| byte == 1));
    assert!(parent[2048..].iter().all(|&byte| byte == 2));
}

#[test]
#[should_panic(expected = "1 views still out")]
fn into_parent_with_a_view_out_panics() {
    let mut split = SplitBuffer::new(IoBuf::zeroed(4096));
    let _view = split.view(0, 512).unwrap();
    split.into_parent();
}

#[test]
fn a_foreign_buffer_is_not_taken_as_a_view() {
    let mut split = SplitBuffer::new(IoBuf::zeroed(4096));
    let mut other = SplitBuffer::new(IoBuf::zeroed(4096));
    let foreign = other.view(0, 512).unwrap();
    let refused = split.return_view(foreign).unwrap_err();
    assert_eq!(refused.buffer.len(), 512);
    let refused = split.return_view(IoBuf::zeroed(512)).unwrap_err();
    assert_eq!(refused.buffer.len(), 512);
}

#[test]
fn a_view_outlives_its_split_and_keeps_the_parent_alive() {
    let pool = BufferPool::new(1, 4096);
    let mut split = SplitBuffer::new(pool.try_take().unwrap());
    let mut view = split.view(512, 512).unwrap();
    drop(split);
    drop(pool);
    view.fill(9);
    assert!(view.iter().all(|&byte| byte == 9));
}

#[test]
fn the_pool_slot_returns_when_the_last_view_goes() {
    let pool = BufferPool::new(1, 4096);
    let mut split = SplitBuffer::new(pool.try_take().unwrap());
    let view = split.view(0, 4096).unwrap();
    drop(split);
    assert_eq!(pool.free_count(), 0);
    drop(view);
    assert_eq!(pool.free_count(), 1);
}

#[test]
fn views_go_to_another_thread_and_back() {
    let mut split = SplitBuffer::new(IoBuf::zeroed(8192));
    let views = vec![
        split.view(0, 4096).unwrap(),
        split.view(4096, 4096).unwrap(),
    ];
    let handles: Vec<_> = views
        .into_iter()
        .enumerate()
        .map(|(index, mut view)| {
            std::thread::spawn(move || {
                view.fill(index as u8 + 1);
                view
            })
        })
        .collect();
    for handle in handles {
        drop(handle.join().unwrap());
    }
    let parent = split.into_parent();
    assert!(parent[..4096].iter().all(|&byte| byte == 1));
    assert!(parent[4096..].iter().all(|&byte| byte == 2));
}

#[test]
fn views_are_written_and_read_through_a_ram_disk() {
    let block_bytes = 512;
    let clock = VirtualClock::new().as_clock();
    let mut disk = RamDisk::with_clock("ram-split", block_bytes as u32, 64, 4, clock).unwrap();
    // Four views of two blocks each, at device blocks 40, 30, 20 and 10.
    let on_pieces = |split: &mut SplitBuffer, operation: fn(u64, IoBuf) -> Operation| {
        (0..4)
            .map(|piece| {
                let view = split.view(piece * 2 * block_bytes, 2 * block_bytes);
                operation(40 - 10 * piece as u64, view.unwrap())
            })
            .collect()
    };
    let mut split = SplitBuffer::new(numbered_buffer(8 * block_bytes));
    let writes = on_pieces(&mut split, |first_block, buffer| Operation::Write {
        first_block,
        buffer,
    });
    let completions = run_batch(&mut disk, writes).unwrap();
    assert_eq!(split.views_out(), 4);
    drop(completions);
    let written = split.into_parent();

    let mut split = SplitBuffer::new(IoBuf::zeroed(8 * block_bytes));
    let reads = on_pieces(&mut split, |first_block, buffer| Operation::Read {
        first_block,
        buffer,
    });
    for completion in run_batch(&mut disk, reads).unwrap() {
        split.return_view(completion.buffer.unwrap()).unwrap();
    }
    let read = split.into_parent();
    assert_eq!(&read[..], &written[..]);
}

#[test]
fn a_view_of_a_view_reaches_the_grandparent() {
    let mut outer = SplitBuffer::new(IoBuf::zeroed(8192));
    let mut inner = SplitBuffer::new(outer.view(4096, 4096).unwrap());
    inner.view(1024, 1024).unwrap().fill(5);
    drop(inner);
    let parent = outer.into_parent();
    assert!(parent[4096 + 1024..4096 + 2048]
        .iter()
        .all(|&byte| byte == 5));
    assert!(parent[..4096 + 1024].iter().all(|&byte| byte == 0));
}
