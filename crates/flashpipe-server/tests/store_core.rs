//! The store server's request rules without a socket or a thread: a `StoreServerCore`
//! over a host with no shared memory admits commands within its limits, refuses the
//! rest by name (a repeated request id ends the connection), gives every byte back when
//! a request is answered or abandoned, and turns engine replies into answer frames.

use std::cell::Cell;

use flashpipe_api::{Command, Payloads, Reply};
use flashpipe_protocol::{
    CheckSummary, DataPayload, ErrorCode, Frame, RemoteError, Response, WireCommand, WireReply,
    WritePayload,
};
use flashpipe_server::{CoreHost, CoreLimits, Refused, StoreServerCore};

/// Engine payloads of the test: a write is its bytes.
#[derive(Debug)]
struct Bytes;

impl Payloads for Bytes {
    type Write = Vec<u8>;
    type Written = u64;
    type Read = Vec<u8>;
    type Check = CheckSummary;
    type FileError = RemoteError;
}

/// A copying connection with a server-wide budget of `server_bytes`.
struct Host {
    server_bytes: u64,
    taken: Cell<u64>,
}

impl CoreHost for Host {
    type Engine = Bytes;

    fn reserve_read_handle(&self) -> Result<bool, RemoteError> {
        Ok(false)
    }

    fn cancel_read_handle(&self) {
        panic!("a copying connection reserves no read handle");
    }

    fn forfeit_grant(&self, _slot: u32) {}

    fn take_server_bytes(&self, bytes: u64) -> Result<(), RemoteError> {
        if self.taken.get() + bytes > self.server_bytes {
            return Err(RemoteError::new(ErrorCode::ServerBytesInFlight, "full"));
        }
        self.taken.set(self.taken.get() + bytes);
        Ok(())
    }

    fn give_back_server_bytes(&self, bytes: u64) {
        self.taken.set(self.taken.get() - bytes);
    }

    fn engine_write(
        &self,
        data: WritePayload,
        _max_write_bytes: u64,
    ) -> Result<Vec<u8>, RemoteError> {
        match data {
            WritePayload::Inline(bytes) => Ok(bytes),
            WritePayload::Granted { .. } => {
                Err(RemoteError::new(ErrorCode::NotMapped, "no write pool"))
            }
        }
    }
}

const LIMITS: CoreLimits = CoreLimits {
    max_in_flight: 3,
    max_write_bytes: 100,
    max_bytes_in_flight: 250,
    max_read_bytes: 1000,
    max_read_files_bytes: 5000,
};

fn host() -> Host {
    Host {
        server_bytes: 10_000,
        taken: Cell::new(0),
    }
}

fn write(length_bytes: usize) -> WireCommand {
    Command::Write {
        name: "f".into(),
        offset_bytes: 0,
        data: WritePayload::Inline(vec![7; length_bytes]),
    }
}

fn refused_code(refused: Refused) -> ErrorCode {
    match refused {
        Refused::Request(error) => error.code,
        Refused::Connection(error) => panic!("the connection was ended: {}", error.message),
    }
}

#[test]
fn commands_within_the_limits_are_admitted_and_the_rest_refused_by_name() {
    let host = host();
    let mut core = StoreServerCore::new(LIMITS);
    let command = core.admit_command(&host, 1, write(100)).expect("admitted");
    assert!(matches!(command, Command::Write { data, .. } if data == vec![7; 100]));
    let refused = core
        .admit_command(&host, 2, write(101))
        .expect_err("too large");
    assert_eq!(refused_code(refused), ErrorCode::WriteTooLarge);
    core.admit_command(&host, 2, write(100)).expect("admitted");
    let refused = core.admit_command(&host, 3, write(60)).expect_err("bytes");
    assert_eq!(refused_code(refused), ErrorCode::ClientBytesInFlight);
    core.admit_command(&host, 3, Command::Stat { name: "f".into() })
        .expect("a stat holds no bytes");
    let refused = core
        .admit_command(&host, 4, Command::List)
        .expect_err("count");
    assert_eq!(refused_code(refused), ErrorCode::TooManyInFlight);
    match core.admit_command(&host, 3, Command::List) {
        Err(Refused::Connection(error)) => assert_eq!(error.code, ErrorCode::MalformedFrame),
        _ => panic!("a request id already in flight ends the connection"),
    }
    assert_eq!(core.in_flight_count(), 3);
    assert_eq!(core.bytes_in_flight(), 200);
    assert_eq!(host.taken.get(), 200);
}

#[test]
fn answers_and_abandons_give_every_byte_back() {
    let host = host();
    let mut core = StoreServerCore::new(LIMITS);
    core.admit_command(&host, 1, write(50)).expect("admitted");
    core.admit_command(
        &host,
        2,
        Command::Read {
            name: "f".into(),
            offset_bytes: 0,
            length_bytes: 5000,
        },
    )
    .expect_err("a read may bring more than the client's byte budget");
    core.admit_command(
        &host,
        2,
        Command::Read {
            name: "f".into(),
            offset_bytes: 0,
            length_bytes: 20,
        },
    )
    .expect("admitted");
    let granted = Command::Write {
        name: "f".into(),
        offset_bytes: 0,
        data: WritePayload::Granted {
            slot: 0,
            length_bytes: 10,
        },
    };
    let refused = core.admit_command(&host, 3, granted).expect_err("no pool");
    assert_eq!(refused_code(refused), ErrorCode::NotMapped);
    assert!(!core.is_in_flight(3), "a refused mapping holds nothing");
    let frame = core
        .answer(
            &host,
            1,
            Ok::<_, RemoteError>(Reply::Written { buffer: 50 }),
            |error| error,
            |reply, _| match reply {
                Reply::Written { buffer } => WireReply::Written { buffer },
                other => panic!("unexpected {}", other.name()),
            },
        )
        .expect("in flight");
    assert_eq!(
        frame,
        Frame::Response {
            request_id: 1,
            response: Response::Reply(WireReply::Written { buffer: 50 }),
        }
    );
    let frame = core
        .answer(
            &host,
            2,
            Err::<Reply<Bytes>, _>(RemoteError::new(ErrorCode::NotFound, "no f")),
            |error| error,
            |_, _| WireReply::Data(DataPayload::Inline(Vec::new())),
        )
        .expect("in flight");
    assert!(matches!(frame, Frame::Error { request_id: 2, .. }));
    assert!(core
        .answer(
            &host,
            2,
            Ok::<_, RemoteError>(Reply::Done),
            |error| error,
            |_, _| WireReply::Done
        )
        .is_none());
    core.admit_command(&host, 4, write(10)).expect("admitted");
    core.abandon(&host, 4);
    assert_eq!(core.in_flight_count(), 0);
    assert_eq!(core.bytes_in_flight(), 0);
    assert_eq!(host.taken.get(), 0);
}

#[test]
fn the_server_wide_budget_is_the_hosts() {
    let host = Host {
        server_bytes: 120,
        taken: Cell::new(0),
    };
    let mut core = StoreServerCore::new(LIMITS);
    core.admit_command(&host, 1, write(100)).expect("admitted");
    let refused = core
        .admit_command(&host, 2, write(30))
        .expect_err("server full");
    assert_eq!(refused_code(refused), ErrorCode::ServerBytesInFlight);
    core.admit_kernel_run(&host, 2)
        .expect("a kernel run holds no bytes");
    assert_eq!(core.in_flight_count(), 2);
}
