//! Every command through a server on the copying path and by reference, several client
//! threads at once with answers out of order, and the typed errors of the engine.

mod common;

use common::{connect, listed_names, pattern, start_server};
use flashpipe_client::{
    CancelOutcome, ClientError, CopyMethod, ErrorCode, Reply, Request, Response, TransportExt,
};

fn every_command(map_memory: bool) {
    let test = start_server(&format!("serve-every-command-{map_memory}"), |_| {});
    let mut client = connect(&test.socket, map_memory);
    assert_eq!(client.is_mapped(), map_memory);
    let contents = pattern(300_000, 7);
    client.create("a").expect("create");
    client.write("a", 0, &contents).expect("write");
    let view = client.read("a", 0, 300_000).expect("read");
    assert_eq!(view.is_shared(), map_memory);
    assert_eq!(&*view, &contents[..]);
    drop(view);
    assert_eq!(
        &*client.read("a", 4095, 10).expect("read unaligned"),
        &contents[4095..4105]
    );
    assert_eq!(client.stat("a").expect("stat").size_bytes, 300_000);

    client.create("small").expect("create small");
    client.write("small", 0, b"hello").expect("write small");
    let names = vec!["small".to_string(), "missing".to_string(), "a".to_string()];
    let files = client.read_files(names.clone()).expect("read files");
    assert_eq!(&files[0].as_ref().expect("small read")[..], b"hello");
    assert_eq!(
        files[1].as_ref().expect_err("missing").code,
        ErrorCode::NotFound
    );
    assert_eq!(&files[2].as_ref().expect("a read")[..], &contents[..]);

    client.truncate("a", 1000).expect("truncate");
    assert_eq!(client.stat("a").expect("stat").size_bytes, 1000);
    client.rename("small", "small2").expect("rename");
    client.create("target").expect("create target");
    client
        .rename_replacing("small2", "target")
        .expect("rename replacing");
    assert_eq!(
        &*client.read("target", 0, 5).expect("read target"),
        b"hello"
    );
    let report = client.copy("a", "a-copy", CopyMethod::Bytes).expect("copy");
    assert_eq!(report.bytes_by_bytes, 1000);
    assert_eq!(
        &*client.read("a-copy", 0, 1000).expect("read copy"),
        &contents[..1000]
    );
    let refused = client
        .copy("a", "a-ref", CopyMethod::ReferenceOrFail)
        .expect_err("RAM disks do not remap");
    assert_eq!(
        refused.remote().expect("remote").code,
        ErrorCode::NotByReference
    );
    let names = listed_names(&mut client);
    assert_eq!(names.len(), 3, "{names:?}");
    client.delete("a-copy").expect("delete");
    assert_eq!(client.stats().expect("stats").file_count, 2);
    client.flush().expect("flush");
    let check = client.check().expect("check");
    assert!(check.clean, "{}", check.report_text);
    assert_eq!(check.file_count, 2);
    assert_eq!(
        client.cancel(999).expect("cancel"),
        CancelOutcome::NotInFlight
    );

    let missing = client.stat("nope").expect_err("missing");
    assert_eq!(missing.remote().expect("remote").code, ErrorCode::NotFound);
    assert!(missing.to_string().contains("nope"), "{missing}");
    let exists = client.create("a").expect_err("exists");
    assert_eq!(exists.remote().expect("remote").code, ErrorCode::Exists);
    let past_end = client.read("a", 900, 200).expect_err("past end");
    assert_eq!(
        past_end.remote().expect("remote").code,
        ErrorCode::ReadPastEnd
    );
    assert_eq!(past_end.limit(), Some(1000));
    let too_large = client.read("a", 0, 64 << 20).expect_err("too large");
    assert_eq!(
        too_large.remote().expect("remote").code,
        ErrorCode::ReadTooLarge
    );
    drop(files);
    client.release_now().expect("release");
    client.stat("a").expect("a round trip after the release");
    assert_eq!(
        test.read_pool.free_count(),
        test.read_pool.buffer_count() as usize
    );
    drop(client);
    test.server.stop_handle().stop();
    test.server.run_until_stopped().expect("stopped");
}

#[test]
fn every_command_on_the_copying_path() {
    every_command(false);
}

#[test]
fn every_command_by_reference() {
    every_command(true);
}

#[test]
fn pipelined_requests_are_answered_by_id_in_any_order() {
    let test = start_server("serve-pipelined", |config| {
        config.spin = flashpipe_base::WaitPolicy::spin_us(100)
    });
    let mut client = connect(&test.socket, false);
    for index in 0..8u64 {
        let name = format!("f{index}");
        client.create(&name).expect("create");
        client
            .write(&name, 0, &pattern(20_000 + index as usize * 5000, index))
            .expect("write");
    }
    let mut expected = std::collections::HashMap::new();
    for index in 0..8u64 {
        let request_id = client
            .submit(Request::Read {
                name: format!("f{index}"),
                offset_bytes: 0,
                length_bytes: 20_000 + index * 5000,
            })
            .expect("submit");
        expected.insert(request_id, index);
        let stat_id = client
            .submit(Request::Stat {
                name: format!("f{index}"),
            })
            .expect("submit stat");
        expected.insert(stat_id, 100 + index);
    }
    while !expected.is_empty() {
        let (request_id, answer) = client.wait().expect("answer");
        let index = expected.remove(&request_id).expect("an id in flight");
        match answer.expect("success") {
            Response::Reply(Reply::Data(view)) => {
                assert_eq!(&*view, &pattern(20_000 + index as usize * 5000, index)[..])
            }
            Response::Reply(Reply::Stat(stat)) => {
                assert_eq!(stat.name, format!("f{}", index - 100))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(matches!(client.wait(), Err(ClientError::NothingInFlight)));
}

#[test]
fn several_client_threads_at_once() {
    let test = start_server("serve-threads", |_| {});
    let threads: Vec<_> = (0..6u64)
        .map(|thread_index| {
            let socket = test.socket.clone();
            std::thread::spawn(move || {
                let mut client = connect(&socket, thread_index % 2 == 0);
                for round in 0..10u64 {
                    let name = format!("t{thread_index}-{round}");
                    let contents =
                        pattern(8192 + round as usize * 1000, thread_index * 100 + round);
                    client.create(&name).expect("create");
                    client.write(&name, 0, &contents).expect("write");
                    let view = client.read(&name, 0, contents.len() as u64).expect("read");
                    assert_eq!(&*view, &contents[..]);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("client thread");
    }
    let mut client = connect(&test.socket, false);
    assert_eq!(client.list().expect("list").len(), 60);
    assert!(test.server.counters().clients_total >= 7);
}
