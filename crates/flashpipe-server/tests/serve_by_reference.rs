//! Data by reference: the same bytes as the copying path, read handles held until the
//! views are dropped (and reclaimed when a client dies), write grants checked slot by
//! slot, and the handle and slot limits with their typed errors.

mod common;

use std::io::Write;

use common::{connect, pattern, raw_hello, remote_code, start_server, wait_until};
use flashpipe_api::Command;
use flashpipe_client::{ErrorCode, Reply, Response, TransportExt};
use flashpipe_device::SplitMix64;
use flashpipe_protocol::{encode_frame, Frame, PROTOCOL_VERSION};
use flashpipe_protocol::{Request, WritePayload};

#[test]
fn both_paths_return_the_same_bytes() {
    let seed = 0x5eed_0014;
    let test = start_server("serve-same-bytes", |_| {});
    let mut copying = connect(&test.socket, false);
    let mut mapped = connect(&test.socket, true);
    assert!(mapped.is_mapped() && !copying.is_mapped());
    let mut rng = SplitMix64::new(seed);
    for index in 0..6u64 {
        let name = format!("f{index}");
        let size = 1 + (rng.next_u64() % 600_000) as usize;
        let contents = pattern(size, seed + index);
        let writer = if index % 2 == 0 {
            &mut copying
        } else {
            &mut mapped
        };
        writer.create(&name).expect("create");
        writer.write(&name, 0, &contents).expect("write");
        for _ in 0..5 {
            let offset = rng.next_u64() % size as u64;
            let length = 1 + rng.next_u64() % (size as u64 - offset).min(1 << 20);
            let by_copy = copying.read(&name, offset, length).expect("copying read");
            let by_reference = mapped
                .read(&name, offset, length)
                .expect("read by reference");
            assert!(by_reference.is_shared() && !by_copy.is_shared());
            assert_eq!(
                &*by_copy, &*by_reference,
                "seed {seed:#x} file {name} at {offset}+{length}"
            );
            assert_eq!(
                &*by_copy,
                &contents[offset as usize..(offset + length) as usize]
            );
        }
    }
    let names: Vec<String> = (0..6).map(|index| format!("f{index}")).collect();
    let small: Vec<String> = (0..20).map(|index| format!("s{index}")).collect();
    for (index, name) in small.iter().enumerate() {
        mapped.create(name).expect("create small");
        mapped
            .write(name, 0, &pattern(100 + index * 37, index as u64))
            .expect("write small");
    }
    let by_copy = copying.read_files(small.clone()).expect("copying batch");
    let by_reference = mapped
        .read_files(small.clone())
        .expect("batch by reference");
    for ((copy, reference), index) in by_copy.iter().zip(&by_reference).zip(0..) {
        let reference = reference.as_ref().expect("file read");
        assert!(reference.is_shared());
        assert_eq!(&copy.as_ref().expect("file read")[..], &reference[..]);
        assert_eq!(&reference[..], &pattern(100 + index * 37, index as u64)[..]);
    }
    drop((by_copy, by_reference));
    let listed = mapped.list().expect("list").len();
    assert_eq!(listed, names.len() + small.len());
    mapped.release_now().expect("release");
    mapped.stat("f0").expect("round trip");
    assert_eq!(
        test.read_pool.free_count(),
        test.read_pool.buffer_count() as usize
    );
}

#[test]
fn views_hold_pool_buffers_until_dropped_and_the_handle_limit_holds() {
    let test = start_server("serve-read-handles", |config| {
        config.max_read_handles_per_client = 4
    });
    let mut client = connect(&test.socket, true);
    client.create("f").expect("create");
    client.write("f", 0, &pattern(64 << 10, 1)).expect("write");
    let full = test.read_pool.buffer_count() as usize;
    let views: Vec<_> = (0..4)
        .map(|index| client.read("f", index * 4096, 4096).expect("read"))
        .collect();
    assert_eq!(test.read_pool.free_count(), full - 4);
    let refused = client.read("f", 0, 10).expect_err("a fifth handle");
    assert_eq!(remote_code(&refused), ErrorCode::TooManyReadHandles);
    assert_eq!(refused.limit(), Some(4));
    for (index, view) in views.iter().enumerate() {
        assert_eq!(
            &view[..],
            &pattern(64 << 10, 1)[index * 4096..(index + 1) * 4096]
        );
    }
    drop(views);
    let again = client
        .read("f", 0, 10)
        .expect("handles released with this request");
    assert_eq!(&again[..], &pattern(10, 1)[..]);
    drop(again);
    client.release_now().expect("release");
    client.stat("f").expect("round trip");
    assert_eq!(test.read_pool.free_count(), full);
}

#[test]
fn a_client_that_dies_holding_views_and_grants_leaves_nothing_held() {
    let test = start_server("serve-dying-mapped", |_| {});
    let full = test.read_pool.buffer_count() as usize;
    let mut writer = connect(&test.socket, true);
    writer.create("f").expect("create");
    writer.write("f", 0, &pattern(200_000, 2)).expect("write");
    for _ in 0..3 {
        let mut dying = connect(&test.socket, true);
        let views: Vec<_> = (0..3)
            .map(|_| dying.read("f", 0, 100_000).expect("read"))
            .collect();
        let mut buffer = dying.write_buffer().expect("granted");
        assert!(buffer.is_shared());
        buffer[..5].copy_from_slice(b"never");
        let _second = dying.write_buffer().expect("granted again");
        assert!(test.read_pool.free_count() <= full - 3);
        std::mem::forget(views);
        drop(dying);
    }
    wait_until(|| test.server.counters().clients_now == 1);
    assert_eq!(
        test.read_pool.free_count(),
        full,
        "every buffer a dead client held is back"
    );
    assert_eq!(test.server.counters().bytes_in_flight, 0);
    assert_eq!(
        &writer.read("f", 0, 5).expect("read")[..],
        &pattern(5, 2)[..],
        "no grant was written"
    );
}

#[test]
fn writes_by_grant_land_and_writes_outside_grants_are_refused() {
    let test = start_server("serve-grants", |config| {
        config.write_slots_per_client = 2;
        config.max_write_bytes = 64 << 10;
    });
    let mut client = connect(&test.socket, true);
    client.create("f").expect("create");
    let mut buffer = client.write_buffer().expect("grant");
    let slot = buffer.slot().expect("a granted slot");
    assert_eq!(buffer.len(), 64 << 10);
    buffer[..5000].copy_from_slice(&pattern(5000, 3));
    let request_id = client.submit_write("f", 0, buffer, 5000).expect("submit");
    assert!(matches!(
        client.wait_for(request_id),
        Ok(Response::Reply(Reply::Written { buffer: 5000 }))
    ));
    assert_eq!(
        &client.read("f", 0, 5000).expect("read")[..],
        &pattern(5000, 3)[..]
    );
    let reused = client
        .write_buffer()
        .expect("the written slot stays granted");
    assert_eq!(reused.slot(), Some(slot));
    let other = client.write_buffer().expect("second slot");
    let exhausted = client.call(Request::GrantWrite).expect_err("no third slot");
    assert_eq!(remote_code(&exhausted), ErrorCode::NoWriteSlots);
    assert_eq!(exhausted.limit(), Some(2));
    let fallback = client
        .write_buffer()
        .expect("an inline buffer when every slot is out");
    assert!(!fallback.is_shared());
    drop((reused, other, fallback));

    for (slot, length) in [(7u32, 10u32), (u32::MAX, 10), (slot, (64 << 10) + 1)] {
        let refused = client
            .call(Request::Command(Command::Write {
                name: "f".into(),
                offset_bytes: 0,
                data: WritePayload::Granted {
                    slot,
                    length_bytes: length,
                },
            }))
            .expect_err("outside the grants");
        let code = remote_code(&refused);
        assert!(
            matches!(code, ErrorCode::NotGranted | ErrorCode::WriteTooLarge),
            "slot {slot} length {length}: {refused}"
        );
    }
    let mut copying = connect(&test.socket, false);
    let refused = copying
        .call(Request::Command(Command::Write {
            name: "f".into(),
            offset_bytes: 0,
            data: WritePayload::Granted {
                slot: 0,
                length_bytes: 10,
            },
        }))
        .expect_err("a copying client has no grants");
    assert_eq!(remote_code(&refused), ErrorCode::NotMapped);
    let refused = copying.call(Request::GrantWrite).expect_err("no pool");
    assert_eq!(remote_code(&refused), ErrorCode::NotMapped);
    assert_eq!(
        &copying.read("f", 0, 5000).expect("read")[..],
        &pattern(5000, 3)[..],
        "refused writes changed nothing"
    );
    client
        .write("f", 0, &pattern(300_000, 4))
        .expect("a long write through the grants");
    assert_eq!(
        &copying.read("f", 0, 300_000).expect("read")[..],
        &pattern(300_000, 4)[..]
    );
}

#[test]
fn fuzzed_grants_and_releases_from_a_raw_client_never_hurt_others() {
    let seed = 0xf022_0014;
    let test = start_server("serve-fuzzed-grants", |_| {});
    let mut good = connect(&test.socket, true);
    good.create("f").expect("create");
    good.write("f", 0, &pattern(10_000, 5)).expect("write");
    let mut rng = SplitMix64::new(seed);
    let mut raw = raw_hello(
        &test.socket,
        PROTOCOL_VERSION..=PROTOCOL_VERSION,
        true,
        "fuzz",
    );
    for request_id in 1..200u64 {
        let frame = match rng.next_u64() % 3 {
            0 => Frame::Request {
                request_id,
                request: Request::Command(Command::Write {
                    name: "fuzzed".into(),
                    offset_bytes: rng.next_u64() % 20_000,
                    data: WritePayload::Granted {
                        slot: (rng.next_u64() % 40) as u32,
                        length_bytes: (rng.next_u64() % (2 << 20)) as u32,
                    },
                }),
            },
            1 => Frame::Release {
                handles: (0..rng.next_u64() % 8)
                    .map(|_| rng.next_u64() % 50)
                    .collect(),
            },
            _ => Frame::Request {
                request_id,
                request: Request::GrantWrite,
            },
        };
        if raw.write_all(&encode_frame(&frame)).is_err() {
            break;
        }
    }
    drop(raw);
    assert_eq!(
        &good.read("f", 0, 10_000).expect("read")[..10],
        &pattern(10, 5)[..],
        "seed {seed:#x}"
    );
    wait_until(|| test.server.counters().clients_now == 1);
    assert_eq!(test.server.counters().bytes_in_flight, 0);
}
