//! [`classify`]: the kind of an error, from its type. Each typed error of the crates the
//! CLI calls is matched variant by variant (transparent wrappers hide their inner error
//! from `source()`, so the chain alone would not do); an unknown type's sources are
//! tried before giving up with `internal`.

use std::error::Error;

use flashpipe_client::{ClientError, ConnectError, ErrorCode};
use flashpipe_cluster_host::auth::KeyError;
use flashpipe_cluster_host::backend::ClusterOpenError;
use flashpipe_cluster_host::loaded::LoadError;
use flashpipe_device::{DeviceError, DeviceErrorKind};
use flashpipe_engine::{EngineError, StreamError};
use flashpipe_fs::{
    CopyError, FileIoError, FlushError, FsckError, MountError, NamespaceError, StoreIdentityError,
};
use flashpipe_kernels::error::{KernelError, KernelErrorKind, OptionsError};
use flashpipe_kernels::langid::profile_file::ProfileError;
use flashpipe_kernels::langid::udhr::CorpusError;
use flashpipe_pipeline::PipelineError;
use flashpipe_store::cluster_store::ClusterStoreError;
use flashpipe_store::flash_store::FlashStoreError;
use flashpipe_store::member_label::MemberLabelError;
use flashpipe_store::{
    IdentityError, StoreCloseError, StoreConfigError, StoreLockError, StoreOpenError,
};

use super::{ErrorKind, Failure};
use crate::kernels_cmd::KernelsCommandError;
use crate::nbd_cmd::PathExportError;
use crate::session::SessionError;
use ErrorKind::*;

/// The kind of `error`: of the first error in its chain whose type is known, `internal`
/// when none is.
pub fn classify(error: &(dyn Error + 'static)) -> ErrorKind {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(kind) = known(error) {
            return kind;
        }
        current = error.source();
    }
    Internal
}

/// The kind of one error of a known type.
fn known(error: &(dyn Error + 'static)) -> Option<ErrorKind> {
    macro_rules! try_type {
        ($($type:ty => $function:expr),* $(,)?) => {
            $(if let Some(typed) = error.downcast_ref::<$type>() {
                return Some($function(typed));
            })*
        };
    }
    try_type! {
        Failure => Failure::kind,
        crate::run_cmd::NoMatch => |_| NoMatch,
        crate::shell_cmd::JsonDoesNotApplyError => |_| Usage,
        crate::shell_cmd::ManError => |_| Io,
        std::io::Error => io,
        StoreConfigError => store_config,
        StoreOpenError => store_open,
        StoreLockError => store_lock,
        StoreCloseError => store_close,
        FlashStoreError => flash_store,
        MemberLabelError => member_label,
        IdentityError => |_| Io,
        flashpipe_store::probe::DeviceHoldsStoreError => |_| Exists,
        flashpipe_store::put_plan::PutPlanError => put_plan,
        flashpipe_store::info::StoreInfoError => store_info,
        crate::store_cmd::put_stdin::PutStdinError => put_stdin,
        flashpipe_store::units::SizeParseError => |_| InvalidInput,
        flashpipe_flash::ConfigError => |_| InvalidInput,
        flashpipe_bench::error::BenchError => bench,
        DeviceError => device,
        EngineError => engine,
        StreamError => stream,
        NamespaceError => namespace,
        FileIoError => file_io,
        CopyError => copy,
        FlushError => flush,
        FsckError => fsck,
        MountError => mount,
        StoreIdentityError => store_identity,
        SessionError => session,
        ClientError => client,
        ConnectError => connect,
        flashpipe_client::RemoteError => |remote: &flashpipe_client::RemoteError| code(remote.code),
        KernelsCommandError => kernels_command,
        OptionsError => |_| Kernel,
        KernelError => kernel,
        ProfileError => profile,
        CorpusError => corpus,
        PipelineError => pipeline,
        PathExportError => path_export,
        flashpipe_nbd::client::NbdUriError => |_| InvalidInput,
        flashpipe_nbd::server::tls::TlsSetupError => |_| InvalidInput,
        flashpipe_nbd::server::ExportSpecError => |_| InvalidInput,
        flashpipe_nbd::server::ServerStartError => nbd_start,
        flashpipe_server::ServeError => serve,
        flashpipe_server::KernelPathsError => |_| InvalidInput,
        serde_json::Error => |_| Internal,
    }
    None
}

/// An operating system's error, by its number first (precise), then its kind.
pub(super) fn io(error: &std::io::Error) -> ErrorKind {
    if let Some(number) = error.raw_os_error() {
        match number {
            libc::ENOSPC | libc::EDQUOT | libc::EFBIG => return NoSpace,
            libc::EACCES | libc::EPERM | libc::EROFS => return Permission,
            libc::ENOENT => return NotFound,
            libc::EEXIST => return Exists,
            libc::ENOTDIR | libc::EISDIR | libc::EINVAL | libc::ENAMETOOLONG => {
                return InvalidInput
            }
            libc::ECONNREFUSED
            | libc::ECONNRESET
            | libc::ECONNABORTED
            | libc::ENOTCONN
            | libc::EHOSTUNREACH
            | libc::ENETUNREACH
            | libc::ETIMEDOUT
            | libc::EADDRINUSE
            | libc::EADDRNOTAVAIL
            | libc::EPIPE => return Network,
            libc::EBADMSG => return Corrupt,
            _ => {}
        }
    }
    use std::io::ErrorKind as Io_;
    match error.kind() {
        Io_::NotFound => NotFound,
        Io_::AlreadyExists => Exists,
        Io_::PermissionDenied => Permission,
        Io_::StorageFull | Io_::QuotaExceeded | Io_::FileTooLarge => NoSpace,
        Io_::InvalidInput => InvalidInput,
        Io_::InvalidData => Corrupt,
        Io_::ConnectionRefused
        | Io_::ConnectionReset
        | Io_::ConnectionAborted
        | Io_::NotConnected
        | Io_::TimedOut
        | Io_::BrokenPipe => Network,
        _ => match error.get_ref() {
            Some(inner) => known(inner).unwrap_or(Io),
            None => Io,
        },
    }
}

/// A benchmark's failure: its kind, an operating-system failure by its error's number
/// when kept.
fn bench(error: &flashpipe_bench::error::BenchError) -> ErrorKind {
    use flashpipe_bench::error::BenchErrorKind as B;
    match error.kind() {
        B::InvalidInput => InvalidInput,
        B::NotFound => NotFound,
        B::NoSpace => NoSpace,
        B::Internal => Internal,
        B::Io(kind) => match error.io_source() {
            Some(source) => io(source),
            None => io(&std::io::Error::from(kind)),
        },
    }
}

fn put_plan(error: &flashpipe_store::put_plan::PutPlanError) -> ErrorKind {
    use flashpipe_store::put_plan::PutPlanError as P;
    match error {
        P::Local { source, .. } => io(source),
        P::Refused(_) => InvalidInput,
    }
}

fn store_info(error: &flashpipe_store::info::StoreInfoError) -> ErrorKind {
    use flashpipe_store::info::StoreInfoError as E;
    match error {
        E::Config(inner) => store_config(inner),
        E::Open(inner) => store_open(inner),
        E::Mount { source, .. } => mount(source),
        E::Members { .. } => Io,
        E::RamDevices { .. } => InvalidInput,
    }
}

fn put_stdin(error: &crate::store_cmd::put_stdin::PutStdinError) -> ErrorKind {
    use crate::store_cmd::put_stdin::PutStdinError as E;
    match error {
        E::Unreadable(inner) => io(inner),
        E::NoName | E::NotAlone | E::Empty | E::BadName { .. } => InvalidInput,
    }
}

fn store_config(error: &StoreConfigError) -> ErrorKind {
    match error {
        StoreConfigError::Io { source, .. } => io(source),
        StoreConfigError::Syntax { .. } => Corrupt,
        StoreConfigError::NotAStoreFile { .. }
        | StoreConfigError::NewerVersion { .. }
        | StoreConfigError::Invalid { .. }
        | StoreConfigError::BadDevice { .. } => InvalidInput,
    }
}

fn store_open(error: &StoreOpenError) -> ErrorKind {
    match error {
        StoreOpenError::Config(inner) => store_config(inner),
        StoreOpenError::Members(inner) => member_label(inner),
        StoreOpenError::Identity(_) => Io,
        StoreOpenError::Device(inner) => device(inner),
        StoreOpenError::Flash(inner) => flash_store(inner),
        StoreOpenError::Cluster(inner) => cluster_store(inner),
        StoreOpenError::MissingDevice { .. } => NotFound,
        StoreOpenError::Lock(inner) => store_lock(inner),
        StoreOpenError::RamDevices { .. }
        | StoreOpenError::OtherStoresDevices { .. }
        | StoreOpenError::WrongDeviceSize { .. } => InvalidInput,
        StoreOpenError::Mount { source, .. } => mount(source),
        StoreOpenError::SuperBlockIdentity { source, .. } => store_identity(source),
    }
}

fn store_lock(error: &StoreLockError) -> ErrorKind {
    match error {
        StoreLockError::Held { .. } => StoreInUse,
        StoreLockError::Io { source, .. } => io(source),
    }
}

fn store_close(error: &StoreCloseError) -> ErrorKind {
    match error {
        StoreCloseError::Engine(inner) => engine(inner),
        StoreCloseError::Unmount(inner) => flush(inner),
    }
}

fn flash_store(error: &FlashStoreError) -> ErrorKind {
    match error {
        FlashStoreError::MissingImage { .. } => NotFound,
        FlashStoreError::Spec { .. }
        | FlashStoreError::OtherPreset { .. }
        | FlashStoreError::InMemory { .. }
        | FlashStoreError::TooSmall { .. } => InvalidInput,
        FlashStoreError::Flash { .. } | FlashStoreError::Ftl { .. } => Io,
    }
}

/// A store device on a cluster: a node that cannot be reached fails as the network.
fn cluster_store(error: &ClusterStoreError) -> ErrorKind {
    match error {
        ClusterStoreError::Open { source, .. } => match source {
            ClusterOpenError::Load(LoadError::Key(KeyError::Open { .. })) => Permission,
            ClusterOpenError::Load(_) | ClusterOpenError::View { .. } => InvalidInput,
            ClusterOpenError::Handshake(_) => Network,
        },
        ClusterStoreError::Ftl { fault: Some(_), .. } => Network,
        ClusterStoreError::Ftl { .. } => Io,
        ClusterStoreError::TooSmall { .. } => InvalidInput,
    }
}

fn member_label(error: &MemberLabelError) -> ErrorKind {
    match error {
        MemberLabelError::Io { source, .. } => io(source),
        _ => InvalidInput,
    }
}

/// A device's failure; a device reached over NBD (named by its URI) or on a cluster fails as
/// the network.
fn device(error: &DeviceError) -> ErrorKind {
    let remote = error.device.starts_with("nbd") || error.device.starts_with("cluster");
    match &error.kind {
        DeviceErrorKind::IoFailed { .. } | DeviceErrorKind::Open { .. } if remote => Network,
        DeviceErrorKind::IoFailed { .. }
        | DeviceErrorKind::ShortTransfer { .. }
        | DeviceErrorKind::InjectedFault { .. }
        | DeviceErrorKind::BadBlock { .. }
        | DeviceErrorKind::Crashed
        | DeviceErrorKind::Open { .. } => Io,
        DeviceErrorKind::Uncorrectable { .. } => Corrupt,
        DeviceErrorKind::OutOfSpace { .. } => NoSpace,
        DeviceErrorKind::ReadOnly { .. } => Permission,
        DeviceErrorKind::Unsupported { .. } => InvalidInput,
        DeviceErrorKind::OutOfRange { .. }
        | DeviceErrorKind::Misaligned { .. }
        | DeviceErrorKind::QueueFull { .. }
        | DeviceErrorKind::NothingInFlight => Internal,
    }
}

fn engine(error: &EngineError) -> ErrorKind {
    match error {
        EngineError::Namespace(inner) => namespace(inner),
        EngineError::FileIo(inner) => file_io(inner),
        EngineError::Copy(inner) => copy(inner),
        EngineError::Flush(inner) => flush(inner),
        EngineError::Check(inner) => fsck(inner),
        EngineError::Device(inner) => device(inner),
        EngineError::ReadTooLarge { .. }
        | EngineError::TooManyFiles { .. }
        | EngineError::ReadFilesTooLarge { .. } => InvalidInput,
        _ => Internal,
    }
}

fn stream(error: &StreamError) -> ErrorKind {
    match error {
        StreamError::Transport(inner) => engine(inner),
        StreamError::Source(inner) | StreamError::Sink(inner) => io(inner),
    }
}

fn namespace(error: &NamespaceError) -> ErrorKind {
    match error {
        NamespaceError::BadName { .. } => InvalidInput,
        NamespaceError::NotFound { .. } => NotFound,
        NamespaceError::Exists { .. } => Exists,
        NamespaceError::NoSpace { .. } => NoSpace,
        NamespaceError::Unusable { .. } => Io,
        NamespaceError::ReadOnly { .. } => Permission,
        NamespaceError::StaleHandle { .. } => Internal,
    }
}

fn file_io(error: &FileIoError) -> ErrorKind {
    match error {
        FileIoError::FileTooLarge { .. } | FileIoError::NoSpace { .. } => NoSpace,
        FileIoError::DataChecksumMismatch { .. } => Corrupt,
        FileIoError::ReadOnly { .. } => Permission,
        FileIoError::Unusable { .. } => Io,
        FileIoError::Device(inner) => device(inner),
        FileIoError::StaleHandle { .. }
        | FileIoError::ReadPastEnd { .. }
        | FileIoError::BadBuffer { .. } => Internal,
    }
}

fn copy(error: &CopyError) -> ErrorKind {
    match error {
        CopyError::NotByReference { .. } => InvalidInput,
        CopyError::Namespace(inner) => namespace(inner),
        CopyError::Io(inner) => file_io(inner),
    }
}

fn flush(error: &FlushError) -> ErrorKind {
    match error {
        FlushError::NoSpace { .. } => NoSpace,
        FlushError::Unusable { .. } => Io,
        FlushError::Device(inner) => device(inner),
    }
}

fn fsck(error: &FsckError) -> ErrorKind {
    match error {
        FsckError::NewerVersion { .. } | FsckError::WrongDeviceSize { .. } => InvalidInput,
        FsckError::RepairFailed(inner) => flush(inner),
        FsckError::Device(inner) => device(inner),
    }
}

fn mount(error: &MountError) -> ErrorKind {
    match error {
        MountError::NotFormatted
        | MountError::DamagedSuperBlock { .. }
        | MountError::Corrupt { .. } => Corrupt,
        MountError::NewerVersion { .. } | MountError::WrongDeviceSize { .. } => InvalidInput,
        MountError::Device(inner) => device(inner),
    }
}

fn store_identity(error: &StoreIdentityError) -> ErrorKind {
    match error {
        StoreIdentityError::ReadOnly => Permission,
        StoreIdentityError::Unusable { .. } => Io,
        StoreIdentityError::Different { .. } => InvalidInput,
        StoreIdentityError::Zero => Internal,
    }
}

fn session(error: &SessionError) -> ErrorKind {
    match error {
        SessionError::Engine(inner) => engine(inner),
        SessionError::Source(inner) | SessionError::Sink(inner) => io(inner),
        SessionError::Served(inner) => client(inner),
        SessionError::ChangedWhileRead { .. } => StoreInUse,
    }
}

fn client(error: &ClientError) -> ErrorKind {
    match error {
        ClientError::Remote(remote) | ClientError::Closed(remote) => code(remote.code),
        ClientError::ConnectionLost(_) | ClientError::Protocol(_) | ClientError::Malformed(_) => {
            Network
        }
        ClientError::LimitReached { .. } => InvalidInput,
        ClientError::NothingInFlight => Internal,
    }
}

fn connect(error: &ConnectError) -> ErrorKind {
    match error {
        ConnectError::Connect { .. } | ConnectError::Handshake(_) => Network,
        ConnectError::Refused(remote) => code(remote.code),
        ConnectError::ForeignServer { .. } => Permission,
        ConnectError::OtherStore { .. } => InvalidInput,
    }
}

/// A server's error code (docs/protocol.md, "Error codes"), by the one table
/// ([`ErrorCode::class`]) Python's exceptions follow too.
fn code(code: ErrorCode) -> ErrorKind {
    use flashpipe_api::ErrorClass as K;
    match code.class() {
        K::NotFound => NotFound,
        K::Exists => Exists,
        K::Invalid => InvalidInput,
        K::NoSpace => NoSpace,
        K::Permission => Permission,
        K::Io => Io,
        K::Corrupt => Corrupt,
        K::Busy => StoreInUse,
        K::Network => Network,
        K::Kernel => Kernel,
        K::Internal => Internal,
    }
}

fn kernels_command(error: &KernelsCommandError) -> ErrorKind {
    match error {
        KernelsCommandError::Options(_) | KernelsCommandError::Throughput(_) => Kernel,
        KernelsCommandError::Kernel(inner) => kernel(inner),
        KernelsCommandError::Corpus(inner) => corpus(inner),
        KernelsCommandError::HeldOut(flashpipe_kernels::langid::held_out::HeldOutError::Io {
            source,
            ..
        }) => io(source),
        KernelsCommandError::HeldOut(_) => InvalidInput,
        KernelsCommandError::Profile(inner) => profile(inner),
        KernelsCommandError::File { source, .. } => io(source),
        KernelsCommandError::BadArgument(_) => InvalidInput,
    }
}

fn kernel(error: &KernelError) -> ErrorKind {
    match &error.kind {
        KernelErrorKind::Io(inner) => io(inner),
        KernelErrorKind::Internal(_) => Internal,
        _ => Kernel,
    }
}

fn profile(error: &ProfileError) -> ErrorKind {
    match error {
        ProfileError::Io { source, .. } => io(source),
        ProfileError::BadMagic | ProfileError::Malformed { .. } => InvalidInput,
        ProfileError::UnsupportedVersion { .. } => InvalidInput,
        ProfileError::ChecksumMismatch { .. } => Corrupt,
    }
}

fn corpus(error: &CorpusError) -> ErrorKind {
    match error {
        CorpusError::Io { source, .. } => io(source),
        CorpusError::BadIndex { .. } | CorpusError::Empty(_) => InvalidInput,
    }
}

fn pipeline(error: &PipelineError) -> ErrorKind {
    match error {
        PipelineError::Open { source, .. }
        | PipelineError::Read { source, .. }
        | PipelineError::Output { source, .. }
        | PipelineError::Write { source, .. } => engine(source),
        PipelineError::Stream { source, .. } => stream(source),
        PipelineError::Kernel(inner) => kernel(inner),
        PipelineError::KernelPanicked { .. } => Kernel,
        PipelineError::Config(_) => InvalidInput,
        PipelineError::Cancelled => Internal,
    }
}

fn path_export(error: &PathExportError) -> ErrorKind {
    match error {
        PathExportError::Held { .. } | PathExportError::DeviceOfServedStore { .. } => StoreInUse,
        PathExportError::Lock { source, .. } => store_lock(source),
    }
}

fn nbd_start(error: &flashpipe_nbd::server::ServerStartError) -> ErrorKind {
    use flashpipe_nbd::server::ServerStartError as S;
    match error {
        S::Bind { source, .. } => match io(source) {
            Io => Network,
            other => other,
        },
        S::Thread { .. } => Internal,
        _ => InvalidInput,
    }
}

fn serve(error: &flashpipe_server::ServeError) -> ErrorKind {
    use flashpipe_server::ServeError as S;
    match error {
        S::AlreadyServing { .. } => StoreInUse,
        S::NotASocket { .. } => Exists,
        S::Bind { source, .. } => io(source),
        S::BadConfig { .. } | S::KernelPaths(_) => InvalidInput,
        S::Thread(_) => Internal,
        S::Close(inner) => store_close(inner),
    }
}
