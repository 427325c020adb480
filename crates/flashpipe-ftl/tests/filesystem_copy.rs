//! The file system's copy by reference on emulated flash (issue #5, Build 5): copying a
//! file costs metadata, not data; partial blocks at unaligned ends are copied by bytes
//! (the head/tail rule); a later write to either side leaves the other intact; a device
//! that cannot remap gives "by reference or fail" an error instead of a silent byte copy.
//! A model-based test runs random writes, copies (all three methods, same file and
//! overlapping included), truncates, flushes and remounts against plain byte vectors.
//! `FLASHPIPE_SEEDS=N` runs N seeds, `FLASHPIPE_SEED=S` replays one.

mod support;

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::{BlockDevice, RamDisk, SplitMix64};
use flashpipe_fs::{CopyError, CopyMethod, FileId, Filesystem, FormatOptions};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, SharedFlash, SharedFtl};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::seeds::run_seeds;

fn contents(seed: u64, length: usize) -> Vec<u8> {
    let mut generator = SplitMix64::new(seed);
    (0..length).map(|_| generator.next_u64() as u8).collect()
}

struct FlashStore {
    flash: SharedFlash,
    options: FtlOptions,
    filesystem: Filesystem,
}

fn flash_store(seed: u64) -> FlashStore {
    let (flash, options, ftl) = support::ftl_on_shared_flash(64, seed);
    let filesystem = format_fs(Box::new(ftl) as Box<dyn BlockDevice>, 4096);
    FlashStore {
        flash,
        options,
        filesystem,
    }
}

impl FlashStore {
    /// Unmounts the file system, drops the FTL, mounts both again.
    fn remount(self) -> FlashStore {
        drop(self.filesystem.unmount().expect("unmount"));
        let (ftl, _) = Ftl::mount(
            Box::new(self.flash.clone()) as Box<dyn FlashBackend>,
            self.options.clone(),
        )
        .expect("mount the FTL");
        let filesystem =
            Filesystem::mount(Box::new(ftl) as Box<dyn BlockDevice>).expect("mount the FS");
        FlashStore { filesystem, ..self }
    }
}

fn read_all(filesystem: &mut Filesystem, file: FileId) -> Vec<u8> {
    let size = filesystem.stat(file).expect("stat").size_bytes;
    if size == 0 {
        return Vec::new();
    }
    filesystem.read(file, 0, size).expect("read").to_vec()
}

/// A store of seed `store_seed` holding file `source` with `contents(seed, length)`.
fn store_with_source(store_seed: u64, seed: u64, length: usize) -> (FlashStore, FileId, Vec<u8>) {
    let mut store = flash_store(store_seed);
    let original = contents(seed, length);
    let source = store.filesystem.create("source").expect("create");
    store.filesystem.write(source, 0, &original).expect("write");
    (store, source, original)
}

#[test]
fn copying_a_file_by_reference_moves_no_data() {
    let (mut store, source, original) = store_with_source(3, 1, 300_001);
    store.filesystem.flush().expect("flush");
    let report = store
        .filesystem
        .copy_file("source", "copy", CopyMethod::ReferenceOrFail)
        .expect("copy by reference");
    assert_eq!(report.bytes_by_bytes, 0, "{report:?}");
    assert_eq!(report.blocks_by_reference, 74, "{report:?}");
    let copy = store.filesystem.open("copy").expect("open the copy");
    assert!(read_all(&mut store.filesystem, copy) == original);
    store
        .filesystem
        .write(source, 4096, b"changed source")
        .expect("overwrite the source");
    store
        .filesystem
        .write(copy, 300_000, b"grown copy")
        .expect("write the copy");
    store.filesystem.flush().expect("flush");
    let mut store = store.remount();
    let source = store.filesystem.open("source").expect("open");
    let copy = store.filesystem.open("copy").expect("open");
    let mut expected_source = original.clone();
    expected_source[4096..4096 + 14].copy_from_slice(b"changed source");
    let mut expected_copy = original;
    expected_copy.truncate(300_000);
    expected_copy.extend_from_slice(b"grown copy");
    assert!(read_all(&mut store.filesystem, source) == expected_source);
    assert!(read_all(&mut store.filesystem, copy) == expected_copy);
    assert!(store.filesystem.check().expect("fsck").is_clean());
}

#[test]
fn a_reference_copy_programs_no_data_pages_on_flash() {
    let array = support::small_array(support::small_config(64, 32), 4);
    let ftl = Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        support::test_options(32),
    )
    .expect("format the FTL");
    let ftl = SharedFtl::new(ftl);
    let mut filesystem = Filesystem::format(
        Box::new(ftl.clone()) as Box<dyn BlockDevice>,
        &FormatOptions::default(),
    )
    .expect("format the file system");
    let source = filesystem.create("big").expect("create");
    filesystem
        .write(source, 0, &contents(2, 1 << 20))
        .expect("write");
    filesystem.flush().expect("flush");
    let before = ftl.stats();
    filesystem
        .copy_file("big", "big-copy", CopyMethod::ReferenceOrFail)
        .expect("copy");
    let after = ftl.stats();
    assert_eq!(after.host_pages_written, before.host_pages_written);
    assert_eq!(
        after.pages_copied_by_reference - before.pages_copied_by_reference,
        256
    );
}

#[test]
fn unaligned_ends_are_copied_by_bytes_and_the_middle_by_reference() {
    let (mut store, source, original) = store_with_source(5, 3, 40_000);
    let destination = store.filesystem.create("destination").expect("create");
    store
        .filesystem
        .write(destination, 0, &contents(4, 50_000))
        .expect("write");
    // 30 000 bytes of the source from its byte 1000 into the destination at `at`.
    let copy_30k = |filesystem: &mut Filesystem, at: u64, method: CopyMethod| {
        filesystem.copy_range(source, 1000, destination, at, 30_000, method)
    };
    let report = copy_30k(&mut store.filesystem, 5096, CopyMethod::ReferenceOrFail)
        .expect("same phase: by reference");
    assert_eq!(report.blocks_by_reference, 6, "{report:?}");
    assert_eq!(report.bytes_by_bytes, 30_000 - 6 * 4096, "{report:?}");
    let mut expected = contents(4, 50_000);
    expected[5096..35_096].copy_from_slice(&original[1000..31_000]);
    assert!(read_all(&mut store.filesystem, destination) == expected);
    let error = copy_30k(&mut store.filesystem, 5000, CopyMethod::ReferenceOrFail)
        .expect_err("different phase cannot be by reference");
    assert!(matches!(error, CopyError::NotByReference { .. }), "{error}");
    assert!(
        read_all(&mut store.filesystem, destination) == expected,
        "a refused copy changes nothing"
    );
    let report = copy_30k(&mut store.filesystem, 5000, CopyMethod::ReferenceOrBytes)
        .expect("falls back to bytes");
    assert_eq!(report.bytes_by_bytes, 30_000);
    expected[5000..35_000].copy_from_slice(&original[1000..31_000]);
    assert!(read_all(&mut store.filesystem, destination) == expected);
}

#[test]
fn copies_by_reference_over_a_stripe_of_ftls_keep_every_block_on_its_member() {
    let members: Vec<Box<dyn BlockDevice>> = (0..2)
        .map(|index| {
            let array = support::small_array(support::small_config(64, 32), 20 + index);
            let ftl = Ftl::format(
                Box::new(array) as Box<dyn FlashBackend>,
                support::test_options(32),
            )
            .expect("format an FTL");
            Box::new(ftl) as Box<dyn BlockDevice>
        })
        .collect();
    let stripe = StripedDevice::new(
        "stripe",
        members,
        3 * 4096,
        CompletionOrder::AsCompleted,
        64,
    )
    .expect("stripe");
    assert_eq!(stripe.copy_alignment_blocks(), 6);
    let mut filesystem = format_fs(Box::new(stripe) as Box<dyn BlockDevice>, 8192);
    let mut expected = Vec::new();
    for (index, length) in [70_000usize, 5_000, 123_457].into_iter().enumerate() {
        let name = format!("file-{index}");
        let file = filesystem.create(&name).expect("create");
        let bytes = contents(index as u64, length);
        filesystem.write(file, 0, &bytes).expect("write");
        let report = filesystem
            .copy_file(&name, &format!("{name}-copy"), CopyMethod::ReferenceOrFail)
            .expect("by reference over the stripe");
        assert_eq!(report.bytes_by_bytes, 0, "{report:?}");
        expected.push((format!("{name}-copy"), bytes));
    }
    filesystem.flush().expect("flush");
    for (name, bytes) in &expected {
        let file = filesystem.open(name).expect("open");
        assert!(read_all(&mut filesystem, file) == *bytes, "{name}");
    }
    assert!(filesystem.check().expect("fsck").is_clean());
}

#[test]
fn a_device_that_cannot_remap_fails_by_reference_or_fail_and_changes_nothing() {
    let ram = RamDisk::new("ram", 4096, 4096, 32).expect("ram disk");
    let mut filesystem = Filesystem::format(
        Box::new(ram) as Box<dyn BlockDevice>,
        &FormatOptions::default(),
    )
    .expect("format");
    let source = filesystem.create("source").expect("create");
    let original = contents(6, 100_000);
    filesystem.write(source, 0, &original).expect("write");
    let error = filesystem
        .copy_file("source", "copy", CopyMethod::ReferenceOrFail)
        .expect_err("RAM cannot remap");
    assert!(matches!(error, CopyError::NotByReference { .. }), "{error}");
    assert!(
        filesystem.open("copy").is_err(),
        "no destination left behind"
    );
    let report = filesystem
        .copy_file("source", "copy", CopyMethod::ReferenceOrBytes)
        .expect("by bytes");
    assert_eq!(report.bytes_by_bytes, 100_000);
    let copy = filesystem.open("copy").expect("open");
    assert!(read_all(&mut filesystem, copy) == original);
}

/// The files of the model test and their expected bytes.
struct Model {
    files: Vec<(FileId, Vec<u8>)>,
}

fn random_method(generator: &mut SplitMix64) -> CopyMethod {
    match generator.below(3) {
        0 => CopyMethod::ReferenceOrFail,
        1 => CopyMethod::ReferenceOrBytes,
        _ => CopyMethod::Bytes,
    }
}

/// An offset that is block-aligned, same-phase or arbitrary.
fn random_offset(generator: &mut SplitMix64, limit: u64, phase: u64) -> u64 {
    let base = generator.below(limit / 4096 + 1) * 4096;
    match generator.below(3) {
        0 => base.min(limit),
        1 => (base + phase).min(limit),
        _ => generator.below(limit + 1),
    }
}

fn random_copy(store: &mut FlashStore, model: &mut Model, generator: &mut SplitMix64, seed: u64) {
    let from = generator.below(model.files.len() as u64) as usize;
    let to = generator.below(model.files.len() as u64) as usize;
    let source_size = model.files[from].1.len() as u64;
    let source_offset = random_offset(generator, source_size, 0);
    let length = generator.below(source_size - source_offset + 1);
    let destination_size = model.files[to].1.len() as u64;
    let destination_offset = random_offset(generator, destination_size, source_offset % 4096);
    let method = random_method(generator);
    let result = store.filesystem.copy_range(
        model.files[from].0,
        source_offset,
        model.files[to].0,
        destination_offset,
        length,
        method,
    );
    match result {
        Ok(_) => {
            let bytes = model.files[from].1
                [source_offset as usize..(source_offset + length) as usize]
                .to_vec();
            let target = &mut model.files[to].1;
            let end = (destination_offset + length) as usize;
            if target.len() < end {
                target.resize(end, 0);
            }
            target[destination_offset as usize..end].copy_from_slice(&bytes);
        }
        Err(CopyError::NotByReference { .. }) if method == CopyMethod::ReferenceOrFail => {
            assert_ne!(
                source_offset % 4096,
                destination_offset % 4096,
                "seed {seed}: only a phase difference refuses on the FTL"
            );
        }
        Err(error) => panic!("seed {seed}: copy failed: {error}"),
    }
}

fn random_write(store: &mut FlashStore, model: &mut Model, generator: &mut SplitMix64) {
    let index = generator.below(model.files.len() as u64) as usize;
    let size = model.files[index].1.len() as u64;
    let offset = generator.below(size + 8192);
    let data = contents(generator.next_u64(), generator.below(20_000) as usize + 1);
    store
        .filesystem
        .write(model.files[index].0, offset, &data)
        .expect("write");
    let target = &mut model.files[index].1;
    let end = offset as usize + data.len();
    if target.len() < end {
        target.resize(end, 0);
    }
    target[offset as usize..end].copy_from_slice(&data);
}

fn check_model(store: &mut FlashStore, model: &Model, seed: u64, step: usize) {
    for (index, (file, expected)) in model.files.iter().enumerate() {
        let found = read_all(&mut store.filesystem, *file);
        assert!(
            found == *expected,
            "seed {seed}, step {step}: file {index} differs from the model (replay with FLASHPIPE_SEED={seed})"
        );
    }
}

fn run_model_seed(seed: u64) {
    let mut generator = SplitMix64::new(seed);
    let mut store = flash_store(seed);
    let mut model = Model { files: Vec::new() };
    for index in 0..3 {
        let file = store
            .filesystem
            .create(&format!("file-{index}"))
            .expect("create");
        model.files.push((file, Vec::new()));
    }
    for step in 0..40 {
        match generator.below(10) {
            0..=3 => random_write(&mut store, &mut model, &mut generator),
            4..=7 => random_copy(&mut store, &mut model, &mut generator, seed),
            8 => {
                let index = generator.below(3) as usize;
                let size = generator.below(model.files[index].1.len() as u64 + 1);
                store
                    .filesystem
                    .truncate(model.files[index].0, size)
                    .expect("truncate");
                model.files[index].1.truncate(size as usize);
            }
            _ => {
                store.filesystem.flush().expect("flush");
                store = store.remount();
                for (index, entry) in model.files.iter_mut().enumerate() {
                    entry.0 = store
                        .filesystem
                        .open(&format!("file-{index}"))
                        .expect("open");
                }
            }
        }
        check_model(&mut store, &model, seed, step);
    }
    let report = store.filesystem.check().expect("fsck");
    assert!(report.is_clean(), "seed {seed}: {report:?}");
}

#[test]
fn random_copies_writes_and_remounts_match_a_model() {
    run_seeds(24, run_model_seed);
}
