//! A server's defences for the many, through the real binary: silent connections (and
//! ones trickling their hello) are closed at the handshake time limit and make room for a newcomer, one user holds at
//! most its share of the connections, clients name no host path in kernel options, a
//! device image shrunk or deleted under the server stops its writes with a clear error,
//! temporaries a killed command left are removed (and named) at the next read-write
//! open, a `get` waits for read buffers other clients hold, and bad values of the new
//! serve options are refused before serving.

mod serve_support;

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use flashpipe_client::{Client, ConnectOptions, TransportExt};
use serve_support::*;

/// Stops the server, which must stop cleanly and have logged a connection closed at the
/// handshake time limit.
fn stops_having_logged_the_time_limit(server: ServerProcess) {
    let exit = server.stop_cleanly();
    assert!(
        exit.stderr.contains("handshake time limit"),
        "the server logs why it closed the connection: {}",
        exit.stderr
    );
}

/// A server over a new store whose handshake time limit is `limit_ms`.
fn server_with_handshake_limit(name: &str, limit_ms: &str) -> (TestFolder, PathBuf, ServerProcess) {
    let folder = TestFolder::new(name);
    let store = file_store(&folder, "64MiB");
    let server = ServerProcess::start(&store, &["--handshake-timeout-ms", limit_ms]);
    (folder, store, server)
}

/// Opens a connection that never sends a byte.
fn silent_connection(server: &ServerProcess) -> UnixStream {
    UnixStream::connect(&server.socket).expect("the server accepts a connection")
}

#[test]
fn a_silent_connection_is_closed_at_the_handshake_time_limit() {
    let (_folder, _store, server) =
        server_with_handshake_limit("security-handshake-timeout", "300");
    let mut silent = silent_connection(&server);
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = Vec::new();
    let closed = silent.read_to_end(&mut answer);
    assert!(
        closed.is_ok() && !answer.is_empty(),
        "the server answers a silent connection with an error frame and closes it (the read \
         would otherwise time out): {closed:?}"
    );
    stops_having_logged_the_time_limit(server);
}

#[test]
fn a_connection_trickling_its_hello_is_closed_at_the_same_time_limit() {
    let (_folder, _store, server) =
        server_with_handshake_limit("security-handshake-trickle", "300");
    let mut trickling = silent_connection(&server);
    // The frame magic ("FPSV"), one byte every 100 ms and then again: each read the
    // server makes is quick, but the hello never completes.
    let mut closed = false;
    for byte in b"FPSV".iter().cycle().take(200) {
        if std::io::Write::write_all(&mut trickling, &[*byte]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        closed,
        "a connection sending its hello a byte at a time is closed at the handshake time \
         limit, counted from its accept"
    );
    stops_having_logged_the_time_limit(server);
}

#[test]
fn sixty_four_silent_connections_do_not_lock_out_the_owner() {
    let (_folder, store, server) = server_with_handshake_limit("security-silent-flood", "2000");
    let silent: Vec<UnixStream> = (0..64).map(|_| silent_connection(&server)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let output = flashpipe(&["ls", text(&store)]);
    assert_succeeded(
        &output,
        "ls is refused while 64 silent connections fill the client table",
    );
    drop(silent);
    server.stop_cleanly();
}

#[test]
fn one_user_holds_at_most_its_share_of_the_connections() {
    let (_folder, store) = folder_with_store("security-per-uid", "64MiB");
    let server = ServerProcess::start(
        &store,
        &["--max-clients", "8", "--max-clients-per-uid", "2"],
    );
    let first = Client::connect(&server.socket, ConnectOptions::default()).unwrap();
    let second = Client::connect(&server.socket, ConnectOptions::default()).unwrap();
    let error = fail_stderr(&["ls", text(&store)]);
    assert!(
        error.contains("--max-clients-per-uid") && error.contains("holds 2"),
        "the refusal names the share and its option: {error}"
    );
    drop(first);
    let mut listed = false;
    for _ in 0..200 {
        if flashpipe(&["ls", text(&store)]).status.success() {
            listed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(
        listed,
        "the user gets in again once one of its connections ended"
    );
    drop(second);
    server.stop_cleanly();
}

#[test]
fn kernel_options_naming_host_paths_are_refused_through_a_server() {
    let (folder, store) = folder_with_store("security-host-paths", "64MiB");
    let input = folder.join("records.bin");
    std::fs::write(&input, file_contents(1, 64 * 1024)).unwrap();
    succeed(&["put", text(&store), text(&input), "--as", "records"]);
    let data = folder.join("kernel-data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("q.f32"), [0u8; 16]).unwrap();
    let server = ServerProcess::start(&store, &["--kernel-data", text(&data)]);
    let spill_prefix = format!("flashpipe-spill-{}-", server.pid);
    assert_eq!(
        spill_folders(&spill_prefix).len(),
        1,
        "the server made its private spill folder"
    );
    for (arguments, option) in [
        (
            vec!["sort", "record=16", "key=4", "temp_dir=/tmp", "records"],
            "temp_dir=",
        ),
        (
            vec!["knn", "queries=/etc/passwd", "dimensions=4", "records"],
            "queries=",
        ),
        (
            vec!["knn", "queries=../records.bin", "dimensions=4", "records"],
            "queries=",
        ),
        (
            vec!["langid", "profiles=/etc/hostname", "records"],
            "profiles=",
        ),
    ] {
        let mut command = vec!["run", text(&store)];
        command.extend(arguments);
        let output = flashpipe(&command);
        let error = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{command:?} is refused");
        assert!(
            error.contains(option) && (error.contains("server") || error.contains("kernel data")),
            "the refusal names the option and what to do: {error}"
        );
    }
    succeed(&[
        "run",
        text(&store),
        "sort",
        "record=16",
        "key=4",
        "records",
        "--output",
        "sorted",
    ]);
    succeed(&[
        "run",
        text(&store),
        "knn",
        "queries=q.f32",
        "dimensions=4",
        "k=1",
        "records",
    ]);
    server.stop_cleanly();
    assert!(
        spill_folders(&spill_prefix).is_empty(),
        "the server's private spill folder is removed at stop"
    );
    let in_process = flashpipe(&[
        "run",
        text(&store),
        "sort",
        "record=16",
        "key=4",
        "temp_dir=/tmp",
        "records",
        "--output",
        "sorted-here",
    ]);
    assert_succeeded(&in_process, "the in-process CLI keeps host paths");
}

/// The folders in the system temporary folder whose names start with `prefix`.
fn spill_folders(prefix: &str) -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

#[test]
fn a_truncated_image_under_the_server_stops_its_writes() {
    image_changed_under_the_server(
        "security-truncated",
        |image| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(image)
                .unwrap()
                .set_len(1 << 20)
                .unwrap();
        },
        "shrank",
    );
}

#[test]
fn a_deleted_image_under_the_server_stops_its_writes() {
    image_changed_under_the_server(
        "security-deleted",
        |image| {
            std::fs::remove_file(image).unwrap();
        },
        "deleted",
    );
}

fn image_changed_under_the_server(test: &str, change: impl Fn(&std::path::Path), said: &str) {
    let folder = TestFolder::new(test);
    let store = file_store(&folder, "64MiB");
    let local = folder.join("one.bin");
    std::fs::write(&local, file_contents(2, 100_000)).unwrap();
    let server = ServerProcess::start(&store, &[]);
    succeed(&["put", text(&store), text(&local), "--as", "one"]);
    change(&folder.join("a.img"));
    let output = flashpipe(&["put", text(&store), text(&local), "--as", "two"]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the put after the change fails");
    assert!(
        error.contains(said) && error.contains("a.img") && error.contains("no more writes"),
        "the error says what happened and what to do: {error}"
    );
    let again = flashpipe(&["put", text(&store), text(&local), "--as", "three"]);
    assert!(!again.status.success(), "writes stay refused");
    drop(server);
}

#[test]
fn leftover_temporaries_are_removed_and_named_at_the_next_read_write_open() {
    let (folder, store) = folder_with_store("security-leftovers", "64MiB");
    let local = folder.join("x.bin");
    std::fs::write(&local, file_contents(3, 10_000)).unwrap();
    // Through a server, which holds the store read-write the whole time, so the names
    // stay until the next open, as the temporaries of a killed command do.
    let server = ServerProcess::start(&store, &[]);
    for name in [
        ".flashpipe-put-4242-0",
        ".flashpipe-serve-run-4242-1-0",
        ".flashpipe-notes",
        ".flashpipe-put-4242",
    ] {
        succeed(&["put", text(&store), text(&local), "--as", name]);
    }
    server.stop_cleanly();
    let output = flashpipe(&["put", text(&store), text(&local), "--as", "after"]);
    let notes = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{notes}");
    assert!(
        notes.contains(".flashpipe-put-4242-0") && notes.contains(".flashpipe-serve-run-4242-1-0"),
        "the removed temporaries are named: {notes}"
    );
    let listing = succeed(&["ls", text(&store), "-1"]);
    let names: Vec<&str> = listing.lines().map(str::trim).collect();
    assert!(!names.contains(&".flashpipe-put-4242-0"), "{listing}");
    assert!(
        !names.contains(&".flashpipe-serve-run-4242-1-0"),
        "{listing}"
    );
    for kept in [".flashpipe-notes", ".flashpipe-put-4242", "after"] {
        assert!(
            names.contains(&kept),
            "{kept} is a user's file and kept: {listing}"
        );
    }
}

#[test]
fn a_get_waits_for_read_buffers_other_clients_hold_instead_of_failing() {
    let (folder, store) = folder_with_store("security-read-buffers", "64MiB");
    let local = folder.join("data.bin");
    let contents = file_contents(4, 1 << 20);
    std::fs::write(&local, &contents).unwrap();
    succeed(&["put", text(&store), text(&local), "--as", "data"]);
    let server = ServerProcess::start(&store, &["--max-read-handles", "4096"]);
    // Four clients holding 16 reads by reference each hold the engine's 64 read buffers.
    let mut holders = Vec::new();
    let mut views = Vec::new();
    for _ in 0..4 {
        let mut holder = Client::connect(&server.socket, ConnectOptions::default()).unwrap();
        for index in 0..16u64 {
            match holder.read("data", index * 4096, 4096) {
                Ok(view) => views.push(view),
                Err(error) => panic!("a holder's read {index}: {error}"),
            }
        }
        holders.push(holder);
    }
    let getter = {
        let store = store.clone();
        std::thread::spawn(move || flashpipe(&["get", text(&store), "data", "-"]))
    };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !getter.is_finished(),
        "the get waits while every read buffer is held"
    );
    drop(views);
    drop(holders);
    let output = getter.join().unwrap();
    assert_succeeded(&output, "the get fails instead of waiting");
    assert!(output.stdout == contents, "the get reads the file's bytes");
    server.stop_cleanly();
}

#[test]
fn bad_values_of_the_new_serve_options_are_refused_before_serving() {
    let (folder, store) = folder_with_store("security-bad-options", "64MiB");
    let a_file = folder.join("not-a-folder");
    std::fs::write(&a_file, b"x").unwrap();
    let missing = folder.join("missing");
    for (arguments, said) in [
        (
            vec!["--handshake-timeout-ms", "0"],
            "--handshake-timeout-ms",
        ),
        (vec!["--max-clients-per-uid", "0"], "--max-clients-per-uid"),
        (vec!["--spill-dir", text(&missing)], "--spill-dir"),
        (vec!["--kernel-data", text(&a_file)], "--kernel-data"),
        (
            vec!["--max-regions-per-client", "0"],
            "--max-regions-per-client",
        ),
        (
            vec!["--max-region-bytes-per-client", "0"],
            "--max-region-bytes-per-client",
        ),
        (
            vec!["--max-region-bytes-per-client", "lots"],
            "--max-region-bytes-per-client",
        ),
    ] {
        let mut command = vec!["serve", text(&store)];
        command.extend(arguments);
        let error = fail_stderr(&command);
        assert!(error.contains(said), "{command:?}: {error}");
        assert!(!error.contains("panicked"), "{error}");
    }
    assert!(
        !folder.join("s.toml.sock").exists(),
        "no socket is left behind"
    );
    succeed(&["ls", text(&store)]);
}

#[test]
fn the_temporary_of_a_put_killed_mid_way_is_removed_at_the_next_read_write_open() {
    let (folder, store) = folder_with_store("security-killed-put", "256MiB");
    let large = folder.join("large.bin");
    std::fs::write(&large, file_contents(5, 160 << 20)).unwrap();
    let server = ServerProcess::start(&store, &[]);
    let mut put = std::process::Command::new(flashpipe_binary())
        .args(["put", text(&store), text(&large), "--as", "large"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let temporary = loop {
        let listing = succeed(&["ls", text(&store), "-1"]);
        if let Some(name) = listing
            .lines()
            .map(str::trim)
            .find(|name| name.starts_with(".flashpipe-put-"))
        {
            break name.to_string();
        }
        assert!(
            put.try_wait().unwrap().is_none(),
            "the put ended before its temporary was seen; give it a larger file"
        );
        assert!(Instant::now() < deadline, "no temporary appeared");
        std::thread::sleep(Duration::from_millis(5));
    };
    put.kill().unwrap();
    put.wait().unwrap();
    server.stop_cleanly();
    let small = folder.join("small.bin");
    std::fs::write(&small, b"small").unwrap();
    let output = flashpipe(&["put", text(&store), text(&small), "--as", "small"]);
    let notes = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{notes}");
    assert!(
        notes.contains(&temporary) && notes.contains("killed"),
        "the removed temporary {temporary} is named: {notes}"
    );
    let listing = succeed(&["ls", text(&store), "-1"]);
    assert!(!listing.contains(".flashpipe-put-"), "{listing}");
    assert!(
        !listing.lines().any(|name| name.trim() == "large"),
        "{listing}"
    );
    assert_fsck_clean(&store);
}
