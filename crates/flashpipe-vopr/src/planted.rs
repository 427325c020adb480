//! Bugs planted on purpose (test-only fault hooks): the campaign must find each within a
//! few dozen seeds, which shows that its checks have teeth.

use std::collections::VecDeque;
use std::sync::Arc;

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceInfo, Operation, Rejected, Request,
};

/// A bug the campaign plants in the stack it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// The device under the file system acknowledges every flush at once without passing
    /// it on: data the file system was told is durable is not.
    FlushAcknowledgedUnflushed,
}

/// A device that acknowledges flushes without flushing ([`PlantedBug::FlushAcknowledgedUnflushed`]).
pub(crate) struct LyingFlushes {
    inner: Box<dyn BlockDevice>,
    acknowledged: VecDeque<Completion>,
}

impl LyingFlushes {
    pub(crate) fn new(inner: Box<dyn BlockDevice>) -> LyingFlushes {
        LyingFlushes {
            inner,
            acknowledged: VecDeque::new(),
        }
    }
}

impl BlockDevice for LyingFlushes {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if matches!(request.operation, Operation::Flush) {
            self.acknowledged.push_back(Completion {
                tag: request.tag,
                status: Ok(()),
                buffer: None,
            });
            return Ok(());
        }
        self.inner.submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        let lied = self.acknowledged.len();
        completions.extend(self.acknowledged.drain(..));
        lied + self.inner.poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        if !self.acknowledged.is_empty() {
            return Ok(self.poll_completions(completions));
        }
        self.inner.wait_completions(completions)
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.acknowledged.len()
    }
}
