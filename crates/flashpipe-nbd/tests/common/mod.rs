//! Shared support of the NBD server's tests: a server on an ephemeral port and a
//! temporary Unix socket, tool lookup with a clear skip message, commands run under a
//! time limit, and a small raw-protocol client built on `wire`.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use flashpipe_nbd::server::{
    Export, ExportDeviceSpec, NbdServer, ReaderWindow, ServerConfig, ServerLimits,
};
use flashpipe_nbd::wire::*;

/// Seconds any external tool may take before the test fails.
pub const TOOL_TIME_LIMIT_SECONDS: u32 = 120;

/// A server with RAM exports, listening on 127.0.0.1:0 and a Unix socket in a
/// temporary folder; shut down on drop.
pub struct TestServer {
    pub server: Option<NbdServer>,
    pub folder: tempfile::TempDir,
}

impl TestServer {
    /// Exports `(name, size_bytes)` RAM disks.
    pub fn ram(exports: &[(&str, u64)]) -> TestServer {
        TestServer::with_limits(exports, ServerLimits::default())
    }

    /// [`TestServer::ram`] for the test `test` when the programs `tools` are installed;
    /// `None` (the test skips, saying why) when one is missing.
    pub fn ram_if_tools(test: &str, tools: &[&str], exports: &[(&str, u64)]) -> Option<TestServer> {
        tool_or_skip(test, tools).then(|| TestServer::ram(exports))
    }

    /// The same with chosen limits.
    pub fn with_limits(exports: &[(&str, u64)], limits: ServerLimits) -> TestServer {
        let exports = exports
            .iter()
            .map(|(name, size_bytes)| {
                Export::open(
                    name,
                    &ExportDeviceSpec::Ram {
                        size_bytes: *size_bytes,
                    },
                )
                .expect("a RAM export opens")
            })
            .collect();
        TestServer::with_exports(exports, limits)
    }

    /// Serves the given exports: with `FLASHPIPE_SPIN_US` set, every waiting thread and
    /// reader polls that long first; else the defaults (the automatic reader window).
    pub fn with_exports(exports: Vec<Export>, limits: ServerLimits) -> TestServer {
        match flashpipe_base::WaitPolicy::from_environment().and_then(Result::ok) {
            Some(spin) => TestServer::with_spin(exports, limits, spin),
            None => TestServer::with_waits(exports, limits, Default::default(), Default::default()),
        }
    }

    /// Serves the given exports, every waiting thread and reader polling for `spin` first.
    pub fn with_spin(
        exports: Vec<Export>,
        limits: ServerLimits,
        spin: flashpipe_base::WaitPolicy,
    ) -> TestServer {
        TestServer::with_waits(exports, limits, spin, ReaderWindow::Fixed(spin))
    }

    /// Serves the given exports with the hand-off spin `spin` and the reader window `window`.
    pub fn with_waits(
        exports: Vec<Export>,
        limits: ServerLimits,
        spin: flashpipe_base::WaitPolicy,
        reader_window: ReaderWindow,
    ) -> TestServer {
        let folder = tempfile::tempdir().expect("a temporary folder");
        let config = ServerConfig {
            tcp_address: Some("127.0.0.1:0".parse().unwrap()),
            unix_socket_path: Some(folder.path().join("nbd.sock")),
            allow_non_loopback: false,
            tls: None,
            limits,
            log_connections: false,
            spin,
            reader_window,
        };
        let server = NbdServer::start(config, exports).expect("the server starts");
        TestServer {
            server: Some(server),
            folder,
        }
    }

    pub fn server(&self) -> &NbdServer {
        self.server.as_ref().expect("the server runs")
    }

    /// `nbd://127.0.0.1:PORT/NAME`.
    pub fn tcp_uri(&self, name: &str) -> String {
        format!("nbd://{}/{name}", self.server().tcp_address().unwrap())
    }

    /// `nbd+unix:///NAME?socket=PATH`.
    pub fn unix_uri(&self, name: &str) -> String {
        format!(
            "nbd+unix:///{name}?socket={}",
            self.server().unix_socket_path().unwrap().display()
        )
    }

    pub fn connect_tcp(&self) -> TcpStream {
        TcpStream::connect(self.server().tcp_address().unwrap()).expect("connects")
    }

    pub fn scratch(&self, name: &str) -> PathBuf {
        self.folder.path().join(name)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

/// Whether every one of `tools` is on the PATH; says why `test` is skipped when one is not (a
/// failure under `FLASHPIPE_REQUIRE_TOOLS=1`).
pub fn tool_or_skip(test: &str, tools: &[&str]) -> bool {
    flashpipe_testkit::tools::programs_or_skip(test, tools)
}

/// Runs `program` with `arguments` under `timeout`, returning its output.
pub fn run_tool(program: &str, arguments: &[&str]) -> Output {
    let limit = TOOL_TIME_LIMIT_SECONDS.to_string();
    let mut all = vec!["--kill-after=5", limit.as_str(), program];
    all.extend_from_slice(arguments);
    Command::new("timeout")
        .args(&all)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {program}: {error}"))
}

/// Runs a tool and fails the test with its output unless it exits 0; returns stdout.
pub fn run_ok(program: &str, arguments: &[&str]) -> String {
    let output = run_tool(program, arguments);
    assert!(
        output.status.success(),
        "{program} {arguments:?} failed ({}):\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// How often [`wait_until`] looks again.
pub const WAIT_POLL: Duration = Duration::from_millis(2);

/// Waits until `condition` holds, looking every [`WAIT_POLL`], for at most `timeout`; true
/// when it held. Tests wait on what the server reports (its open connections, a file a tool
/// writes when ready), never for a guessed time.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(WAIT_POLL);
    }
}

/// Bytes of a seeded pattern (SplitMix64), for files whose contents a test checks.
pub fn pattern_bytes(seed: u64, length_bytes: usize) -> Vec<u8> {
    let mut random = flashpipe_device::SplitMix64::new(seed);
    let mut bytes = Vec::with_capacity(length_bytes + 8);
    while bytes.len() < length_bytes {
        bytes.extend_from_slice(&random.next_u64().to_le_bytes());
    }
    bytes.truncate(length_bytes);
    bytes
}

pub fn write_file(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("writes the scratch file");
}

/// A request header's bytes on the wire.
pub fn request_header_bytes(
    flags: u16,
    command: u16,
    cookie: u64,
    offset_bytes: u64,
    length_bytes: u32,
) -> Vec<u8> {
    RequestHeader::new(flags, command, cookie, offset_bytes, length_bytes).to_bytes()
}

/// A minimal NBD client over any stream, for driving the server byte by byte.
pub struct RawClient<S: Read + Write> {
    pub stream: S,
    pub structured: bool,
    pub size_bytes: u64,
    pub transmission_flags: u16,
}

impl<S: Read + Write> RawClient<S> {
    /// Handshake: fixed newstyle with NO_ZEROES, optionally structured replies and
    /// `base:allocation`, then `NBD_OPT_GO` for `export`.
    pub fn connect(mut stream: S, export: &str, structured: bool) -> RawClient<S> {
        let mut greeting = [0u8; SERVER_GREETING_BYTES];
        stream.read_exact(&mut greeting).unwrap();
        let flags = decode_server_greeting(&greeting).unwrap();
        assert_ne!(flags & HANDSHAKE_FLAG_FIXED_NEWSTYLE, 0);
        stream
            .write_all(&(CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES).to_be_bytes())
            .unwrap();
        let mut client = RawClient {
            stream,
            structured,
            size_bytes: 0,
            transmission_flags: 0,
        };
        if structured {
            let replies = client.option(OPT_STRUCTURED_REPLY, &[]);
            assert_eq!(replies.last().unwrap().0.reply_type, REP_ACK);
            let mut data = Vec::new();
            MetaContextRequest {
                export_name: export.to_string(),
                queries: vec![META_CONTEXT_BASE_ALLOCATION.to_string()],
            }
            .encode(&mut data);
            let replies = client.option(OPT_SET_META_CONTEXT, &data);
            assert_eq!(replies[0].0.reply_type, REP_META_CONTEXT);
        }
        let mut data = Vec::new();
        InfoRequest {
            export_name: export.to_string(),
            info_types: vec![INFO_BLOCK_SIZE],
        }
        .encode(&mut data);
        let replies = client.option(OPT_GO, &data);
        assert_eq!(replies.last().unwrap().0.reply_type, REP_ACK, "GO {export}");
        for (header, data) in &replies {
            if header.reply_type == REP_INFO {
                if let Ok(InfoReply::Export {
                    size_bytes,
                    transmission_flags,
                }) = InfoReply::decode(data)
                {
                    client.size_bytes = size_bytes;
                    client.transmission_flags = transmission_flags;
                }
            }
        }
        client
    }

    /// Sends an option and reads replies up to the final one (ACK or an error).
    pub fn option(&mut self, option: u32, data: &[u8]) -> Vec<(OptionReplyHeader, Vec<u8>)> {
        let mut bytes = Vec::new();
        encode_option(&mut bytes, option, data);
        self.stream.write_all(&bytes).unwrap();
        let mut replies = Vec::new();
        loop {
            let (header, data) = read_option_reply(&mut self.stream).unwrap();
            let last = header.reply_type == REP_ACK || header.is_error();
            replies.push((header, data));
            if last {
                return replies;
            }
        }
    }

    /// Sends, without waiting, 16 FUA writes of [`pattern_bytes`] to this client's 16
    /// blocks of 8 KiB (client `index` writes blocks `16 * index` on; cookies 0 to 15), then a
    /// write of zeroes (no hole) of 1 MiB at 3 MiB (cookie 99).
    pub fn send_pipelined_writes(&mut self, index: u64) {
        const MIB: u64 = 1024 * 1024;
        for block in 0..16u64 {
            let offset = (index * 16 + block) * 8192;
            self.send(
                CMD_WRITE,
                CMD_FLAG_FUA,
                block,
                offset,
                8192,
                &pattern_bytes(offset, 8192),
            );
        }
        self.send(
            CMD_WRITE_ZEROES,
            CMD_FLAG_NO_HOLE,
            99,
            3 * MIB,
            MIB as u32,
            &[],
        );
    }

    /// Sends a request (and a write's payload) without waiting.
    pub fn send(
        &mut self,
        command: u16,
        flags: u16,
        cookie: u64,
        offset_bytes: u64,
        length_bytes: u32,
        payload: &[u8],
    ) {
        let mut bytes = request_header_bytes(flags, command, cookie, offset_bytes, length_bytes);
        bytes.extend_from_slice(payload);
        self.stream.write_all(&bytes).unwrap();
    }

    /// Reads one whole reply: (cookie, error, data). Structured chunks are gathered
    /// until the DONE chunk; `read_lengths` gives a simple read reply's data length.
    pub fn receive(
        &mut self,
        read_lengths: &std::collections::HashMap<u64, u32>,
    ) -> (u64, u32, Vec<u8>) {
        let mut data = Vec::new();
        let mut error = 0;
        loop {
            match read_reply_header(&mut self.stream).unwrap() {
                ReplyHeader::Simple { error, cookie } => {
                    let length = if error == 0 {
                        read_lengths.get(&cookie).copied().unwrap_or(0)
                    } else {
                        0
                    };
                    let mut bytes = vec![0u8; length as usize];
                    self.stream.read_exact(&mut bytes).unwrap();
                    return (cookie, error, bytes);
                }
                ReplyHeader::Structured(header) => {
                    let mut payload = vec![0u8; header.length_bytes as usize];
                    self.stream.read_exact(&mut payload).unwrap();
                    match header.reply_type {
                        REPLY_TYPE_OFFSET_DATA => data.extend_from_slice(&payload[8..]),
                        REPLY_TYPE_BLOCK_STATUS => data.extend_from_slice(&payload),
                        REPLY_TYPE_NONE => {}
                        other if other & REPLY_TYPE_FLAG_ERROR != 0 => {
                            error = decode_error_payload(other, &payload).unwrap().error;
                        }
                        other => panic!("unexpected chunk type {other}"),
                    }
                    if header.is_done() {
                        return (header.cookie, error, data);
                    }
                }
            }
        }
    }

    /// One request, waiting for its reply: (error, data).
    pub fn request(
        &mut self,
        command: u16,
        flags: u16,
        offset_bytes: u64,
        length_bytes: u32,
        payload: &[u8],
    ) -> (u32, Vec<u8>) {
        self.send(command, flags, 77, offset_bytes, length_bytes, payload);
        let lengths = std::collections::HashMap::from([(
            77,
            if command == CMD_READ { length_bytes } else { 0 },
        )]);
        let (cookie, error, data) = self.receive(&lengths);
        assert_eq!(cookie, 77);
        (error, data)
    }
}
