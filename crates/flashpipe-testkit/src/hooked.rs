//! A block device wrapped with test hooks: the test doubles that count the requests a
//! device is given, refuse some of them, change them or answer them themselves (a copy by
//! reference carried out by moving bytes, a write failed), change the completions they
//! hand back, or hold completions back until waited for. A test writes only what its
//! double does differently ([`Hooks`]); [`Hooked`] passes everything else to the device it
//! wraps.

use std::collections::VecDeque;
use std::sync::Arc;

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, Operation, Rejected,
    Request,
};

/// What [`Hooks::serve`] did with a request: `Some` completion when the hooks answered it
/// themselves, `None` when the device has it; `Err` hands it back refused.
pub type Served = Result<Option<Completion>, Rejected>;

/// What a test double does differently from the device it wraps. Every method has the
/// plain device's behaviour as its default.
pub trait Hooks: Send {
    /// Sees each request before the device does (to count it); an error refuses it, and
    /// the request comes back in [`Rejected`] with that error, named after the device.
    fn before_submit(&mut self, _request: &Request) -> Result<(), DeviceErrorKind> {
        Ok(())
    }

    /// Hands `request` to `device` (the default), changed or not, or answers it itself:
    /// `Some(completion)` is reaped at the next poll or wait, before the device's own.
    fn serve(&mut self, device: &mut dyn BlockDevice, request: Request) -> Served {
        device.submit(request).map(|()| None)
    }

    /// Sees, and may change, the completions each poll or successful wait reaps.
    fn reaped(&mut self, _completions: &mut [Completion]) {}

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

/// A device with hooks: `device` serves every request the hooks let through and do not
/// answer themselves.
#[derive(Debug)]
pub struct Hooked<D, H> {
    /// The wrapped device.
    pub device: D,
    /// The test's hooks.
    pub hooks: H,
    /// Completions of the requests the hooks answered, not reaped yet.
    answered: VecDeque<Completion>,
}

impl<D: BlockDevice, H: Hooks> Hooked<D, H> {
    /// `device` with `hooks`.
    pub fn new(device: D, hooks: H) -> Hooked<D, H> {
        Hooked {
            device,
            hooks,
            answered: VecDeque::new(),
        }
    }

    /// Waits for the device's completions (the hooks have no answer waiting), then runs
    /// the hooks' `after_wait` and shows them what came.
    fn wait_on_device(&mut self, completions: &mut Vec<Completion>) -> Result<usize, DeviceError> {
        let start = completions.len();
        let reaped = self.device.wait_completions(completions);
        self.hooks.after_wait(self.device.in_flight());
        if reaped.is_ok() {
            self.hooks.reaped(&mut completions[start..]);
        }
        reaped
    }

    /// Moves the hooks' answers into `completions` and shows them to the hooks.
    fn reap_answered(&mut self, completions: &mut Vec<Completion>) -> usize {
        let start = completions.len();
        let count = self.answered.len();
        completions.extend(self.answered.drain(..));
        self.hooks.reaped(&mut completions[start..]);
        count
    }
}

/// Hooks that answer copies by reference themselves, moving the bytes with the closure
/// (`device`, source first block, destination first block, block count): a stand-in for a
/// remapping device, where only the semantics matter. Every request is first checked
/// against the device's geometry; the others go to the device.
pub struct CopiesByMoving<F>(pub F);

impl<F> Hooks for CopiesByMoving<F>
where
    F: FnMut(&mut dyn BlockDevice, u64, u64, u64) -> Result<(), DeviceError> + Send,
{
    fn serve(&mut self, device: &mut dyn BlockDevice, request: Request) -> Served {
        if let Err(error) = device.info().validate(&request.operation) {
            return Err(Rejected { request, error });
        }
        match request.operation {
            Operation::CopyByReference {
                source_first_block,
                destination_first_block,
                block_count,
            } => {
                let status = (self.0)(
                    device,
                    source_first_block,
                    destination_first_block,
                    block_count,
                );
                let tag = request.tag;
                Ok(Some(Completion {
                    tag,
                    status,
                    buffer: None,
                }))
            }
            _ => device.submit(request).map(|()| None),
        }
    }

    fn copies_by_reference(&self) -> bool {
        true
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

    /// The hooks' answers not reaped yet count against the queue depth, as requests in
    /// flight do.
    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if !self.answered.is_empty() && self.in_flight() >= self.info().queue_depth as usize {
            return Err(self.info().queue_full(request));
        }
        if let Err(kind) = self.hooks.before_submit(&request) {
            return Err(Rejected {
                error: DeviceError::new(&self.device.info().name, kind),
                request,
            });
        }
        if let Some(completion) = self.hooks.serve(&mut self.device, request)? {
            self.answered.push_back(completion);
        }
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        let answered = self.reap_answered(completions);
        if !self.hooks.completes_at_poll() {
            return answered;
        }
        let start = completions.len();
        let reaped = self.device.poll_completions(completions);
        self.hooks.reaped(&mut completions[start..]);
        answered + reaped
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        if self.answered.is_empty() {
            self.wait_on_device(completions)
        } else {
            Ok(self.poll_completions(completions))
        }
    }

    fn in_flight(&self) -> usize {
        self.answered.len() + self.device.in_flight()
    }

    fn copies_by_reference(&self) -> bool {
        self.hooks.copies_by_reference()
    }
}
