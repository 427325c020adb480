//! `--json` readiness of `flashpipe serve` and `flashpipe nbd serve` through the binary:
//! the first line on standard output is one JSON object (pid, store and socket, each NBD
//! export with its URIs) that a supervising script parses; on SIGTERM the stop is JSON
//! too, and under `--log-format json` every log line is a JSON object without Rust Debug
//! text.

mod serve_support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use serve_support::{command_line, file_store, flashpipe_binary, text, TestFolder};

/// Starts `flashpipe ARGUMENTS` (`what` in messages), its output piped: its first stdout
/// line (a hang guard of the pipe's EOF: a server that dies prints nothing and the read
/// returns), then, after SIGTERM, the rest of stdout and all of stderr; checks that it
/// exited 0.
fn ready_then_stop(arguments: &[&str], what: &str) -> (serde_json::Value, String, String) {
    let mut child = Command::new(flashpipe_binary())
        .args(arguments)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{what} does not start: {error}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    reader.read_line(&mut first).expect("stdout readable");
    let ready: serde_json::Value = serde_json::from_str(&first).unwrap_or_else(|error| {
        let mut logs = String::new();
        let _ = stderr.read_to_string(&mut logs);
        let _ = child.kill();
        panic!("readiness is not JSON ({error}): {first:?}; logs: {logs}")
    });
    assert_eq!(ready["event"], "ready");
    assert_eq!(
        ready["pid"],
        child.id(),
        "the readiness names the server's pid"
    );
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    let status = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(status, 0);
    let mut rest = String::new();
    reader.read_to_string(&mut rest).expect("stdout readable");
    let mut logs = String::new();
    stderr.read_to_string(&mut logs).expect("stderr readable");
    let exit = child.wait().expect("the server exits");
    assert!(exit.success(), "{what} exits 0 on SIGTERM; logs: {logs}");
    (ready, rest, logs)
}

fn assert_no_debug_text(text: &str) {
    for marker in ["ServerCounters", " { ", "Some(", "Ok(", "Err("] {
        assert!(
            !text.contains(marker),
            "Rust Debug text {marker:?} in {text}"
        );
    }
}

#[test]
fn serve_json_prints_a_ready_object_json_logs_and_a_stopped_object() {
    let folder = TestFolder::new("serve-json");
    let store = file_store(&folder, "64MiB");
    let nbd_socket = folder.join("nbd.sock");
    let (ready, rest, logs) = ready_then_stop(
        &command_line(
            "serve {} --json --log-format json --export scratch=ram:16MiB --nbd-socket {}",
            &[text(&store), text(&nbd_socket)],
        ),
        "serve",
    );
    assert_eq!(ready["command"], "serve");
    assert_eq!(ready["store"], text(&store));
    let socket = ready["socket"].as_str().expect("the store's socket");
    assert_eq!(
        std::path::Path::new(socket).parent(),
        store.parent(),
        "the default socket lies beside the store"
    );
    assert_eq!(ready["nbd_socket"], text(&nbd_socket));
    assert!(ready.get("nbd_address").is_none(), "no TCP listener asked");
    let exports = ready["exports"].as_array().expect("the exports");
    assert_eq!(exports.len(), 1);
    assert_eq!(exports[0]["name"], "scratch");
    assert!(exports[0]["uris"][0]
        .as_str()
        .unwrap()
        .starts_with("nbd+unix://"));
    let stopped: serde_json::Value =
        serde_json::from_str(rest.trim()).unwrap_or_else(|error| panic!("{error}: {rest:?}"));
    assert_eq!(stopped["event"], "stopped");
    assert!(stopped["clients_total"].is_u64());
    assert!(stopped["malformed_frames"].is_u64());
    let mut log_lines = 0;
    for line in logs.lines().filter(|line| !line.trim().is_empty()) {
        let log: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("a log line is not JSON ({error}): {line}"));
        assert!(log["fields"].is_object(), "{line}");
        assert_no_debug_text(line);
        log_lines += 1;
    }
    assert!(log_lines > 0, "the server logs under --log-format json");
    assert!(
        logs.contains("\"clients_total\":"),
        "the stop counters as fields: {logs}"
    );
}

#[test]
fn nbd_serve_json_prints_a_ready_object_and_json_stop_lines() {
    let folder = TestFolder::new("nbd-serve-json");
    let socket = folder.join("nbd.sock");
    let (ready, rest, logs) = ready_then_stop(
        &command_line(
            "nbd serve --export first=ram:8MiB --export second=ram:8MiB --socket {} --json",
            &[text(&socket)],
        ),
        "nbd serve",
    );
    assert_eq!(ready["command"], "nbd serve");
    assert_eq!(ready["nbd_socket"], text(&socket));
    let names: Vec<&str> = ready["exports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|export| export["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["first", "second"]);
    assert!(rest.trim().is_empty(), "nothing else on stdout: {rest:?}");
    let events: Vec<serde_json::Value> = logs
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("a stop line is not JSON ({error}): {line}"))
        })
        .collect();
    assert_eq!(
        events.first().map(|event| &event["signal"]),
        Some(&"SIGTERM".into())
    );
    assert_eq!(
        events.last().map(|event| &event["event"]),
        Some(&"stopped".into())
    );
}
