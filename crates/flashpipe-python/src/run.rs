//! Kernel runs from Python: [`KernelRunStream`], the answers of one run through the
//! store's server (`Client::submit` of a run-kernel request), read one at a time as the
//! server finishes each input file, then its summary. The stream holds its request id,
//! not a borrow of the connection. While the run is in flight the store's other calls are
//! refused (`flashpipe.Busy`): their commands' answers would meet the run's on the one
//! connection. A stream closed or freed before its end cancels the run (the server stops
//! at its next file boundary and commits nothing) and drains its answers, so the
//! connection stays usable.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use flashpipe_client::{
    Client, KernelFileOutcome, KernelRunSummary, RequestId, Response, RunKernelRequest,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::{ErrorKind, StoreError};
use crate::store::Store;

/// Where a run stands.
enum RunState {
    /// Answers are still to come.
    Running,
    /// The summary came: the run committed its outputs.
    Finished(KernelRunSummary),
    /// The run failed, was cancelled, or its connection went.
    Ended,
}

/// The answers of one kernel run through a server: iterate for one dict per input file
/// as each completes; `summary` once the iteration ends.
#[pyclass(module = "flashpipe._flashpipe", frozen)]
pub struct KernelRunStream {
    store: Py<Store>,
    request_id: RequestId,
    state: Mutex<RunState>,
}

/// The run's state, or `flashpipe.Busy` while another thread reads the run: its lock is
/// held across a detached wait, so waiting for it with the interpreter attached could
/// deadlock (the reader needs the interpreter back to let go).
fn state_of(state: &Mutex<RunState>) -> PyResult<MutexGuard<'_, RunState>> {
    match state.try_lock() {
        Ok(guard) => Ok(guard),
        Err(TryLockError::Poisoned(poisoned)) => Ok(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => Err(crate::error::raise(
            ErrorKind::Busy,
            "another thread is reading this kernel run; read a run from one thread".to_string(),
        )),
    }
}

impl KernelRunStream {
    /// Sends `request` through the store's server and returns the stream of its answers.
    pub fn start(
        py: Python<'_>,
        store: Py<Store>,
        request: RunKernelRequest,
    ) -> PyResult<KernelRunStream> {
        let this = store.get();
        let request_id = this.with_client(py, false, move |client| {
            let request_id = client.submit(flashpipe_protocol::Request::RunKernel(request))?;
            this.set_kernel_run(true);
            Ok(request_id)
        })?;
        Ok(KernelRunStream {
            store,
            request_id,
            state: Mutex::new(RunState::Running),
        })
    }

    fn next_answer(&self, py: Python<'_>) -> PyResult<Option<KernelFileOutcome>> {
        let mut state = state_of(&self.state)?;
        if !matches!(*state, RunState::Running) {
            return Ok(None);
        }
        let request_id = self.request_id;
        let answer = self
            .store
            .get()
            .with_client(py, true, move |client| Ok(client.wait_for(request_id)?));
        match answer {
            Ok(Response::KernelFile(file)) => Ok(Some(file)),
            Ok(Response::KernelSummary(summary)) => {
                *state = RunState::Finished(summary);
                self.store.get().set_kernel_run(false);
                Ok(None)
            }
            Ok(other) => {
                *state = RunState::Ended;
                self.store.get().set_kernel_run(false);
                Err(crate::error::raise(
                    ErrorKind::Network,
                    format!(
                        "the server answered a kernel run with a {} answer",
                        other.name()
                    ),
                ))
            }
            Err(error) => {
                *state = RunState::Ended;
                self.store.get().set_kernel_run(false);
                Err(error)
            }
        }
    }

    /// Cancels a run still going and reads its remaining answers.
    fn cancel(client: &mut Client, request_id: RequestId) -> Result<(), StoreError> {
        client.cancel(request_id)?;
        while let Ok(Response::KernelFile(_)) = client.wait_for(request_id) {}
        Ok(())
    }
}

fn file_dict<'py>(py: Python<'py>, file: &KernelFileOutcome) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("index", file.index)?;
    dict.set_item("name", &file.name)?;
    dict.set_item("size_bytes", file.size_bytes)?;
    match &file.result {
        Ok(result) => {
            dict.set_item(
                "summary_json",
                String::from_utf8_lossy(&result.summary_json).into_owned(),
            )?;
            dict.set_item("output_bytes", result.output_bytes)?;
            dict.set_item("output_file", result.output_file.as_deref())?;
            dict.set_item("error", py.None())?;
        }
        Err(remote) => {
            dict.set_item("summary_json", py.None())?;
            dict.set_item("output_bytes", 0)?;
            dict.set_item("output_file", py.None())?;
            dict.set_item("error", remote.to_string())?;
        }
    }
    Ok(dict)
}

#[pymethods]
impl KernelRunStream {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        match self.next_answer(py)? {
            Some(file) => Ok(Some(file_dict(py, &file)?)),
            None => Ok(None),
        }
    }

    /// The run's totals and stage table once every answer was read; None before (or
    /// when the run failed or was cancelled).
    #[getter]
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let state = state_of(&self.state)?;
        let RunState::Finished(summary) = &*state else {
            return Ok(None);
        };
        let dict = PyDict::new(py);
        dict.set_item("kernel", &summary.kernel)?;
        dict.set_item("file_count", summary.file_count)?;
        dict.set_item("input_bytes", summary.input_bytes)?;
        dict.set_item("output_bytes", summary.output_bytes)?;
        dict.set_item("elapsed_seconds", summary.elapsed_seconds.to_f64())?;
        dict.set_item(
            "input_bytes_per_second",
            summary.input_bytes_per_second.to_f64(),
        )?;
        dict.set_item("slowest_stage", &summary.slowest_stage)?;
        dict.set_item("device_time_is_virtual", summary.device_time_is_virtual)?;
        let stages = summary
            .stages
            .iter()
            .map(|stage| {
                let row = PyDict::new(py);
                row.set_item("stage", &stage.stage)?;
                row.set_item("thread_count", stage.thread_count)?;
                row.set_item("item_count", stage.item_count)?;
                row.set_item("bytes", stage.bytes)?;
                row.set_item("busy_seconds", stage.busy_seconds.to_f64())?;
                row.set_item(
                    "capacity_bytes_per_second",
                    stage.capacity_bytes_per_second.to_f64(),
                )?;
                Ok(row)
            })
            .collect::<PyResult<Vec<_>>>()?;
        dict.set_item("stages", stages)?;
        Ok(Some(dict))
    }

    /// Stops a run still going (it commits nothing) and reads its remaining answers;
    /// does nothing once the run ended, or when its store was closed or its connection
    /// went (nothing is left to stop then).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut state = state_of(&self.state)?;
        if !matches!(*state, RunState::Running) {
            return Ok(());
        }
        *state = RunState::Ended;
        let request_id = self.request_id;
        // A closed store or a lost connection has no run left to stop: nothing to report.
        drop(self.store.get().with_client(py, true, move |client| {
            KernelRunStream::cancel(client, request_id)
        }));
        self.store.get().set_kernel_run(false);
        Ok(())
    }
}

impl Drop for KernelRunStream {
    fn drop(&mut self) {
        if matches!(
            *self.state.get_mut().unwrap_or_else(PoisonError::into_inner),
            RunState::Running
        ) {
            // Dropped: no other thread holds the run, so its state lock is free.
            Python::attach(|py| drop(self.close(py)));
        }
    }
}
