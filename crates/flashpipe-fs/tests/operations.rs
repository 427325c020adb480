//! Unit tests of every file system operation and every error, on RAM disks, through the
//! public API.

mod support;

use flashpipe_device::{IoBuf, RamDisk};
use flashpipe_fs::layout::NEWEST_READABLE_FORMAT_VERSION;
use flashpipe_fs::{
    FileIoError, Filesystem, FormatError, FormatOptions, MountError, NamespaceError, Structure,
};
use flashpipe_testkit::formatted::format_fs;
use support::{pattern, read_named, SharedDisk};

fn new_fs(block_size_bytes: u32, device_blocks: u64) -> Filesystem {
    let disk = RamDisk::new("ram0", 512, device_blocks, 32).expect("RAM disk");
    format_fs(Box::new(disk), block_size_bytes)
}

#[test]
fn write_then_read_at_any_offset_across_block_sizes() {
    for block_size in [4096u32, 8192, 16384, 65536] {
        let mut fs = new_fs(block_size, 16384);
        let file = fs.create("data").unwrap();
        let bytes = pattern(5 * block_size as usize + 123, u64::from(block_size));
        fs.write(file, 0, &bytes).unwrap();
        for (offset, length) in [
            (0, 1),
            (1, 4096),
            (block_size as u64 - 1, 2),
            (3 * block_size as u64 + 5, 1000),
            (0, bytes.len() as u64),
        ] {
            let read = fs.read(file, offset, length).unwrap();
            assert_eq!(
                &read[..],
                &bytes[offset as usize..(offset + length) as usize],
                "B {block_size} at {offset}+{length}"
            );
        }
    }
}

/// One data-driven case: writes applied in order, then the whole file compared.
struct WriteCase {
    label: &'static str,
    writes: Vec<(u64, usize)>,
    truncate_to: Option<u64>,
}

fn check(case: &WriteCase) {
    let mut fs = new_fs(4096, 8192);
    let file = fs.create("f").unwrap();
    let mut model: Vec<u8> = Vec::new();
    for (step, &(offset, length)) in case.writes.iter().enumerate() {
        let bytes = pattern(length, step as u64 + 1);
        fs.write(file, offset, &bytes).unwrap();
        let end = offset as usize + length;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[offset as usize..end].copy_from_slice(&bytes);
        if step == 1 {
            fs.flush().unwrap();
        }
    }
    if let Some(size) = case.truncate_to {
        fs.truncate(file, size).unwrap();
        model.resize(size as usize, 0);
    }
    assert_eq!(read_named(&mut fs, "f"), model, "{}", case.label);
    let device = fs.unmount().unwrap();
    let mut fs = Filesystem::mount(device).unwrap();
    assert_eq!(
        read_named(&mut fs, "f"),
        model,
        "{} after remount",
        case.label
    );
    assert!(fs.check().unwrap().is_clean(), "{}", case.label);
}

#[test]
fn writes_overwrites_appends_holes_and_truncates_match_a_model() {
    let cases = vec![
        WriteCase {
            label: "append",
            writes: vec![(0, 100), (100, 5000), (5100, 3)],
            truncate_to: None,
        },
        WriteCase {
            label: "overwrite inside a block after flush",
            writes: vec![(0, 9000), (10, 10), (4090, 20)],
            truncate_to: None,
        },
        WriteCase {
            label: "sparse hole",
            writes: vec![(100_000, 10), (0, 1)],
            truncate_to: None,
        },
        WriteCase {
            label: "hole past twelve direct pointers",
            writes: vec![(0, 1), (4096 * 40, 4096 * 3)],
            truncate_to: None,
        },
        WriteCase {
            label: "big file with an indirect chain",
            writes: vec![(0, 4096 * 600), (4096 * 300 + 7, 50_000)],
            truncate_to: None,
        },
        WriteCase {
            label: "shrink inside a block then grow",
            writes: vec![(0, 10_000), (0, 1)],
            truncate_to: Some(5000),
        },
        WriteCase {
            label: "shrink then write past the end",
            writes: vec![(0, 10_000), (12_000, 5)],
            truncate_to: Some(3),
        },
        WriteCase {
            label: "grow by truncate",
            writes: vec![(0, 10), (10, 10)],
            truncate_to: Some(70_000),
        },
        WriteCase {
            label: "truncate to zero",
            writes: vec![(0, 70_000), (1, 1)],
            truncate_to: Some(0),
        },
    ];
    for case in &cases {
        check(case);
    }
}

#[test]
fn shrink_then_grow_reads_zeros_where_old_data_was() {
    let mut fs = new_fs(4096, 4096);
    let file = fs.create("f").unwrap();
    fs.write(file, 0, &[0xAA; 8192]).unwrap();
    fs.flush().unwrap();
    fs.truncate(file, 100).unwrap();
    fs.truncate(file, 8192).unwrap();
    let read = fs.read(file, 0, 8192).unwrap();
    assert!(read[..100].iter().all(|&byte| byte == 0xAA));
    assert!(read[100..].iter().all(|&byte| byte == 0));
}

#[test]
fn create_open_rename_delete_list_and_stat() {
    let mut fs = new_fs(4096, 4096);
    let a = fs.create("a").unwrap();
    fs.write(a, 0, b"alpha").unwrap();
    let b = fs.create("b").unwrap();
    assert_eq!(fs.open("a").unwrap(), a);
    fs.rename("a", "c").unwrap();
    assert_eq!(fs.open("c").unwrap(), a);
    assert_eq!(
        fs.open("a"),
        Err(NamespaceError::NotFound { name: "a".into() })
    );
    let names: Vec<String> = fs.list().into_iter().map(|stat| stat.name).collect();
    assert_eq!(names, vec!["b", "c"]);
    let stat = fs.stat_name("c").unwrap();
    assert_eq!(
        (stat.size_bytes, stat.allocated_blocks, stat.file_id),
        (5, 1, a)
    );
    fs.delete("b").unwrap();
    assert_eq!(
        fs.stat(b),
        Err(NamespaceError::StaleHandle { file_id: b.0 })
    );
    assert!(matches!(
        fs.write(b, 0, b"x"),
        Err(FileIoError::StaleHandle { .. })
    ));
    fs.rename("c", "c").unwrap();
    let stats = fs.stats();
    assert_eq!(stats.file_count, 1);
    assert!(stats.unflushed_changes);
    fs.flush().unwrap();
    let mut fs = Filesystem::mount(fs.unmount().unwrap()).unwrap();
    assert_eq!(read_named(&mut fs, "c"), b"alpha");
    assert_eq!(fs.stats().file_count, 1);
    assert!(!fs.stats().unflushed_changes);
}

#[test]
fn namespace_errors_are_typed_and_change_nothing() {
    let mut fs = new_fs(4096, 4096);
    fs.create("x").unwrap();
    fs.create("y").unwrap();
    let too_long = "n".repeat(256);
    let cases: Vec<(&str, NamespaceError)> = vec![
        (
            "",
            NamespaceError::BadName {
                name: String::new(),
                reason: "a name needs at least one byte",
            },
        ),
        (
            &too_long,
            NamespaceError::BadName {
                name: too_long.clone(),
                reason: "a name has at most 255 bytes",
            },
        ),
        (
            "a/b",
            NamespaceError::BadName {
                name: "a/b".into(),
                reason: "a name may not contain '/'",
            },
        ),
        (
            "a\0",
            NamespaceError::BadName {
                name: "a\0".into(),
                reason: "a name may not contain NUL",
            },
        ),
        ("x", NamespaceError::Exists { name: "x".into() }),
    ];
    for (name, expected) in cases {
        assert_eq!(fs.create(name), Err(expected), "create {name:?}");
    }
    assert_eq!(
        fs.rename("x", "y"),
        Err(NamespaceError::Exists { name: "y".into() })
    );
    assert_eq!(
        fs.rename("missing", "z"),
        Err(NamespaceError::NotFound {
            name: "missing".into()
        })
    );
    assert!(matches!(
        fs.rename("x", "bad/name"),
        Err(NamespaceError::BadName { .. })
    ));
    assert_eq!(
        fs.delete("missing"),
        Err(NamespaceError::NotFound {
            name: "missing".into()
        })
    );
    let names: Vec<String> = fs.list().into_iter().map(|stat| stat.name).collect();
    assert_eq!(names, vec!["x", "y"]);
    let longest = "é".repeat(127);
    fs.create(&longest).unwrap();
    assert!(fs.open(&longest).is_ok());
}

#[test]
fn read_past_the_end_and_too_large_files_are_refused() {
    let mut fs = new_fs(4096, 4096);
    let file = fs.create("f").unwrap();
    fs.write(file, 0, &[1; 10]).unwrap();
    for (offset, length) in [(0, 11), (10, 1), (11, 0), (u64::MAX, 2)] {
        assert!(
            matches!(
                fs.read(file, offset, length),
                Err(FileIoError::ReadPastEnd { .. })
            ),
            "{offset}+{length}"
        );
    }
    assert_eq!(fs.read(file, 10, 0).unwrap().len(), 0);
    let capacity = fs.stats().fs_block_count * 4096;
    assert!(matches!(
        fs.write(file, capacity, b"x"),
        Err(FileIoError::FileTooLarge { .. })
    ));
    assert!(matches!(
        fs.truncate(file, capacity + 1),
        Err(FileIoError::FileTooLarge { .. })
    ));
    assert_eq!(fs.stat(file).unwrap().size_bytes, 10);
}

#[test]
fn full_disk_is_enospc_and_changes_nothing() {
    let mut fs = new_fs(4096, 64 * 8);
    let file = fs.create("big").unwrap();
    let before = fs.stats();
    let result = fs.write(file, 0, &vec![7u8; 64 * 4096]);
    assert!(
        matches!(result, Err(FileIoError::NoSpace { .. })),
        "{result:?}"
    );
    assert_eq!(fs.stats(), before);
    assert_eq!(fs.stat(file).unwrap().size_bytes, 0);
    let mut written = 0u64;
    while fs.write(file, written, &[9u8; 4096]).is_ok() {
        written += 4096;
    }
    assert!(written > 0);
    fs.flush().unwrap();
    let mut fs = Filesystem::mount(fs.unmount().unwrap()).unwrap();
    assert_eq!(read_named(&mut fs, "big"), vec![9u8; written as usize]);
    assert!(fs.check().unwrap().is_clean());
    let overwrite = fs.open("big").unwrap();
    assert!(matches!(
        fs.write(overwrite, 0, &vec![1u8; written as usize]),
        Err(FileIoError::NoSpace { .. })
    ));
    fs.delete("big").unwrap();
    fs.flush().unwrap();
    let again = fs.create("again").unwrap();
    fs.write(again, 0, &vec![3u8; written as usize]).unwrap();
    fs.flush().unwrap();
    assert!(fs.check().unwrap().is_clean());
}

#[test]
fn many_creates_hit_enospc_cleanly_on_a_tiny_disk() {
    let mut fs = new_fs(4096, 64 * 8);
    let mut created = 0;
    loop {
        match fs.create(&format!("file-with-a-fairly-long-name-{created:06}")) {
            Ok(_) => created += 1,
            Err(NamespaceError::NoSpace { .. }) => break,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert!(created > 10);
    fs.flush().unwrap();
    let fs = Filesystem::mount(fs.unmount().unwrap()).unwrap();
    assert_eq!(fs.stats().file_count, created);
}

#[test]
fn read_into_a_pool_buffer_goes_straight_to_the_device() {
    let mut fs = new_fs(16384, 16384);
    let file = fs.create("f").unwrap();
    let bytes = pattern(5 * 16384, 9);
    fs.write(file, 0, &bytes).unwrap();
    fs.truncate(file, 7 * 16384).unwrap();
    let pool = flashpipe_device::BufferPool::new(2, 4 * 16384);
    let mut buffer = pool.try_take().unwrap();
    fs.read_into(file, 16384, &mut buffer).unwrap();
    assert_eq!(&buffer[..], &bytes[16384..]);
    let mut unaligned = IoBuf::zeroed(20000);
    fs.read_into(file, 100, &mut unaligned).unwrap();
    assert_eq!(&unaligned[..], &bytes[100..20100]);
    let runs = fs.block_map(file, 0, 7 * 16384).unwrap();
    let mapped: u64 = runs
        .iter()
        .filter(|run| run.first_device_block.is_some())
        .map(|run| run.block_count)
        .sum();
    assert_eq!(mapped, 5);
    assert_eq!(runs.last().unwrap().first_device_block, None);
}

#[test]
fn format_refuses_bad_block_sizes_and_tiny_devices() {
    for block_size in [0u32, 1000, 2048, 1 << 21, 3 * 4096] {
        let disk = RamDisk::new("ram0", 512, 4096, 8).unwrap();
        let result = Filesystem::format(
            Box::new(disk),
            &FormatOptions {
                fs_block_size_bytes: block_size,
                store_identity: None,
            },
        );
        assert!(
            matches!(result, Err(FormatError::BadBlockSize { .. })),
            "{block_size}"
        );
    }
    let disk = RamDisk::new("ram0", 8192, 64, 8).unwrap();
    let result = Filesystem::format(
        Box::new(disk),
        &FormatOptions {
            fs_block_size_bytes: 4096,
            store_identity: None,
        },
    );
    assert!(matches!(result, Err(FormatError::BadBlockSize { .. })));
    let disk = RamDisk::new("ram0", 4096, 7, 8).unwrap();
    let result = Filesystem::format(Box::new(disk), &FormatOptions::default());
    assert!(matches!(result, Err(FormatError::DeviceTooSmall { .. })));
}

#[test]
fn mount_refuses_blank_newer_and_too_small_devices() {
    let blank = RamDisk::new("ram0", 512, 4096, 8).unwrap();
    assert!(matches!(
        Filesystem::mount(Box::new(blank)),
        Err(MountError::NotFormatted)
    ));

    let shared = SharedDisk::new(512, 4096);
    let mut fs = Filesystem::format(shared.boxed(), &FormatOptions::default()).unwrap();
    fs.create("keep").unwrap();
    fs.unmount().unwrap();

    let smaller = shared.copy_to(4000);
    assert!(matches!(
        Filesystem::mount(smaller.boxed()),
        Err(MountError::WrongDeviceSize { .. })
    ));
    let larger = shared.copy_to(8192);
    assert!(Filesystem::mount(larger.boxed())
        .unwrap()
        .open("keep")
        .is_ok());

    for slot_offset in [0u64, 4096] {
        let mut super_bytes = shared.peek(slot_offset, 512);
        super_bytes[8..12].copy_from_slice(&(NEWEST_READABLE_FORMAT_VERSION + 1).to_le_bytes());
        shared.poke(slot_offset, &super_bytes);
    }
    let error = Filesystem::mount(shared.boxed()).err().unwrap();
    assert!(
        matches!(
            error,
            MountError::NewerVersion {
                found,
                supported: NEWEST_READABLE_FORMAT_VERSION
            } if found == NEWEST_READABLE_FORMAT_VERSION + 1
        ),
        "{error}"
    );
    assert!(error.to_string().contains("upgrade"));
    assert!(matches!(
        flashpipe_fs::fsck(&mut shared.boxed(), false),
        Err(flashpipe_fs::FsckError::NewerVersion { .. })
    ));
}

#[test]
fn unflushed_changes_vanish_when_the_device_is_dropped() {
    let shared = SharedDisk::new(512, 4096);
    let mut fs = Filesystem::format(shared.boxed(), &FormatOptions::default()).unwrap();
    let kept = fs.create("kept").unwrap();
    fs.write(kept, 0, b"durable").unwrap();
    fs.flush().unwrap();
    fs.write(kept, 0, b"VOLATILE").unwrap();
    fs.create("lost").unwrap();
    drop(fs);
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(read_named(&mut fs, "kept"), b"durable");
    assert!(fs.open("lost").is_err());
}

#[test]
fn metadata_blocks_name_every_structure() {
    let mut fs = new_fs(4096, 8192);
    let file = fs.create("chained").unwrap();
    fs.write(file, 0, &vec![1u8; 4096 * 20]).unwrap();
    fs.flush().unwrap();
    let structures: std::collections::HashSet<Structure> = fs
        .metadata_blocks()
        .into_iter()
        .map(|(structure, _)| structure)
        .collect();
    for structure in [
        Structure::SuperBlock,
        Structure::CheckpointMap,
        Structure::NameTable,
        Structure::InodeTable,
        Structure::FreeList,
        Structure::IndirectBlock,
    ] {
        assert!(structures.contains(&structure), "{structure}");
    }
}

#[test]
fn a_huge_read_past_the_end_allocates_nothing() {
    let mut fs = new_fs(4096, 4096);
    let file = fs.create("f").unwrap();
    assert!(matches!(
        fs.read(file, 0, 1 << 50),
        Err(FileIoError::ReadPastEnd { .. })
    ));
}

#[test]
fn the_file_system_can_move_to_an_engine_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<Filesystem>();
    let mut fs = new_fs(4096, 4096);
    let file = fs.create("moved").unwrap();
    let mut fs = std::thread::spawn(move || {
        fs.write(file, 0, b"from another thread").unwrap();
        fs
    })
    .join()
    .unwrap();
    assert_eq!(read_named(&mut fs, "moved"), b"from another thread");
}

#[test]
fn runs_over_a_striped_set_of_ram_disks() {
    use flashpipe_array::{CompletionOrder, StripedDevice};
    let members: Vec<Box<dyn flashpipe_device::BlockDevice>> = (0..3)
        .map(|index| {
            Box::new(RamDisk::new(&format!("ram{index}"), 4096, 2048, 64).unwrap())
                as Box<dyn flashpipe_device::BlockDevice>
        })
        .collect();
    let striped =
        StripedDevice::new("stripe0", members, 65536, CompletionOrder::AsCompleted, 128).unwrap();
    let mut fs = format_fs(Box::new(striped), 16384);
    let file = fs.create("big").unwrap();
    let bytes = pattern(9 * 1024 * 1024 + 333, 77);
    fs.write(file, 0, &bytes).unwrap();
    fs.flush().unwrap();
    let mut fs = Filesystem::mount(fs.unmount().unwrap()).unwrap();
    assert!(read_named(&mut fs, "big") == bytes);
    assert!(fs.check().unwrap().is_clean());
}
