//! A block device wrapped with test hooks: the test doubles that count the requests a
//! device is given, refuse some of them, or hold completions back until waited for. A
//! test writes only what its double does differently ([`Hooks`]); [`Hooked`] passes
//! everything else to the device it wraps.

use std::sync::Arc;

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, Rejected, Request,
};

/// What a test double does differently from the device it wraps. Every method has the
/// plain device's behaviour as its default.
pub trait Hooks: Send {
    /// Sees each request before the device does (to count it); an error refuses it, and
    /// the request comes back in [`Rejected`] with that error, named after the device.
    fn before_submit(&mut self, _request: &Request) -> Result<(), DeviceErrorKind> {
        Ok(())
    }

    /// Runs after each wait for completions, with the requests still in flight.
    fn after_wait(&mut self, _in_flight: usize) {}

    /// Whether a poll reaps completions (false: they come only when waited for, like a
    /// device whose hardware completes later).
    fn completes_at_poll(&self) -> bool {
        true
    }

    /// What the double answers to [`BlockDevice::copies_by_reference`] (the trait's
    /// default: no).
    fn copies_by_reference(&self) -> bool {
        false
    }
}

/// A device with hooks: `device` serves every request the hooks let through.
#[derive(Clone, Debug)]
pub struct Hooked<D, H> {
    /// The wrapped device.
    pub device: D,
    /// The test's hooks.
    pub hooks: H,
}

impl<D: BlockDevice, H: Hooks> Hooked<D, H> {
    /// `device` with `hooks`.
    pub fn new(device: D, hooks: H) -> Hooked<D, H> {
        Hooked { device, hooks }
    }
}

/// An injected I/O failure with `detail`, for [`Hooks::before_submit`].
pub fn io_failed(detail: &str) -> DeviceErrorKind {
    DeviceErrorKind::IoFailed {
        detail: detail.to_string(),
    }
}

impl<D: BlockDevice, H: Hooks> BlockDevice for Hooked<D, H> {
    fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.device.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        match self.hooks.before_submit(&request) {
            Ok(()) => self.device.submit(request),
            Err(kind) => Err(Rejected {
                error: DeviceError::new(&self.device.info().name, kind),
                request,
            }),
        }
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        if self.hooks.completes_at_poll() {
            self.device.poll_completions(completions)
        } else {
            0
        }
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        let reaped = self.device.wait_completions(completions);
        self.hooks.after_wait(self.device.in_flight());
        reaped
    }

    fn in_flight(&self) -> usize {
        self.device.in_flight()
    }

    fn copies_by_reference(&self) -> bool {
        self.hooks.copies_by_reference()
    }
}
