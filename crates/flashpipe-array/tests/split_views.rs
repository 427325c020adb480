//! A [`SplitBuffer`]'s views through a striped device and back: the striped device
//! splits each view again (a view of a view), the members fill or store the pieces, and
//! the caller's parent buffer comes back whole once every view has returned; a striped
//! device dropped with views still out frees nothing under them.

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::{
    run_batch, BlockDevice, BufferPool, IoBuf, Operation, RamDisk, Request, SplitBuffer,
};

const BLOCK_SIZE_BYTES: u32 = 512;

fn striped_ram(member_count: usize, unit_blocks: u64) -> StripedDevice {
    let members = (0..member_count)
        .map(|index| {
            let name = format!("ram{index}");
            Box::new(RamDisk::new(&name, BLOCK_SIZE_BYTES, 256, 2).unwrap()) as Box<dyn BlockDevice>
        })
        .collect();
    let stripe_unit_bytes = unit_blocks * u64::from(BLOCK_SIZE_BYTES);
    StripedDevice::new(
        "stripe0",
        members,
        stripe_unit_bytes,
        CompletionOrder::AsCompleted,
        8,
    )
    .unwrap()
}

fn patterned(length_bytes: usize, seed: u8) -> IoBuf {
    let mut buffer = IoBuf::zeroed(length_bytes);
    for (index, byte) in buffer.iter_mut().enumerate() {
        *byte = (index as u8).wrapping_mul(31).wrapping_add(seed);
    }
    buffer
}

/// Views of `lengths_blocks` each, one after another from the start of `split`.
fn views(split: &mut SplitBuffer, lengths_blocks: &[usize]) -> Vec<(usize, IoBuf)> {
    let block_bytes = BLOCK_SIZE_BYTES as usize;
    let mut offset_blocks = 0;
    lengths_blocks
        .iter()
        .map(|&length_blocks| {
            let view = split
                .view(offset_blocks * block_bytes, length_blocks * block_bytes)
                .unwrap();
            let placed = (offset_blocks, view);
            offset_blocks += length_blocks;
            placed
        })
        .collect()
}

#[test]
fn views_written_and_read_through_a_stripe_come_back_whole() {
    let lengths_blocks = [3, 8, 1, 13, 7];
    let total_blocks: usize = lengths_blocks.iter().sum();
    let total_bytes = total_blocks * BLOCK_SIZE_BYTES as usize;
    for (member_count, unit_blocks) in [(2, 1), (3, 2), (4, 5)] {
        let mut stripe = striped_ram(member_count, unit_blocks);
        let written = patterned(total_bytes, member_count as u8);
        let mut split = SplitBuffer::new(IoBuf::from_slice(&written));
        let writes = views(&mut split, &lengths_blocks)
            .into_iter()
            .map(|(offset_blocks, view)| Operation::Write {
                first_block: 100 + offset_blocks as u64,
                buffer: view,
            })
            .collect();
        drop(run_batch(&mut stripe, writes).unwrap());
        assert_eq!(&split.into_parent()[..], &written[..]);

        let pool = BufferPool::new(1, total_bytes);
        let mut parent = pool.try_take().unwrap();
        parent.set_len(total_bytes);
        parent.fill(0xAA);
        let mut split = SplitBuffer::new(parent);
        let reads = views(&mut split, &lengths_blocks)
            .into_iter()
            .rev()
            .map(|(offset_blocks, view)| Operation::Read {
                first_block: 100 + offset_blocks as u64,
                buffer: view,
            })
            .collect();
        let completions = run_batch(&mut stripe, reads).unwrap();
        assert_eq!(split.views_out(), lengths_blocks.len());
        for completion in completions {
            split.return_view(completion.buffer.unwrap()).unwrap();
        }
        let read = split.into_parent();
        assert_eq!(&read[..], &written[..], "{member_count} members");
        assert_eq!(read.pool_slot().map(|(id, _)| id), Some(pool.pool_id()));
        drop(read);
        assert_eq!(pool.free_count(), 1);
    }
}

#[test]
fn a_stripe_dropped_with_views_out_keeps_the_parent_alive() {
    let pool = BufferPool::new(1, 8192);
    let mut split = SplitBuffer::new(pool.try_take().unwrap());
    let mut stripe = striped_ram(2, 1);
    for (index, (offset_blocks, view)) in views(&mut split, &[4, 4]).into_iter().enumerate() {
        stripe
            .submit(Request::read(index as u64, offset_blocks as u64, view))
            .unwrap();
    }
    drop(split);
    assert_eq!(pool.free_count(), 0, "the members still hold the views");
    drop(stripe);
    assert_eq!(
        pool.free_count(),
        1,
        "the parent returns with the last view"
    );
}
