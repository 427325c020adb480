//! The client against servers that break the protocol, scripted here on a Unix socket:
//! the oldstyle handshake, no fixed newstyle, `NBD_OPT_GO` unknown (the
//! `NBD_OPT_EXPORT_NAME` fallback with simple replies must work), refusals with their
//! messages, bad block-size constraints, transmission replies that break a rule, and
//! seeded garbage. Every case ends in an error that names the rule or the refusal, and
//! none in a panic or a hang.

mod client_support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use client_support::AcceptLoop;

use flashpipe_device::{BlockDevice, Completion, IoBuf, Request};
use flashpipe_nbd::client::{NbdDevice, NbdDeviceConfig, NbdUri};
use flashpipe_nbd::wire;

type Script = dyn Fn(&mut UnixStream) -> std::io::Result<()> + Send + Sync;

/// A scripted server: every connection runs the script, one after the other.
struct FakeServer {
    accepting: AcceptLoop,
}

impl FakeServer {
    fn start(name: &str, script: Arc<Script>) -> FakeServer {
        let socket =
            std::env::temp_dir().join(format!("fp-nbd-fake-{}-{name}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let accepting = AcceptLoop::start(socket, move |mut stream| {
            let _ = script(&mut stream);
        });
        FakeServer { accepting }
    }

    fn uri(&self) -> String {
        format!(
            "nbd+unix:///disk?socket={}",
            self.accepting.socket.display()
        )
    }

    fn open(&self) -> Result<NbdDevice, String> {
        self.open_with(|_| {})
    }

    fn open_with(&self, adjust: impl FnOnce(&mut NbdDeviceConfig)) -> Result<NbdDevice, String> {
        let mut config = NbdDeviceConfig::new(NbdUri::parse(&self.uri()).unwrap());
        config.queue_depth = 4;
        config.reconnect_attempts = 1;
        config.reconnect_first_delay_ms = 1;
        config.connect_timeout_ms = 2000;
        adjust(&mut config);
        NbdDevice::open(config).map_err(|error| error.to_string())
    }
}

/// Appends a structured data chunk for `request`: `length` bytes of 1 at `offset_bytes`,
/// the reply's last chunk when `done`.
fn data_chunk(
    bytes: &mut Vec<u8>,
    request: &wire::RequestHeader,
    offset_bytes: u64,
    length: u32,
    done: bool,
) {
    wire::encode_chunk_offset_data_header(bytes, request.cookie, offset_bytes, length, done);
    bytes.extend(std::iter::repeat_n(1u8, length as usize));
}

/// Ends the connection after a reply that claims more bytes than it sent; what the client
/// still sends is drained.
fn close_after_short_reply(stream: &mut UnixStream) -> std::io::Result<()> {
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).map(drop)
}

/// Opens a device on `server` (the handshake must succeed), reads its first block with
/// `tag` and returns that read's completion.
fn read_first_block(server: &FakeServer, tag: u64) -> Completion {
    let mut device = server.open().expect("the handshake is fine");
    device
        .submit(Request::read(tag, 0, IoBuf::zeroed(4096)))
        .unwrap();
    let mut completions = Vec::new();
    device.wait_completions(&mut completions).unwrap();
    completions.pop().unwrap()
}

fn greet(stream: &mut UnixStream, flags: u16) -> std::io::Result<u32> {
    let mut greeting = Vec::new();
    wire::encode_server_greeting(&mut greeting, flags);
    stream.write_all(&greeting)?;
    let mut client_flags = [0u8; 4];
    stream.read_exact(&mut client_flags)?;
    Ok(u32::from_be_bytes(client_flags))
}

fn read_option(stream: &mut UnixStream) -> std::io::Result<(u32, Vec<u8>)> {
    let (header, data) = wire::read_option(stream).map_err(std::io::Error::other)?;
    Ok((header.option, data))
}

fn reply(
    stream: &mut UnixStream,
    option: u32,
    reply_type: u32,
    data: &[u8],
) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    wire::encode_option_reply(&mut bytes, option, reply_type, data);
    stream.write_all(&bytes)
}

const FLAGS: u16 = wire::TRANSMISSION_FLAG_HAS_FLAGS | wire::TRANSMISSION_FLAG_SEND_FLUSH;

/// Greeting, structured replies accepted, `NBD_OPT_GO` answered with `info` and `ACK`.
fn handshake(stream: &mut UnixStream, info: &[wire::InfoReply]) -> std::io::Result<()> {
    greet(stream, wire::HANDSHAKE_FLAG_FIXED_NEWSTYLE)?;
    loop {
        let (option, _) = read_option(stream)?;
        match option {
            wire::OPT_STRUCTURED_REPLY => reply(stream, option, wire::REP_ACK, &[])?,
            wire::OPT_GO => {
                for item in info {
                    let mut data = Vec::new();
                    item.encode(&mut data);
                    reply(stream, option, wire::REP_INFO, &data)?;
                }
                return reply(stream, option, wire::REP_ACK, &[]);
            }
            other => reply(stream, other, wire::REP_ERR_UNSUP, &[])?,
        }
    }
}

fn export_info() -> Vec<wire::InfoReply> {
    vec![wire::InfoReply::Export {
        size_bytes: 1 << 20,
        transmission_flags: FLAGS,
    }]
}

fn read_request(stream: &mut UnixStream) -> std::io::Result<wire::RequestHeader> {
    let mut header = [0u8; wire::REQUEST_HEADER_BYTES];
    stream.read_exact(&mut header)?;
    wire::RequestHeader::decode(&header).map_err(std::io::Error::other)
}

fn open_error(name: &str, script: Arc<Script>) -> String {
    let server = FakeServer::start(name, script);
    match server.open() {
        Ok(_) => panic!("{name}: the device opened"),
        Err(error) => {
            assert!(error.contains(&server.uri()), "{name}: {error}");
            error
        }
    }
}

fn assert_contains(text: &str, fragment: &str) {
    assert!(text.contains(fragment), "{text:?} lacks {fragment:?}");
}

#[test]
fn handshake_refusals_and_violations_are_named() {
    assert_contains(
        &open_error(
            "oldstyle",
            Arc::new(|stream: &mut UnixStream| {
                let mut bytes = Vec::new();
                bytes.extend_from_slice(&wire::NBD_MAGIC.to_be_bytes());
                bytes.extend_from_slice(&0x0000_4202_8186_1253u64.to_be_bytes());
                bytes.extend_from_slice(&[0u8; 8 + 4 + 124]);
                stream.write_all(&bytes)
            }),
        ),
        "oldstyle",
    );
    assert_contains(
        &open_error(
            "unfixed",
            Arc::new(|stream: &mut UnixStream| greet(stream, 0).map(drop)),
        ),
        "fixed newstyle",
    );
    let refusal = |reply_type: u32, message: &'static str| -> Arc<Script> {
        Arc::new(move |stream: &mut UnixStream| {
            greet(stream, wire::HANDSHAKE_FLAG_FIXED_NEWSTYLE)?;
            loop {
                let (option, _) = read_option(stream)?;
                match option {
                    wire::OPT_GO => reply(stream, option, reply_type, message.as_bytes())?,
                    wire::OPT_ABORT => return Ok(()),
                    other => reply(stream, other, wire::REP_ACK, &[])?,
                }
            }
        })
    };
    let unknown = open_error("unknown", refusal(wire::REP_ERR_UNKNOWN, "no disk here"));
    assert_contains(&unknown, "export \"disk\" does not exist");
    assert_contains(&unknown, "no disk here");
    assert_contains(
        &open_error("tls", refusal(wire::REP_ERR_TLS_REQD, "")),
        "requires TLS",
    );
    assert_contains(
        &open_error("policy", refusal(wire::REP_ERR_POLICY, "")),
        "policy refuses",
    );
    assert_contains(
        &open_error(
            "no-export-info",
            Arc::new(|stream: &mut UnixStream| handshake(stream, &[])),
        ),
        "without the mandatory NBD_INFO_EXPORT",
    );
    let mut bad_block_size = export_info();
    bad_block_size.push(wire::InfoReply::BlockSize {
        minimum_bytes: 3,
        preferred_bytes: 4096,
        maximum_payload_bytes: 1 << 20,
    });
    let bad_block_size = Arc::new(bad_block_size);
    assert_contains(
        &open_error(
            "block-size",
            Arc::new(move |stream: &mut UnixStream| handshake(stream, &bad_block_size)),
        ),
        "the minimum is a power of two",
    );
    assert_contains(
        &open_error(
            "no-has-flags",
            Arc::new(|stream: &mut UnixStream| {
                handshake(
                    stream,
                    &[wire::InfoReply::Export {
                        size_bytes: 1 << 20,
                        transmission_flags: 0,
                    }],
                )
            }),
        ),
        "NBD_FLAG_HAS_FLAGS",
    );
    assert_contains(
        &open_error(
            "wrong-option",
            Arc::new(|stream: &mut UnixStream| {
                greet(stream, wire::HANDSHAKE_FLAG_FIXED_NEWSTYLE)?;
                let (_, _) = read_option(stream)?;
                reply(stream, wire::OPT_LIST, wire::REP_ACK, &[])
            }),
        ),
        "while NBD_OPT_STRUCTURED_REPLY was pending",
    );
}

/// A server without `NBD_OPT_GO` or structured replies: `NBD_OPT_EXPORT_NAME` and simple
/// replies serve a read.
#[test]
fn the_export_name_fallback_serves_reads_with_simple_replies() {
    let server = FakeServer::start(
        "fallback",
        Arc::new(|stream: &mut UnixStream| {
            let client_flags = greet(
                stream,
                wire::HANDSHAKE_FLAG_FIXED_NEWSTYLE | wire::HANDSHAKE_FLAG_NO_ZEROES,
            )?;
            assert_eq!(client_flags, 3, "fixed newstyle and no zeroes");
            loop {
                let (option, data) = read_option(stream)?;
                if option == wire::OPT_EXPORT_NAME {
                    assert_eq!(data, b"disk");
                    break;
                }
                reply(stream, option, wire::REP_ERR_UNSUP, &[])?;
            }
            let mut answer = Vec::new();
            answer.extend_from_slice(&(1u64 << 20).to_be_bytes());
            answer.extend_from_slice(&FLAGS.to_be_bytes());
            stream.write_all(&answer)?;
            loop {
                let request = read_request(stream)?;
                if request.command == wire::CMD_DISC {
                    return Ok(());
                }
                let mut bytes = Vec::new();
                wire::encode_simple_reply(&mut bytes, 0, request.cookie);
                bytes.extend((0..request.length_bytes).map(|index| (index % 251) as u8));
                stream.write_all(&bytes)?;
            }
        }),
    );
    let mut device = server.open().expect("open through NBD_OPT_EXPORT_NAME");
    assert!(!device.export().entered_with_go);
    assert!(!device.export().structured_replies);
    assert_eq!(device.info().block_count, 256);
    device
        .submit(Request::read(1, 2, IoBuf::zeroed(8192)))
        .unwrap();
    let mut completions: Vec<Completion> = Vec::new();
    device.wait_completions(&mut completions).unwrap();
    let completion = completions.pop().unwrap();
    assert!(completion.status.is_ok(), "{:?}", completion.status);
    let expected: Vec<u8> = (0..8192u32).map(|index| (index % 251) as u8).collect();
    assert!(completion.buffer.unwrap()[..] == expected[..]);
}

/// Transmission replies breaking a rule: the read fails with the violation named.
#[test]
fn transmission_violations_fail_the_request_naming_the_rule() {
    type Answer = fn(&mut UnixStream, &wire::RequestHeader) -> std::io::Result<()>;
    let cases: [(&str, Answer, &str); 6] = [
        (
            "unknown-cookie",
            |stream, request| {
                let mut bytes = Vec::new();
                wire::encode_chunk_none(&mut bytes, request.cookie ^ 0xdead_0000_0000);
                stream.write_all(&bytes)
            },
            "which no request in flight carries",
        ),
        (
            "outside",
            |stream, request| {
                let mut bytes = Vec::new();
                data_chunk(&mut bytes, request, request.offset_bytes + 4096, 4096, true);
                stream.write_all(&bytes)
            },
            "outside the request",
        ),
        (
            "short",
            |stream, request| {
                let mut bytes = Vec::new();
                data_chunk(&mut bytes, request, request.offset_bytes, 512, false);
                wire::encode_chunk_none(&mut bytes, request.cookie);
                stream.write_all(&bytes)
            },
            "covered 512 of its 4096 bytes",
        ),
        (
            "overlap",
            |stream, request| {
                let mut bytes = Vec::new();
                for _ in 0..2 {
                    data_chunk(&mut bytes, request, request.offset_bytes, 2048, false);
                }
                stream.write_all(&bytes)
            },
            "overlaps data already received",
        ),
        (
            "simple-read",
            |stream, request| {
                let mut bytes = Vec::new();
                wire::encode_simple_reply(&mut bytes, 0, request.cookie);
                bytes.extend_from_slice(&[0u8; 4096]);
                stream.write_all(&bytes)
            },
            "a simple reply to NBD_CMD_READ",
        ),
        (
            "bad-magic",
            |stream, _| stream.write_all(&[0x12u8; 64]),
            "reply magic",
        ),
    ];
    for (name, answer, fragment) in cases {
        let server = FakeServer::start(
            name,
            Arc::new(move |stream: &mut UnixStream| {
                handshake(stream, &export_info())?;
                let request = read_request(stream)?;
                answer(stream, &request)?;
                close_after_short_reply(stream)
            }),
        );
        let error = read_first_block(&server, 5)
            .status
            .expect_err(name)
            .to_string();
        assert_contains(&error, "protocol violation");
        assert_contains(&error, fragment);
        assert_contains(&error, &server.uri());
    }
}

/// Seeded garbage from the server, in the handshake and in transmission: errors, never
/// a panic or a hang.
#[test]
fn seeded_garbage_from_the_server_is_an_error() {
    for seed in 0..40u64 {
        let garbage = move |length: usize| -> Vec<u8> {
            let mut random = flashpipe_base::SplitMix64::new(seed);
            (0..length).map(|_| random.next_u64() as u8).collect()
        };
        let early = FakeServer::start(
            &format!("garbage-early-{seed}"),
            Arc::new(move |stream: &mut UnixStream| {
                let mut bytes = Vec::new();
                wire::encode_server_greeting(&mut bytes, wire::HANDSHAKE_FLAG_FIXED_NEWSTYLE);
                bytes.extend(garbage(64 + (seed as usize * 13) % 200));
                stream.write_all(&bytes)
            }),
        );
        assert!(early.open().is_err(), "seed {seed}");
        let late = FakeServer::start(
            &format!("garbage-late-{seed}"),
            Arc::new(move |stream: &mut UnixStream| {
                handshake(stream, &export_info())?;
                let request = read_request(stream)?;
                let mut bytes = Vec::new();
                bytes.extend_from_slice(&wire::STRUCTURED_REPLY_MAGIC.to_be_bytes());
                bytes.extend(garbage(2));
                bytes.extend_from_slice(&(seed as u16 % 4).to_be_bytes());
                bytes.extend_from_slice(&request.cookie.to_be_bytes());
                bytes.extend(garbage(4 + (seed as usize * 7) % 100));
                stream.write_all(&bytes)?;
                close_after_short_reply(stream)
            }),
        );
        assert!(read_first_block(&late, 1).status.is_err(), "seed {seed}");
    }
}

/// A server that takes requests and never answers (a partition without a reset): the
/// request fails after the reply timeout and the bounded reconnect, naming the silence.
#[test]
fn a_server_that_never_replies_times_out() {
    let server = FakeServer::start(
        "silent",
        Arc::new(|stream: &mut UnixStream| {
            handshake(stream, &export_info())?;
            let mut rest = Vec::new();
            stream.read_to_end(&mut rest).map(drop)
        }),
    );
    let mut device = server
        .open_with(|config| config.reply_timeout_ms = 200)
        .expect("the handshake is fine");
    let mut completions = Vec::new();
    // The reply timeout passes twice with nothing in flight: counted, and nothing else.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while device.idle_reply_timeouts() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the reply timeout never passed"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(device.poll_completions(&mut completions), 0);
    assert_eq!(
        device.counters().connections_lost,
        0,
        "an idle connection outlives the reply timeout"
    );
    device
        .submit(Request::read(3, 0, IoBuf::zeroed(4096)))
        .unwrap();
    device.wait_completions(&mut completions).unwrap();
    let error = completions
        .pop()
        .unwrap()
        .status
        .expect_err("no reply")
        .to_string();
    assert_contains(
        &error,
        "no reply from the server for 200 ms with 1 requests in flight",
    );
    assert_contains(&error, &server.uri());
}
