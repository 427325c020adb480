//! TLS on the NBD client (`nbds://`, `nbds+unix://`): flashpipe's client against
//! flashpipe's own TLS server (a client certificate, multi-conn: every connection does
//! STARTTLS), against `nbdkit --tls=require` (a restarted server: the reconnect redoes
//! TLS), against `qemu-nbd --tls-creds` (x509, client certificates verified), a store
//! striped over `nbds` members; and the failures, each a clear error
//! naming the URI: a server that does not trust the client, a client that does not
//! trust the server, a wrong host name, a plaintext-only server refusing STARTTLS, a
//! plain `nbd://` URI against a server requiring TLS, hostile answers to STARTTLS (an
//! acknowledgement followed by plaintext, or carrying data; refusals).

mod client_support;
mod common;
mod tls_certificates;

use std::path::{Path, PathBuf};

use client_support::{
    check_store, fill_store, have, reap, striped_store_config, zero_file, Scratch, Server,
};
use flashpipe_device::{BlockDevice, Completion, IoBuf, Request};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};
use flashpipe_nbd::server::tls::{load_rustls_config, TlsMode, TlsSettings};
use flashpipe_nbd::server::{Export, ExportDeviceSpec, NbdServer, ServerConfig, ServerLimits};
use flashpipe_store::create_store;
use tls_certificates::{make_certificates, Certificates};

const MIB: u64 = 1024 * 1024;
const BLOCK: usize = 4096;

fn certificates_or_skip(test: &str) -> Option<Certificates> {
    common::tool_or_skip(test, &["openssl"]).then(make_certificates)
}

/// For a test of a TLS server `program` over a disk image: the test certificates, a
/// scratch folder named `label` and an 8 MiB zeroed `disk.img` in it; `None` (skipped,
/// saying why) without `program` or openssl.
fn tls_disk_if_tool(
    program: &str,
    test: &str,
    label: &str,
) -> Option<(Certificates, Scratch, PathBuf)> {
    if !have(program) {
        return None;
    }
    let certificates = certificates_or_skip(test)?;
    let scratch = Scratch::new(label);
    let image = scratch.path.join("disk.img");
    zero_file(&image, 8 * MIB);
    Some((certificates, scratch, image))
}

/// A flashpipe server on loopback TCP with one RAM export `disk`; TLS in `tls` (clients
/// admitted by certificates of the test CA), or plaintext only.
fn flashpipe_server(
    certificates: &Certificates,
    tls: Option<TlsMode>,
    size_bytes: u64,
) -> NbdServer {
    let tls = tls.map(|mode| TlsSettings {
        rustls_config: load_rustls_config(
            &certificates.path("server-cert.pem"),
            &certificates.path("server-key.pem"),
            Some(&certificates.path("ca-cert.pem")),
        )
        .expect("the TLS configuration loads"),
        mode,
    });
    let config = ServerConfig {
        tcp_address: Some("127.0.0.1:0".parse().unwrap()),
        tls,
        limits: ServerLimits::default(),
        ..ServerConfig::default()
    };
    let export = Export::open("disk", &ExportDeviceSpec::Ram { size_bytes }).unwrap();
    NbdServer::start(config, vec![export]).expect("the server starts")
}

fn port(server: &NbdServer) -> u16 {
    server.tcp_address().unwrap().port()
}

fn open(uri: &str) -> Result<NbdDevice, String> {
    let mut config = NbdDeviceConfig::new(NbdUri::parse(uri).expect("a valid URI"));
    config.queue_depth = 32;
    config.reconnect_attempts = 20;
    NbdDevice::open(config).map_err(|error| error.to_string())
}

fn block_pattern(block: u64, round: u8) -> Vec<u8> {
    (0..BLOCK)
        .map(|index| ((index as u64 * 7) ^ block.wrapping_mul(131)) as u8 ^ round)
        .collect()
}

/// Submits `request`, first reaping everything in flight when the queue is full.
fn submit(device: &mut NbdDevice, request: Request, completions: &mut Vec<Completion>) {
    if device.in_flight() >= device.info().queue_depth as usize {
        completions.extend(reap(device));
    }
    device.submit(request).expect("request accepted");
}

/// The device at `uri` (opening must succeed), after [`write_and_check`] of `blocks`.
fn open_and_check(uri: &str, blocks: std::ops::Range<u64>, round: u8) -> NbdDevice {
    let mut device = open(uri).unwrap_or_else(|error| panic!("{error}"));
    write_and_check(&mut device, blocks, round);
    device
}

fn write_and_check(device: &mut NbdDevice, blocks: std::ops::Range<u64>, round: u8) {
    let mut completions = Vec::new();
    for block in blocks.clone() {
        let buffer = IoBuf::from_slice(&block_pattern(block, round));
        submit(
            device,
            Request::write(block, block, buffer),
            &mut completions,
        );
    }
    completions.extend(reap(device));
    device.submit(Request::flush(u64::MAX)).expect("flush");
    completions.extend(reap(device));
    for completion in completions.drain(..) {
        assert!(completion.status.is_ok(), "{:?}", completion.status);
    }
    for block in blocks.clone() {
        let request = Request::read(block, block, IoBuf::zeroed(BLOCK));
        submit(device, request, &mut completions);
    }
    completions.extend(reap(device));
    assert_eq!(completions.len(), blocks.count());
    for completion in completions {
        assert!(completion.status.is_ok(), "{:?}", completion.status);
        let block = completion.tag;
        assert!(
            completion.buffer.unwrap()[..] == block_pattern(block, round)[..],
            "block {block} differs"
        );
    }
}

fn assert_refused(uri: &str, expected: &str) {
    let error = open(uri).expect_err(uri);
    eprintln!("refused as expected: {error}");
    assert!(error.contains(uri), "the error names the URI: {error}");
    assert!(error.contains(expected), "{expected:?} in: {error}");
}

#[test]
fn the_client_writes_and_reads_over_nbds_with_a_client_certificate_on_every_connection() {
    let Some(certificates) = certificates_or_skip("client_tls_flashpipe_server") else {
        return;
    };
    let server = flashpipe_server(&certificates, Some(TlsMode::Required), 16 * MIB);
    let good = certificates.client_folder("good", "ca", Some("client"));
    let uri = format!(
        "nbds://localhost:{}/disk?tls-certificates={}&x-connections=2",
        port(&server),
        good.display()
    );
    drop(open_and_check(&uri, 0..256, 1));
    // By IP address (the certificate names 127.0.0.1 too), one connection.
    let uri = format!(
        "nbds://127.0.0.1:{}/disk?tls-certificates={}",
        port(&server),
        good.display()
    );
    drop(open_and_check(&uri, 100..300, 2));
    server.shutdown();
}

#[test]
fn refusals_and_untrusted_certificates_are_clear_errors_naming_the_uri() {
    let Some(certificates) = certificates_or_skip("client_tls_refusals") else {
        return;
    };
    let server = flashpipe_server(&certificates, Some(TlsMode::Required), 16 * MIB);
    let tls_port = port(&server);
    let distrusting = certificates.client_folder("distrusting", "otherca", Some("client"));
    assert_refused(
        &format!(
            "nbds://localhost:{tls_port}/disk?tls-certificates={}",
            distrusting.display()
        ),
        "TLS handshake failed",
    );
    let good = certificates.client_folder("good", "ca", Some("client"));
    assert_refused(
        &format!(
            "nbds://127.0.0.1:{tls_port}/disk?tls-certificates={}&tls-hostname=elsewhere.example",
            good.display()
        ),
        "TLS handshake failed",
    );
    let stranger = certificates.client_folder("stranger", "ca", Some("strangerclient"));
    let uri = format!(
        "nbds://localhost:{tls_port}/disk?tls-certificates={}",
        stranger.display()
    );
    assert!(open(&uri).expect_err("a stranger").contains(&uri));
    assert_refused(&format!("nbd://localhost:{tls_port}/disk"), "nbds://");
    // Not verifying the server: a folder whose CA is not the server's still connects.
    let uri = format!(
        "nbds://localhost:{tls_port}/disk?tls-certificates={}&tls-verify-peer=false",
        distrusting.display()
    );
    drop(open_and_check(&uri, 0..16, 3));
    server.shutdown();

    let plaintext = flashpipe_server(&certificates, None, 16 * MIB);
    assert_refused(
        &format!(
            "nbds://localhost:{}/disk?tls-certificates={}",
            port(&plaintext),
            good.display()
        ),
        "refused NBD_OPT_STARTTLS",
    );
    plaintext.shutdown();
    assert_refused(
        "nbds://localhost:1/disk?tls-certificates=/nonexistent-folder",
        "/nonexistent-folder/ca-cert.pem",
    );
    assert_refused(
        "nbds://localhost:1/disk?tls-psk-file=/k.psk",
        "not supported",
    );
}

/// A hostile server on loopback TCP: greets, reads the client flags and one option,
/// answers it with `reply_type` (and `reply_data`), then sends `after` and closes.
fn one_shot_server(reply_type: u32, reply_data: &'static [u8], after: &'static [u8]) -> u16 {
    use flashpipe_nbd::wire;
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut greeting = Vec::new();
        wire::encode_server_greeting(
            &mut greeting,
            wire::HANDSHAKE_FLAG_FIXED_NEWSTYLE | wire::HANDSHAKE_FLAG_NO_ZEROES,
        );
        stream.write_all(&greeting).unwrap();
        let mut client_flags = [0u8; 4];
        std::io::Read::read_exact(&mut stream, &mut client_flags).unwrap();
        let (header, _) = wire::read_option(&mut stream).unwrap();
        let mut reply = Vec::new();
        wire::encode_option_reply(&mut reply, header.option, reply_type, reply_data);
        stream.write_all(&reply).unwrap();
        let _ = stream.write_all(after);
        // The client's own bytes (a TLS ClientHello, NBD_OPT_ABORT) are read and dropped.
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stream, &mut rest);
    });
    port
}

#[test]
fn hostile_answers_to_starttls_are_clear_errors_naming_the_uri() {
    use flashpipe_nbd::wire;
    let uri_for = |port: u16| format!("nbds://localhost:{port}/disk?tls-verify-peer=false");
    let port = one_shot_server(wire::REP_ACK, b"", b"HTTP/1.1 400 Bad Request\r\n\r\n");
    assert_refused(&uri_for(port), "TLS handshake failed");
    let port = one_shot_server(wire::REP_ACK, b"surprise", b"");
    assert_refused(
        &uri_for(port),
        "NBD_REP_ACK to NBD_OPT_STARTTLS with 8 bytes",
    );
    let port = one_shot_server(wire::REP_ERR_POLICY, b"no TLS for you", b"");
    assert_refused(&uri_for(port), "NBD_REP_ERR_POLICY");
    let port = one_shot_server(wire::REP_ERR_UNSUP, b"", b"");
    assert_refused(&uri_for(port), "a server without TLS?");
}

fn nbdkit_tls_file(
    certificates: &Certificates,
    scratch: &Path,
    name: &str,
    image: &Path,
) -> Server {
    let server_folder = certificates.server_folder(&format!("{name}-server"));
    let image = image.display().to_string();
    Server::nbdkit(
        scratch,
        name,
        &[
            "--tls=require",
            &format!("--tls-certificates={}", server_folder.display()),
            "file",
            &image,
        ],
    )
}

fn nbds_unix_uri(server: &Server, folder: &Path) -> String {
    format!(
        "nbds+unix:///?socket={}&tls-certificates={}",
        server.socket.display(),
        folder.display()
    )
}

#[test]
fn nbdkit_with_tls_required_serves_the_client_and_a_restart_redoes_tls() {
    let Some((certificates, scratch, image)) =
        tls_disk_if_tool("nbdkit", "client_tls_nbdkit", "client-tls")
    else {
        return;
    };
    let mut server = nbdkit_tls_file(&certificates, &scratch.path, "tls", &image);
    let folder = certificates.client_folder("client", "ca", Some("client"));
    let uri = nbds_unix_uri(&server, &folder);
    let mut device = open_and_check(&uri, 0..128, 4);
    server.restart();
    write_and_check(&mut device, 64..192, 5);
    assert!(device.counters().reconnects >= 1, "{:?}", device.counters());
    drop(device);
    let plain = format!("nbd+unix:///?socket={}", server.socket.display());
    assert!(open(&plain)
        .expect_err("plaintext to nbdkit --tls=require")
        .contains(&plain));
}

#[test]
fn qemu_nbd_with_x509_credentials_serves_the_client_over_nbds_unix() {
    let Some((certificates, scratch, image)) =
        tls_disk_if_tool("qemu-nbd", "client_tls_qemu_nbd", "client-tls-qemu")
    else {
        return;
    };
    let server_folder = certificates.server_folder("qemu-server");
    let socket = scratch.path.join("qemu.sock");
    // endpoint=server verifies clients by default: the client folder's certificate.
    let arguments = vec![
        "--object".to_string(),
        format!(
            "tls-creds-x509,id=tls0,endpoint=server,dir={}",
            server_folder.display()
        ),
        "--tls-creds".to_string(),
        "tls0".to_string(),
        "-k".to_string(),
        socket.display().to_string(),
        "-f".to_string(),
        "raw".to_string(),
        "--persistent".to_string(),
        image.display().to_string(),
    ];
    let server = Server::start("qemu-nbd", &arguments, &socket);
    let folder = certificates.client_folder("client", "ca", Some("client"));
    let uri = nbds_unix_uri(&server, &folder);
    drop(open_and_check(&uri, 0..200, 6));
    let without_certificate = certificates.client_folder("anonymous", "ca", None);
    let uri = nbds_unix_uri(&server, &without_certificate);
    assert!(open(&uri)
        .expect_err("no client certificate")
        .contains(&uri));
}

fn contents(index: usize) -> Vec<u8> {
    let length = 1000 + index * 37_111 % 200_000;
    (0..length)
        .map(|byte| ((byte as u64 * 2654435761) ^ (index as u64 * 97)) as u8)
        .collect()
}

#[test]
fn a_store_striped_over_nbds_members_keeps_its_files() {
    let Some(certificates) = certificates_or_skip("client_tls_striped_store") else {
        return;
    };
    let servers: Vec<NbdServer> = (0..3)
        .map(|_| flashpipe_server(&certificates, Some(TlsMode::Required), 32 * MIB))
        .collect();
    let folder = certificates.client_folder("client", "ca", Some("client"));
    let list: Vec<String> = servers
        .iter()
        .map(|server| {
            format!(
                "nbds://localhost:{}/disk?tls-certificates={}",
                port(server),
                folder.display()
            )
        })
        .collect();
    let scratch = Scratch::new("client-tls-store");
    let store_file = scratch.path.join("store.toml");
    let config = striped_store_config(&list);
    create_store(&config, &store_file, &mut |note| eprintln!("note: {note}")).expect("mkfs");
    let files: Vec<(String, Vec<u8>)> = (0..20)
        .map(|index| (format!("file-{index:02}"), contents(index)))
        .collect();
    fill_store(&config, &store_file, &files);
    assert_eq!(check_store(&config, &store_file, &files), 3 * 32 * MIB);
    for server in servers {
        server.shutdown();
    }
}
