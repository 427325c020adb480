//! The file system runs unchanged on emulated flash through the FTL: format it, write
//! files, flush, drop everything held in memory (FTL included), mount the FTL and the
//! file system again, read the files back.

mod support;

use flashpipe_device::BlockDevice;
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_ftl::{FlashBackend, Ftl};

fn file_contents(index: usize, length: usize) -> Vec<u8> {
    (0..length)
        .map(|offset| (offset.wrapping_mul(31) ^ index.wrapping_mul(7919)) as u8)
        .collect()
}

#[test]
fn filesystem_on_emulated_flash_survives_a_remount_of_the_ftl() {
    let (flash, options, ftl) = support::ftl_on_shared_flash(48, 11);
    let mut filesystem = Filesystem::format(
        Box::new(ftl) as Box<dyn BlockDevice>,
        &FormatOptions::default(),
    )
    .expect("format the file system");
    let lengths = [0usize, 1, 4095, 4096, 70_000, 300_000];
    for (index, &length) in lengths.iter().enumerate() {
        let file = filesystem.create(&format!("file-{index}")).expect("create");
        filesystem
            .write(file, 0, &file_contents(index, length))
            .expect("write");
    }
    // Overwrite one file twice so garbage accumulates on flash.
    for round in 0..2 {
        let file = filesystem.open("file-5").expect("open");
        filesystem
            .write(file, 0, &file_contents(5 + round, 300_000))
            .expect("overwrite");
        filesystem.flush().expect("flush");
    }
    let clock = filesystem.clock();
    let before_ns = clock.now_ns();
    drop(filesystem.unmount().expect("unmount"));
    let (ftl, report) =
        Ftl::mount(Box::new(flash) as Box<dyn FlashBackend>, options).expect("mount the FTL");
    assert!(report.mapped_pages > 0, "{report:?}");
    assert!(
        ftl.clock().now_ns() >= before_ns,
        "one virtual clock throughout"
    );
    let mut filesystem =
        Filesystem::mount(Box::new(ftl) as Box<dyn BlockDevice>).expect("mount the file system");
    for (index, &length) in lengths.iter().enumerate() {
        let file = filesystem.open(&format!("file-{index}")).expect("open");
        let expected = if index == 5 {
            file_contents(6, length)
        } else {
            file_contents(index, length)
        };
        if length > 0 {
            let data = filesystem.read(file, 0, length as u64).expect("read");
            assert!(
                data[..] == expected[..],
                "file-{index} differs after remount"
            );
        }
    }
    let report = filesystem.check().expect("fsck");
    assert!(report.is_clean(), "{report:?}");
}
