//! The command set over a transport that keeps files in memory and answers out of order:
//! every `TransportExt` method, both streams, and a transport that breaks the protocol
//! (answers of the wrong kind or length) failing with an error, never a panic.

use std::collections::{BTreeMap, VecDeque};

use flashpipe_api::{
    read_stream, read_stream_retrying, write_stream, ApiError, Command, CommandKind, Completion,
    CopyMethod, CopyReport, ErrorCode, FileId, FileStat, FsStats, Limits, NeverRetry, Payloads,
    ReadRetry, ReadWindow, Reply, ReplyMap, StreamError, Ticket, Transport, TransportExt,
};

use flashpipe_api::VecPayloads as Memory;

/// How the fake engine misbehaves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    AnswerDone,
    ShortReads,
    /// Every other read is refused for want of read buffers, three times in all.
    RefuseReads,
}

struct MemoryTransport {
    files: BTreeMap<String, Vec<u8>>,
    ready: VecDeque<Completion<Memory, ApiError>>,
    stashed: VecDeque<Completion<Memory, ApiError>>,
    next_ticket: Ticket,
    fault: Fault,
    max_in_flight_seen: usize,
    reads_seen: usize,
}

impl MemoryTransport {
    fn new(fault: Fault) -> MemoryTransport {
        MemoryTransport {
            files: BTreeMap::new(),
            ready: VecDeque::new(),
            stashed: VecDeque::new(),
            next_ticket: 1,
            fault,
            max_in_flight_seen: 0,
            reads_seen: 0,
        }
    }

    fn stat_of(&self, name: &str) -> Result<FileStat, ApiError> {
        let data = self.file(name)?;
        Ok(FileStat {
            file_id: FileId(name.len() as u64),
            name: name.to_string(),
            size_bytes: data.len() as u64,
            allocated_blocks: 0,
            shared_bytes: 0,
            modified_clock_ns: 0,
            mode: None,
            owner: None,
            modified_wall_ns: None,
        })
    }

    fn file(&self, name: &str) -> Result<&Vec<u8>, ApiError> {
        self.files
            .get(name)
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("no file {name}")))
    }

    fn execute(&mut self, command: Command<Memory>) -> Result<Reply<Memory>, ApiError> {
        if self.fault == Fault::AnswerDone {
            return Ok(Reply::Done);
        }
        let exists = |name: &str| ApiError::new(ErrorCode::Exists, format!("{name} exists"));
        Ok(match command {
            Command::Create { name } => {
                if self.files.contains_key(&name) {
                    return Err(exists(&name));
                }
                self.files.insert(name, Vec::new());
                Reply::Done
            }
            Command::Write {
                name,
                offset_bytes,
                data,
            } => {
                let file = self
                    .files
                    .get_mut(&name)
                    .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no file"))?;
                let end = offset_bytes as usize + data.len();
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[offset_bytes as usize..end].copy_from_slice(&data);
                Reply::Written { buffer: data }
            }
            Command::Read {
                name,
                offset_bytes,
                length_bytes,
            } => {
                self.reads_seen += 1;
                if self.fault == Fault::RefuseReads
                    && self.reads_seen % 2 == 0
                    && self.reads_seen <= 6
                {
                    return Err(ApiError::new(
                        ErrorCode::ReadBuffersExhausted,
                        "no read buffers",
                    ));
                }
                let file = self.file(&name)?;
                let mut end = (offset_bytes + length_bytes) as usize;
                if self.fault == Fault::ShortReads {
                    end -= 1;
                }
                Reply::Data(file[offset_bytes as usize..end].to_vec())
            }
            Command::ReadFiles { names } => {
                Reply::Files(names.iter().map(|name| self.file(name).cloned()).collect())
            }
            Command::Truncate { name, size_bytes } => {
                self.files
                    .get_mut(&name)
                    .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no file"))?
                    .resize(size_bytes as usize, 0);
                Reply::Done
            }
            Command::Delete { name } => {
                self.files
                    .remove(&name)
                    .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no file"))?;
                Reply::Done
            }
            Command::Rename { from, to, replace } => {
                if !replace && self.files.contains_key(&to) {
                    return Err(exists(&to));
                }
                let data = self
                    .files
                    .remove(&from)
                    .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no file"))?;
                self.files.insert(to, data);
                Reply::Done
            }
            Command::Copy { from, to, .. } => {
                let data = self.file(&from)?.clone();
                let bytes_by_bytes = data.len() as u64;
                self.files.insert(to, data);
                Reply::Copied(CopyReport {
                    blocks_by_reference: 0,
                    bytes_by_bytes,
                })
            }
            Command::Stat { name } => Reply::Stat(self.stat_of(&name)?),
            Command::List => Reply::List(
                self.files
                    .keys()
                    .map(|name| self.stat_of(name))
                    .collect::<Result<_, _>>()?,
            ),
            Command::Stats => Reply::Stats(FsStats {
                fs_block_size_bytes: 4096,
                fs_block_count: 1,
                used_blocks: 0,
                shared_blocks: 0,
                saved_blocks: 0,
                free_blocks: 1,
                pending_free_blocks: 0,
                reserved_blocks: 0,
                file_count: self.files.len() as u64,
                commit_sequence: 1,
                unflushed_changes: false,
            }),
            Command::Flush => Reply::Done,
            Command::Check => Reply::Check(true),
            Command::SetAttributes { name, .. } => {
                self.stat_of(&name)?;
                Reply::Done
            }
        })
    }
}

impl Transport for MemoryTransport {
    type P = Memory;
    type Error = ApiError;

    fn submit(&mut self, command: Command<Memory>) -> Result<Ticket, ApiError> {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let result = self.execute(command);
        // answers come newest first: out of order
        self.ready.push_front((ticket, result));
        self.max_in_flight_seen = self.max_in_flight_seen.max(self.outstanding());
        Ok(ticket)
    }

    fn wait(&mut self) -> Result<Completion<Memory, ApiError>, ApiError> {
        self.stashed
            .pop_front()
            .or_else(|| self.ready.pop_front())
            .ok_or_else(|| ApiError::new(ErrorCode::EngineBusy, "nothing outstanding"))
    }

    fn wait_for(&mut self, ticket: Ticket) -> Result<Reply<Memory>, ApiError> {
        if let Some(at) = self.stashed.iter().position(|(id, _)| *id == ticket) {
            return self.stashed.remove(at).expect("found").1;
        }
        loop {
            let completion = self
                .ready
                .pop_front()
                .ok_or_else(|| ApiError::new(ErrorCode::EngineBusy, "no such ticket"))?;
            if completion.0 == ticket {
                return completion.1;
            }
            self.stashed.push_back(completion);
        }
    }

    fn write_buffer(&mut self, length_bytes: usize) -> Result<Vec<u8>, ApiError> {
        Ok(vec![0; length_bytes])
    }

    fn limits(&self) -> Limits {
        Limits {
            max_read_bytes: 10,
            max_write_bytes: 1 << 20,
            max_read_files_count: 4,
            max_read_files_bytes: 40,
            max_in_flight: 3,
        }
    }

    fn outstanding(&self) -> usize {
        self.ready.len() + self.stashed.len()
    }
}

#[test]
fn every_command_has_one_method_over_any_transport() {
    let mut transport = MemoryTransport::new(Fault::None);
    transport.create("a").expect("create");
    assert_eq!(
        transport.create("a").expect_err("exists").code,
        ErrorCode::Exists
    );
    let written = transport.write("a", 2, b"xyz".to_vec()).expect("write");
    assert_eq!(written, b"xyz");
    assert_eq!(transport.read("a", 1, 3).expect("read"), b"\0xy");
    assert_eq!(transport.stat("a").expect("stat").size_bytes, 5);
    transport.truncate("a", 3).expect("truncate");
    let report = transport.copy("a", "b", CopyMethod::Bytes).expect("copy");
    assert_eq!(report.bytes_by_bytes, 3);
    assert_eq!(
        transport.rename("a", "b").expect_err("b exists").code,
        ErrorCode::Exists
    );
    transport
        .rename_replacing("a", "b")
        .expect("rename replacing");
    transport.rename("b", "c").expect("rename");
    let files = transport
        .read_files(vec!["c".into(), "gone".into()])
        .expect("read files");
    assert_eq!(files[0].as_deref().expect("c read"), b"\0\0x");
    assert_eq!(
        files[1].as_ref().expect_err("gone").code,
        ErrorCode::NotFound
    );
    let names: Vec<String> = transport
        .list()
        .expect("list")
        .into_iter()
        .map(|stat| stat.name)
        .collect();
    assert_eq!(names, ["c"]);
    assert_eq!(transport.stats().expect("stats").file_count, 1);
    transport.flush().expect("flush");
    assert!(transport.check().expect("check"));
    transport.delete("c").expect("delete");
    assert_eq!(
        transport.stat("c").expect_err("deleted").code,
        ErrorCode::NotFound
    );
}

#[test]
fn a_file_streams_in_and_out_in_order_with_answers_out_of_order() {
    let mut transport = MemoryTransport::new(Fault::None);
    transport.create("f").expect("create");
    transport.write("f", 0, vec![1; 100]).expect("old bytes");
    let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let mut acknowledged = Vec::new();
    let written = write_stream(&mut transport, "f", &mut &data[..], 64, 8, &mut |done| {
        acknowledged.push(done)
    })
    .expect("write stream");
    assert_eq!(written, 1000);
    assert_eq!(acknowledged.last(), Some(&1000));
    assert!(acknowledged.windows(2).all(|pair| pair[0] < pair[1]));
    assert!(
        transport.max_in_flight_seen <= 3,
        "in flight held to the limit"
    );
    let mut out = Vec::new();
    let read = read_stream(
        &mut transport,
        "f",
        &mut |chunk| {
            out.extend_from_slice(chunk);
            Ok(())
        },
        64,
        8,
        &mut |_| {},
    )
    .expect("read stream");
    assert_eq!(read, 1000);
    assert_eq!(
        out, data,
        "read in order, in chunks of the transport's limit"
    );
}

#[test]
fn a_stream_over_a_transport_that_breaks_the_protocol_fails_cleanly() {
    let mut transport = MemoryTransport::new(Fault::ShortReads);
    transport.create("f").expect("create");
    transport.write("f", 0, vec![7; 30]).expect("write");
    let result = read_stream(&mut transport, "f", &mut |_| Ok(()), 10, 2, &mut |_| {});
    match result {
        Err(StreamError::Transport(error)) => {
            assert_eq!(error.code, ErrorCode::Internal);
            assert!(error.message.contains("data of another length"), "{error}");
        }
        _ => panic!("a short read must fail the stream"),
    }
    let mut transport = MemoryTransport::new(Fault::AnswerDone);
    let error = transport.stat("f").expect_err("stat answered done");
    assert_eq!(
        error.message,
        "a stat command was answered with a done reply; the server does not follow the protocol"
    );
}

/// Tries a read refused for want of read buffers again (counting the tries), gives up on
/// any other failure.
#[derive(Default)]
struct RetryBuffers {
    tries: usize,
    successes: usize,
}

impl ReadRetry<ApiError> for RetryBuffers {
    fn failed(&mut self, error: ApiError) -> Result<(), ApiError> {
        if error.code != ErrorCode::ReadBuffersExhausted {
            return Err(error);
        }
        self.tries += 1;
        Ok(())
    }

    fn succeeded(&mut self) {
        self.successes += 1;
    }
}

/// File `f` read whole through `retry`: its stat at the start and its bytes.
fn read_whole<R: ReadRetry<ApiError>>(
    transport: &mut MemoryTransport,
    window: ReadWindow,
    retry: &mut R,
) -> Result<(FileStat, Vec<u8>), StreamError<ApiError>> {
    let mut out = Vec::new();
    let mut sink = |chunk: &[u8]| {
        out.extend_from_slice(chunk);
        Ok(())
    };
    let stat = read_stream_retrying(transport, "f", &mut sink, window, &mut |_| {}, retry)?;
    Ok((stat, out))
}

#[test]
fn a_refused_read_is_tried_again_when_the_retry_says_so_and_fails_the_stream_otherwise() {
    let data: Vec<u8> = (0..=255u8).cycle().take(95).collect();
    let window = ReadWindow {
        chunk_bytes: 10,
        in_flight: 3,
    };
    let mut transport = MemoryTransport::new(Fault::RefuseReads);
    transport.files.insert("f".into(), data.clone());
    let mut retry = RetryBuffers::default();
    let (stat, out) =
        read_whole(&mut transport, window, &mut retry).expect("refused reads tried again");
    assert_eq!(stat.size_bytes, 95);
    assert_eq!(out, data, "every byte once, in order");
    assert_eq!(retry.tries, 3);
    assert!(retry.successes >= 10, "each chunk read at least once");
    assert!(transport.max_in_flight_seen <= 3, "the window holds");

    let mut transport = MemoryTransport::new(Fault::RefuseReads);
    transport.files.insert("f".into(), data);
    match read_whole(&mut transport, window, &mut NeverRetry) {
        Err(StreamError::Transport(error)) => {
            assert_eq!(error.code, ErrorCode::ReadBuffersExhausted)
        }
        _ => panic!("without a retry a refused read fails the stream"),
    }
}

struct Lengths;

#[derive(Debug, PartialEq)]
struct Counted;

impl Payloads for Counted {
    type Write = usize;
    type Written = u64;
    type Read = usize;
    type Check = String;
    type FileError = String;
}

impl ReplyMap<Memory, Counted> for Lengths {
    fn written(&mut self, written: Vec<u8>) -> u64 {
        written.len() as u64
    }
    fn read(&mut self, read: Vec<u8>) -> usize {
        read.len()
    }
    fn file_error(&mut self, error: ApiError) -> String {
        error.message
    }
    fn check(&mut self, check: bool) -> String {
        check.to_string()
    }
}

#[test]
fn payloads_map_between_transports() {
    let command: Command<Memory> = Command::Write {
        name: "f".into(),
        offset_bytes: 4,
        data: vec![1, 2, 3],
    };
    assert_eq!(command.kind(), CommandKind::Write);
    let mapped: Command<Counted> = command
        .map_write(|data| Ok::<_, ()>(data.len()))
        .expect("mapped");
    match mapped {
        Command::Write {
            name,
            offset_bytes,
            data,
        } => assert_eq!((name.as_str(), offset_bytes, data), ("f", 4, 3)),
        _ => panic!("a write maps to a write"),
    }
    let rename: Command<Memory> = Command::Rename {
        from: "a".into(),
        to: "b".into(),
        replace: true,
    };
    assert_eq!(rename.kind(), CommandKind::RenameReplacing);
    let reply: Reply<Memory> = Reply::Files(vec![
        Ok(vec![0; 5]),
        Err(ApiError::new(ErrorCode::NotFound, "gone")),
    ]);
    match reply.map_payloads(&mut Lengths) {
        Reply::Files(files) => assert_eq!(files, vec![Ok(5), Err("gone".to_string())]),
        _ => panic!("files map to files"),
    }
    let reply: Reply<Memory> = Reply::Written { buffer: vec![0; 9] };
    assert_eq!(
        reply.map_payloads(&mut Lengths),
        Reply::<Counted>::Written { buffer: 9 }
    );
}
