//! Copy by reference through a stripe: a copy whose blocks stay on their members is split
//! into one copy per member (memmove semantics kept, checked against a model with random
//! overlapping copies); one that would move blocks across members, or a stripe with a
//! member that cannot remap, is refused with `Unsupported` and changes nothing.
//!
//! The members are RAM disks wrapped in [`CopiesByMoving`] hooks, a test double that answers
//! copies by moving bytes (the real remapping device is the FTL, tested in its crate);
//! what is under test here is how the stripe splits and routes the copy.

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::{
    run_one, BlockDevice, DeviceError, DeviceErrorKind, IoBuf, Operation, RamDisk, Request,
    SplitMix64,
};
use flashpipe_testkit::hooked::{CopiesByMoving, Hooked};

const BLOCK_SIZE_BYTES: u32 = 512;

/// Copies `count` blocks from `source` to `destination` on `device` by reading and
/// writing them.
fn move_blocks(
    device: &mut dyn BlockDevice,
    source: u64,
    destination: u64,
    count: u64,
) -> Result<(), DeviceError> {
    let block_bytes = BLOCK_SIZE_BYTES as usize;
    let read = run_one(
        device,
        Operation::Read {
            first_block: source,
            buffer: IoBuf::zeroed(count as usize * block_bytes),
        },
    )?;
    let buffer = read.buffer.expect("a read hands its buffer back");
    run_one(
        device,
        Operation::Write {
            first_block: destination,
            buffer,
        },
    )?;
    Ok(())
}

fn member(index: usize, block_count: u64, remaps: bool) -> Box<dyn BlockDevice> {
    let ram = RamDisk::new(&format!("m{index}"), BLOCK_SIZE_BYTES, block_count, 8).unwrap();
    if remaps {
        Box::new(Hooked::new(ram, CopiesByMoving(move_blocks)))
    } else {
        Box::new(ram)
    }
}

fn stripe(member_count: usize, unit_blocks: u64, remapping: &[bool]) -> StripedDevice {
    let members = (0..member_count)
        .map(|index| member(index, 256, remapping[index]))
        .collect();
    StripedDevice::new(
        "stripe",
        members,
        unit_blocks * u64::from(BLOCK_SIZE_BYTES),
        CompletionOrder::AsCompleted,
        16,
    )
    .unwrap()
}

fn read_all(device: &mut StripedDevice) -> Vec<u8> {
    let length = device.info().size_bytes() as usize;
    let completion = run_one(
        device,
        Operation::Read {
            first_block: 0,
            buffer: IoBuf::zeroed(length),
        },
    )
    .unwrap();
    completion.buffer.unwrap().to_vec()
}

fn fill(device: &mut StripedDevice, seed: u64) -> Vec<u8> {
    let mut generator = SplitMix64::new(seed);
    let length = device.info().size_bytes() as usize;
    let bytes: Vec<u8> = (0..length).map(|_| generator.next_u64() as u8).collect();
    run_one(
        device,
        Operation::Write {
            first_block: 0,
            buffer: IoBuf::from_slice(&bytes),
        },
    )
    .unwrap();
    bytes
}

#[test]
fn copies_that_keep_members_match_a_memmove_model() {
    // (members, stripe unit in blocks)
    for (member_count, unit_blocks) in [(1, 4), (2, 1), (2, 8), (3, 2), (4, 4)] {
        let mut device = stripe(member_count, unit_blocks, &[true; 4]);
        let mut model = fill(&mut device, member_count as u64);
        let block_count = device.info().block_count;
        let stripe_blocks = member_count as u64 * unit_blocks;
        let mut generator = SplitMix64::new(7 + unit_blocks);
        for _ in 0..40 {
            let count = 1 + generator.below(block_count / 2);
            let source = generator.below(block_count - count + 1);
            let shift_stripes = generator.below((block_count - count) / stripe_blocks + 1);
            let destination = (source % stripe_blocks) + shift_stripes * stripe_blocks;
            if destination + count > block_count {
                continue;
            }
            run_one(
                &mut device,
                Operation::CopyByReference {
                    source_first_block: source,
                    destination_first_block: destination,
                    block_count: count,
                },
            )
            .unwrap();
            let block_bytes = BLOCK_SIZE_BYTES as usize;
            model.copy_within(
                source as usize * block_bytes..(source + count) as usize * block_bytes,
                destination as usize * block_bytes,
            );
            assert!(
                read_all(&mut device) == model,
                "{member_count} members, unit {unit_blocks}: copy {source}->{destination} x{count}"
            );
        }
    }
}

fn refusal(device: &mut StripedDevice, source: u64, destination: u64) -> DeviceErrorKind {
    device
        .submit(Request::copy_by_reference(1, source, destination, 4))
        .expect_err("refused")
        .error
        .kind
}

#[test]
fn copies_across_members_or_onto_a_member_that_cannot_remap_are_refused() {
    let mut device = stripe(2, 4, &[true, true]);
    let before = fill(&mut device, 3);
    assert!(matches!(
        refusal(&mut device, 0, 4),
        DeviceErrorKind::Unsupported { .. }
    ));
    assert!(matches!(
        refusal(&mut device, 0, 1),
        DeviceErrorKind::Unsupported { .. }
    ));
    assert!(
        read_all(&mut device) == before,
        "a refused copy changes nothing"
    );
    let mut mixed = stripe(2, 4, &[true, false]);
    assert!(!mixed.copies_by_reference());
    assert!(matches!(
        refusal(&mut mixed, 0, 8),
        DeviceErrorKind::Unsupported { .. }
    ));
}
