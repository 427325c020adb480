//! The NBD client over TLS with a self-signed certificate made by `openssl req -x509`
//! (RSA, basic constraints CA:TRUE, no subject alternative name), as a user makes one
//! and as nbdinfo accepts it: `flashpipe nbd serve` with that certificate, and a store
//! made on the export through the binary trusting that exact certificate (pinned, in
//! `ca-cert.pem`); a client trusting another certificate is refused with a sentence, no
//! Debug text, kind `network`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{command_line, fresh_folder, text};

/// Makes `NAME-cert.pem` and `NAME-key.pem` in `folder` as a user would; false when
/// `openssl` is missing (the test is skipped, saying why).
fn openssl_self_signed(folder: &Path, name: &str) -> bool {
    let output = Command::new("openssl")
        .current_dir(folder)
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(format!("{name}-key.pem"))
        .arg("-out")
        .arg(format!("{name}-cert.pem"))
        .args(["-days", "30", "-subj", "/CN=localhost"])
        .output();
    if !output.is_ok_and(|output| output.status.success()) {
        flashpipe_testkit::tools::skip(
            "nbd_tls_pinned",
            "the `openssl` command is missing or failed",
        );
        return false;
    }
    true
}

/// Starts `flashpipe nbd serve` with TLS on loopback; returns it and its port.
fn serve(folder: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .current_dir(folder)
        .args(command_line(
            "nbd serve --export d=ram:64MiB --listen 127.0.0.1:0 \
             --tls-certificate server-cert.pem --tls-key server-key.pem",
            &[],
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flashpipe starts");
    let stdout = child.stdout.take().expect("piped");
    let mut port = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("a readiness line");
        if let Some(rest) = line.split("nbds://127.0.0.1:").nth(1) {
            port = rest.split('/').next().map(str::to_string);
        }
        if line.contains("ready") {
            break;
        }
    }
    (child, port.expect("the server names its port"))
}

fn stop(child: Child) {
    let stderr = common::stop_with(child, libc::SIGTERM);
    assert!(!stderr.contains("Other("), "{stderr}");
}

fn flashpipe(folder: &Path, arguments: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .current_dir(folder)
        .args(arguments)
        .output()
        .expect("the flashpipe binary runs")
}

#[test]
fn a_self_signed_openssl_certificate_trusted_by_itself_serves_a_store() {
    let folder = fresh_folder("nbd-tls-pinned");
    if !openssl_self_signed(&folder, "server") || !openssl_self_signed(&folder, "stranger") {
        return;
    }
    for (trust, certificate) in [
        ("trusted", "server-cert.pem"),
        ("distrusting", "stranger-cert.pem"),
    ] {
        std::fs::create_dir(folder.join(trust)).unwrap();
        std::fs::copy(
            folder.join(certificate),
            folder.join(trust).join("ca-cert.pem"),
        )
        .unwrap();
    }
    let (server, port) = serve(&folder);
    let uri = |trust: &str| {
        format!(
            "nbds://localhost:{port}/d?tls-certificates={}",
            text(&folder.join(trust))
        )
    };

    let made = flashpipe(
        &folder,
        &command_line("mkfs --devices {} --size 32MiB n.toml", &[&uri("trusted")]),
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    std::fs::write(folder.join("x.txt"), b"over TLS\n").unwrap();
    let put = flashpipe(&folder, &["put", "n.toml", "x.txt"]);
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
    let cat = flashpipe(&folder, &["cat", "n.toml", "x.txt"]);
    assert_eq!(cat.stdout, b"over TLS\n");

    let refused = flashpipe(
        &folder,
        &command_line(
            "mkfs --devices {} --size 32MiB m.toml --json",
            &[&uri("distrusting")],
        ),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(69), "{stderr}");
    let error: serde_json::Value = serde_json::from_str(stderr.trim()).expect("a JSON error");
    assert_eq!(error["kind"], "network", "{stderr}");
    let message = error["error"].as_str().unwrap();
    assert!(
        message.contains("ca-cert.pem"),
        "says what to do: {message}"
    );
    for debug in ["CaUsedAsEndEntity", "Other(", "UnknownIssuer", "{"] {
        assert!(!message.contains(debug), "{debug} in {message}");
    }
    assert!(!folder.join("m.toml").exists(), "nothing made");
    stop(server);
}
