//! `Filesystem::write_batch` against a plain model: random batches of writes (overlapping,
//! appending, across files, with a stale handle among them) give exactly what applying
//! the same writes one by one gives, before and after a remount.

use std::collections::BTreeMap;

use flashpipe_device::{RamDisk, SplitMix64};
use flashpipe_fs::{FileId, Filesystem};
use flashpipe_testkit::formatted::format_fs;

fn apply_to_model(model: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    if model.len() < offset + bytes.len() {
        model.resize(offset + bytes.len(), 0);
    }
    model[offset..offset + bytes.len()].copy_from_slice(bytes);
}

fn check_batches(seed: u64, block_size_bytes: u32) {
    let disk = RamDisk::new("ram0", 4096, 16384, 32).unwrap();
    let mut filesystem = format_fs(Box::new(disk), block_size_bytes);
    let mut generator = SplitMix64::new(seed);
    let files: Vec<FileId> = (0..3)
        .map(|index| filesystem.create(&format!("f{index}")).unwrap())
        .collect();
    let mut models: BTreeMap<FileId, Vec<u8>> =
        files.iter().map(|&file| (file, Vec::new())).collect();
    for round in 0..20u64 {
        let writes: Vec<(FileId, u64, Vec<u8>)> = (0..1 + generator.below(12))
            .map(|index| {
                let file = files[generator.below(3) as usize];
                let offset = generator.below(200_000);
                let length = generator.below(40_000) as usize;
                let fill = (round * 31 + index) as u8;
                (file, offset, vec![fill; length])
            })
            .collect();
        let mut borrowed: Vec<(FileId, u64, &[u8])> = writes
            .iter()
            .map(|(file, offset, bytes)| (*file, *offset, bytes.as_slice()))
            .collect();
        borrowed.push((FileId(9999), 0, b"stale"));
        let results = filesystem.write_batch(&borrowed);
        assert_eq!(results.len(), borrowed.len());
        assert!(
            results.last().unwrap().is_err(),
            "seed {seed}: a stale handle fails alone"
        );
        for ((file, offset, bytes), result) in writes.iter().zip(&results) {
            assert!(result.is_ok(), "seed {seed}: {result:?}");
            apply_to_model(models.get_mut(file).unwrap(), *offset as usize, bytes);
        }
        check_contents(&mut filesystem, &models, seed);
    }
    filesystem.flush().unwrap();
    let mut remounted = Filesystem::mount(filesystem.unmount().unwrap()).unwrap();
    check_contents(&mut remounted, &models, seed);
    assert!(remounted.check().unwrap().is_clean());
}

fn check_contents(filesystem: &mut Filesystem, models: &BTreeMap<FileId, Vec<u8>>, seed: u64) {
    for (&file, model) in models {
        let stat = filesystem.stat(file).unwrap();
        assert_eq!(
            stat.size_bytes,
            model.len() as u64,
            "seed {seed}: size of {file:?}"
        );
        let bytes = filesystem.read(file, 0, model.len() as u64).unwrap();
        assert!(bytes[..] == model[..], "seed {seed}: contents of {file:?}");
    }
}

#[test]
fn batches_equal_writes_one_by_one() {
    for seed in 0..6 {
        check_batches(seed, [4096, 8192, 16384][seed as usize % 3]);
    }
}
