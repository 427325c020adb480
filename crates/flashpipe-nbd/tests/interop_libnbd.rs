//! flashpipe's NBD server against libnbd's tools (`nbdinfo`, `nbdcopy`), which no one
//! here wrote: export listing, capabilities, allocation maps of written and trimmed
//! ranges, and copies in both directions over TCP and a Unix socket with the bytes
//! compared. Each test skips, with a printed message, when its tool is missing.

mod common;

use common::{pattern_bytes, run_ok, run_tool, tool_or_skip, write_file, RawClient, TestServer};
use flashpipe_nbd::server::{Export, ExportDeviceSpec, ServerLimits};
use flashpipe_nbd::wire::{CMD_FLAG_FUA, CMD_FLAG_NO_HOLE, CMD_TRIM, CMD_WRITE, CMD_WRITE_ZEROES};

const MIB: u64 = 1024 * 1024;

#[test]
fn nbdinfo_lists_every_export_with_its_description() {
    let Some(server) = TestServer::ram_if_tools(
        "nbdinfo_lists_every_export",
        &["nbdinfo"],
        &[("first", 4 * MIB), ("second", 2 * MIB)],
    ) else {
        return;
    };
    let listing = run_ok("nbdinfo", &["--list", &server.tcp_uri("")]);
    assert!(listing.contains("export=\"first\""), "{listing}");
    assert!(listing.contains("export=\"second\""), "{listing}");
    assert!(listing.contains("flashpipe RAM disk, 4 MiB"), "{listing}");
    assert!(listing.contains("export-size: 2097152"), "{listing}");
    assert!(listing.contains("base:allocation"), "{listing}");
    let single = run_ok("nbdinfo", &["--json", &server.unix_uri("second")]);
    assert!(single.contains("\"export-size\": 2097152"), "{single}");
    assert!(single.contains("\"block_size_minimum\": 512"), "{single}");
    assert!(
        single.contains("\"block_size_maximum\": 33554432"),
        "{single}"
    );
}

#[test]
fn nbdinfo_can_and_is_report_the_advertised_features() {
    let Some(server) =
        TestServer::ram_if_tools("nbdinfo_can_and_is", &["nbdinfo"], &[("disk", 4 * MIB)])
    else {
        return;
    };
    let uri = server.tcp_uri("disk");
    for feature in [
        "connect",
        "flush",
        "trim",
        "zero",
        "fast-zero",
        "fua",
        "multi-conn",
        "structured-reply",
        "df",
        "cache",
    ] {
        let output = run_tool("nbdinfo", &["--can", feature, &uri]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "nbdinfo --can {feature}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    for (property, expected) in [("read-only", Some(2)), ("rotational", Some(2))] {
        let output = run_tool("nbdinfo", &["--is", property, &uri]);
        assert_eq!(output.status.code(), expected, "nbdinfo --is {property}");
    }
    let read_only = TestServer::with_exports(
        vec![Export {
            read_only: true,
            ..Export::open("ro", &ExportDeviceSpec::Ram { size_bytes: MIB }).unwrap()
        }],
        ServerLimits::default(),
    );
    let output = run_tool("nbdinfo", &["--is", "read-only", &read_only.tcp_uri("ro")]);
    assert_eq!(output.status.code(), Some(0), "a read-only export says so");
}

/// Parses `nbdinfo --map` lines into (offset, length, type-number).
fn parse_map(text: &str) -> Vec<(u64, u64, u32)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            Some((
                fields.next()?.parse().ok()?,
                fields.next()?.parse().ok()?,
                fields.next()?.parse().ok()?,
            ))
        })
        .collect()
}

#[test]
fn nbdinfo_map_shows_holes_where_never_written_and_where_trimmed() {
    let Some(server) = TestServer::ram_if_tools("nbdinfo_map", &["nbdinfo"], &[("disk", 16 * MIB)])
    else {
        return;
    };
    let mut client = RawClient::connect(server.connect_tcp(), "disk", true);
    let data = pattern_bytes(1, MIB as usize);
    assert_eq!(client.request(CMD_WRITE, 0, MIB, MIB as u32, &data).0, 0);
    assert_eq!(
        client
            .request(
                CMD_WRITE,
                CMD_FLAG_FUA,
                4 * MIB,
                2 * MIB as u32,
                &pattern_bytes(2, 2 * MIB as usize)
            )
            .0,
        0
    );
    assert_eq!(
        client
            .request(CMD_TRIM, 0, 4 * MIB + 512 * 1024, 512 * 1024, &[])
            .0,
        0
    );
    assert_eq!(
        client
            .request(CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 8 * MIB, MIB as u32, &[])
            .0,
        0
    );
    assert_eq!(
        client
            .request(CMD_WRITE_ZEROES, 0, 8 * MIB, 512 * 1024, &[])
            .0,
        0
    );
    let map = parse_map(&run_ok("nbdinfo", &["--map", &server.tcp_uri("disk")]));
    let hole_zero = 3;
    let expected = vec![
        (0, MIB, hole_zero),
        (MIB, MIB, 0),
        (2 * MIB, 2 * MIB, hole_zero),
        (4 * MIB, 512 * 1024, 0),
        (4 * MIB + 512 * 1024, 512 * 1024, hole_zero),
        (5 * MIB, MIB, 0),
        (6 * MIB, 2 * MIB, hole_zero),
        (8 * MIB, 512 * 1024, hole_zero),
        (8 * MIB + 512 * 1024, 512 * 1024, 0),
        (9 * MIB, 7 * MIB, hole_zero),
    ];
    let merged = merge_runs(&map);
    assert_eq!(merged, merge_runs(&expected), "map:\n{map:?}");
    let unix_map = parse_map(&run_ok("nbdinfo", &["--map", &server.unix_uri("disk")]));
    assert_eq!(merge_runs(&unix_map), merged);
}

fn merge_runs(runs: &[(u64, u64, u32)]) -> Vec<(u64, u64, u32)> {
    let mut merged: Vec<(u64, u64, u32)> = Vec::new();
    for &(offset, length, kind) in runs {
        match merged.last_mut() {
            Some(last) if last.2 == kind && last.0 + last.1 == offset => last.1 += length,
            _ => merged.push((offset, length, kind)),
        }
    }
    merged
}

#[test]
fn nbdcopy_copies_in_both_directions_over_tcp_and_unix_sockets() {
    let Some(server) = TestServer::ram_if_tools(
        "nbdcopy_both_directions",
        &["nbdcopy"],
        &[("disk", 24 * MIB)],
    ) else {
        return;
    };
    let source = server.scratch("source.img");
    let mut bytes = pattern_bytes(7, 24 * MIB as usize);
    bytes[3 * MIB as usize..5 * MIB as usize].fill(0);
    write_file(&source, &bytes);
    for (upload, download) in [
        (server.tcp_uri("disk"), server.unix_uri("disk")),
        (server.unix_uri("disk"), server.tcp_uri("disk")),
    ] {
        let copy = server.scratch("copy.img");
        let _ = std::fs::remove_file(&copy);
        run_ok("nbdcopy", &["--flush", source.to_str().unwrap(), &upload]);
        run_ok(
            "nbdcopy",
            &["--connections=4", &download, copy.to_str().unwrap()],
        );
        let copied = std::fs::read(&copy).unwrap();
        assert_eq!(
            crc32c::crc32c(&copied),
            crc32c::crc32c(&bytes),
            "{upload} -> {download}"
        );
        assert!(copied == bytes);
    }
}

#[test]
fn a_file_export_serves_its_existing_contents_and_keeps_what_is_written() {
    if !tool_or_skip("file_export", &["nbdcopy", "nbdinfo"]) {
        return;
    }
    let folder = tempfile::tempdir().unwrap();
    let image = folder.path().join("disk.img");
    let original = pattern_bytes(21, 8 * MIB as usize);
    write_file(&image, &original);
    let export = Export::open(
        "file",
        &ExportDeviceSpec::File {
            path: image.clone(),
        },
    )
    .unwrap();
    let mut server = TestServer::with_exports(vec![export], ServerLimits::default());
    let map = parse_map(&run_ok("nbdinfo", &["--map", &server.tcp_uri("file")]));
    assert_eq!(
        merge_runs(&map),
        vec![(0, 8 * MIB, 0)],
        "unknown contents are data"
    );
    let copy = server.scratch("copy.img");
    run_ok(
        "nbdcopy",
        &[&server.unix_uri("file"), copy.to_str().unwrap()],
    );
    assert!(std::fs::read(&copy).unwrap() == original);
    let replacement = pattern_bytes(22, 8 * MIB as usize);
    let source = server.scratch("replacement.img");
    write_file(&source, &replacement);
    run_ok(
        "nbdcopy",
        &["--flush", source.to_str().unwrap(), &server.tcp_uri("file")],
    );
    server.server.take().unwrap().shutdown();
    assert!(
        std::fs::read(&image).unwrap() == replacement,
        "the file holds what was written"
    );
}
