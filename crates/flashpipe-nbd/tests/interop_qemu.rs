//! flashpipe's NBD server against QEMU's block layer (`qemu-img`, `qemu-io`), which no
//! one here wrote: image info, conversion in and out, comparison, and write-then-verify
//! patterns (several requests in flight with `aio_write`/`aio_read`), over TCP and a Unix
//! socket. Each test skips, with a printed message, when its tool is missing.

mod common;

use common::{pattern_bytes, run_ok, write_file, TestServer};

const MIB: u64 = 1024 * 1024;

/// A server exporting one RAM disk of `size_bytes` as `disk`, when the program `tool`
/// is installed (else the test skips, saying why).
fn disk_if_tool(test: &str, tool: &str, size_bytes: u64) -> Option<TestServer> {
    TestServer::ram_if_tools(test, &[tool], &[("disk", size_bytes)])
}

#[test]
fn qemu_img_info_convert_and_compare() {
    let Some(server) = disk_if_tool("qemu_img_info_convert_compare", "qemu-img", 16 * MIB) else {
        return;
    };
    let info = run_ok(
        "qemu-img",
        &["info", "--output=json", &server.tcp_uri("disk")],
    );
    assert!(info.contains("\"virtual-size\": 16777216"), "{info}");
    let source = server.scratch("source.raw");
    let mut bytes = pattern_bytes(11, 16 * MIB as usize);
    bytes[..2 * MIB as usize].fill(0);
    write_file(&source, &bytes);
    let source = source.to_str().unwrap();
    run_ok(
        "qemu-img",
        &[
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            source,
            &server.tcp_uri("disk"),
        ],
    );
    let compared = run_ok(
        "qemu-img",
        &compare_raw_arguments(source, &server.unix_uri("disk")),
    );
    assert!(compared.contains("Images are identical"), "{compared}");
    let back = server.scratch("back.qcow2");
    let back = back.to_str().unwrap();
    run_ok(
        "qemu-img",
        &[
            "convert",
            "-f",
            "raw",
            "-O",
            "qcow2",
            &server.unix_uri("disk"),
            back,
        ],
    );
    let compared = run_ok(
        "qemu-img",
        &["compare", "-f", "qcow2", "-F", "raw", back, source],
    );
    assert!(compared.contains("Images are identical"), "{compared}");
    let mut changed = bytes.clone();
    changed[5 * MIB as usize] ^= 1;
    write_file(std::path::Path::new(source), &changed);
    let output = common::run_tool(
        "qemu-img",
        &compare_raw_arguments(source, &server.tcp_uri("disk")),
    );
    assert_eq!(
        output.status.code(),
        Some(1),
        "a changed byte is a difference"
    );
}

#[test]
fn qemu_io_writes_then_verifies_patterns() {
    let Some(server) = disk_if_tool("qemu_io_patterns", "qemu-io", 8 * MIB) else {
        return;
    };
    for uri in [server.tcp_uri("disk"), server.unix_uri("disk")] {
        let output = run_ok(
            "qemu-io",
            &[
                "-f",
                "raw",
                "-c",
                "write -P 0xab 0 64k",
                "-c",
                "read -P 0xab 0 64k",
                "-c",
                "write -P 0x11 1M 1M",
                "-c",
                "write -z 1536k 256k",
                "-c",
                "read -P 0x11 1M 512k",
                "-c",
                "read -P 0 1536k 256k",
                "-c",
                "write -u -z 4M 1M",
                "-c",
                "read -P 0 4M 1M",
                "-c",
                "write -f -P 0x5a 6M 4k",
                "-c",
                "discard 7M 512k",
                "-c",
                "flush",
                "-c",
                "read -P 0x5a 6M 4k",
                &uri,
            ],
        );
        assert!(!output.contains("Pattern verification failed"), "{output}");
        assert!(!output.contains("failed"), "{output}");
    }
}

#[test]
fn qemu_io_keeps_many_requests_in_flight() {
    let Some(server) = disk_if_tool("qemu_io_in_flight", "qemu-io", 8 * MIB) else {
        return;
    };
    let mut commands = Vec::new();
    for index in 0..32u64 {
        commands.push(format!("aio_write -P {} {}k 64k", index + 1, index * 64));
    }
    commands.push("aio_flush".to_string());
    for index in 0..32u64 {
        commands.push(format!("aio_read -P {} {}k 64k", index + 1, index * 64));
    }
    commands.push("aio_flush".to_string());
    let mut arguments = vec!["-f", "raw"];
    for command in &commands {
        arguments.push("-c");
        arguments.push(command);
    }
    let uri = server.tcp_uri("disk");
    arguments.push(&uri);
    let output = run_ok("qemu-io", &arguments);
    assert!(!output.contains("Pattern verification failed"), "{output}");
    assert_eq!(output.matches("read 65536/65536").count(), 32, "{output}");
}

/// `qemu-img compare` of two raw images.
fn compare_raw_arguments<'a>(first: &'a str, second: &'a str) -> [&'a str; 7] {
    ["compare", "-f", "raw", "-F", "raw", first, second]
}
