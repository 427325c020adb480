//! `bench net --parts tls`: what TLS costs the NBD client and server. flashpipe's client
//! reads and writes a RAM export of flashpipe's server (in this process, loopback TCP) in
//! 1 MiB requests at queue depth 32, once over `nbd://` and once over `nbds://` (STARTTLS,
//! rustls on both sides, the server's TLS pump), and the ratio of the two is the row to
//! read. The server's certificate is a self-signed one made for the run by `openssl` (the
//! client trusts it as its own authority); no client certificate is asked for.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use flashpipe_device::{BlockDevice, Completion, IoBuf, Request};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};
use flashpipe_nbd::server::tls::{load_rustls_config, TlsMode, TlsSettings};
use flashpipe_nbd::server::{Export, ExportDeviceSpec, NbdServer, ServerConfig};
use serde::Serialize;

use crate::column_table::{fixed, ColumnTable};
use crate::error::{internal, io_with, not_found, BenchError};
use crate::BenchResult;

/// Bytes of each request.
const REQUEST_BYTES: u64 = 1 << 20;
/// Requests in flight.
const QUEUE_DEPTH: u32 = 32;
/// Passes over the export per direction.
const PASSES: u64 = 4;

/// One transport's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TlsRow {
    /// `nbd` (plaintext) or `nbds` (TLS).
    pub transport: &'static str,
    pub write_bytes_per_second: f64,
    pub read_bytes_per_second: f64,
}

/// Measures plaintext, then TLS, over an export of `size_bytes`; certificates go in `folder`.
pub fn run(size_bytes: u64, folder: &Path) -> BenchResult<Vec<TlsRow>> {
    assert!(
        size_bytes % REQUEST_BYTES == 0,
        "checked by check_arguments"
    );
    let certificates = folder.join("tls");
    make_certificate(&certificates)?;
    let mut rows = Vec::new();
    for (transport, tls) in [("nbd", None), ("nbds", Some(TlsMode::Required))] {
        let server = start_server(&certificates, tls, size_bytes)?;
        let port = server
            .tcp_address()
            .ok_or_else(|| internal("the NBD server has no TCP address"))?
            .port();
        let uri = match tls {
            None => format!("nbd://localhost:{port}/disk"),
            Some(_) => format!(
                "nbds://localhost:{port}/disk?tls-certificates={}",
                certificates.display()
            ),
        };
        let measured = sequential(&uri, size_bytes);
        drop(server.shutdown());
        let (write_bytes_per_second, read_bytes_per_second) = measured?;
        rows.push(TlsRow {
            transport,
            write_bytes_per_second,
            read_bytes_per_second,
        });
    }
    Ok(rows)
}

/// A self-signed certificate for `localhost` in `folder`: the server's `server-cert.pem` and
/// `server-key.pem`, and the same certificate as the client's `ca-cert.pem`.
fn make_certificate(folder: &Path) -> BenchResult {
    std::fs::create_dir_all(folder)
        .map_err(io_with(format!("cannot create {}", folder.display())))?;
    let output = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost"])
        .arg("-keyout")
        .arg(folder.join("server-key.pem"))
        .arg("-out")
        .arg(folder.join("server-cert.pem"))
        .output()
        .map_err(|error| {
            not_found(format!(
                "openssl could not be run ({error}): the tls part makes its certificate with it (Debian: apt-get install openssl)"
            ))
        })?;
    if !output.status.success() {
        return Err(internal(format!(
            "openssl could not make the test certificate: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
        .into());
    }
    std::fs::copy(folder.join("server-cert.pem"), folder.join("ca-cert.pem")).map_err(io_with(
        "cannot copy the certificate as the client's authority",
    ))?;
    Ok(())
}

fn start_server(
    certificates: &Path,
    tls: Option<TlsMode>,
    size_bytes: u64,
) -> BenchResult<NbdServer> {
    let tls = match tls {
        None => None,
        Some(mode) => Some(TlsSettings {
            rustls_config: load_rustls_config(
                &certificates.join("server-cert.pem"),
                &certificates.join("server-key.pem"),
                None,
            )
            .map_err(|error| internal(format!("the test certificate does not load: {error}")))?,
            mode,
        }),
    };
    let config = ServerConfig {
        tcp_address: Some(([127, 0, 0, 1], 0).into()),
        tls,
        ..ServerConfig::default()
    };
    let export = Export::open("disk", &ExportDeviceSpec::Ram { size_bytes })
        .map_err(|error| internal(format!("the RAM export cannot be made: {error}")))?;
    Ok(NbdServer::start(config, vec![export])
        .map_err(|error| internal(format!("the NBD server does not start: {error}")))?)
}

/// Bytes per second of sequential writes, then reads, over `uri`, [`PASSES`] passes each.
fn sequential(uri: &str, size_bytes: u64) -> BenchResult<(f64, f64)> {
    let parsed = NbdUri::parse(uri).map_err(|error| internal(format!("{uri}: {error}")))?;
    let mut config = NbdDeviceConfig::new(parsed);
    config.queue_depth = QUEUE_DEPTH;
    let mut device =
        NbdDevice::open(config).map_err(|error| internal(format!("{uri}: {error}")))?;
    let blocks_per_request = REQUEST_BYTES / u64::from(device.info().block_size_bytes);
    let requests = size_bytes / REQUEST_BYTES;
    let mut figures = [0.0; 2];
    for (figure, write) in figures.iter_mut().zip([true, false]) {
        let started = Instant::now();
        let mut completions = Vec::new();
        for index in 0..requests * PASSES {
            let block = (index % requests) * blocks_per_request;
            let buffer = IoBuf::zeroed(REQUEST_BYTES as usize);
            let request = match write {
                true => Request::write(index, block, buffer),
                false => Request::read(index, block, buffer),
            };
            if device.in_flight() >= QUEUE_DEPTH as usize {
                device
                    .wait_completions(&mut completions)
                    .map_err(|error| internal(format!("{uri}: {error}")))?;
            }
            device
                .submit(request)
                .map_err(|rejected| internal(format!("{uri}: {}", rejected.error)))?;
            check(uri, &mut completions)?;
        }
        while device.in_flight() > 0 {
            device
                .wait_completions(&mut completions)
                .map_err(|error| internal(format!("{uri}: {error}")))?;
        }
        check(uri, &mut completions)?;
        *figure = (size_bytes * PASSES) as f64 / started.elapsed().as_secs_f64();
    }
    Ok((figures[0], figures[1]))
}

fn check(uri: &str, completions: &mut Vec<Completion>) -> Result<(), BenchError> {
    for completion in completions.drain(..) {
        if let Err(error) = completion.status {
            return Err(internal(format!(
                "{uri}: request {} failed: {error}",
                completion.tag
            )));
        }
    }
    Ok(())
}

/// The TLS table: MiB/s each way per transport, and TLS over plaintext.
pub fn print_table(size_bytes: u64, rows: &[TlsRow]) {
    println!();
    println!(
        "bench net tls: flashpipe's client and server (in this process, loopback TCP), \
         sequential 1 MiB requests at queue depth {QUEUE_DEPTH}, {PASSES} passes over a \
         {} MiB RAM export each way",
        size_bytes >> 20
    );
    let mib = |bytes_per_second: f64| fixed(bytes_per_second / (1 << 20) as f64, 0);
    let mut table = ColumnTable::new("  ", rows)
        .left("transport", 9, |row| row.transport.to_string())
        .right("write MiB/s", 11, |row| mib(row.write_bytes_per_second))
        .right("read MiB/s", 10, |row| mib(row.read_bytes_per_second))
        .table();
    if let [plain, tls] = rows {
        let over_plain = |tls: f64, plain: f64| format!("{:.2}x", tls / plain);
        table.row(vec![
            "nbds/nbd".to_string(),
            over_plain(tls.write_bytes_per_second, plain.write_bytes_per_second),
            over_plain(tls.read_bytes_per_second, plain.read_bytes_per_second),
        ]);
    }
    table.print();
}
