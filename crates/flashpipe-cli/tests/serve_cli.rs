//! `flashpipe serve` with the real binary: it prints its readiness line, CLI commands in
//! other processes go through it transparently (two at once, each seeing the other's
//! files), `-v` says so, commands that need the store alone name the server's pid, a
//! service manager gets `READY=1`, and SIGTERM and SIGINT end it with a clean unmount.

mod serve_support;

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};

use flashpipe_client::{Client, ConnectOptions};
use serve_support::*;

#[test]
fn serve_prints_its_readiness_line_and_stops_cleanly_on_sigterm() {
    let (_folder, store) = folder_with_store("serve-ready", "64MiB");
    let server = ServerProcess::start(&store, &[]);
    assert!(
        server
            .readiness_line
            .starts_with("flashpipe serve: ready: "),
        "{}",
        server.readiness_line
    );
    assert!(
        server.socket.exists(),
        "the socket {} exists",
        server.socket.display()
    );
    assert_eq!(
        server.socket.parent(),
        store.parent(),
        "the default socket lies beside the store file"
    );
    let socket = server.socket.clone();
    let exit = server.stop_with(libc::SIGTERM);
    assert!(exit.status.success(), "serve exits 0 on SIGTERM: {exit:?}");
    assert!(
        exit.stdout.contains("stopped") && exit.stdout.contains("unmounted cleanly"),
        "the summary line: {exit:?}"
    );
    assert!(
        exit.stderr.contains("SIGTERM"),
        "the logs name the signal: {}",
        exit.stderr
    );
    assert!(!socket.exists(), "the socket is removed on a clean stop");
    assert_fsck_clean(&store);
}

#[test]
fn sigint_stops_the_server_as_sigterm_does() {
    let (_folder, store) = folder_with_store("serve-sigint", "64MiB");
    let server = ServerProcess::start(&store, &["--log-format", "json"]);
    let exit = server.stop_with(libc::SIGINT);
    assert!(exit.status.success(), "serve exits 0 on SIGINT: {exit:?}");
    let first_log = exit.stderr.lines().next().unwrap_or_default();
    assert!(
        first_log.starts_with('{') && first_log.contains("\"level\""),
        "--log-format json writes JSON lines: {first_log:?}"
    );
    assert_fsck_clean(&store);
}

#[test]
fn commands_go_through_the_server_and_say_so_with_v() {
    let (folder, store) = folder_with_store("serve-through", "64MiB");
    let local = folder.join("local.bin");
    std::fs::write(&local, file_contents(1, 300_000)).unwrap();
    let server = ServerProcess::start(&store, &[]);
    let stderr = succeed_stderr(&["put", text(&store), text(&local), "--as", "one", "-v"]);
    assert!(
        stderr.contains("through the server") && stderr.contains(&server.pid.to_string()),
        "-v names the server and its pid: {stderr}"
    );
    assert_eq!(read_back(&store, "one"), file_contents(1, 300_000));
    let listing = succeed(&["ls", text(&store), "-1"]);
    assert_eq!(listing.trim(), "one");
    succeed(&["cp", text(&store), "one", "two"]);
    succeed(&["mv", text(&store), "two", "three"]);
    let stat = succeed(&["stat", text(&store), "three"]);
    assert!(stat.contains("300000 bytes"), "{stat}");
    let df = succeed(&["df", text(&store)]);
    assert!(df.contains("2 file(s)"), "{df}");
    let fsck = succeed(&["fsck", text(&store)]);
    assert!(fsck.contains("clean"), "fsck through the server: {fsck}");
    succeed(&["rm", text(&store), "three"]);
    let error = fail_stderr(&["put", text(&store), text(&local), "--as", "one"]);
    assert!(
        error.contains("--force"),
        "an existing name is refused as before: {error}"
    );
    server.stop_cleanly();
    assert_eq!(succeed(&["ls", text(&store), "-1"]).trim(), "one");
    assert_fsck_clean(&store);
}

#[test]
fn two_concurrent_clients_put_get_and_list_through_the_server() {
    let (folder, store) = folder_with_store("serve-two", "128MiB");
    let server = ServerProcess::start(&store, &[]);
    let clients: Vec<_> = (0..2u64)
        .map(|client| {
            let store = store.clone();
            let local = folder.join(format!("client{client}.bin"));
            std::thread::spawn(move || {
                for round in 0..6u64 {
                    let index = client * 100 + round;
                    let contents = file_contents(index, 50_000 + 30_000 * round as usize);
                    std::fs::write(&local, &contents).unwrap();
                    let name = format!("c{client}-r{round}");
                    succeed(&["put", text(&store), text(&local), "--as", &name]);
                    assert_eq!(read_back(&store, &name), contents, "{name}");
                    let listing = succeed(&["ls", text(&store), "-1"]);
                    assert!(
                        listing.lines().any(|line| line == name),
                        "{name}: {listing}"
                    );
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client thread");
    }
    let listing = succeed(&["ls", text(&store), "-1"]);
    assert_eq!(listing.lines().count(), 12, "{listing}");
    server.stop_cleanly();
    assert_fsck_clean(&store);
    for client in 0..2u64 {
        for round in 0..6u64 {
            let contents = file_contents(client * 100 + round, 50_000 + 30_000 * round as usize);
            assert_eq!(read_back(&store, &format!("c{client}-r{round}")), contents);
        }
    }
}

#[test]
fn ls_through_the_server_sees_a_file_another_client_just_put() {
    let (folder, store) = folder_with_store("serve-sees", "64MiB");
    let local = folder.join("x.txt");
    std::fs::write(&local, b"seen by the other shell\n").unwrap();
    let server = ServerProcess::start(&store, &[]);
    assert_eq!(succeed(&["ls", text(&store), "-1"]).trim(), "");
    succeed(&["put", text(&store), text(&local)]);
    assert_eq!(succeed(&["ls", text(&store), "-1"]).trim(), "x.txt");
    assert_eq!(read_back(&store, "x.txt"), b"seen by the other shell\n");
    drop(server);
}

#[test]
fn commands_needing_the_store_alone_name_the_server_pid() {
    let (folder, store) = folder_with_store("serve-exclusive", "64MiB");
    let server = ServerProcess::start(&store, &[]);
    let pid = server.pid.to_string();
    let repair = fail_stderr(&["fsck", text(&store), "--repair"]);
    assert!(
        repair.contains(&pid),
        "fsck --repair names the server's pid: {repair}"
    );
    let second = fail_stderr(&["serve", text(&store)]);
    assert!(
        second.contains(&pid),
        "a second serve names the first's pid: {second}"
    );
    let mkfs = Command::new(flashpipe_binary())
        .args(command_line(
            "mkfs --devices a.img --size 64MiB --force t.toml",
            &[],
        ))
        .current_dir(folder.path())
        .output()
        .unwrap();
    let mkfs_error = String::from_utf8_lossy(&mkfs.stderr);
    assert!(
        !mkfs.status.success(),
        "mkfs over a served device must fail"
    );
    assert!(
        mkfs_error.contains(&pid),
        "mkfs names the server's pid: {mkfs_error}"
    );
    server.stop_cleanly();
    assert_fsck_clean(&store);
}

#[test]
fn a_service_manager_is_told_ready_and_stopping() {
    let (folder, store) = folder_with_store("serve-notify", "64MiB");
    let notify_path = folder.join("notify.sock");
    let receiver = UnixDatagram::bind(&notify_path).unwrap();
    let server = ServerProcess::start_with_environment(
        &store,
        &[],
        &[("NOTIFY_SOCKET", text(&notify_path))],
    );
    let mut buffer = [0u8; 256];
    let length = receiver.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..length], b"READY=1");
    server.stop_cleanly();
    let length = receiver.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..length], b"STOPPING=1");
}

#[test]
fn without_a_server_commands_open_the_store_in_their_own_process() {
    let (_folder, store) = folder_with_store("serve-none", "64MiB");
    let stderr = succeed_stderr(&["ls", text(&store), "-v"]);
    assert!(stderr.contains("in this process"), "{stderr}");
    let child = Command::new(flashpipe_binary())
        .args(["serve", text(&store), "--max-clients", "0"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(!child.status.success(), "--max-clients 0 is refused");
    assert!(String::from_utf8_lossy(&child.stderr).contains("--max-clients"));
}

#[test]
fn a_put_that_fails_through_the_server_leaves_no_file_and_no_temporary() {
    let (folder, store) = folder_with_store("serve-failed-put", "16MiB");
    let small = folder.join("small.bin");
    let too_big = folder.join("too-big.bin");
    std::fs::write(&small, file_contents(20, 100_000)).unwrap();
    std::fs::write(&too_big, file_contents(21, 40 << 20)).unwrap();
    let server = ServerProcess::start(&store, &[]);
    let error = fail_stderr(&["put", text(&store), text(&small), text(&too_big)]);
    assert!(
        error.contains("too-big.bin"),
        "the error names the file: {error}"
    );
    let listing = succeed(&["ls", text(&store), "-1"]);
    assert_eq!(
        listing.trim(),
        "",
        "nothing of the failed put is left: {listing}"
    );
    server.stop_cleanly();
    assert_eq!(succeed(&["ls", text(&store), "-1"]).trim(), "");
    assert_fsck_clean(&store);
}

#[test]
fn a_client_past_the_client_limit_is_refused_naming_the_limit() {
    let (_folder, store) = folder_with_store("serve-limit", "64MiB");
    let server = ServerProcess::start(&store, &["--max-clients", "1"]);
    let holder = Client::connect(&server.socket, ConnectOptions::default()).unwrap();
    let error = fail_stderr(&["ls", text(&store)]);
    assert!(
        error.contains("limit") && error.contains('1'),
        "the refusal names the limit: {error}"
    );
    drop(holder);
    assert!(
        lists_again(&store),
        "a client is admitted once the holder has gone"
    );
    let exit = server.stop_cleanly();
    assert!(
        exit.stdout.contains("refused at the client limit")
            && !exit.stdout.contains(" 0 refused at the client limit"),
        "the summary counts the refusals: {exit:?}"
    );
}

#[test]
fn data_by_reference_and_copied_through_the_socket_read_the_same_bytes() {
    let (folder, store) = folder_with_store("serve-paths", "64MiB");
    let local = folder.join("data.bin");
    let contents = file_contents(30, 5 << 20);
    std::fs::write(&local, &contents).unwrap();
    let server = ServerProcess::start(&store, &[]);
    for (map, path_said) in [
        ("1", "data by reference"),
        ("0", "data copied through the socket"),
    ] {
        let environment = [("FLASHPIPE_MAP_MEMORY", map)];
        let name = format!("data-{map}");
        let put = flashpipe_with_environment(
            &["put", text(&store), text(&local), "--as", &name, "-v"],
            &environment,
        );
        assert!(
            put.status.success(),
            "{}",
            String::from_utf8_lossy(&put.stderr)
        );
        let get =
            flashpipe_with_environment(&["get", text(&store), &name, "-", "-v"], &environment);
        let said = String::from_utf8_lossy(&get.stderr);
        assert!(get.status.success(), "{said}");
        assert!(
            said.contains(path_said),
            "FLASHPIPE_MAP_MEMORY={map}: {said}"
        );
        assert!(
            get.stdout == contents,
            "FLASHPIPE_MAP_MEMORY={map}: bytes differ"
        );
    }
    server.stop_cleanly();
    assert_fsck_clean(&store);
}

#[test]
fn a_get_whose_file_is_replaced_meanwhile_fails_instead_of_mixing_versions() {
    let (folder, store) = folder_with_store("serve-replaced", "256MiB");
    let old = folder.join("old.bin");
    let new = folder.join("new.bin");
    let old_contents = file_contents(40, 24 << 20);
    std::fs::write(&old, &old_contents).unwrap();
    std::fs::write(&new, file_contents(41, 24 << 20)).unwrap();
    let server = ServerProcess::start(&store, &[]);
    succeed(&["put", text(&store), text(&old), "--as", "f"]);
    let mut get = Command::new(flashpipe_binary())
        .args(["get", text(&store), "f", "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = get.stdout.take().unwrap();
    let mut first_bytes = vec![0u8; 1 << 16];
    std::io::Read::read_exact(&mut stdout, &mut first_bytes).unwrap();
    assert_eq!(first_bytes, old_contents[..1 << 16]);
    succeed(&["put", text(&store), text(&new), "--as", "f", "--force"]);
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut stdout, &mut rest).unwrap();
    let output = get.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the get must fail: it read two versions"
    );
    assert!(
        stderr.contains("changed while it was being read"),
        "{stderr}"
    );
    server.stop_cleanly();
}

#[test]
fn two_clients_putting_one_name_at_once_leave_one_whole_file() {
    let (folder, store) = folder_with_store("serve-same-name", "128MiB");
    let server = ServerProcess::start(&store, &[]);
    let sources: Vec<_> = (0..2u64)
        .map(|client| {
            let path = folder.join(format!("source{client}.bin"));
            std::fs::write(&path, file_contents(50 + client, 6 << 20)).unwrap();
            path
        })
        .collect();
    for force in [false, true] {
        let arguments_of = |path: &std::path::Path| {
            let mut arguments = vec![
                "put".to_string(),
                text(&store).to_string(),
                text(path).to_string(),
                "--as".to_string(),
                format!("same-{force}"),
            ];
            if force {
                arguments.push("--force".to_string());
            }
            arguments
        };
        let children: Vec<_> = sources
            .iter()
            .map(|path| {
                Command::new(flashpipe_binary())
                    .args(arguments_of(path))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outcomes: Vec<_> = children
            .into_iter()
            .map(|child| child.wait_with_output().unwrap())
            .collect();
        let succeeded = outcomes
            .iter()
            .filter(|output| output.status.success())
            .count();
        if force {
            assert_eq!(
                succeeded, 2,
                "both forced puts succeed, the later rename wins"
            );
        } else {
            assert!(succeeded >= 1, "at least the first rename succeeds");
            for output in outcomes.iter().filter(|output| !output.status.success()) {
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(
                    stderr.contains("--force"),
                    "the loser is told the name exists: {stderr}"
                );
            }
        }
        let stored = read_back(&store, &format!("same-{force}"));
        assert!(
            stored == file_contents(50, 6 << 20) || stored == file_contents(51, 6 << 20),
            "the stored file is one of the two puts, whole"
        );
    }
    let listing = succeed(&["ls", text(&store), "-1"]);
    assert_eq!(
        listing.lines().count(),
        2,
        "no temporary is left: {listing}"
    );
    server.stop_cleanly();
    assert_fsck_clean(&store);
}

#[test]
fn a_server_whose_standard_error_went_away_still_stops_on_sigterm() {
    let (_folder, store) = folder_with_store("serve-stderr-gone", "64MiB");
    let mut child = Command::new(flashpipe_binary())
        .args(["serve", text(&store)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flashpipe serve starts");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).expect("the readiness line");
    assert!(line.contains("ready"), "{line}");
    // the reader of its logs is gone: every log line now fails to be written
    drop(child.stderr.take());
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server ignored SIGTERM once its standard error was gone");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    assert_fsck_clean(&store);
}
