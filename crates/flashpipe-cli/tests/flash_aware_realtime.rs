//! A store in the flash-aware layout paced in real time (`mkfs --realtime`, `realtime =
//! true` in the store file) and the flash counters its holder prints at its stop
//! (docs/design/29-flash-aware.md): the option accepted and recorded, files round-tripping
//! through the paced device, the refusals (no flash, flash over the FTL, a hand-edited
//! store file) with nothing made or changed, and the `flash_counters` line of `flashpipe
//! serve` and `flashpipe mount` with the pacing's lag report. No timing is asserted.

mod common;
mod mount_support;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{check_fails, check_fails_unchanged, flashpipe, succeed_bytes};
use flashpipe_testkit::scratch::ScratchFolder;
use mount_support::{fuse_available, Mounted};
use serde_json::Value;

fn sample(length: usize, seed: usize) -> Vec<u8> {
    (0..length)
        .map(|index| (index * 13 + index / 509 + seed) as u8)
        .collect()
}

/// A small paced flash-aware store `s.toml` in `folder`.
fn make_paced_store(folder: &ScratchFolder) -> String {
    make_store(folder, &["--realtime"])
}

/// A small flash-aware store `s.toml` in `folder`, made with `options` too.
fn make_store(folder: &ScratchFolder, options: &[&str]) -> String {
    let store = folder.join("s.toml");
    let mut arguments = vec![
        "mkfs",
        "--devices",
        "flash:minflash:fa.img",
        "--layout",
        "flash-aware",
        "--flash-blocks-per-plane",
        "8",
    ];
    arguments.extend_from_slice(options);
    arguments.push(&store);
    succeed_bytes(&arguments);
    store
}

/// The `flash_counters` JSON object among `lines`.
fn flash_counters(lines: &str) -> Value {
    lines
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|object| object["event"] == "flash_counters")
        .unwrap_or_else(|| panic!("no flash_counters object in: {lines}"))
}

/// Checks a `flash_counters` object of a paced store that was written to.
fn check_written_and_paced(counters: &Value) {
    assert_eq!(counters["layout"], "flash-aware", "{counters}");
    for key in ["pages_read", "pages_programmed", "commits"] {
        assert!(counters[key].as_u64().unwrap() > 0, "{key}: {counters}");
    }
    assert_eq!(counters["refused_programs"], 0, "{counters}");
    assert!(counters["erases"].is_u64(), "{counters}");
    assert!(counters["gc_pages_copied"].is_u64(), "{counters}");
    let pacing = &counters["pacing"];
    assert!(pacing["released"].as_u64().unwrap() > 0, "{counters}");
    for key in [
        "lag_us_mean",
        "lag_us_p99",
        "lag_us_max",
        "late_threshold_us",
    ] {
        assert!(pacing[key].as_f64().unwrap() >= 0.0, "{key}: {counters}");
    }
    assert!(pacing["late"].is_u64(), "{counters}");
}

/// What the mount said once its drained standard error holds `marker` (the drain thread
/// may still be reading when the process has exited; a hang guard, not a timing).
fn drained(said: &std::sync::Mutex<String>, marker: &str) -> String {
    for _ in 0..600 {
        let text = said.lock().unwrap().clone();
        if text.contains(marker) {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    said.lock().unwrap().clone()
}

#[test]
fn a_paced_store_records_the_option_and_round_trips_files() {
    let folder = ScratchFolder::new("flash-aware-paced");
    let store = make_paced_store(&folder);
    let store_file = std::fs::read_to_string(&store).unwrap();
    assert!(store_file.contains("realtime = true"), "{store_file}");
    std::fs::write(folder.path().join("a.bin"), sample(300_000, 1)).unwrap();
    succeed_bytes(&["put", &store, &folder.join("a.bin")]);
    std::fs::write(folder.path().join("a.bin"), sample(200_000, 2)).unwrap();
    succeed_bytes(&["put", "--force", &store, &folder.join("a.bin")]);
    let copy = folder.join("a.copy");
    succeed_bytes(&["get", &store, "a.bin", &copy]);
    assert!(std::fs::read(&copy).unwrap() == sample(200_000, 2));
    let fsck: Value = serde_json::from_slice(&succeed_bytes(&["fsck", &store, "--json"])).unwrap();
    assert_eq!(fsck["clean"], Value::Bool(true), "{fsck}");
}

#[test]
fn realtime_is_refused_without_a_flash_aware_device_and_nothing_is_made() {
    let folder = ScratchFolder::new("flash-aware-paced-refused");
    let store = folder.join("s.toml");
    let cases: [(&[&str], &str); 3] = [
        (
            &["--devices", "d0.img", "--size", "64MiB"],
            "--realtime paces emulated flash, and the store has no flash device",
        ),
        (&["--devices", "ram:64MiB"], "the store has no flash device"),
        (
            &["--devices", "flash:minflash:a.img"],
            "add --layout flash-aware, or pace a flash device over the FTL by exporting it",
        ),
    ];
    for (devices, expected) in cases {
        let mut arguments = vec!["mkfs", "--realtime"];
        arguments.extend_from_slice(devices);
        arguments.push(&store);
        check_fails_unchanged(&folder, &arguments, expected);
    }
}

#[test]
fn a_store_file_asking_to_pace_a_device_over_the_ftl_is_refused_unchanged() {
    let folder = ScratchFolder::new("flash-aware-paced-ftl");
    let store = folder.join("s.toml");
    succeed_bytes(&[
        "mkfs",
        "--devices",
        "flash:minflash:f.img",
        "--flash-blocks-per-plane",
        "8",
        &store,
    ]);
    let written = std::fs::read_to_string(&store).unwrap();
    assert!(
        !written.contains("realtime"),
        "left out when off: {written}"
    );
    let edited = written.replace(
        "preset = \"minflash\"\n",
        "preset = \"minflash\"\nrealtime = true\n",
    );
    assert_ne!(edited, written, "the device table names its preset");
    std::fs::write(&store, &edited).unwrap();
    let image_before = std::fs::read(folder.path().join("f.img")).unwrap();
    check_fails(
        &["ls", &store],
        "realtime pacing applies to a flash device in the flash-aware layout",
    );
    assert_eq!(std::fs::read_to_string(&store).unwrap(), edited);
    assert!(std::fs::read(folder.path().join("f.img")).unwrap() == image_before);
}

/// Serves `store` (`--json`), puts a file through the server, stops it with SIGTERM and
/// returns its `flash_counters` object, checking the stop line came after it.
fn serve_put_and_stop(folder: &ScratchFolder, store: &str) -> Value {
    let mut server = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(["serve", store, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flashpipe serve starts");
    let mut stdout = BufReader::new(server.stdout.take().expect("piped"));
    let mut ready = String::new();
    stdout.read_line(&mut ready).expect("stdout readable");
    assert!(ready.contains("\"ready\""), "no readiness: {ready}");
    std::fs::write(folder.path().join("b.bin"), sample(100_000, 3)).unwrap();
    succeed_bytes(&["put", store, &folder.join("b.bin")]);
    let pid = libc::pid_t::try_from(server.id()).expect("a pid");
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("stdout readable");
    let mut logs = String::new();
    let mut stderr = server.stderr.take().expect("piped");
    stderr.read_to_string(&mut logs).expect("stderr readable");
    assert!(server.wait().unwrap().success(), "serve failed: {logs}");
    assert!(rest.contains("\"stopped\""), "no stop line: {rest}");
    let counters = flash_counters(&logs);
    assert_eq!(counters["store"], store, "{counters}");
    counters
}

#[test]
fn serve_reports_the_flash_work_and_the_pacing_at_its_stop() {
    let folder = ScratchFolder::new("flash-aware-paced-serve");
    let store = make_paced_store(&folder);
    check_written_and_paced(&serve_put_and_stop(&folder, &store));
}

#[test]
fn an_unpaced_store_reports_its_flash_work_without_pacing() {
    let folder = ScratchFolder::new("flash-aware-unpaced-serve");
    let store = make_store(&folder, &[]);
    let counters = serve_put_and_stop(&folder, &store);
    assert!(
        counters["pages_programmed"].as_u64().unwrap() > 0,
        "{counters}"
    );
    assert!(counters["commits"].as_u64().unwrap() > 0, "{counters}");
    assert_eq!(counters["pacing"], Value::Null, "{counters}");
}

#[test]
fn mount_reports_the_flash_work_and_the_pacing_at_its_unmount() {
    if !fuse_available("mount_reports_the_flash_work_and_the_pacing_at_its_unmount") {
        return;
    }
    let folder = ScratchFolder::new("flash-aware-paced-mount");
    let store = make_paced_store(&folder);
    for json in [true, false] {
        let directory = folder.path().join(format!("m{json}"));
        std::fs::create_dir(&directory).unwrap();
        let extra: &[&str] = if json { &["--json"] } else { &[] };
        let mounted = Mounted::start(Path::new(&store), &directory, extra);
        let file = directory.join(format!("f{json}"));
        std::fs::write(&file, sample(50_000, 4)).unwrap();
        std::fs::File::open(&file).unwrap().sync_all().unwrap();
        assert!(std::fs::read(&file).unwrap() == sample(50_000, 4));
        let said = std::sync::Arc::clone(&mounted.said);
        mounted.stop(libc::SIGTERM);
        let said = drained(
            &said,
            if json {
                "pages_programmed"
            } else {
                "pages programmed"
            },
        );
        if json {
            let counters = flash_counters(&said);
            assert_eq!(counters["store"], store.as_str(), "{counters}");
            check_written_and_paced(&counters);
        } else {
            assert!(said.contains("pages programmed"), "{said}");
            assert!(said.contains("paced in real time"), "{said}");
            assert!(!said.contains("Some("), "Rust Debug text in {said}");
        }
    }
    let listing = flashpipe(&["ls", &store]);
    assert!(listing.status.success());
    let names = String::from_utf8_lossy(&listing.stdout).into_owned();
    assert!(
        names.contains("ftrue") && names.contains("ffalse"),
        "{names}"
    );
}
