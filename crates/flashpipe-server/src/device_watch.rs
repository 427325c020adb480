//! A served store whose device image shrinks or disappears takes no more writes.
//!
//! Before each request that changes the store's names or commits it (create, truncate,
//! delete, rename, copy, flush, kernel run), the server examines the store's image files
//! ([`RunningStore::check_devices`], one `fstat` per image). Data writes are not examined
//! one by one: they are the per-chunk hot path, and none of them is durable before the flush
//! that ends its command, which is examined, so a command writing to a changed image fails
//! before anything of it is acknowledged. The first finding is kept:
//! from then on every such request is refused with `StoreDeviceChanged` and the message
//! says what happened and what to do; reads of what is still there go on.

use std::sync::{OnceLock, Weak};

use flashpipe_protocol::{ErrorCode, RemoteError, Request};
use flashpipe_store::RunningStore;

/// The server's watch on its store's images.
pub(crate) struct DeviceWatch {
    store: Weak<RunningStore>,
    /// The first finding, kept: writes stay refused once an image changed.
    changed: OnceLock<String>,
}

impl DeviceWatch {
    pub(crate) fn new(store: Weak<RunningStore>) -> DeviceWatch {
        DeviceWatch {
            store,
            changed: OnceLock::new(),
        }
    }

    /// Refuses `request` when it would change the store and an image of the store was
    /// deleted or shrank.
    pub(crate) fn check_before(&self, request: &Request) -> Result<(), RemoteError> {
        if !changes_store(request) {
            return Ok(());
        }
        if let Some(message) = self.changed.get() {
            return Err(refusal(message));
        }
        let Some(store) = self.store.upgrade() else {
            return Ok(());
        };
        match store.check_devices() {
            Ok(()) => Ok(()),
            Err(finding) => {
                let message = self.changed.get_or_init(|| {
                    let message = finding.to_string();
                    tracing::error!(reason = %message, "a device image of the store changed under the server; writes are refused from now on");
                    message
                });
                Err(refusal(message))
            }
        }
    }
}

fn refusal(message: &str) -> RemoteError {
    RemoteError::new(ErrorCode::StoreDeviceChanged, message)
}

/// True for the requests that change the store's names or commit it (the commands whose
/// kind says so, and kernel runs, which commit their outputs); data writes are covered by
/// the flush that makes them durable.
fn changes_store(request: &Request) -> bool {
    match request.command_kind() {
        Some(kind) => kind.changes_names(),
        None => matches!(request, Request::RunKernel(_)),
    }
}
