//! The frames of the protocol as Rust values: the handshake ([`Hello`], [`Welcome`]),
//! requests ([`Request`]: a command of the command set over the wire's payloads
//! ([`Wire`]), or a request about the connection), their answers ([`Response`], or an
//! error), and the release of read handles. Byte layouts are in `codec` and
//! docs/protocol.md.

pub use flashpipe_api::CheckSummary;
use flashpipe_api::{Command, CommandKind, Payloads, Reply};

use crate::attributes::has_attributes;
use crate::error::RemoteError;
use crate::kernel_run::{KernelFileOutcome, KernelRunSummary, RunKernelRequest};
use crate::region::{RegionRequest, RegionResponse};
use crate::RequestId;

/// Every frame kind and its number on the wire (the header's kind field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum FrameKind {
    /// Client -> server, first frame: versions and whether the client maps memory.
    Hello = 0x0001,
    /// Server -> client, answer to hello: version, limits, shared regions (fds beside).
    Welcome = 0x0002,
    /// Client -> server: read handles the client no longer holds.
    Release = 0x0003,
    /// Either way: a request failed (request id), or the connection is closed (id 0).
    Error = 0x0004,
    /// Request: create an empty file.
    Create = 0x0101,
    /// Request: write bytes carried in the frame.
    Write = 0x0102,
    /// Request: write bytes the client put in a granted slot of its write pool.
    WriteGranted = 0x0103,
    /// Request: read a range of a file.
    Read = 0x0104,
    /// Request: read several small files whole.
    ReadFiles = 0x0105,
    /// Request: set a file's size.
    Truncate = 0x0106,
    /// Request: delete a file.
    Delete = 0x0107,
    /// Request: rename a file (target must not exist).
    Rename = 0x0108,
    /// Request: rename a file, replacing the target.
    RenameReplacing = 0x0109,
    /// Request: copy a whole file.
    Copy = 0x010A,
    /// Request: facts about one file.
    Stat = 0x010B,
    /// Request: every file.
    List = 0x010C,
    /// Request: space and counts (df).
    Stats = 0x010D,
    /// Request: make every change durable.
    Flush = 0x010E,
    /// Request: check the durable image (fsck).
    Check = 0x010F,
    /// Request: cancel a request in flight.
    Cancel = 0x0110,
    /// Request: grant a slot of the client's write pool.
    GrantWrite = 0x0111,
    /// Request: change a file's attributes (version 5).
    SetAttributes = 0x0112,
    /// Request: run a kernel over files of the store (answered by kernel-file frames,
    /// then a kernel-summary frame or an error).
    RunKernel = 0x0120,
    /// Request: move this connection's frames into shared-memory rings (#14).
    OpenRings = 0x0130,
    /// Request (version 6): register the memfd beside this frame as a destination region.
    RegisterRegion = 0x0113,
    /// Request (version 6): read a file range straight into a registered region.
    ReadInto = 0x0114,
    /// Request (version 6): forget a registered region (answered done).
    UnregisterRegion = 0x0115,
    /// Response: done, nothing more to say.
    Done = 0x0201,
    /// Response: a write completed.
    Written = 0x0202,
    /// Response: read data (inline or by reference).
    Data = 0x0203,
    /// Response: data of several files.
    Files = 0x0204,
    /// Response: one file's facts.
    StatReply = 0x0205,
    /// Response: every file's facts.
    ListReply = 0x0206,
    /// Response: space and counts.
    StatsReply = 0x0207,
    /// Response: what the check found.
    CheckReply = 0x0208,
    /// Response: what a copy did.
    Copied = 0x0209,
    /// Response: a write slot granted.
    Granted = 0x020A,
    /// Response: what a cancel did.
    CancelReply = 0x020B,
    /// Response: one file's facts with its attributes (version 5; sent only when one is
    /// set).
    StatAttributesReply = 0x020C,
    /// Response: every file's facts with attributes (version 5; sent only when a file
    /// has one set).
    ListAttributesReply = 0x020D,
    /// Response (one of several): one input file's outcome of a kernel run.
    KernelFile = 0x0220,
    /// Response (the last): a kernel run's totals and stage table.
    KernelSummary = 0x0221,
    /// Response: the rings are open (their two descriptors ride beside it).
    RingsOpened = 0x0230,
    /// Response (version 6): the region is registered under an id.
    RegionRegistered = 0x020E,
    /// Response (version 6): a read into a region completed.
    ReadIntoDone = 0x020F,
}

/// Every frame kind, for decoding the header's kind field.
pub const ALL_FRAME_KINDS: [FrameKind; 45] = [
    FrameKind::Hello,
    FrameKind::Welcome,
    FrameKind::Release,
    FrameKind::Error,
    FrameKind::Create,
    FrameKind::Write,
    FrameKind::WriteGranted,
    FrameKind::Read,
    FrameKind::ReadFiles,
    FrameKind::Truncate,
    FrameKind::Delete,
    FrameKind::Rename,
    FrameKind::RenameReplacing,
    FrameKind::Copy,
    FrameKind::Stat,
    FrameKind::List,
    FrameKind::Stats,
    FrameKind::Flush,
    FrameKind::Check,
    FrameKind::Cancel,
    FrameKind::GrantWrite,
    FrameKind::SetAttributes,
    FrameKind::Done,
    FrameKind::Written,
    FrameKind::Data,
    FrameKind::Files,
    FrameKind::StatReply,
    FrameKind::ListReply,
    FrameKind::StatsReply,
    FrameKind::CheckReply,
    FrameKind::Copied,
    FrameKind::Granted,
    FrameKind::CancelReply,
    FrameKind::StatAttributesReply,
    FrameKind::ListAttributesReply,
    FrameKind::RunKernel,
    FrameKind::KernelFile,
    FrameKind::KernelSummary,
    FrameKind::OpenRings,
    FrameKind::RingsOpened,
    FrameKind::RegisterRegion,
    FrameKind::ReadInto,
    FrameKind::UnregisterRegion,
    FrameKind::RegionRegistered,
    FrameKind::ReadIntoDone,
];

impl FrameKind {
    /// The frame kind of a command's request (a write by grant travels under
    /// [`FrameKind::WriteGranted`] instead).
    pub fn of_command(kind: CommandKind) -> FrameKind {
        FrameKind::from_wire(kind.wire_number())
            .expect("every command kind has its frame kind (protocol/tests/command_kinds.rs)")
    }

    /// The kind numbered `value`, if any.
    pub fn from_wire(value: u16) -> Option<FrameKind> {
        ALL_FRAME_KINDS
            .iter()
            .copied()
            .find(|kind| *kind as u16 == value)
    }

    /// The kind's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Hello => "hello",
            FrameKind::Welcome => "welcome",
            FrameKind::Release => "release",
            FrameKind::Error => "error",
            FrameKind::Create => "create",
            FrameKind::Write => "write",
            FrameKind::WriteGranted => "write-granted",
            FrameKind::Read => "read",
            FrameKind::ReadFiles => "read-files",
            FrameKind::Truncate => "truncate",
            FrameKind::Delete => "delete",
            FrameKind::Rename => "rename",
            FrameKind::RenameReplacing => "rename-replacing",
            FrameKind::Copy => "copy",
            FrameKind::Stat => "stat",
            FrameKind::List => "list",
            FrameKind::Stats => "stats",
            FrameKind::Flush => "flush",
            FrameKind::Check => "check",
            FrameKind::Cancel => "cancel",
            FrameKind::GrantWrite => "grant-write",
            FrameKind::SetAttributes => "set-attributes",
            FrameKind::Done => "done",
            FrameKind::Written => "written",
            FrameKind::Data => "data",
            FrameKind::Files => "files",
            FrameKind::StatReply => "stat-reply",
            FrameKind::ListReply => "list-reply",
            FrameKind::StatsReply => "stats-reply",
            FrameKind::CheckReply => "check-reply",
            FrameKind::Copied => "copied",
            FrameKind::Granted => "granted",
            FrameKind::CancelReply => "cancel-reply",
            FrameKind::StatAttributesReply => "stat-attributes-reply",
            FrameKind::ListAttributesReply => "list-attributes-reply",
            FrameKind::RunKernel => "run-kernel",
            FrameKind::KernelFile => "kernel-file",
            FrameKind::KernelSummary => "kernel-summary",
            FrameKind::OpenRings => "open-rings",
            FrameKind::RingsOpened => "rings-opened",
            FrameKind::RegisterRegion => "register-region",
            FrameKind::ReadInto => "read-into",
            FrameKind::UnregisterRegion => "unregister-region",
            FrameKind::RegionRegistered => "region-registered",
            FrameKind::ReadIntoDone => "read-into-done",
        }
    }
}

/// One frame, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// The client's opening frame.
    Hello(Hello),
    /// The server's answer to hello.
    Welcome(Welcome),
    /// Read handles the client let go of (no answer).
    Release {
        /// The handles.
        handles: Vec<u64>,
    },
    /// A request failed (its id), or the connection is being closed (id 0).
    Error {
        /// The failed request, or 0 for the connection.
        request_id: RequestId,
        /// What went wrong.
        error: RemoteError,
    },
    /// A request (id non-zero).
    Request {
        /// Chosen by the client.
        request_id: RequestId,
        /// What is asked.
        request: Request,
    },
    /// A request's answer (id non-zero).
    Response {
        /// The request answered.
        request_id: RequestId,
        /// The answer.
        response: Response,
    },
}

impl Frame {
    /// The header kind this frame is sent under.
    pub fn kind(&self) -> FrameKind {
        match self {
            Frame::Hello(_) => FrameKind::Hello,
            Frame::Welcome(_) => FrameKind::Welcome,
            Frame::Release { .. } => FrameKind::Release,
            Frame::Error { .. } => FrameKind::Error,
            Frame::Request { request, .. } => request.kind(),
            Frame::Response { response, .. } => response.kind(),
        }
    }

    /// The header's request id.
    pub fn request_id(&self) -> RequestId {
        match self {
            Frame::Hello(_) | Frame::Welcome(_) | Frame::Release { .. } => 0,
            Frame::Error { request_id, .. }
            | Frame::Request { request_id, .. }
            | Frame::Response { request_id, .. } => *request_id,
        }
    }
}

/// The client's opening frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Oldest protocol version the client speaks.
    pub min_version: u16,
    /// Newest protocol version the client speaks.
    pub max_version: u16,
    /// True when the client maps shared memory (data by reference); false for the
    /// copying path (data inline in frames).
    pub map_memory: bool,
    /// What the client calls itself (for logs).
    pub client_name: String,
}

/// The server's answer to hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// The version both sides speak from now on.
    pub version: u16,
    /// The server's process id.
    pub server_pid: u32,
    /// The store the server holds (its store file, or a description).
    pub store_path: String,
    /// The identity (a random 16-byte UUID made at mkfs) of the store the server holds;
    /// `None` for a store that has none yet (version 2; all zero on the wire).
    pub store_identity: Option<[u8; 16]>,
    /// The server's limits.
    pub limits: ServerLimits,
    /// The engine's read pool, passed as the first file descriptor beside this frame
    /// (mapped read-only by the client); `None` on the copying path.
    pub read_region: Option<SharedRegion>,
    /// The client's own write pool, passed as the next file descriptor (mapped
    /// read-write by this client alone); `None` on the copying path.
    pub write_region: Option<SharedRegion>,
    /// Which clock the store's file times count (version 4); `None` when not told: a
    /// welcome of version 3 has no such field (and may not be given one).
    pub store_clock: Option<ClockKind>,
    /// True when the server holds the store read-only (`serve --read-only`): every change
    /// is refused (version 6; a welcome of an older version says nothing, read as false,
    /// and may not be given true).
    pub read_only: bool,
}

/// Which clock a store's devices keep, and so what its file times
/// (`modified_clock_ns`) count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockKind {
    /// The wall clock (files, memory, remote devices).
    Real,
    /// Simulated device time (emulated flash).
    Virtual,
}

impl Welcome {
    /// True when data goes by reference on this connection.
    pub fn is_mapped(&self) -> bool {
        self.read_region.is_some()
    }

    /// File descriptors that travel beside this frame.
    pub fn fd_count(&self) -> usize {
        usize::from(self.read_region.is_some()) + usize::from(self.write_region.is_some())
    }
}

/// The server's limits, as told to a client at connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Largest frame body the server accepts.
    pub max_body_bytes: u32,
    /// Largest write one request may carry (inline or by grant).
    pub max_write_bytes: u32,
    /// Largest read one request may ask for.
    pub max_read_bytes: u64,
    /// Most files one read-files request may name.
    pub max_read_files_count: u32,
    /// Most bytes (the files' sizes added up) one read-files request may ask for.
    pub max_read_files_bytes: u64,
    /// Most requests one client may have in flight.
    pub max_in_flight_per_client: u32,
    /// Most bytes one client's requests may hold in flight.
    pub max_bytes_in_flight_per_client: u64,
    /// Most read handles one client may hold.
    pub max_read_handles_per_client: u32,
}

/// A shared-memory region of equal slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedRegion {
    /// Slots in the region.
    pub slot_count: u32,
    /// Bytes per slot; slot `s` starts at byte `s * slot_size_bytes`.
    pub slot_size_bytes: u64,
}

impl SharedRegion {
    /// The region's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        u64::from(self.slot_count).saturating_mul(self.slot_size_bytes)
    }
}

/// The wire's payloads of the command set: a write carries its bytes in the frame or
/// names a granted slot of the client's write pool, a completed write says how many
/// bytes it wrote, read data is inline or a window of the shared read pool, a check
/// answers with its summary, and one file of a batched read fails with an error frame's
/// body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wire;

impl Payloads for Wire {
    type Write = WritePayload;
    type Written = u64;
    type Read = DataPayload;
    type Check = CheckSummary;
    type FileError = RemoteError;
}

/// A command as it travels in a request frame.
pub type WireCommand = Command<Wire>;

/// A command's answer as it travels in a response frame.
pub type WireReply = Reply<Wire>;

/// The bytes of a write command on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WritePayload {
    /// The bytes themselves, carried in the frame (the copying path; frame kind write).
    Inline(Vec<u8>),
    /// `length_bytes` the client put at the start of write-pool slot `slot`, which the
    /// server granted it (by reference; frame kind write-granted).
    Granted {
        /// The granted slot.
        slot: u32,
        /// Bytes of the slot to write.
        length_bytes: u32,
    },
}

impl WritePayload {
    /// Bytes this write carries.
    pub fn length_bytes(&self) -> u64 {
        match self {
            WritePayload::Inline(bytes) => bytes.len() as u64,
            WritePayload::Granted { length_bytes, .. } => u64::from(*length_bytes),
        }
    }
}

/// What a client asks: a command of the command set, or one of the requests about the
/// connection itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A command the engine carries out.
    Command(WireCommand),
    /// Cancel the request `target`, if the server still can.
    Cancel {
        /// The request to cancel.
        target: RequestId,
    },
    /// Grant a free slot of the client's write pool.
    GrantWrite,
    /// Run a kernel next to the data; answered by one [`Response::KernelFile`] per
    /// input, then [`Response::KernelSummary`] (or an error).
    RunKernel(RunKernelRequest),
    /// Move the connection's frames into two shared-memory rings (a mapping client,
    /// nothing in flight); answered [`Response::RingsOpened`].
    OpenRings,
    /// A request about destination regions (version 6): register, read into, unregister.
    Region(RegionRequest),
}

impl From<WireCommand> for Request {
    fn from(command: WireCommand) -> Request {
        Request::Command(command)
    }
}

impl Request {
    /// The command of the command set this request carries (a write by grant is a
    /// write); `None` for the requests that are not commands (cancel, grant, kernel
    /// run, open-rings).
    pub fn command_kind(&self) -> Option<CommandKind> {
        match self {
            Request::Command(command) => Some(command.kind()),
            Request::Cancel { .. }
            | Request::GrantWrite
            | Request::RunKernel(_)
            | Request::OpenRings
            | Request::Region(_) => None,
        }
    }

    /// The header kind of this request: a command's own number
    /// ([`CommandKind::wire_number`]), write-granted for a write by grant.
    pub fn kind(&self) -> FrameKind {
        match self {
            Request::Command(Command::Write {
                data: WritePayload::Granted { .. },
                ..
            }) => FrameKind::WriteGranted,
            Request::Command(command) => FrameKind::of_command(command.kind()),
            Request::Cancel { .. } => FrameKind::Cancel,
            Request::GrantWrite => FrameKind::GrantWrite,
            Request::RunKernel(_) => FrameKind::RunKernel,
            Request::OpenRings => FrameKind::OpenRings,
            Request::Region(RegionRequest::Register { .. }) => FrameKind::RegisterRegion,
            Request::Region(RegionRequest::ReadInto(_)) => FrameKind::ReadInto,
            Request::Region(RegionRequest::Unregister { .. }) => FrameKind::UnregisterRegion,
        }
    }
}

/// A request's answer: a command's reply, or the answer to a request about the
/// connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// A command's reply.
    Reply(WireReply),
    /// A write slot granted.
    Granted(WriteGrant),
    /// What a cancel did.
    Cancel(CancelOutcome),
    /// One input's outcome of a kernel run (more answers follow under the same id).
    KernelFile(KernelFileOutcome),
    /// A kernel run's totals: its last answer.
    KernelSummary(KernelRunSummary),
    /// The rings are open; every later frame goes through them.
    RingsOpened(RingsOpened),
    /// An answer about destination regions (version 6).
    Region(RegionResponse),
}

impl From<WireReply> for Response {
    fn from(reply: WireReply) -> Response {
        Response::Reply(reply)
    }
}

impl Response {
    /// The header kind of this response.
    pub fn kind(&self) -> FrameKind {
        match self {
            Response::Reply(reply) => match reply {
                Reply::Done => FrameKind::Done,
                Reply::Written { .. } => FrameKind::Written,
                Reply::Data(_) => FrameKind::Data,
                Reply::Files(_) => FrameKind::Files,
                Reply::Stat(stat) if has_attributes(stat) => FrameKind::StatAttributesReply,
                Reply::Stat(_) => FrameKind::StatReply,
                Reply::List(stats) if stats.iter().any(has_attributes) => {
                    FrameKind::ListAttributesReply
                }
                Reply::List(_) => FrameKind::ListReply,
                Reply::Stats(_) => FrameKind::StatsReply,
                Reply::Check(_) => FrameKind::CheckReply,
                Reply::Copied(_) => FrameKind::Copied,
            },
            Response::Granted(_) => FrameKind::Granted,
            Response::Cancel(_) => FrameKind::CancelReply,
            Response::KernelFile(_) => FrameKind::KernelFile,
            Response::KernelSummary(_) => FrameKind::KernelSummary,
            Response::RingsOpened(_) => FrameKind::RingsOpened,
            Response::Region(RegionResponse::Registered { .. }) => FrameKind::RegionRegistered,
            Response::Region(RegionResponse::ReadIntoDone { .. }) => FrameKind::ReadIntoDone,
        }
    }

    /// True when this answer ends its request (every answer but a kernel run's
    /// per-file outcomes).
    pub fn is_final(&self) -> bool {
        !matches!(self, Response::KernelFile(_))
    }
}

/// Read data: in the frame, or a window of the engine's shared read pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataPayload {
    /// The bytes themselves (the copying path).
    Inline(Vec<u8>),
    /// Where the bytes lie in the shared read pool (by reference).
    Shared(SharedWindow),
}

/// One file of a read-files answer.
pub type FileData = Result<DataPayload, RemoteError>;

/// A window of the engine's shared read pool, held for the client under `handle` until
/// it releases it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedWindow {
    /// Names the hold; released with a release frame. Several windows of one read-files
    /// answer may share a handle (they share a pool buffer).
    pub handle: u64,
    /// The read pool's slot.
    pub slot: u32,
    /// Offset of the first byte within the slot.
    pub window_start: u64,
    /// Bytes.
    pub length_bytes: u64,
}

/// A slot of the client's write pool, now the client's to fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteGrant {
    /// The slot; its bytes start at `slot * slot_size_bytes` of the write region.
    pub slot: u32,
    /// The slot's size (most bytes one write by grant may carry from it).
    pub slot_size_bytes: u32,
}

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The target was not in flight (answered already, or never sent).
    NotInFlight,
    /// The target is in the engine and will complete (the engine does not stop a
    /// command it has taken); its answer still comes.
    Running,
    /// The target (a kernel run) is told to stop at its next file boundary: it commits
    /// nothing and answers with a `Cancelled` error, unless it had committed its
    /// outputs already (then its summary still comes).
    Stopping,
}

/// The answer to [`Request::OpenRings`]: the data areas of the two rings whose memfds
/// ride beside the frame (the request ring first, then the reply ring); each region is
/// one header page (4096 bytes) and then its data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingsOpened {
    /// Data area of the ring the client pushes its frames into, in bytes.
    pub request_ring_capacity_bytes: u32,
    /// Data area of the ring the server pushes its frames into, in bytes.
    pub reply_ring_capacity_bytes: u32,
    /// A third descriptor rides beside the two rings: the engine's doorbell page, which
    /// the client rings after each push into its request ring (protocol version
    /// [`crate::ENGINE_DOORBELL_VERSION`]; only ever true on a connection of that
    /// version or newer). On the wire: one more body byte, 1, present only when true.
    pub engine_doorbell: bool,
}

impl RingsOpened {
    /// True when a connection of `version` may be sent an engine doorbell.
    pub fn may_carry_doorbell(version: u16) -> bool {
        version >= crate::ENGINE_DOORBELL_VERSION
    }
}
