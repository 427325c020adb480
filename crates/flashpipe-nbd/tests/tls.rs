//! TLS on the NBD server (`NBD_OPT_STARTTLS`, doc/proto.md "TLS support"): libnbd's
//! `nbdinfo` and `nbdcopy` over `nbds://` with a client certificate, data checksummed
//! both ways; qemu-img over TLS; FORCEDTLS answers on the wire (`NBD_REP_ERR_TLS_REQD`,
//! `NBD_OPT_EXPORT_NAME` closing); plaintext clients, clients with a certificate from
//! another authority or none, and clients that do not trust the server refused while
//! the server keeps serving.
//!
//! Certificates are made in each test by the `openssl` command (`tls_certificates`).

mod common;
mod tls_certificates;

use std::io::Write;
use std::path::Path;

use common::*;
use flashpipe_nbd::server::tls::{load_rustls_config, TlsMode, TlsSettings};
use flashpipe_nbd::server::{Export, ExportDeviceSpec, NbdServer, ServerConfig, ServerLimits};
use flashpipe_nbd::wire::*;
use tls_certificates::{make_certificates, Certificates};

const MIB: u64 = 1024 * 1024;

/// A server with one 64 MiB RAM export `disk` and TLS in `mode`, clients admitted by
/// certificates of `ca` when `client_ca` is set.
fn tls_server(certificates: &Certificates, mode: TlsMode, client_ca: bool) -> NbdServer {
    let client_ca_path = client_ca.then(|| certificates.path("ca-cert.pem"));
    let rustls_config = load_rustls_config(
        &certificates.path("server-cert.pem"),
        &certificates.path("server-key.pem"),
        client_ca_path.as_deref(),
    )
    .expect("the TLS configuration loads");
    let config = ServerConfig {
        tcp_address: Some("127.0.0.1:0".parse().unwrap()),
        tls: Some(TlsSettings {
            rustls_config,
            mode,
        }),
        limits: ServerLimits::default(),
        ..ServerConfig::default()
    };
    let export = Export::open(
        "disk",
        &ExportDeviceSpec::Ram {
            size_bytes: 64 * MIB,
        },
    )
    .unwrap();
    NbdServer::start(config, vec![export]).expect("the TLS server starts")
}

fn nbds_uri(server: &NbdServer, folder: &Path) -> String {
    format!(
        "nbds://localhost:{}/disk?tls-certificates={}",
        server.tcp_address().unwrap().port(),
        folder.display()
    )
}

fn certificates_or_skip(test: &str) -> Option<Certificates> {
    tool_or_skip(test, &["openssl"]).then(make_certificates)
}

/// The test certificates for a test that also needs `tools`; `None` (skipped, saying
/// why) without them or openssl.
fn certificates_if_tools(test: &str, tools: &[&str]) -> Option<Certificates> {
    if !tool_or_skip(test, tools) {
        return None;
    }
    certificates_or_skip(test)
}

#[test]
fn nbdinfo_and_nbdcopy_over_tls_with_a_client_certificate() {
    let test = "nbdinfo_and_nbdcopy_over_tls_with_a_client_certificate";
    let Some(certificates) = certificates_if_tools(test, &["nbdinfo", "nbdcopy"]) else {
        return;
    };
    let server = tls_server(&certificates, TlsMode::Required, true);
    let good = certificates.client_folder("good", "ca", Some("client"));
    let uri = nbds_uri(&server, &good);
    let info = run_ok("nbdinfo", &[&uri]);
    assert!(info.contains("with TLS"), "{info}");
    assert!(info.contains("export-size: 67108864"), "{info}");
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("in.bin");
    let output = scratch.path().join("out.bin");
    let pattern = pattern_bytes(15, (64 * MIB) as usize);
    write_file(&input, &pattern);
    run_ok("nbdcopy", &[input.to_str().unwrap(), &uri]);
    run_ok("nbdcopy", &[&uri, output.to_str().unwrap()]);
    let copied = std::fs::read(&output).unwrap();
    assert_eq!(crc32c::crc32c(&copied), crc32c::crc32c(&pattern));
    assert!(copied == pattern, "the export read back differs");
    server.shutdown();
}

#[test]
fn plaintext_and_wrongly_certified_clients_are_refused_and_the_server_keeps_serving() {
    let test = "plaintext_and_wrongly_certified_clients_are_refused_and_the_server_keeps_serving";
    let Some(certificates) = certificates_if_tools(test, &["nbdinfo"]) else {
        return;
    };
    let server = tls_server(&certificates, TlsMode::Required, true);
    let port = server.tcp_address().unwrap().port();
    let refused = |uri: &str, what: &str| {
        let output = run_tool("nbdinfo", &["--size", uri]);
        assert!(!output.status.success(), "{what} was admitted");
    };
    refused(
        &format!("nbd://localhost:{port}/disk"),
        "a plaintext client",
    );
    let stranger = certificates.client_folder("stranger", "ca", Some("strangerclient"));
    refused(
        &nbds_uri(&server, &stranger),
        "a client certificate of another CA",
    );
    let no_certificate = certificates.client_folder("none", "ca", None);
    refused(
        &nbds_uri(&server, &no_certificate),
        "a client without a certificate",
    );
    let distrusting = certificates.client_folder("distrusting", "otherca", Some("client"));
    refused(
        &nbds_uri(&server, &distrusting),
        "a client that does not trust the server",
    );
    let good = certificates.client_folder("good", "ca", Some("client"));
    let size = run_ok("nbdinfo", &["--size", &nbds_uri(&server, &good)]);
    assert_eq!(size.trim(), (64 * MIB).to_string());
    server.shutdown();
}

fn raw_greeting(stream: &mut std::net::TcpStream) {
    let mut greeting = [0u8; SERVER_GREETING_BYTES];
    std::io::Read::read_exact(stream, &mut greeting).unwrap();
    decode_server_greeting(&greeting).unwrap();
    stream
        .write_all(&(CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES).to_be_bytes())
        .unwrap();
}

fn raw_option(stream: &mut std::net::TcpStream, option: u32, data: &[u8]) -> u32 {
    let mut bytes = Vec::new();
    encode_option(&mut bytes, option, data);
    stream.write_all(&bytes).unwrap();
    read_option_reply(stream).unwrap().0.reply_type
}

#[test]
fn forced_tls_answers_options_before_starttls_with_tls_reqd_and_closes_on_export_name() {
    let Some(certificates) = certificates_or_skip(
        "forced_tls_answers_options_before_starttls_with_tls_reqd_and_closes_on_export_name",
    ) else {
        return;
    };
    let server = tls_server(&certificates, TlsMode::Required, false);
    let address = server.tcp_address().unwrap();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    raw_greeting(&mut stream);
    let mut go = Vec::new();
    InfoRequest {
        export_name: "disk".to_string(),
        info_types: vec![],
    }
    .encode(&mut go);
    for (option, data) in [
        (OPT_LIST, Vec::new()),
        (OPT_INFO, go.clone()),
        (OPT_GO, go),
        (OPT_STRUCTURED_REPLY, Vec::new()),
        (0x4242, Vec::new()),
    ] {
        assert_eq!(
            raw_option(&mut stream, option, &data),
            REP_ERR_TLS_REQD,
            "option {option}"
        );
    }
    assert_eq!(raw_option(&mut stream, OPT_STARTTLS, b"x"), REP_ERR_INVALID);
    assert_eq!(raw_option(&mut stream, OPT_ABORT, &[]), REP_ACK);

    let mut stream = std::net::TcpStream::connect(address).unwrap();
    raw_greeting(&mut stream);
    let mut bytes = Vec::new();
    encode_option(&mut bytes, OPT_EXPORT_NAME, b"disk");
    stream.write_all(&bytes).unwrap();
    let mut rest = Vec::new();
    // The server closes without a reply: end of file (or a reset) and nothing read.
    let _ = std::io::Read::read_to_end(&mut stream, &mut rest);
    assert!(
        rest.is_empty(),
        "the server answered NBD_OPT_EXPORT_NAME before TLS"
    );
    server.shutdown();
}

#[test]
fn optional_tls_serves_plaintext_and_tls_clients() {
    let test = "optional_tls_serves_plaintext_and_tls_clients";
    let Some(certificates) = certificates_if_tools(test, &["nbdinfo"]) else {
        return;
    };
    let server = tls_server(&certificates, TlsMode::Optional, false);
    let port = server.tcp_address().unwrap().port();
    let plain = run_ok("nbdinfo", &[&format!("nbd://localhost:{port}/disk")]);
    assert!(plain.contains("without TLS"), "{plain}");
    let trusting = certificates.client_folder("trusting", "ca", None);
    let secure = run_ok("nbdinfo", &[&nbds_uri(&server, &trusting)]);
    assert!(secure.contains("with TLS"), "{secure}");
    server.shutdown();
}

#[test]
fn qemu_img_writes_and_compares_over_tls() {
    let test = "qemu_img_writes_and_compares_over_tls";
    let Some(certificates) = certificates_if_tools(test, &["qemu-img"]) else {
        return;
    };
    let server = tls_server(&certificates, TlsMode::Required, true);
    let good = certificates.client_folder("good", "ca", Some("client"));
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("in.raw");
    write_file(&input, &pattern_bytes(16, (64 * MIB) as usize));
    let object = format!(
        "tls-creds-x509,id=tls0,endpoint=client,dir={}",
        good.display()
    );
    let image = format!(
        "driver=nbd,host=localhost,port={},export=disk,tls-creds=tls0",
        server.tcp_address().unwrap().port()
    );
    let input_image = format!("driver=raw,file.filename={}", input.display());
    run_ok(
        "qemu-img",
        &[
            "convert",
            "-n",
            "--object",
            &object,
            "--image-opts",
            &input_image,
            "--target-image-opts",
            &image,
        ],
    );
    run_ok(
        "qemu-img",
        &[
            "compare",
            "--object",
            &object,
            "--image-opts",
            &input_image,
            &image,
        ],
    );
    server.shutdown();
}

#[test]
fn listening_beyond_loopback_is_allowed_with_tls_required_only() {
    let Some(certificates) =
        certificates_or_skip("listening_beyond_loopback_is_allowed_with_tls_required_only")
    else {
        return;
    };
    for (mode, allowed) in [(TlsMode::Required, true), (TlsMode::Optional, false)] {
        let rustls_config = load_rustls_config(
            &certificates.path("server-cert.pem"),
            &certificates.path("server-key.pem"),
            None,
        )
        .unwrap();
        let config = ServerConfig {
            tcp_address: Some("0.0.0.0:0".parse().unwrap()),
            tls: Some(TlsSettings {
                rustls_config,
                mode,
            }),
            ..ServerConfig::default()
        };
        let export = Export::open("disk", &ExportDeviceSpec::Ram { size_bytes: MIB }).unwrap();
        match NbdServer::start(config, vec![export]) {
            Ok(server) => {
                assert!(allowed, "{mode:?} listened beyond loopback");
                server.shutdown();
            }
            Err(error) => assert!(!allowed, "{mode:?}: {error}"),
        }
    }
}

#[test]
fn a_missing_certificate_file_names_the_file() {
    let error = load_rustls_config(
        Path::new("/nonexistent/server-cert.pem"),
        Path::new("/nonexistent/server-key.pem"),
        None,
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("/nonexistent/server-cert.pem"),
        "{error}"
    );
}

/// A rustls client stream with the test CA and client certificate, after STARTTLS.
fn rustls_client_after_starttls(
    certificates: &Certificates,
    address: std::net::SocketAddr,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(certificates.path("ca-cert.pem")).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![CertificateDer::from_pem_file(certificates.path("client-cert.pem")).unwrap()],
            PrivateKeyDer::from_pem_file(certificates.path("client-key.pem")).unwrap(),
        )
        .unwrap();
    let mut socket = std::net::TcpStream::connect(address).unwrap();
    raw_greeting(&mut socket);
    assert_eq!(raw_option(&mut socket, OPT_STARTTLS, &[]), REP_ACK);
    let connection = rustls::ClientConnection::new(
        std::sync::Arc::new(config),
        ServerName::try_from("localhost").unwrap(),
    )
    .unwrap();
    rustls::StreamOwned::new(connection, socket)
}

#[test]
fn a_tls_client_in_transmission_is_ended_by_shutdown_after_its_requests() {
    let Some(certificates) = certificates_or_skip(
        "a_tls_client_in_transmission_is_ended_by_shutdown_after_its_requests",
    ) else {
        return;
    };
    let server = tls_server(&certificates, TlsMode::Required, true);
    let mut stream = rustls_client_after_starttls(&certificates, server.tcp_address().unwrap());
    let mut go = Vec::new();
    InfoRequest {
        export_name: "disk".to_string(),
        info_types: vec![],
    }
    .encode(&mut go);
    let mut bytes = Vec::new();
    encode_option(&mut bytes, OPT_GO, &go);
    stream.write_all(&bytes).unwrap();
    loop {
        let (header, _) = read_option_reply(&mut stream).unwrap();
        assert!(!header.is_error(), "GO over TLS refused: {header:?}");
        if header.reply_type == REP_ACK {
            break;
        }
    }
    let shutdown = std::thread::spawn(move || server.shutdown());
    let mut rest = Vec::new();
    // The server ends the session: end of file, a close_notify or a reset; no bytes.
    let _ = std::io::Read::read_to_end(&mut stream, &mut rest);
    assert!(rest.is_empty());
    let devices = shutdown.join().unwrap();
    assert_eq!(devices.len(), 1);
}
