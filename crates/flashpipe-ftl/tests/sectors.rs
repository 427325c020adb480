//! 512-byte sectors over the FTL's pages (`flashpipe_ftl::sectors`): the block-device
//! conformance checks, read-merge-write at every sector offset and across page
//! boundaries against a model, concurrent writes to sectors of one page, partial trims,
//! page-aligned copies, one page programmed per partial write, and a merged page
//! surviving a remount.

mod support;

use flashpipe_device::{conformance, run_one, BlockDevice, DeviceErrorKind, IoBuf, Request};
use flashpipe_ftl::sectors::{SectorDevice, SECTOR_BYTES};
use flashpipe_ftl::{FlashBackend, Ftl};

const SECTOR: usize = SECTOR_BYTES as usize;

fn sector_ftl(queue_depth: u32) -> SectorDevice<Ftl> {
    SectorDevice::new(support::small_ftl(queue_depth)).expect("4 KiB pages are whole sectors")
}

fn pattern(seed: u64, length: usize) -> Vec<u8> {
    (0..length as u64)
        .map(|index| (seed.wrapping_mul(0x9E37_79B9) ^ index.wrapping_mul(31) ^ (index >> 9)) as u8)
        .collect()
}

fn write(device: &mut dyn BlockDevice, first_sector: u64, data: &[u8]) {
    let completion = run_one(
        device,
        flashpipe_device::Operation::Write {
            first_block: first_sector,
            buffer: IoBuf::from_slice(data),
        },
    )
    .expect("write accepted");
    completion.status.expect("write completes");
}

fn read(device: &mut dyn BlockDevice, first_sector: u64, sectors: usize) -> Vec<u8> {
    let completion = run_one(
        device,
        flashpipe_device::Operation::Read {
            first_block: first_sector,
            buffer: IoBuf::zeroed(sectors * SECTOR),
        },
    )
    .expect("read accepted");
    completion.status.as_ref().expect("read completes");
    completion.buffer.expect("buffer back").to_vec()
}

#[test]
fn sectors_pass_the_block_device_checks_that_do_not_copy() {
    let mut factory = |queue_depth: u32| Box::new(sector_ftl(queue_depth)) as Box<dyn BlockDevice>;
    for (queue_depth, seed) in [(1, 11), (8, 12), (32, 13)] {
        conformance::check_read_after_write(&mut factory, queue_depth, seed);
    }
    conformance::check_tags_complete_once(&mut factory);
    conformance::check_queue_full_hands_request_back(&mut factory);
    conformance::check_bad_requests_are_rejected(&mut factory);
    conformance::check_wait_with_nothing_in_flight(&mut factory);
    conformance::check_trim_reads_zeros(&mut factory);
}

#[test]
fn the_device_reports_sectors_and_prefers_its_page() {
    let device = sector_ftl(8);
    let page = device.inner().info().block_size_bytes;
    assert_eq!(device.info().block_size_bytes, SECTOR_BYTES);
    assert_eq!(
        device.info().size_bytes(),
        device.inner().info().size_bytes()
    );
    assert_eq!(device.preferred_block_size_bytes(), page);
}

#[test]
fn writes_at_every_sector_offset_and_length_merge_with_what_is_there() {
    let mut device = sector_ftl(8);
    let sectors_per_page = (device.inner().info().block_size_bytes / SECTOR_BYTES) as u64;
    // Three pages: every offset in the first two, lengths that stay inside a page, end on
    // a boundary, cross one boundary and cross two.
    let span_sectors = 3 * sectors_per_page;
    let base = 5 * sectors_per_page;
    let mut model = pattern(1, span_sectors as usize * SECTOR);
    write(&mut device, base, &model);
    let lengths = [
        1,
        2,
        sectors_per_page - 1,
        sectors_per_page,
        sectors_per_page + 1,
        2 * sectors_per_page - 1,
    ];
    let mut round = 2;
    for offset in 0..2 * sectors_per_page {
        for &length in &lengths {
            if offset + length > span_sectors {
                continue;
            }
            round += 1;
            let data = pattern(round, length as usize * SECTOR);
            write(&mut device, base + offset, &data);
            let start = offset as usize * SECTOR;
            model[start..start + data.len()].copy_from_slice(&data);
            assert!(
                read(&mut device, base, span_sectors as usize) == model,
                "after {length} sector(s) at sector {offset}"
            );
            // Reads at the same offsets see the window alone.
            assert!(
                read(&mut device, base + offset, length as usize)[..] == data[..],
                "reading back {length} sector(s) at sector {offset}"
            );
        }
    }
    // The pages around the span were never touched.
    assert!(read(&mut device, base - 1, 1).iter().all(|&byte| byte == 0));
    assert!(read(&mut device, base + span_sectors, 1)
        .iter()
        .all(|&byte| byte == 0));
    device.inner().check_invariants().expect("invariants");
}

#[test]
fn a_partial_write_to_an_unmapped_page_reads_zeros_around_it() {
    let mut device = sector_ftl(4);
    let data = pattern(9, 3 * SECTOR);
    write(&mut device, 21, &data);
    let sectors_per_page = (device.inner().info().block_size_bytes / SECTOR_BYTES) as usize;
    let page = read(&mut device, 16, sectors_per_page);
    let mut expected = vec![0u8; sectors_per_page * SECTOR];
    expected[5 * SECTOR..8 * SECTOR].copy_from_slice(&data);
    assert!(page == expected);
}

#[test]
fn one_partial_write_programs_one_page_and_the_map_stays_per_page() {
    let mut device = sector_ftl(4);
    let logical_pages = device.inner().info().block_count;
    let before = device.inner().stats().host_pages_written;
    write(&mut device, 3, &pattern(2, SECTOR));
    assert_eq!(device.inner().stats().host_pages_written, before + 1);
    write(&mut device, 7, &pattern(3, 2 * SECTOR));
    assert_eq!(
        device.inner().stats().host_pages_written,
        before + 3,
        "two sectors across a page boundary merge into two pages"
    );
    assert_eq!(device.inner().info().block_count, logical_pages);
}

#[test]
fn concurrent_writes_to_the_sectors_of_one_page_lose_none() {
    let mut device = sector_ftl(32);
    let sectors_per_page = (device.inner().info().block_size_bytes / SECTOR_BYTES) as u64;
    let mut expected = Vec::new();
    for page in 0..3u64 {
        for sector in 0..sectors_per_page {
            let data = pattern(page * 100 + sector, SECTOR);
            expected.extend_from_slice(&data);
            device
                .submit(Request::write(
                    page * sectors_per_page + sector,
                    page * sectors_per_page + sector,
                    IoBuf::from_slice(&data),
                ))
                .expect("room in the queue");
        }
    }
    let mut completions = Vec::new();
    while completions.len() < 3 * sectors_per_page as usize {
        device.wait_completions(&mut completions).expect("wait");
    }
    assert!(completions
        .iter()
        .all(|completion| completion.status.is_ok()));
    assert!(read(&mut device, 0, 3 * sectors_per_page as usize) == expected);
}

#[test]
fn a_partial_trim_zeros_its_sectors_and_keeps_the_rest() {
    let mut device = sector_ftl(8);
    let sectors_per_page = (device.inner().info().block_size_bytes / SECTOR_BYTES) as u64;
    let span = 4 * sectors_per_page as usize;
    let mut model = pattern(4, span * SECTOR);
    write(&mut device, 0, &model);
    let (first, count) = (3, 2 * sectors_per_page + 2);
    let completion = run_one(
        &mut device,
        flashpipe_device::Operation::Trim {
            first_block: first,
            block_count: count,
        },
    )
    .expect("trim accepted");
    completion.status.expect("trim completes");
    model[first as usize * SECTOR..(first + count) as usize * SECTOR].fill(0);
    assert!(read(&mut device, 0, span) == model);
}

#[test]
fn copies_by_reference_move_whole_pages_and_refuse_sector_offsets() {
    let mut device = sector_ftl(8);
    let sectors_per_page = (device.inner().info().block_size_bytes / SECTOR_BYTES) as u64;
    assert!(device.copies_by_reference());
    assert_eq!(device.copy_alignment_blocks(), sectors_per_page);
    let data = pattern(5, 2 * sectors_per_page as usize * SECTOR);
    write(&mut device, 0, &data);
    let pages_before = device.inner().stats().host_pages_written;
    let completion = run_one(
        &mut device,
        flashpipe_device::Operation::CopyByReference {
            source_first_block: 0,
            destination_first_block: 4 * sectors_per_page,
            block_count: 2 * sectors_per_page,
        },
    )
    .expect("an aligned copy is accepted");
    completion.status.expect("copy completes");
    assert_eq!(device.inner().stats().host_pages_written, pages_before);
    assert!(
        read(
            &mut device,
            4 * sectors_per_page,
            2 * sectors_per_page as usize
        ) == data
    );
    let rejected = device
        .submit(Request::copy_by_reference(
            9,
            1,
            4 * sectors_per_page,
            sectors_per_page,
        ))
        .expect_err("a copy from a sector offset is refused");
    assert!(matches!(
        rejected.error.kind,
        DeviceErrorKind::Misaligned { .. }
    ));
    assert_eq!(device.in_flight(), 0);
}

#[test]
fn a_completed_partial_write_survives_a_remount() {
    let mut device = sector_ftl(4);
    let sectors_per_page = (device.inner().info().block_size_bytes / SECTOR_BYTES) as usize;
    let mut model = pattern(6, 2 * sectors_per_page * SECTOR);
    write(&mut device, 0, &model);
    let data = pattern(7, 3 * SECTOR);
    write(&mut device, sectors_per_page as u64 - 1, &data);
    model[(sectors_per_page - 1) * SECTOR..(sectors_per_page + 2) * SECTOR].copy_from_slice(&data);
    // No flush and no unmount: what a power cut leaves after the write completed.
    let backend: Box<dyn FlashBackend> = device.into_inner().into_backend();
    let (ftl, _) = Ftl::mount(backend, support::test_options(4)).expect("mount");
    let mut device = SectorDevice::new(ftl).expect("sectors");
    assert!(read(&mut device, 0, 2 * sectors_per_page) == model);
}
