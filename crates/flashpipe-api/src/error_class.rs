//! [`ErrorClass`]: what kind of failure each [`ErrorCode`] is, the one table the CLI's
//! exit statuses (docs/cli.md, "Exit statuses") and Python's exception classes
//! (docs/python.md, "Errors") both follow, so a refusal reads the same from either.

use crate::error::ErrorCode;

/// The kind of failure a refusal is, as a user acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// No file has the name.
    NotFound,
    /// The target exists already.
    Exists,
    /// An argument is wrong: a bad name, a range past a file's end, a request over a
    /// limit of one call, attributes out of range.
    Invalid,
    /// The store or a device is full, or a file would pass its size limit.
    NoSpace,
    /// The caller may not do this: a read-only store, the server's access rule, a
    /// per-user limit.
    Permission,
    /// A device failed or the store became unusable.
    Io,
    /// Stored data failed its checksum.
    Corrupt,
    /// A limit of the server or engine is reached for now: try again.
    Busy,
    /// The server stops, or the conversation with it broke down.
    Network,
    /// A kernel refused its run or failed on its input.
    Kernel,
    /// Anything else: a bug or an unforeseen condition.
    Internal,
}

impl ErrorCode {
    /// The kind of failure this code is (the one table of docs/protocol.md, "Error
    /// codes"). A code this version does not know is [`ErrorClass::Internal`].
    pub fn class(self) -> ErrorClass {
        use ErrorClass as K;
        use ErrorCode as C;
        match self {
            C::NotFound => K::NotFound,
            C::Exists => K::Exists,
            C::BadName
            | C::NotByReference
            | C::ReadTooLarge
            | C::TooManyFiles
            | C::ReadFilesTooLarge
            | C::WriteTooLarge
            | C::ReadPastEnd
            | C::HostPathOption
            | C::BadAttributes => K::Invalid,
            C::NoSpace | C::FileTooLarge => K::NoSpace,
            C::ReadOnly | C::AccessDenied | C::TooManyClientsForUser => K::Permission,
            C::Unusable | C::Device | C::CheckFailed | C::StoreDeviceChanged => K::Io,
            C::DataChecksumMismatch => K::Corrupt,
            C::ReadBuffersExhausted
            | C::EngineBusy
            | C::TooManyClients
            | C::TooManyInFlight
            | C::ClientBytesInFlight
            | C::ServerBytesInFlight
            | C::TooManyReadHandles
            | C::ServerReadHandles
            | C::NoWriteSlots
            | C::TooManyKernelRuns
            | C::BatchBuffersFull => K::Busy,
            C::EngineStopped | C::ShuttingDown | C::HandshakeTimeout | C::UnsupportedVersion => {
                K::Network
            }
            C::BadKernelRun | C::KernelFailed => K::Kernel,
            C::StaleHandle
            | C::BadBuffer
            | C::Internal
            | C::NotGranted
            | C::MalformedFrame
            | C::NotMapped
            | C::HandshakeRequired
            | C::Cancelled
            | C::Unknown(_) => K::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ALL_KNOWN_CODES;

    #[test]
    fn every_class_has_a_code_and_the_caller_errors_are_invalid() {
        let classes: std::collections::HashSet<ErrorClass> =
            ALL_KNOWN_CODES.iter().map(|code| code.class()).collect();
        assert_eq!(classes.len(), 11, "every class is some code's");
        for code in [
            ErrorCode::ReadPastEnd,
            ErrorCode::BadAttributes,
            ErrorCode::BadName,
        ] {
            assert_eq!(code.class(), ErrorClass::Invalid, "{code}");
        }
        assert_eq!(ErrorCode::KernelFailed.class(), ErrorClass::Kernel);
        assert_eq!(ErrorCode::Unknown(999).class(), ErrorClass::Internal);
    }
}
