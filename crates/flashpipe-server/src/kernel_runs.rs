//! Kernel runs of a server's clients (issue #14): each on a thread of its own next to
//! the engine, at most [`crate::ServerConfig::max_kernel_runs`] at once server-wide (one
//! past it is refused with `TooManyKernelRuns` and the limit), each with a cancel flag a
//! client's cancel sets (the run stops at the next file boundary and commits nothing).
//! A run answers with one kernel-file frame per input and a kernel-summary frame, or an
//! error frame. A client that goes away cancels its runs; a stopping server cancels every
//! run and waits for their threads before it closes the store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use flashpipe_pipeline::{FileObserver, PipelineResult};
use flashpipe_protocol::kernel_run::MAX_KERNEL_RESULT_BYTES;
use flashpipe_protocol::{
    ErrorCode, Frame, KernelFileOutcome, KernelFileResult, KernelRunSummary, KernelStageFigures,
    RemoteError, RequestId, Response, RunKernelRequest, WireFloat,
};
use flashpipe_store::RunningStore;

use crate::connection::Connection;
use crate::kernel_job::run_kernel_job;

/// A run's key: the connection and the request id.
type RunKey = (u64, RequestId);

/// The server's kernel runs.
pub(crate) struct KernelRuns {
    store: Weak<RunningStore>,
    max_runs: usize,
    running: Mutex<HashMap<RunKey, Arc<AtomicBool>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_run_number: AtomicU64,
}

impl KernelRuns {
    pub(crate) fn new(store: Weak<RunningStore>, max_runs: usize) -> KernelRuns {
        KernelRuns {
            store,
            max_runs,
            running: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            next_run_number: AtomicU64::new(1),
        }
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<RunKey, Arc<AtomicBool>>> {
        self.running
            .lock()
            .expect("no panic holding the kernel runs")
    }

    /// Starts `run` for `connection` under `request_id` (admitted already), or refuses
    /// it at the server-wide limit.
    pub(crate) fn start(
        &self,
        connection: Arc<Connection>,
        request_id: RequestId,
        run: RunKernelRequest,
    ) -> Result<(), RemoteError> {
        let store = self.store.upgrade().ok_or_else(|| {
            RemoteError::new(ErrorCode::ShuttingDown, "the server is closing its store")
        })?;
        let run = connection.state.kernel_paths.server_side(run)?;
        let key = (connection.id, request_id);
        let cancel = Arc::new(AtomicBool::new(false));
        {
            let mut running = self.lock_running();
            if running.len() >= self.max_runs {
                let limit = self.max_runs;
                return Err(RemoteError::limit(
                    ErrorCode::TooManyKernelRuns,
                    format!("the server runs {limit} kernels at once, its limit; try again when one ends"),
                    limit as u64,
                ));
            }
            running.insert(key, Arc::clone(&cancel));
        }
        let task = RunTask {
            store,
            connection,
            request_id,
            run,
            runs_at_once: self.max_runs,
            run_number: self.next_run_number.fetch_add(1, Ordering::Relaxed),
            cancel,
        };
        let spawned = std::thread::Builder::new()
            .name(format!("flashpipe-kernel-run-{}", task.run_number))
            .spawn(move || task.run_and_answer());
        match spawned {
            Ok(thread) => {
                let mut threads = self.threads.lock().expect("no panic holding the threads");
                threads.retain(|thread| !thread.is_finished());
                threads.push(thread);
                Ok(())
            }
            Err(error) => {
                self.lock_running().remove(&key);
                Err(RemoteError::new(
                    ErrorCode::Internal,
                    format!("cannot start a kernel run's thread: {error}"),
                ))
            }
        }
    }

    /// Tells run `request_id` of connection `connection_id` to stop; false when no such
    /// run is going on.
    pub(crate) fn cancel(&self, connection_id: u64, request_id: RequestId) -> bool {
        match self.lock_running().get(&(connection_id, request_id)) {
            Some(flag) => {
                flag.store(true, Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// Tells every run of a connection that ended to stop.
    pub(crate) fn cancel_connection(&self, connection_id: u64) {
        for ((connection, _), flag) in self.lock_running().iter() {
            if *connection == connection_id {
                flag.store(true, Ordering::Release);
            }
        }
    }

    /// Tells every run to stop and waits for their threads.
    pub(crate) fn cancel_all_and_join(&self) {
        for flag in self.lock_running().values() {
            flag.store(true, Ordering::Release);
        }
        let threads =
            std::mem::take(&mut *self.threads.lock().expect("no panic holding the threads"));
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("a kernel run's thread panicked");
            }
        }
    }
}

/// One run, on its own thread.
struct RunTask {
    store: Arc<RunningStore>,
    connection: Arc<Connection>,
    request_id: RequestId,
    run: RunKernelRequest,
    runs_at_once: usize,
    run_number: u64,
    cancel: Arc<AtomicBool>,
}

impl RunTask {
    /// Runs the job, streaming each file's outcome as it completes, then leaves the
    /// registry and sends the last answer.
    fn run_and_answer(self) {
        let RunTask {
            store,
            connection,
            request_id,
            run,
            runs_at_once,
            run_number,
            cancel,
        } = self;
        let streaming = Arc::clone(&connection);
        let on_file_done: FileObserver = Arc::new(move |index, file| {
            streaming.send(&Frame::Response {
                request_id,
                response: Response::KernelFile(file_outcome(index, file)),
            });
        });
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_kernel_job(
                &store,
                &run,
                runs_at_once,
                run_number,
                &cancel,
                on_file_done,
            )
        }))
        .unwrap_or_else(|_| {
            tracing::error!(run_number, "a kernel run panicked");
            Err(RemoteError::new(
                ErrorCode::Internal,
                "the kernel run failed inside the server (a bug; see the server's log)",
            ))
        });
        drop(store);
        connection
            .state
            .kernel_runs
            .lock_running()
            .remove(&(connection.id, request_id));
        answer(&connection, request_id, result);
    }
}

/// Sends a finished run's last answer (its files' outcomes went as they completed): the
/// summary, or the error.
fn answer(
    connection: &Connection,
    request_id: RequestId,
    result: Result<PipelineResult, RemoteError>,
) {
    let final_frame = match result {
        Ok(result) => Frame::Response {
            request_id,
            response: Response::KernelSummary(summary(&result, connection)),
        },
        Err(error) => {
            tracing::debug!(connection = connection.id, request_id, code = %error.code, message = %error.message, "kernel run failed");
            Frame::Error { request_id, error }
        }
    };
    connection.finish(request_id);
    connection.send(&final_frame);
}

fn file_outcome(index: usize, file: &flashpipe_pipeline::FileOutcome) -> KernelFileOutcome {
    let result = serde_json::to_vec(&file.summary)
        .map_err(|error| error.to_string())
        .and_then(|summary_json| {
            if summary_json.len() > MAX_KERNEL_RESULT_BYTES {
                return Err(format!(
                    "{} bytes, above the protocol's {MAX_KERNEL_RESULT_BYTES} (lower the kernel's max_matches)",
                    summary_json.len()
                ));
            }
            Ok(summary_json)
        })
        .map(|summary_json| KernelFileResult {
            summary_json,
            output_bytes: file.output_bytes,
            output_file: file.output_file.clone(),
        })
        .map_err(|error| {
            RemoteError::new(
                ErrorCode::Internal,
                format!("{}: the kernel's summary cannot be encoded: {error}", file.name),
            )
        });
    KernelFileOutcome {
        index: index as u32,
        name: file.name.clone(),
        size_bytes: file.size_bytes,
        result,
    }
}

fn summary(result: &PipelineResult, connection: &Connection) -> KernelRunSummary {
    let report = &result.report;
    KernelRunSummary {
        kernel: report.kernel.clone(),
        file_count: report.file_count as u64,
        input_bytes: report.input_bytes,
        output_bytes: report.output_bytes,
        elapsed_seconds: WireFloat::from_f64(report.elapsed_seconds),
        input_bytes_per_second: WireFloat::from_f64(report.input_bytes_per_second),
        slowest_stage: report.slowest_stage.to_string(),
        stages: report
            .stages
            .iter()
            .map(|stage| KernelStageFigures {
                stage: stage.stage.to_string(),
                thread_count: stage.thread_count as u32,
                item_count: stage.item_count,
                bytes: stage.bytes,
                busy_seconds: WireFloat::from_f64(stage.busy_seconds),
                blocked_downstream_seconds: WireFloat::from_f64(stage.blocked_downstream_seconds),
                capacity_bytes_per_second: WireFloat::from_f64(stage.capacity_bytes_per_second),
            })
            .collect(),
        max_chunks_in_flight: report.max_chunks_in_flight as u64,
        chunk_credit_count: report.chunk_credit_count as u64,
        device_time_is_virtual: connection.state.device_time_is_virtual,
    }
}
