//! The FTL passes the block-device conformance suite and basic map checks.

mod support;

use flashpipe_device::BlockDevice;

#[test]
fn ftl_passes_the_block_device_conformance_suite() {
    flashpipe_device::conformance::check_all(&mut |queue_depth| {
        Box::new(support::small_ftl(queue_depth)) as Box<dyn BlockDevice>
    });
}

#[test]
fn unmapped_reads_are_zeros_and_writes_read_back_after_overwrites() {
    let mut ftl = support::small_ftl(16);
    let block_count = ftl.info().block_count;
    let page = ftl.info().block_size_bytes as usize;
    let zeros = support::read_pages(&mut ftl, 3, page * 2);
    assert!(zeros.iter().all(|&byte| byte == 0));
    for round in 0..6u8 {
        for logical in (0..block_count).step_by(3) {
            support::fill_page(&mut ftl, logical, round ^ logical as u8);
        }
        ftl.check_invariants().expect("invariants");
    }
    for logical in (0..block_count).step_by(3) {
        let data = support::read_pages(&mut ftl, logical, page);
        assert!(
            data.iter().all(|&byte| byte == 5 ^ logical as u8),
            "logical {logical}"
        );
    }
    let stats = ftl.stats();
    assert!(
        stats.gc_victims > 0,
        "six passes over the device need collection: {stats:?}"
    );
}
