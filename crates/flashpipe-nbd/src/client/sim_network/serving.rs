//! The NBD serving of a simulated disk node: the real server's transmission core
//! ([`NbdServerCore`]) cuts the client's bytes into requests, checks them and hands out
//! device jobs; the node carries each job out on its RAM disk (or fails it, as a failing
//! device would) and the core encodes the reply. Also the record of what a node restart
//! reverts (unflushed, non-FUA changes), fed by the jobs.

use flashpipe_device::{run_one, BlockDevice, DeviceError, DeviceErrorKind, IoBuf, Operation};

use crate::server::core::{CoreSettings, DeviceJob, NbdServerCore, Step};
use crate::server::extents::AllocationRun;
use crate::server::worker::{error_body, JobKind, OutgoingReply, ReplyBody};

use super::{NetworkEvent, NetworkState, Node, NODE_DISK_BLOCK_BYTES};

/// Requests a node's connection holds unanswered at most (the real server's default).
pub(super) const NODE_REQUEST_LIMIT: usize = 128;

/// The transmission core of a new connection to a node exporting `size_bytes`.
pub(super) fn connection_core(size_bytes: u64, structured_replies: bool) -> NbdServerCore {
    let settings = CoreSettings {
        size_bytes,
        block_size_bytes: NODE_DISK_BLOCK_BYTES,
        read_only: false,
        trim_reads_zeroes: false,
        structured_replies,
        base_allocation_context: None,
    };
    NbdServerCore::new(settings, NODE_REQUEST_LIMIT)
}

/// Whether a job fails on a failing device, or runs.
enum Service {
    Run,
    Fail,
}

impl NetworkState {
    /// The node feeds one message to its connection's core, carries each job the core
    /// hands out on its disk (or fails it) and schedules each request's replies after its
    /// own service time.
    pub(super) fn serve(&mut self, node: usize, connection: u64, bytes: &[u8]) {
        if self.nodes[node].live_connection != Some(connection) {
            return;
        }
        let closes = {
            let target = &mut self.nodes[node];
            target.link.draw_close(&mut target.generator)
        };
        if closes {
            self.sever(node, "the server closed the connection");
            return;
        }
        self.nodes[node].server.receive(bytes);
        loop {
            let step = self.nodes[node].server.next_step();
            match step {
                Step::Job(job) => {
                    let target = &mut self.nodes[node];
                    let failing = target.failure_probability > 0.0
                        && target.generator.chance(target.failure_probability);
                    let service = if failing {
                        self.counters.requests_failed += 1;
                        Service::Fail
                    } else {
                        Service::Run
                    };
                    let reply = target.carry_out(job, service);
                    target.server.complete(reply);
                }
                Step::BlockStatus(query) => {
                    let target = &mut self.nodes[node];
                    let runs = Node::all_data(query.first_block, query.end_block);
                    let reply = query.reply(target.server.settings(), &runs);
                    target.server.complete(reply);
                }
                Step::Answered => {}
                Step::NeedInput | Step::NeedCompletion => return,
                Step::End(end) => {
                    self.sever(node, &format!("the server refused a request: {end}"));
                    return;
                }
            }
            self.nodes[node].requests_served += 1;
            self.counters.requests_served += 1;
            let replies = self.nodes[node].server.take_replies();
            let service_ns = {
                let target = &mut self.nodes[node];
                target.link.draw_service_ns(&mut target.generator)
            };
            let at_ns = self.timeline.now_ns() + service_ns;
            self.schedule(
                at_ns,
                NetworkEvent::ServiceDone {
                    node,
                    connection,
                    replies,
                },
            );
        }
    }
}

impl Node {
    /// Carries `job` out on the node's disk (or fails it with `EIO`), keeping the
    /// record of what a restart reverts; returns its reply.
    fn carry_out(&mut self, job: DeviceJob, service: Service) -> OutgoingReply {
        let cookie = job.cookie;
        let body = match service {
            Service::Fail => error_body(&DeviceError::new(
                &self.disk.info().name,
                DeviceErrorKind::IoFailed {
                    detail: "simulated device failure".to_string(),
                },
            )),
            Service::Run => {
                self.note_volatile_change(&job);
                let durable = Node::durable_effect(&job);
                let body = self.execute(job.kind);
                if !matches!(body, ReplyBody::Error { .. }) {
                    self.note_durable(durable);
                }
                body
            }
        };
        OutgoingReply { cookie, body }
    }

    /// A block status query (a node selects no metadata context, so the core refuses
    /// it first): every block is data.
    fn all_data(first_block: u64, end_block: u64) -> Vec<AllocationRun> {
        vec![AllocationRun {
            block_count: end_block - first_block,
            is_hole: false,
        }]
    }

    fn execute(&mut self, kind: JobKind) -> ReplyBody {
        let block = u64::from(NODE_DISK_BLOCK_BYTES);
        let (operation, read_offset_bytes) = match kind {
            JobKind::Read {
                first_block,
                block_count,
            } => (
                Operation::Read {
                    first_block,
                    buffer: IoBuf::zeroed((block_count * block) as usize),
                },
                Some(first_block * block),
            ),
            JobKind::Write {
                first_block,
                buffer,
            } => (
                Operation::Write {
                    first_block,
                    buffer,
                },
                None,
            ),
            JobKind::Flush => (Operation::Flush, None),
            JobKind::Trim {
                first_block,
                block_count,
            } => (
                Operation::Trim {
                    first_block,
                    block_count,
                },
                None,
            ),
            JobKind::WriteZeroes {
                first_block,
                block_count,
            } => (
                Operation::Write {
                    first_block,
                    buffer: IoBuf::zeroed((block_count * block) as usize),
                },
                None,
            ),
            JobKind::Reap => return ReplyBody::Done,
        };
        let completion = match run_one(&mut self.disk, operation) {
            Ok(completion) => completion,
            Err(error) => return error_body(&error),
        };
        if let Err(error) = completion.status {
            return error_body(&error);
        }
        match (read_offset_bytes, completion.buffer) {
            (Some(offset_bytes), Some(buffer)) => ReplyBody::Data {
                offset_bytes,
                buffer,
            },
            _ => ReplyBody::Done,
        }
    }

    /// The blocks a job changes, when it is a change a restart may undo: a write or a
    /// write-zeroes without FUA, or a trim.
    fn volatile_blocks(job: &DeviceJob) -> Option<std::ops::Range<u64>> {
        let block = u64::from(NODE_DISK_BLOCK_BYTES);
        let volatile = !job.force_unit_access;
        match &job.kind {
            JobKind::Write {
                first_block,
                buffer,
            } if volatile => Some(*first_block..first_block + buffer.len() as u64 / block),
            JobKind::WriteZeroes {
                first_block,
                block_count,
            } if volatile => Some(*first_block..first_block + block_count),
            JobKind::Trim {
                first_block,
                block_count,
            } => Some(*first_block..first_block + block_count),
            _ => None,
        }
    }

    /// Before a volatile change: keeps each block's contents from before the first
    /// change since the last flush.
    fn note_volatile_change(&mut self, job: &DeviceJob) {
        let Some(blocks) = Node::volatile_blocks(job) else {
            return;
        };
        for block in blocks {
            if self.unflushed_originals.contains_key(&block) {
                continue;
            }
            let operation = Operation::Read {
                first_block: block,
                buffer: IoBuf::zeroed(NODE_DISK_BLOCK_BYTES as usize),
            };
            let completion =
                run_one(&mut self.disk, operation).expect("a RAM disk read inside its bounds");
            let contents = completion.buffer.expect("a read hands its buffer back");
            self.unflushed_originals
                .insert(block, contents.as_slice().to_vec());
        }
    }

    /// What a job makes durable when it succeeds: a flush everything, a FUA write (or
    /// write-zeroes) its blocks.
    fn durable_effect(job: &DeviceJob) -> Durable {
        let block = u64::from(NODE_DISK_BLOCK_BYTES);
        match &job.kind {
            JobKind::Flush => Durable::Everything,
            JobKind::Write {
                first_block,
                buffer,
            } if job.force_unit_access => {
                Durable::Blocks(*first_block..first_block + buffer.len() as u64 / block)
            }
            JobKind::WriteZeroes {
                first_block,
                block_count,
            } if job.force_unit_access => Durable::Blocks(*first_block..first_block + block_count),
            _ => Durable::Nothing,
        }
    }

    /// After a job succeeded: forgets the originals of what it made durable.
    fn note_durable(&mut self, durable: Durable) {
        match durable {
            Durable::Everything => self.unflushed_originals.clear(),
            Durable::Blocks(blocks) => {
                for index in blocks {
                    self.unflushed_originals.remove(&index);
                }
            }
            Durable::Nothing => {}
        }
    }
}

/// What a successful job makes durable.
enum Durable {
    Everything,
    Blocks(std::ops::Range<u64>),
    Nothing,
}
