//! Kernel runs through a server (issue #14): [`Client::run_kernel`] sends a run-kernel
//! request and returns a [`KernelRun`], an iterator over the run's answers as they come:
//! each input file's outcome, then the summary (totals and stage table), or the error
//! that ended the run (`Cancelled` after a cancel). [`KernelRun::cancel`] asks the server
//! to stop the run at its next file boundary; a run dropped before its end is cancelled
//! and its remaining answers read and dropped, so the connection stays usable.

use flashpipe_protocol::{
    CancelOutcome, KernelFileOutcome, KernelRunSummary, Request, RequestId, RunKernelRequest,
};

use crate::client::{Client, Response};
use crate::error::ClientError;

/// One answer of a kernel run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelRunEvent {
    /// One input file's outcome (in the order the server finished them).
    File(KernelFileOutcome),
    /// The run's totals and stage table: its last answer.
    Summary(KernelRunSummary),
}

/// A kernel run in flight on a client's connection; iterate for its answers.
pub struct KernelRun<'a> {
    client: &'a mut Client,
    request_id: RequestId,
    finished: bool,
}

impl Client {
    /// Starts a kernel run on the server; its answers come from the returned iterator.
    pub fn run_kernel(&mut self, request: RunKernelRequest) -> Result<KernelRun<'_>, ClientError> {
        let request_id = self.submit(Request::RunKernel(request))?;
        Ok(KernelRun {
            client: self,
            request_id,
            finished: false,
        })
    }
}

impl KernelRun<'_> {
    /// The run's request id.
    pub fn request_id(&self) -> RequestId {
        self.request_id
    }

    /// Asks the server to stop the run at its next file boundary: it then commits
    /// nothing and ends with a `Cancelled` error ([`CancelOutcome::Stopping`]), unless
    /// it had committed already (then its summary still comes).
    pub fn cancel(&mut self) -> Result<CancelOutcome, ClientError> {
        if self.finished {
            return Ok(CancelOutcome::NotInFlight);
        }
        self.client.cancel(self.request_id)
    }

    /// Reads every remaining answer: the files' outcomes and the summary.
    pub fn collect_all(
        mut self,
    ) -> Result<(Vec<KernelFileOutcome>, KernelRunSummary), ClientError> {
        let mut files = Vec::new();
        for event in &mut self {
            match event? {
                KernelRunEvent::File(file) => files.push(file),
                KernelRunEvent::Summary(summary) => return Ok((files, summary)),
            }
        }
        Err(ClientError::Protocol(
            "the kernel run ended without a summary".to_string(),
        ))
    }
}

impl Iterator for KernelRun<'_> {
    type Item = Result<KernelRunEvent, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let answer = self.client.wait_for(self.request_id);
        Some(match answer {
            Ok(Response::KernelFile(file)) => Ok(KernelRunEvent::File(file)),
            Ok(Response::KernelSummary(summary)) => {
                self.finished = true;
                Ok(KernelRunEvent::Summary(summary))
            }
            Ok(other) => {
                self.finished = true;
                Err(ClientError::Protocol(format!(
                    "a kernel run answered with {other:?}"
                )))
            }
            Err(error) => {
                self.finished = true;
                Err(error)
            }
        })
    }
}

impl Drop for KernelRun<'_> {
    /// A run dropped before its end is cancelled and its answers drained.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if self.cancel().is_err() {
            return;
        }
        for event in self.by_ref() {
            if event.is_err() {
                break;
            }
        }
    }
}
