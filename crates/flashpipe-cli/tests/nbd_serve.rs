//! `flashpipe nbd serve` as a process: the readiness lines on standard output, a client
//! served, SIGTERM and SIGINT stopping it cleanly with status 0 (the Unix socket
//! removed), and bad input refused with a message and a non-zero status.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::process::{Child, Command};

use common::{check_fails, command_line, start_flashpipe, stop_with};

fn flashpipe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flashpipe"))
}

/// Starts the server and reads its readiness lines; returns the child and the lines.
fn start(arguments: &[&str]) -> (Child, Vec<String>) {
    let mut full_arguments = vec!["nbd", "serve"];
    full_arguments.extend_from_slice(arguments);
    start_flashpipe(&full_arguments)
}

fn stop(child: Child, signal: i32) {
    let stderr = stop_with(child, signal);
    assert!(stderr.contains("nbd: stopped"), "{stderr}");
}

#[test]
fn serves_until_sigterm_and_sigint_with_a_readiness_line() {
    let folder = tempfile_folder("signals");
    let socket = folder.join("nbd.sock");
    let socket_text = socket.to_str().unwrap();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let (child, lines) = start(&command_line(
            "--export disk=ram:8MiB --export small=ram:1MiB --listen 127.0.0.1:0 --socket {}",
            &[socket_text],
        ));
        assert!(lines.last().unwrap().contains("ready"), "{lines:?}");
        let disk_line = lines
            .iter()
            .find(|line| line.contains("serving disk"))
            .unwrap();
        let address = disk_line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("nbd://"))
            .and_then(|rest| rest.split('/').next())
            .unwrap()
            .to_string();
        let mut stream = TcpStream::connect(&address).unwrap();
        let mut greeting = [0u8; 8];
        stream.read_exact(&mut greeting).unwrap();
        assert_eq!(&greeting, b"NBDMAGIC");
        drop(stream);
        assert!(socket.exists());
        stop(child, signal);
        assert!(!socket.exists(), "the socket is removed");
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn bad_exports_and_non_loopback_addresses_are_refused() {
    for (arguments, expected) in [
        (vec!["--export", "nonsense"], "NAME=DEVICE"),
        (vec!["--export", "d=ram:100"], "multiple of 512"),
        (vec!["--export", "d=tape:1"], "unknown device kind"),
        (
            vec!["--export", "d=ram:1MiB", "--listen", "0.0.0.0:0"],
            "--insecure",
        ),
        (
            vec![
                "--export",
                "d=ram:1MiB",
                "--export",
                "d=ram:1MiB",
                "--listen",
                "127.0.0.1:0",
            ],
            "two exports",
        ),
    ] {
        check_fails(&[&["nbd", "serve"], &arguments[..]].concat(), expected);
    }
}

/// A fresh folder of this process named after `test` (tests run in parallel).
fn tempfile_folder(test: &str) -> std::path::PathBuf {
    let folder =
        std::env::temp_dir().join(format!("flashpipe-nbd-serve-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

#[test]
fn serve_without_a_store_is_a_disk_node_exporting_over_nbd() {
    let folder = tempfile_folder("disk-node");
    let socket = folder.join("node.sock");
    let socket_text = socket.to_str().unwrap();
    let (mut child, lines) = start_flashpipe(&command_line(
        "serve --export disk=ram:8MiB --nbd-socket {}",
        &[socket_text],
    ));
    assert!(
        lines
            .iter()
            .any(|line| line.contains("nbd export disk at nbd+unix:///disk")),
        "{lines:?}"
    );
    assert!(lines.last().unwrap().contains("disk node"), "{lines:?}");
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let mut greeting = [0u8; 8];
    stream.read_exact(&mut greeting).unwrap();
    assert_eq!(&greeting, b"NBDMAGIC");
    drop(stream);
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill with a valid pid and signal has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());
    assert!(!socket.exists(), "the NBD socket is removed at stop");
    let refused = flashpipe()
        .args(["serve", "--nbd-socket", socket_text])
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "--nbd-socket without --export is refused"
    );
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn realtime_without_a_flash_export_is_refused() {
    let output = flashpipe()
        .args(["nbd", "serve", "--export", "d=ram:1MiB", "--realtime"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--realtime paces emulated flash exports"),
        "{stderr}"
    );
}

#[test]
fn an_emulated_flash_export_keeps_what_qemu_io_writes_across_a_restart() {
    if !flashpipe_testkit::tools::programs_or_skip("flash export", &["qemu-io"]) {
        return;
    }
    let folder = tempfile_folder("flash");
    std::fs::create_dir_all(&folder).unwrap();
    let image = folder.join("flash.img");
    let export = format!("f=flash:minflash:{}", image.display());
    let socket = folder.join("nbd.sock");
    let socket_text = socket.to_str().unwrap();
    let uri = format!("nbd+unix:///f?socket={socket_text}");
    let steps: [&[&str]; 2] = [
        &[
            "-c",
            "write -P 0x3c 0 256k",
            "-c",
            "write -P 0x77 1M 64k",
            "-c",
            "discard 128k 64k",
            "-c",
            "flush",
        ],
        &[
            "-c",
            "read -P 0x3c 0 128k",
            "-c",
            "read -P 0 128k 64k",
            "-c",
            "read -P 0x3c 192k 64k",
            "-c",
            "read -P 0x77 1M 64k",
        ],
    ];
    // The second run paces the export in real time (issue #16): the same data comes back.
    for (run, arguments) in steps.into_iter().enumerate() {
        let mut server_arguments = vec!["--export", export.as_str(), "--socket", socket_text];
        if run == 1 {
            server_arguments.push("--realtime");
        }
        let (child, lines) = start(&server_arguments);
        assert!(
            lines.iter().any(|line| line.contains("serving f")),
            "{lines:?}"
        );
        let output = Command::new("qemu-io")
            .args(["-f", "raw"])
            .args(arguments)
            .arg(&uri)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{text}");
        assert!(!text.contains("failed"), "{text}");
        stop(child, libc::SIGTERM);
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn tls_options_serve_nbds_beyond_loopback_and_bad_tls_input_is_refused() {
    let test = "tls_options";
    let folder = tempfile_folder(test);
    let Some((certificate, key)) = common::self_signed_certificate(&folder, test) else {
        return;
    };
    let (certificate, key) = (certificate.to_str().unwrap(), key.to_str().unwrap());
    let (child, lines) = start(&command_line(
        "--export d=ram:1MiB --listen 0.0.0.0:0 --tls-certificate {} --tls-key {}",
        &[certificate, key],
    ));
    assert!(lines[0].contains("nbds://0.0.0.0:"), "{lines:?}");
    stop(child, libc::SIGTERM);
    for (arguments, expected) in [
        (vec!["--tls-key", key], "--tls-certificate"),
        (
            vec![
                "--tls-certificate",
                certificate,
                "--tls-key",
                "/nonexistent/key.pem",
            ],
            "/nonexistent/key.pem",
        ),
        (
            vec![
                "--tls-certificate",
                certificate,
                "--tls-key",
                key,
                "--tls",
                "optional",
                "--listen",
                "0.0.0.0:0",
            ],
            "--insecure",
        ),
    ] {
        check_fails(
            &[&["nbd", "serve", "--export", "d=ram:1MiB"], &arguments[..]].concat(),
            expected,
        );
    }
    std::fs::remove_dir_all(&folder).unwrap();
}
