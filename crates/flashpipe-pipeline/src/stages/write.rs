//! The write stage: writes result buffers back into the store with several writes in flight and
//! returns each buffer for reuse.

use std::collections::HashMap;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use flashpipe_device::IoBuf;
use flashpipe_engine::{Command, EngineClient, Reply, Ticket};

use super::Shared;
use crate::error::PipelineError;
use crate::output::{keep_output_buffers, WriteRequest};
use crate::report::StageCounters;

struct Writer<'a> {
    shared: &'a Shared,
    client: EngineClient,
    spare_buffers: Sender<IoBuf>,
    writes: HashMap<Ticket, (Arc<str>, u64)>,
    counters: StageCounters,
}

/// Runs until the sinks close the write queue, then waits for the last writes.
pub(crate) fn run_writer(
    shared: &Shared,
    client: EngineClient,
    requests: Receiver<WriteRequest>,
    spare_buffers: Sender<IoBuf>,
    writes_in_flight: usize,
) -> StageCounters {
    let mut writer = Writer {
        shared,
        client,
        spare_buffers,
        writes: HashMap::new(),
        counters: StageCounters::default(),
    };
    for request in requests.iter() {
        if shared.cancelled() {
            continue;
        }
        while writer.client.outstanding() >= writes_in_flight {
            if !writer.reap_one() {
                break;
            }
        }
        writer.submit(request);
    }
    while writer.client.outstanding() > 0 && writer.reap_one() {}
    writer.counters
}

impl Writer<'_> {
    fn submit(&mut self, request: WriteRequest) {
        let WriteRequest {
            file,
            offset_bytes,
            buffer,
        } = request;
        let started_ns = self.shared.clock.now_ns();
        let submitted = self.client.submit(Command::Write {
            name: file.to_string(),
            offset_bytes,
            data: buffer,
        });
        self.counters.busy_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        match submitted {
            Ok(ticket) => {
                self.writes.insert(ticket, (file, offset_bytes));
            }
            Err(source) => self.shared.fail(PipelineError::Write {
                file: file.to_string(),
                offset_bytes,
                source,
            }),
        }
    }

    /// Waits for one write; false when the engine has gone away.
    fn reap_one(&mut self) -> bool {
        let started_ns = self.shared.clock.now_ns();
        let completion = self.client.next_completion();
        self.counters.busy_ns += self.shared.clock.now_ns().saturating_sub(started_ns);
        let (ticket, result) = match completion {
            Ok(completion) => completion,
            Err(source) => {
                self.shared.fail(PipelineError::Write {
                    file: "(results)".to_string(),
                    offset_bytes: 0,
                    source,
                });
                return false;
            }
        };
        let (file, offset_bytes) = self
            .writes
            .remove(&ticket)
            .expect("every completion answers a write this stage submitted");
        match result {
            Ok(Reply::Written { buffer }) => {
                self.counters.items += 1;
                self.counters.bytes += buffer.len() as u64;
                if let Err(full) = self.spare_buffers.try_send(buffer) {
                    keep_output_buffers([full.into_inner()]);
                }
            }
            Ok(other) => unreachable!("a write completed with {other:?}"),
            Err(source) => self.shared.fail(PipelineError::Write {
                file: file.to_string(),
                offset_bytes,
                source,
            }),
        }
        true
    }
}
