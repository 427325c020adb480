//! Scale: 100,000 files in a RAM-disk file system (created, some written, flushed,
//! remounted, looked up by hash, checked by fsck). `FLASHPIPE_FS_FILES=1000000` runs the
//! same test with a million files.

use std::time::Instant;

use flashpipe_device::RamDisk;
use flashpipe_fs::{Filesystem, FormatOptions};

fn file_count() -> u64 {
    std::env::var("FLASHPIPE_FS_FILES")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(100_000)
}

fn name_of(index: u64) -> String {
    format!("sample-{index:07}.dat")
}

#[test]
fn a_hundred_thousand_files_survive_flush_remount_and_fsck() {
    let files = file_count();
    let device_blocks = (files / 8 + 16_384).max(65_536);
    let disk = RamDisk::new("ram-scale", 4096, device_blocks, 256).unwrap();
    let started = Instant::now();
    let mut fs = Filesystem::format(Box::new(disk), &FormatOptions::default()).unwrap();
    for index in 0..files {
        let file = fs.create(&name_of(index)).unwrap();
        if index % 1000 == 0 {
            fs.write(file, 0, &index.to_le_bytes()).unwrap();
        }
    }
    fs.flush().unwrap();
    let created = started.elapsed();
    let device = fs.unmount().unwrap();
    let started = Instant::now();
    let mut fs = Filesystem::mount(device).unwrap();
    let mounted = started.elapsed();
    assert_eq!(fs.stats().file_count, files);
    for index in (0..files).step_by(997) {
        let file = fs.open(&name_of(index)).unwrap();
        let size = fs.stat(file).unwrap().size_bytes;
        if index % 1000 == 0 {
            assert_eq!(&fs.read(file, 0, 8).unwrap()[..], &index.to_le_bytes());
        } else {
            assert_eq!(size, 0);
        }
    }
    fs.delete(&name_of(0)).unwrap();
    fs.flush().unwrap();
    let started = Instant::now();
    let report = fs.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.findings);
    assert_eq!(report.file_count, files - 1);
    eprintln!(
        "{files} files: create+flush {created:?}, mount {mounted:?}, fsck {:?}",
        started.elapsed()
    );
}
