//! The served client as a [`Transport`]: the one command set ([`flashpipe_api::Command`])
//! over the served client's payloads ([`Remote`]), so the command methods
//! ([`flashpipe_api::TransportExt`]) and the file streams ([`flashpipe_api::write_stream`],
//! [`flashpipe_api::read_stream`]) are the same code as over the in-process engine.
//! A command becomes the wire's command by its write payload alone (bytes inline, or a
//! granted slot), and an answer one reply; answers that are not a command's (a grant, a
//! cancel outcome, a kernel run's) are a protocol violation.

use flashpipe_api::{
    CheckSummary, CodedError, Command, Completion, ErrorCode, Limits, MismatchedReply, Payloads,
    Reply, StreamPayloads, Ticket, Transport,
};
use flashpipe_protocol::RemoteError;

use crate::client::{wire_write, Client, Response};
use crate::error::ClientError;
use crate::view::{ReadView, WriteBuffer};

/// The served client's payloads: a write sends the first bytes of a [`WriteBuffer`] (a
/// granted slot of the shared write pool, or memory of the client's own), a completed
/// write tells how many bytes it wrote, read data is a [`ReadView`], a check answers with
/// its summary, and one file of a batched read fails with the server's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote;

impl Payloads for Remote {
    type Write = WriteSource;
    type Written = u64;
    type Read = ReadView;
    type Check = CheckSummary;
    type FileError = RemoteError;
}

/// The bytes of one write command: the first `length_bytes` of `buffer`.
#[derive(Debug)]
pub struct WriteSource {
    /// Where the bytes lie (from [`Transport::write_buffer`] or [`Client::write_buffer`]).
    pub buffer: WriteBuffer,
    /// How many of its bytes to write (at most its length).
    pub length_bytes: usize,
}

impl StreamPayloads for Remote {
    fn write_bytes_mut(write: &mut WriteSource) -> &mut [u8] {
        let length_bytes = write.length_bytes;
        &mut write.buffer[..length_bytes]
    }

    fn set_write_len(write: &mut WriteSource, length_bytes: usize) {
        write.length_bytes = length_bytes.min(write.buffer.len());
    }

    fn written_bytes(written: &u64) -> u64 {
        *written
    }

    fn reuse_written(_written: u64) -> Option<WriteSource> {
        None
    }

    fn read_bytes(read: &ReadView) -> &[u8] {
        read
    }
}

impl From<MismatchedReply> for ClientError {
    fn from(error: MismatchedReply) -> ClientError {
        ClientError::Protocol(error.to_string())
    }
}

/// The server's code for an error it answered with; [`ErrorCode::Internal`] for a
/// failure on the client's side (the connection, a limit checked before sending).
impl CodedError for ClientError {
    fn code(&self) -> ErrorCode {
        self.remote()
            .map_or(ErrorCode::Internal, |remote| remote.code)
    }
}

/// The command reply of an answer; the answers to requests about the connection are
/// not a store command's.
fn reply(response: Response) -> Result<Reply<Remote>, ClientError> {
    match response {
        Response::Reply(reply) => Ok(reply),
        other => Err(not_a_reply(other.name())),
    }
}

fn not_a_reply(answer: &str) -> ClientError {
    ClientError::Protocol(format!("a {answer} answer to a store command"))
}

/// The served client is a [`Transport`]. Its own methods of the same names (`submit`,
/// `wait`, `wait_for`, `write_buffer`) speak protocol requests, which also cover what is
/// not a command (cancel, grants, kernel runs); these speak commands.
impl Transport for Client {
    type P = Remote;
    type Error = ClientError;

    fn submit(&mut self, command: Command<Remote>) -> Result<Ticket, ClientError> {
        let mut granted = None;
        let command = command
            .map_write(|source| wire_write(source.buffer, source.length_bytes, &mut granted))?;
        self.submit_command(command, granted)
    }

    fn wait(&mut self) -> Result<Completion<Remote, ClientError>, ClientError> {
        let (request_id, answer) = Client::wait(self)?;
        Ok((
            request_id,
            answer.map_err(ClientError::Remote).and_then(reply),
        ))
    }

    fn wait_for(&mut self, ticket: Ticket) -> Result<Reply<Remote>, ClientError> {
        Client::wait_for(self, ticket).and_then(reply)
    }

    fn write_buffer(&mut self, length_bytes: usize) -> Result<WriteSource, ClientError> {
        let buffer = Client::write_buffer(self)?;
        let length_bytes = length_bytes.min(buffer.len());
        Ok(WriteSource {
            buffer,
            length_bytes,
        })
    }

    fn limits(&self) -> Limits {
        let limits = &self.server_info().limits;
        Limits {
            max_read_bytes: limits.max_read_bytes,
            max_write_bytes: u64::from(limits.max_write_bytes),
            max_read_files_count: limits.max_read_files_count as usize,
            max_read_files_bytes: limits.max_read_files_bytes,
            max_in_flight: limits
                .max_in_flight_per_client
                .min(limits.max_read_handles_per_client) as usize,
        }
    }

    fn outstanding(&self) -> usize {
        self.in_flight()
    }
}
