//! The engine at its API boundary: commands through clients, many reads in flight from
//! several clients (out of order on simulated disks), zero-copy pool buffers, every
//! error, the streaming helpers, and shutdown followed by a remount.

use flashpipe_device::sim::{SimDiskConfig, SimWorld};
use flashpipe_device::{RamDisk, SplitMix64};
use flashpipe_engine::{Command, Engine, EngineConfig, EngineError, Reply};
use flashpipe_fs::{FileIoError, Filesystem, NamespaceError};
use flashpipe_testkit::formatted::format_fs;

mod common;

use common::{check_packed, read_pool_config};

fn ram_filesystem(block_size_bytes: u32) -> Filesystem {
    let disk = RamDisk::new("ram0", 4096, 8192, 32).unwrap();
    format_fs(Box::new(disk), block_size_bytes)
}

/// A file system on one simulated disk serving 12 requests at once with jittered
/// latencies, so many engine requests are in flight and complete out of order (the engine
/// depends on no striping; stores striped over several devices are tested in
/// `flashpipe-store`).
fn sim_parallel_filesystem(seed: u64) -> Filesystem {
    let world = SimWorld::new(seed);
    let mut config = SimDiskConfig::default_for_tests("sim", 4096, 3 * 4096);
    config.latency_jitter_ns = 40_000;
    config.parallelism = 12;
    let disk = world.add_disk(config).unwrap();
    format_fs(Box::new(disk), 8192)
}

fn pattern(length: usize, seed: u64) -> Vec<u8> {
    let mut generator = SplitMix64::new(seed);
    (0..length).map(|_| generator.next_u64() as u8).collect()
}

/// `name`'s whole contents through `read_stream` (`chunk_bytes` a command, `in_flight` at once).
fn read_whole(
    client: &mut flashpipe_engine::EngineClient,
    name: &str,
    chunk_bytes: u64,
    in_flight: usize,
) -> Vec<u8> {
    client.read_to_vec(name, chunk_bytes, in_flight).unwrap()
}

fn write_file(client: &mut flashpipe_engine::EngineClient, name: &str, bytes: &[u8]) {
    client
        .call(Command::Create {
            name: name.to_string(),
        })
        .unwrap();
    let data = flashpipe_device::IoBuf::from_slice(bytes);
    client
        .call(Command::Write {
            name: name.to_string(),
            offset_bytes: 0,
            data,
        })
        .unwrap();
}

fn read(
    client: &mut flashpipe_engine::EngineClient,
    name: &str,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<Vec<u8>, EngineError> {
    match client.call(Command::Read {
        name: name.to_string(),
        offset_bytes,
        length_bytes,
    })? {
        Reply::Data(data) => Ok(data.bytes().to_vec()),
        other => panic!("read answered {other:?}"),
    }
}

#[test]
fn commands_run_in_order_for_one_client() {
    let engine = Engine::start(ram_filesystem(4096), EngineConfig::default());
    let mut client = engine.client(8);
    let bytes = pattern(100_000, 1);
    write_file(&mut client, "a", &bytes);
    assert_eq!(read(&mut client, "a", 0, 100_000).unwrap(), bytes);
    assert_eq!(read(&mut client, "a", 4095, 3).unwrap(), bytes[4095..4098]);
    client
        .call(Command::Rename {
            from: "a".to_string(),
            to: "b".to_string(),
            replace: false,
        })
        .unwrap();
    let Reply::List(files) = client.call(Command::List).unwrap() else {
        panic!()
    };
    assert_eq!(
        files
            .iter()
            .map(|file| file.name.as_str())
            .collect::<Vec<_>>(),
        ["b"]
    );
    client
        .call(Command::Truncate {
            name: "b".to_string(),
            size_bytes: 10,
        })
        .unwrap();
    let Reply::Stat(stat) = client
        .call(Command::Stat {
            name: "b".to_string(),
        })
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(stat.size_bytes, 10);
    client.call(Command::Flush).unwrap();
    let Reply::Check(report) = client.call(Command::Check).unwrap() else {
        panic!()
    };
    assert!(report.is_clean(), "{report:?}");
    client
        .call(Command::Delete {
            name: "b".to_string(),
        })
        .unwrap();
    let Reply::Stats(stats) = client.call(Command::Stats).unwrap() else {
        panic!()
    };
    assert_eq!(stats.file_count, 0);
    engine.shutdown().unwrap();
}

#[test]
fn errors_are_clear_and_change_nothing() {
    let engine = Engine::start(ram_filesystem(4096), read_pool_config(2, 65536));
    let mut client = engine.client(4);
    write_file(&mut client, "f", &pattern(10_000, 2));
    let missing = read(&mut client, "nope", 0, 1).unwrap_err();
    assert!(
        matches!(
            missing,
            EngineError::Namespace(NamespaceError::NotFound { .. })
        ),
        "{missing}"
    );
    let past_end = read(&mut client, "f", 9_999, 2).unwrap_err();
    assert!(
        past_end.to_string().contains("past the end") || past_end.to_string().contains("end"),
        "{past_end}"
    );
    for offset_bytes in [u64::MAX - 10, u64::MAX] {
        let hostile = read(&mut client, "f", offset_bytes, 100).unwrap_err();
        assert!(
            matches!(
                hostile,
                EngineError::FileIo(FileIoError::ReadPastEnd { .. })
            ),
            "a range past the largest offset is past the end: {hostile}"
        );
    }
    let too_large = read(&mut client, "f", 0, 1 << 20).unwrap_err();
    assert!(
        matches!(too_large, EngineError::ReadTooLarge { .. }),
        "{too_large}"
    );
    let bad_name = client
        .call(Command::Create {
            name: "a/b".to_string(),
        })
        .unwrap_err();
    assert!(
        matches!(
            bad_name,
            EngineError::Namespace(NamespaceError::BadName { .. })
        ),
        "{bad_name}"
    );
    // Hold both read buffers: the third read is refused, not queued forever.
    let held: Vec<_> = (0..2)
        .map(|_| {
            match client
                .call(Command::Read {
                    name: "f".to_string(),
                    offset_bytes: 0,
                    length_bytes: 10,
                })
                .unwrap()
            {
                Reply::Data(data) => data,
                other => panic!("{other:?}"),
            }
        })
        .collect();
    let exhausted = read(&mut client, "f", 0, 10).unwrap_err();
    assert!(
        matches!(exhausted, EngineError::ReadBuffersExhausted(_)),
        "{exhausted}"
    );
    drop(held);
    assert_eq!(read(&mut client, "f", 0, 10).unwrap().len(), 10);
    // Outstanding limit.
    let mut small = engine.client(1);
    small.submit(Command::Stats).unwrap();
    let limit = small.submit(Command::Stats).unwrap_err();
    assert!(
        matches!(limit, EngineError::TooManyOutstanding { limit: 1 }),
        "{limit}"
    );
    assert!(small.next_completion().unwrap().1.is_ok());
    let Reply::Stats(stats) = client.call(Command::Stats).unwrap() else {
        panic!()
    };
    assert_eq!(stats.file_count, 1, "failed commands changed nothing");
}

#[test]
fn many_reads_from_many_client_threads_come_back_right() {
    for seed in [1, 2, 3] {
        let engine = Engine::start(sim_parallel_filesystem(seed), EngineConfig::default());
        let mut writer = engine.client(4);
        let files: Vec<(String, Vec<u8>)> = (0..4)
            .map(|index| {
                (
                    format!("file{index}"),
                    pattern(300_000 + index * 7777, seed * 10 + index as u64),
                )
            })
            .collect();
        for (name, bytes) in &files {
            write_file(&mut writer, name, bytes);
        }
        let mut handles = Vec::new();
        for client_index in 0..3u64 {
            let mut client = engine.client(16);
            let files = files.clone();
            handles.push(std::thread::spawn(move || {
                let mut generator = SplitMix64::new(seed * 100 + client_index);
                let mut expected = std::collections::HashMap::new();
                for _ in 0..64 {
                    let (name, bytes) = &files[generator.below(files.len() as u64) as usize];
                    let length = 1 + generator.below(40_000);
                    let offset = generator.below(bytes.len() as u64 - length);
                    if client.outstanding() == 16 {
                        check_completion(&mut client, &mut expected, &files, seed);
                    }
                    let ticket = client
                        .submit(Command::Read {
                            name: name.clone(),
                            offset_bytes: offset,
                            length_bytes: length,
                        })
                        .unwrap();
                    expected.insert(ticket, (name.clone(), offset, length));
                }
                while client.outstanding() > 0 {
                    check_completion(&mut client, &mut expected, &files, seed);
                }
            }));
        }
        for handle in handles {
            handle.join().unwrap();
        }
        engine.shutdown().unwrap();
    }
}

fn check_completion(
    client: &mut flashpipe_engine::EngineClient,
    expected: &mut std::collections::HashMap<u64, (String, u64, u64)>,
    files: &[(String, Vec<u8>)],
    seed: u64,
) {
    let (ticket, result) = client.next_completion().unwrap();
    let (name, offset, length) = expected.remove(&ticket).unwrap();
    let Reply::Data(data) = result.unwrap() else {
        panic!()
    };
    assert!(
        data_is_pooled(&data),
        "read data must sit in an engine pool buffer"
    );
    let bytes = &files.iter().find(|(file, _)| *file == name).unwrap().1;
    assert!(
        data.bytes() == &bytes[offset as usize..(offset + length) as usize],
        "seed {seed}: {name} at {offset}+{length} differs"
    );
}

fn data_is_pooled(data: &flashpipe_engine::ReadData) -> bool {
    data.is_pooled()
}

#[test]
fn streams_round_trip_and_survive_shutdown() {
    let engine = Engine::start(
        sim_parallel_filesystem(7),
        EngineConfig {
            max_read_bytes: 65536,
            ..EngineConfig::default()
        },
    );
    let mut client = engine.client(8);
    let bytes = pattern(1_000_003, 9);
    let mut progress_seen = 0;
    let written = client
        .write_stream("big", &mut &bytes[..], 100_000, 4, &mut |done| {
            progress_seen = done
        })
        .unwrap();
    assert_eq!(
        (written, progress_seen),
        (bytes.len() as u64, bytes.len() as u64)
    );
    // Writing again replaces the contents.
    client
        .write_stream("big", &mut &bytes[..500_000], 65536, 4, &mut |_| {})
        .unwrap();
    let back = read_whole(&mut client, "big", 65536, 8);
    assert!(back == bytes[..500_000]);
    let filesystem = engine.shutdown().unwrap();
    let device = filesystem.unmount().unwrap();
    let mut remounted = Filesystem::mount(device).unwrap();
    let file = remounted.open("big").unwrap();
    assert!(remounted.read(file, 0, 500_000).unwrap()[..] == bytes[..500_000]);
}

#[test]
fn empty_and_tiny_files_read_back() {
    let engine = Engine::start(ram_filesystem(16384), EngineConfig::default());
    let mut client = engine.client(4);
    client
        .call(Command::Create {
            name: "empty".to_string(),
        })
        .unwrap();
    assert!(read(&mut client, "empty", 0, 0).unwrap().is_empty());
    write_file(&mut client, "one", b"x");
    assert_eq!(read(&mut client, "one", 0, 1).unwrap(), b"x");
    let back = read_whole(&mut client, "empty", 4096, 2);
    assert!(back.is_empty());
}

#[test]
fn queued_writes_from_many_clients_batch_and_each_answer_its_own() {
    let engine = Engine::start(sim_parallel_filesystem(11), EngineConfig::default());
    let mut setup = engine.client(4);
    for index in 0..3 {
        setup
            .call(Command::Create {
                name: format!("w{index}"),
            })
            .unwrap();
    }
    let handles: Vec<_> = (0..3u64)
        .map(|index| {
            let mut client = engine.client(32);
            std::thread::spawn(move || {
                let name = format!("w{index}");
                let mut expected = Vec::new();
                let mut tickets = Vec::new();
                for chunk in 0..24u64 {
                    let bytes = pattern(10_000 + chunk as usize * 13, index * 1000 + chunk);
                    let offset = expected.len() as u64;
                    expected.extend_from_slice(&bytes);
                    let data = flashpipe_device::IoBuf::from_slice(&bytes);
                    tickets.push(
                        client
                            .submit(Command::Write {
                                name: name.clone(),
                                offset_bytes: offset,
                                data,
                            })
                            .unwrap(),
                    );
                    if chunk == 12 {
                        let missing = Command::Write {
                            name: "missing".to_string(),
                            offset_bytes: 0,
                            data: flashpipe_device::IoBuf::from_slice(b"x"),
                        };
                        tickets.push(client.submit(missing).unwrap());
                    }
                }
                let mut failures = 0;
                while client.outstanding() > 0 {
                    let (_, result) = client.next_completion().unwrap();
                    failures += usize::from(result.is_err());
                }
                assert_eq!(failures, 1, "only the write to a missing file fails");
                (name, expected)
            })
        })
        .collect();
    for handle in handles {
        let (name, expected) = handle.join().unwrap();
        let mut client = engine.client(8);
        let back = read_whole(&mut client, &name, 65536, 8);
        assert!(back == expected, "{name} differs after batched writes");
    }
    engine.shutdown().unwrap();
}

fn read_files(
    client: &mut flashpipe_engine::EngineClient,
    names: &[&str],
) -> Result<Vec<Result<flashpipe_engine::ReadData, EngineError>>, EngineError> {
    match client.call(Command::ReadFiles {
        names: names.iter().map(|name| name.to_string()).collect(),
    })? {
        Reply::Files(files) => Ok(files),
        other => panic!("read files answered {other:?}"),
    }
}

/// Writes `files` one after another, then checks that one batched read of `names` gives,
/// per entry, exactly what a single whole-file read gives (data, or an error of the same
/// kind), on a store of `block_size_bytes` blocks.
fn check_batch_equals_single_reads(
    filesystem: Filesystem,
    files: &[(&str, usize)],
    names: &[&str],
    prepare: &dyn Fn(&mut flashpipe_engine::EngineClient),
) {
    let engine = Engine::start(filesystem, EngineConfig::default());
    let mut client = engine.client(8);
    for (index, (name, size_bytes)) in files.iter().enumerate() {
        write_file(&mut client, name, &pattern(*size_bytes, index as u64 + 7));
    }
    prepare(&mut client);
    let batch = read_files(&mut client, names).unwrap();
    assert_eq!(batch.len(), names.len());
    for (name, entry) in names.iter().zip(batch) {
        let single = match client.call(Command::Stat {
            name: name.to_string(),
        }) {
            Ok(Reply::Stat(stat)) => read(&mut client, name, 0, stat.size_bytes),
            Ok(other) => panic!("stat answered {other:?}"),
            Err(error) => Err(error),
        };
        match (entry, single) {
            (Ok(data), Ok(bytes)) => {
                assert_eq!(data.bytes(), &bytes[..], "file {name}");
                assert!(
                    data.is_empty() || data.is_pooled(),
                    "file {name} was copied"
                );
            }
            (Err(batch_error), Err(single_error)) => assert_eq!(
                std::mem::discriminant(&batch_error),
                std::mem::discriminant(&single_error),
                "file {name}: {batch_error} vs {single_error}"
            ),
            (entry, single) => panic!("file {name}: batch {entry:?}, single {single:?}"),
        }
    }
    engine.shutdown().unwrap();
}

#[test]
fn a_batch_of_files_reads_what_single_reads_read() {
    let files: &[(&str, usize)] = &[
        ("empty", 0),
        ("one", 1),
        ("two-k", 2048),
        ("block", 4096),
        ("odd", 5000),
        ("big", 70_000),
        ("tail", 2048),
    ];
    let everything = [
        "two-k", "missing", "empty", "big", "one", "odd", "block", "tail",
    ];
    let no_change = |_: &mut flashpipe_engine::EngineClient| {};
    let fragment_and_hole = |client: &mut flashpipe_engine::EngineClient| {
        let tail = flashpipe_device::IoBuf::from_slice(&pattern(9000, 99));
        client
            .call(Command::Write {
                name: "two-k".to_string(),
                offset_bytes: 2048,
                data: tail,
            })
            .unwrap();
        client
            .call(Command::Truncate {
                name: "one".to_string(),
                size_bytes: 40_000,
            })
            .unwrap();
    };
    check_batch_equals_single_reads(ram_filesystem(4096), files, &everything, &no_change);
    check_batch_equals_single_reads(ram_filesystem(16384), files, &everything, &no_change);
    check_batch_equals_single_reads(ram_filesystem(4096), files, &everything, &fragment_and_hole);
    for seed in 1..=3 {
        check_batch_equals_single_reads(
            sim_parallel_filesystem(seed),
            files,
            &everything,
            &fragment_and_hole,
        );
    }
    check_batch_equals_single_reads(ram_filesystem(4096), files, &[], &no_change);
    check_batch_equals_single_reads(ram_filesystem(4096), files, &["two-k", "two-k"], &no_change);
}

#[test]
fn adjacent_small_files_share_one_device_request() {
    let engine = Engine::start(ram_filesystem(4096), EngineConfig::default());
    let mut client = engine.client(8);
    let names: Vec<String> = (0..64).map(|index| format!("small-{index:03}")).collect();
    for (index, name) in names.iter().enumerate() {
        write_file(&mut client, name, &pattern(2048, index as u64));
    }
    client.call(Command::Flush).unwrap();
    let mut shuffled: Vec<&str> = names.iter().map(String::as_str).collect();
    shuffled.reverse();
    let batch = read_files(&mut client, &shuffled).unwrap();
    let expected = |_, name: &str| pattern(2048, name["small-".len()..].parse().unwrap());
    check_packed(
        &shuffled,
        &batch,
        expected,
        8,
        "adjacent files (not coalesced)",
    );
    drop(batch);
    engine.shutdown().unwrap();
}

#[test]
fn batched_reads_return_their_buffers_and_keep_their_limits() {
    let config = read_pool_config(2, 16384);
    let engine = Engine::start(ram_filesystem(4096), config);
    let mut client = engine.client(8);
    let names: Vec<String> = (0..8).map(|index| format!("f{index}")).collect();
    for name in &names {
        write_file(&mut client, name, &pattern(8192, 1));
    }
    write_file(&mut client, "huge", &pattern(20_000, 2));
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    for _ in 0..20 {
        let batch = read_files(&mut client, &all[..4]).unwrap();
        assert!(batch.iter().all(Result::is_ok), "{batch:?}");
    }
    let too_many: Vec<&str> = vec!["f0"; flashpipe_engine::command::READ_FILES_MAX_COUNT + 1];
    assert!(matches!(
        read_files(&mut client, &too_many),
        Err(EngineError::TooManyFiles { count: 257, .. })
    ));
    let too_large: Vec<&str> = all.iter().copied().cycle().take(9).collect();
    assert!(matches!(
        read_files(&mut client, &too_large),
        Err(EngineError::ReadFilesTooLarge {
            total_bytes: 73_728,
            limit_bytes: 65_536
        })
    ));
    let batch = read_files(&mut client, &["huge", "f1"]).unwrap();
    assert!(matches!(batch[0], Err(EngineError::ReadTooLarge { .. })));
    assert_eq!(batch[1].as_ref().unwrap().bytes(), &pattern(8192, 1)[..]);
    engine.shutdown().unwrap();
}

/// Overwrites FS block `fs_block` of a 4096-byte-block file system with random bytes,
/// straight on its device (taken apart from the file system's core and put back).
fn damage_fs_block(filesystem: Filesystem, fs_block: u64, seed: u64) -> Filesystem {
    let (core, mut device) = filesystem.into_parts();
    let device_blocks_per_fs_block = 4096 / u64::from(device.info().block_size_bytes);
    flashpipe_device::run_one(
        &mut *device,
        flashpipe_device::Operation::Write {
            first_block: fs_block * device_blocks_per_fs_block,
            buffer: flashpipe_device::IoBuf::from_slice(&pattern(4096, seed)),
        },
    )
    .unwrap();
    Filesystem::from_parts(core, device)
}

fn assert_checksum_error(error: &EngineError, name: &str, offset: u64, block: u64) {
    match error {
        EngineError::FileIo(FileIoError::DataChecksumMismatch {
            file_name,
            offset_bytes,
            fs_block,
            ..
        }) => assert_eq!(
            (file_name.as_str(), *offset_bytes, *fs_block),
            (name, offset, block)
        ),
        other => panic!("expected a data checksum mismatch, got {other:?}"),
    }
    assert!(error.to_string().contains(&format!("{name:?}")), "{error}");
}

#[test]
fn a_damaged_data_block_fails_its_read_and_only_its_own_file_of_a_batch() {
    let mut filesystem = ram_filesystem(4096);
    let names = ["before", "damaged", "after", "scattered"];
    for (index, name) in names.iter().enumerate() {
        let file = filesystem.create(name).unwrap();
        filesystem
            .write(file, 0, &pattern(3 * 4096, index as u64))
            .unwrap();
    }
    let scattered = filesystem.open("scattered").unwrap();
    filesystem.truncate(scattered, 6 * 4096).unwrap();
    filesystem
        .write(scattered, 5 * 4096, &pattern(4096, 50))
        .unwrap();
    filesystem.flush().unwrap();
    let block_of = |filesystem: &Filesystem, name: &str, offset: u64| {
        let file = filesystem.open(name).unwrap();
        filesystem.block_map(file, offset, 1).unwrap()[0]
            .first_fs_block
            .unwrap()
    };
    let damaged_block = block_of(&filesystem, "damaged", 4096);
    let scattered_block = block_of(&filesystem, "scattered", 5 * 4096);
    let filesystem = damage_fs_block(filesystem, damaged_block, 77);
    let filesystem = damage_fs_block(filesystem, scattered_block, 78);

    let engine = Engine::start(filesystem, EngineConfig::default());
    let mut client = engine.client(8);
    let error = read(&mut client, "damaged", 100, 3 * 4096 - 100).unwrap_err();
    assert_checksum_error(&error, "damaged", 4096, damaged_block);
    let error = read(&mut client, "damaged", 4096 + 10, 10).unwrap_err();
    assert_checksum_error(&error, "damaged", 4096, damaged_block);
    assert_eq!(
        read(&mut client, "damaged", 0, 4096).unwrap(),
        pattern(3 * 4096, 1)[..4096]
    );
    assert_eq!(
        read(&mut client, "damaged", 2 * 4096, 4096).unwrap(),
        pattern(3 * 4096, 1)[2 * 4096..]
    );

    let batch = read_files(&mut client, &names).unwrap();
    let before = batch[0].as_ref().unwrap();
    let after = batch[2].as_ref().unwrap();
    assert_eq!(before.bytes(), &pattern(3 * 4096, 0)[..]);
    assert_eq!(after.bytes(), &pattern(3 * 4096, 2)[..]);
    assert_eq!(
        before.pool_slot(),
        after.pool_slot(),
        "the damaged file sat in the same coalesced request as its neighbours"
    );
    assert_checksum_error(
        batch[1].as_ref().unwrap_err(),
        "damaged",
        4096,
        damaged_block,
    );
    assert_checksum_error(
        batch[3].as_ref().unwrap_err(),
        "scattered",
        5 * 4096,
        scattered_block,
    );
    drop(batch);
    let report = match client.call(Command::Check).unwrap() {
        Reply::Check(report) => report,
        other => panic!("check answered {other:?}"),
    };
    assert!(report.is_clean(), "the metadata is intact: {report}");
    engine.shutdown().unwrap();
}
