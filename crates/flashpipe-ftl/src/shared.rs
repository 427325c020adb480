//! [`SharedFtl`]: an FTL that a file system (or any other owner of a
//! `Box<dyn BlockDevice>`) drives while a tool or test keeps a handle to read its
//! statistics, e.g. the pages a copy programmed. Each request takes an uncontended lock.

use std::sync::{Arc, Mutex, MutexGuard};

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceInfo, Rejected, Request,
};

use crate::{Ftl, FtlStats};

/// An [`Ftl`] behind a shared lock; a [`BlockDevice`] itself. Clones share the FTL.
#[derive(Clone)]
pub struct SharedFtl {
    ftl: Arc<Mutex<Ftl>>,
    info: DeviceInfo,
}

impl SharedFtl {
    /// Shares `ftl`.
    pub fn new(ftl: Ftl) -> SharedFtl {
        SharedFtl {
            info: ftl.info().clone(),
            ftl: Arc::new(Mutex::new(ftl)),
        }
    }

    /// The FTL's statistics now.
    pub fn stats(&self) -> FtlStats {
        self.lock().stats()
    }

    /// Runs `action` on the FTL.
    pub fn with<R>(&self, action: impl FnOnce(&mut Ftl) -> R) -> R {
        action(&mut self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Ftl> {
        self.ftl.lock().expect("FTL lock")
    }
}

impl BlockDevice for SharedFtl {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn clock(&self) -> Arc<dyn Clock> {
        self.lock().clock()
    }
    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        self.lock().submit(request)
    }
    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.lock().poll_completions(completions)
    }
    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.lock().wait_completions(completions)
    }
    fn in_flight(&self) -> usize {
        self.lock().in_flight()
    }
    fn copies_by_reference(&self) -> bool {
        true
    }
}
