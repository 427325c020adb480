//! Stores on emulated flash (issue #5, "same stack"): a store file naming a flash preset
//! is created like mkfs does, written, flushed, dropped, reopened as another process
//! would and read back identical; bad descriptions are refused before anything changes;
//! the flash store device passes the block-device contract.

use flashpipe_testkit::presets::write_tiny_spare_preset;
use flashpipe_testkit::scratch::ScratchFolder;
use std::path::{Path, PathBuf};

use flashpipe_device::{BlockDevice, SplitMix64};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_store::flash_store::{open_flash_device, FlashDeviceSpec, FlashStoreError};
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::store_config::{
    parse_device_list, DeviceSpec, StoreConfig, STORE_FILE_VERSION,
};

/// The store file of a test folder.
fn store_file_in(folder: &ScratchFolder) -> PathBuf {
    folder.path().join("store.toml")
}

/// A small minflash array (16 of 4096 blocks per chip: 2 GiB raw) in `path`.
/// A new file system with 8 KiB blocks on the flash device `spec` describes, made
/// beside `store_file`.
fn format_new_flash_store(spec: &FlashDeviceSpec, store_file: &Path) -> Filesystem {
    let device = open_flash_device(
        spec,
        store_file,
        "flash0",
        32,
        DeviceCreation::CreateMissing,
    )
    .unwrap();
    let options = FormatOptions {
        fs_block_size_bytes: 8 << 10,
        store_identity: None,
    };
    Filesystem::format(Box::new(device), &options).unwrap()
}

fn small_minflash(path: Option<&str>) -> FlashDeviceSpec {
    let mut spec = FlashDeviceSpec::new("minflash", path.map(PathBuf::from));
    spec.blocks_per_plane = Some(16);
    spec
}

fn store_config(devices: Vec<DeviceSpec>, block_size_bytes: u32) -> StoreConfig {
    StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        identity: None,
        block_size_bytes,
        stripe_unit_bytes: 64 << 10,
        queue_depth: 32,
        devices,
    }
}

fn file_contents(seed: u64, length: usize) -> Vec<u8> {
    let mut generator = SplitMix64::new(seed);
    (0..length).map(|_| generator.next_u64() as u8).collect()
}

const FILES: [(&str, usize); 4] = [
    ("empty", 0),
    ("one-byte", 1),
    ("unaligned", 100_001),
    ("large", 3 << 20),
];

fn write_files(filesystem: &mut Filesystem) {
    for (index, (name, length)) in FILES.iter().enumerate() {
        let file = filesystem.create(name).unwrap();
        let bytes = file_contents(index as u64, *length);
        filesystem.write(file, 0, &bytes).unwrap();
    }
    filesystem.flush().unwrap();
}

fn check_files(filesystem: &mut Filesystem) {
    for (index, (name, length)) in FILES.iter().enumerate() {
        let file = filesystem.open(name).unwrap();
        let read = filesystem.read(file, 0, *length as u64).unwrap();
        assert!(
            read[..*length] == file_contents(index as u64, *length)[..],
            "{name} differs after reopening"
        );
    }
}

#[test]
fn a_flash_store_survives_closing_and_reopening() {
    let folder = ScratchFolder::new("reopen");
    let config = store_config(
        vec![DeviceSpec::Flash(small_minflash(Some("flash0.img")))],
        16 << 10,
    );
    let store_file = store_file_in(&folder);
    config.validate(&store_file).unwrap();
    let opened = open_store_device(&config, &store_file, DeviceCreation::CreateMissing).unwrap();
    let options = FormatOptions {
        fs_block_size_bytes: config.block_size_bytes,
        store_identity: None,
    };
    let mut filesystem = Filesystem::format(opened.device, &options).unwrap();
    write_files(&mut filesystem);
    drop(filesystem.unmount().unwrap());
    assert!(folder.path().join("flash0.img.meta").exists());

    for _reopening in 0..2 {
        let opened = open_store_device(&config, &store_file, DeviceCreation::MustExist).unwrap();
        let mut filesystem = Filesystem::mount(opened.device).unwrap();
        check_files(&mut filesystem);
        assert!(filesystem.check().unwrap().is_clean());
        drop(filesystem);
    }
}

#[test]
fn a_flush_alone_makes_the_store_durable() {
    let folder = ScratchFolder::new("flush-durable");
    let spec = small_minflash(Some("flash0.img"));
    let store_file = store_file_in(&folder);
    let mut filesystem = format_new_flash_store(&spec, &store_file);
    write_files(&mut filesystem);
    // A crash after the flush: no clean unmount, no sync at drop.
    std::mem::forget(filesystem);
    let device =
        open_flash_device(&spec, &store_file, "flash0", 32, DeviceCreation::MustExist).unwrap();
    let mut filesystem = Filesystem::mount(Box::new(device)).unwrap();
    check_files(&mut filesystem);
}

fn check_refused(
    folder: &ScratchFolder,
    spec: FlashDeviceSpec,
    block_size_bytes: u32,
    creation: DeviceCreation,
    expected_fragment: &str,
) {
    let before = folder.listing();
    let config = store_config(vec![DeviceSpec::Flash(spec)], block_size_bytes);
    let store_file = store_file_in(folder);
    let error = match config.validate(&store_file) {
        Err(error) => error.to_string(),
        Ok(()) => match open_store_device(&config, &store_file, creation) {
            Err(error) => error.to_string(),
            Ok(_) => panic!("a store expecting {expected_fragment:?} opened"),
        },
    };
    assert!(
        error.contains(expected_fragment),
        "error {error:?} lacks {expected_fragment:?}"
    );
    assert_eq!(folder.listing(), before, "a refused store changed files");
}

#[test]
fn bad_flash_devices_are_refused_and_change_nothing() {
    let folder = ScratchFolder::new("refused");
    let with = |edit: &dyn Fn(&mut FlashDeviceSpec)| {
        let mut spec = small_minflash(Some("flash0.img"));
        edit(&mut spec);
        spec
    };
    let create = DeviceCreation::CreateMissing;
    let exists = DeviceCreation::MustExist;
    let cases: Vec<(FlashDeviceSpec, u32, DeviceCreation, &str)> = vec![
        (
            with(&|spec| spec.preset = "nand9".into()),
            16384,
            create,
            "unknown flash preset",
        ),
        (
            with(&|spec| spec.preset = "missing.toml".into()),
            16384,
            create,
            "missing.toml",
        ),
        (
            with(&|spec| spec.over_provisioning = 0.97),
            16384,
            create,
            "over_provisioning 0.97",
        ),
        (
            with(&|spec| spec.over_provisioning = -0.1),
            16384,
            create,
            "over_provisioning -0.1",
        ),
        (
            with(&|spec| spec.blocks_per_plane = Some(5000)),
            16384,
            create,
            "blocks_per_plane 5000",
        ),
        (
            with(&|spec| spec.blocks_per_plane = Some(4096)),
            16384,
            create,
            "at most",
        ),
        (
            with(&|_| ()),
            4096,
            create,
            "not a multiple of the flash page of minflash",
        ),
        (
            with(&|spec| spec.size_bytes = Some(12288)),
            16384,
            create,
            "size_bytes 12288",
        ),
        (with(&|_| ()), 16384, exists, "does not exist"),
        (small_minflash(None), 16384, exists, "lives in memory"),
        (
            with(&|spec| spec.blocks_per_plane = Some(2)),
            16384,
            create,
            "too few",
        ),
        (
            // rad's pages carry the FTL's compact record; fewer spare bytes do not.
            with(&|spec| spec.preset = "tiny-spare.toml".into()),
            16384,
            create,
            "host spare bytes; the FTL needs at least 20",
        ),
    ];
    write_tiny_spare_preset(&folder.path().join("tiny-spare.toml"));
    for (spec, block_size_bytes, creation, expected_fragment) in cases {
        check_refused(&folder, spec, block_size_bytes, creation, expected_fragment);
    }
}

#[test]
fn an_image_of_another_geometry_is_refused() {
    let folder = ScratchFolder::new("other-preset");
    let store_file = store_file_in(&folder);
    let spec = small_minflash(Some("flash0.img"));
    let device = open_flash_device(
        &spec,
        &store_file,
        "flash0",
        32,
        DeviceCreation::CreateMissing,
    )
    .unwrap();
    device.close().unwrap();
    let mut other = spec.clone();
    other.blocks_per_plane = Some(8);
    for creation in [DeviceCreation::MustExist, DeviceCreation::CreateMissing] {
        check_refused(&folder, other.clone(), 16384, creation, "wrong image");
    }
    std::fs::write(folder.path().join("plain.img"), b"not flash").unwrap();
    let plain = small_minflash(Some("plain.img"));
    check_refused(
        &folder,
        plain,
        16384,
        DeviceCreation::CreateMissing,
        "not a flash image",
    );
}

#[test]
fn flash_and_files_cannot_be_striped_together() {
    let folder = ScratchFolder::new("mixed");
    let mut devices = parse_device_list("flash:minflash:a.img,b.img", Some(1 << 30)).unwrap();
    let config = store_config(devices.clone(), 16384);
    let error = config
        .validate(&store_file_in(&folder))
        .unwrap_err()
        .to_string();
    assert!(error.contains("share one block size"), "{error}");
    devices.truncate(1);
    store_config(devices, 16384)
        .validate(&store_file_in(&folder))
        .unwrap();
}

#[test]
fn size_bytes_limits_what_the_store_sees() {
    let folder = ScratchFolder::new("size");
    let mut spec = small_minflash(None);
    spec.size_bytes = Some(64 << 20);
    let device = open_flash_device(
        &spec,
        &store_file_in(&folder),
        "flash0",
        32,
        DeviceCreation::CreateMissing,
    )
    .unwrap();
    assert_eq!(device.info().size_bytes(), 64 << 20);
    assert_eq!(device.info().block_size_bytes, 8192);
    spec.size_bytes = Some(4 << 30);
    let error = open_flash_device(
        &spec,
        &store_file_in(&folder),
        "flash0",
        32,
        DeviceCreation::CreateMissing,
    )
    .err()
    .expect("larger than the array");
    assert!(matches!(error, FlashStoreError::TooSmall { .. }), "{error}");
}

#[test]
fn flash_entries_parse_and_round_trip_through_the_store_file() {
    let devices = parse_device_list("flash:minflash:a.img,flash:tlc", None).unwrap();
    assert_eq!(
        devices,
        vec![
            DeviceSpec::Flash(FlashDeviceSpec::new(
                "minflash",
                Some(PathBuf::from("a.img"))
            )),
            DeviceSpec::Flash(FlashDeviceSpec::new("tlc", None)),
        ]
    );
    let devices = parse_device_list("flash:tlc:a.img,flash:tlc", None).unwrap();
    let config = store_config(devices, 16384);
    let text = config.to_toml();
    assert!(text.contains("kind = \"flash\""), "{text}");
    assert_eq!(
        StoreConfig::parse(&text, Path::new("s.toml")).unwrap(),
        config
    );
    for (entry, fragment) in [
        ("flash:", "unknown flash preset"),
        ("flash:slc", "unknown flash preset \"slc\""),
        ("flash:minflash:", "empty path"),
    ] {
        let error = parse_device_list(entry, None).unwrap_err().to_string();
        assert!(
            error.contains(fragment),
            "{entry}: {error:?} lacks {fragment:?}"
        );
    }
    let typo = text.replace("preset = \"tlc\"", "preset = \"tlc\"\nblocks_per_chip = 8");
    let error = StoreConfig::parse(&typo, Path::new("s.toml")).unwrap_err();
    assert!(error.to_string().contains("unknown field"), "{error}");
}

#[test]
fn a_flash_store_device_keeps_the_block_device_contract() {
    let folder = ScratchFolder::new("conformance");
    let store_file = store_file_in(&folder);
    let mut spec = FlashDeviceSpec::new("minflash", None);
    spec.blocks_per_plane = Some(8);
    flashpipe_device::conformance::check_all(&mut |queue_depth| {
        let device = open_flash_device(
            &spec,
            &store_file,
            "flash0",
            queue_depth,
            DeviceCreation::CreateMissing,
        )
        .unwrap();
        Box::new(device) as Box<dyn BlockDevice>
    });
}

/// What a write would change: the `.meta` and the journal byte for byte, and the sparse
/// image's length and modification time (reading gigabytes of holes would be slow).
fn image_files(folder: &ScratchFolder, image: &str) -> Vec<(String, Vec<u8>)> {
    let image_path = folder.path().join(image);
    let image_metadata = std::fs::metadata(&image_path).unwrap();
    let modified = image_metadata.modified().unwrap();
    let image_stamp = format!("{} bytes, modified {modified:?}", image_metadata.len());
    let mut files = vec![(image.to_string(), image_stamp.into_bytes())];
    for name in [format!("{image}.meta"), format!("{image}.journal")] {
        let bytes = std::fs::read(folder.path().join(&name)).unwrap_or_default();
        files.push((name, bytes));
    }
    files
}

/// Opens `spec` read-only, checks the files and that writes are refused with a clear
/// error, drops it, and checks that not a byte of the image, `.meta` or journal changed.
fn read_only_open_writes_nothing(folder: &ScratchFolder, spec: &FlashDeviceSpec) {
    let store_file = store_file_in(folder);
    let before = image_files(folder, "flash0.img");
    let mut device =
        open_flash_device(spec, &store_file, "flash0", 32, DeviceCreation::ReadOnly).unwrap();
    assert!(device.is_read_only());
    let write = flashpipe_device::Request {
        tag: 1,
        operation: flashpipe_device::Operation::Write {
            first_block: 0,
            buffer: flashpipe_device::IoBuf::zeroed(8 << 10),
        },
    };
    let refused = device
        .submit(write)
        .expect_err("a read-only flash device refuses writes");
    let message = refused.error.to_string();
    assert!(message.contains("read-only"), "unclear refusal: {message}");
    let flushed = flashpipe_device::run_one(&mut device, flashpipe_device::Operation::Flush)
        .expect("a flush runs on a read-only device");
    flushed
        .status
        .expect("a flush on a read-only device succeeds (there is nothing to write)");
    let mut filesystem = Filesystem::mount_read_only(Box::new(device)).unwrap();
    check_files(&mut filesystem);
    assert!(filesystem.check().unwrap().is_clean());
    drop(filesystem);
    assert!(
        image_files(folder, "flash0.img") == before,
        "a read-only open changed the image, its .meta or its journal"
    );
}

#[test]
fn a_read_only_open_writes_nothing_after_a_clean_close() {
    let folder = ScratchFolder::new("read-only-clean");
    let spec = small_minflash(Some("flash0.img"));
    let store_file = store_file_in(&folder);
    let mut filesystem = format_new_flash_store(&spec, &store_file);
    write_files(&mut filesystem);
    drop(filesystem.unmount().unwrap());
    read_only_open_writes_nothing(&folder, &spec);
}

/// After a process death the journal holds block changes the `.meta` lacks: a read-only
/// open replays them in memory and still writes nothing; a later read-write open folds
/// them in and the files are all there.
#[test]
fn a_read_only_open_after_a_death_replays_in_memory_only() {
    let folder = ScratchFolder::new("read-only-after-death");
    let spec = small_minflash(Some("flash0.img"));
    let store_file = store_file_in(&folder);
    let mut filesystem = format_new_flash_store(&spec, &store_file);
    write_files(&mut filesystem);
    let extra = filesystem.create("after-the-flush").unwrap();
    filesystem.write(extra, 0, &[7u8; 20_000]).unwrap();
    // A death: no unmount, no sync; programs since the flush are only in the journal.
    std::mem::forget(filesystem);
    read_only_open_writes_nothing(&folder, &spec);
    let device =
        open_flash_device(&spec, &store_file, "flash0", 32, DeviceCreation::MustExist).unwrap();
    let mut filesystem = Filesystem::mount(Box::new(device)).unwrap();
    check_files(&mut filesystem);
    assert!(filesystem.check().unwrap().is_clean());
}
