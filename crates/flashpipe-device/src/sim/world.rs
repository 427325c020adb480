//! The discrete-event core of a simulated world: every disk's state, one event queue
//! ordered by (virtual time, sequence number) (`flashpipe_sim::Timeline`, which moves the
//! world's virtual clock), service slots, the transfer channel, fault injection and
//! crashes.
//!
//! Everything here runs under the world's one mutex, on the caller's thread; random
//! choices come from seeded [`SplitMix64`] generators and every collection iterates in a
//! fixed order, so a seed fixes the whole history.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use flashpipe_sim::Timeline;

use crate::clock::VirtualClock;
use crate::error::{DeviceError, DeviceErrorKind, TransferDirection};
use crate::random::SplitMix64;
use crate::request::{Completion, DeviceInfo, Operation, Request};

use super::config::SimDiskConfig;
use super::storage::{BlockStore, UnfinishedChange};

/// Which step of a request an event ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The request's latency is over; a read or write now needs the transfer channel.
    LatencyDone,
    /// The request is done.
    Finished,
}

/// A scheduled step of one request.
#[derive(Debug, Clone, Copy)]
struct Event {
    disk_index: usize,
    request_id: u64,
    phase: Phase,
}

/// An accepted request that has not completed yet.
#[derive(Debug)]
struct InFlightRequest {
    handle_id: u64,
    request: Request,
    /// For a flush: the store's mark at submission.
    flush_mark: Option<u64>,
}

/// One handle's view of a disk: what it has accepted and what is ready to reap.
#[derive(Debug)]
struct HandleState {
    epoch: u64,
    ready: VecDeque<Completion>,
    accepted_count: usize,
}

/// One simulated disk.
#[derive(Debug)]
struct DiskState {
    config: SimDiskConfig,
    info: DeviceInfo,
    store: BlockStore,
    generator: SplitMix64,
    requests: BTreeMap<u64, InFlightRequest>,
    waiting_for_slot: VecDeque<u64>,
    busy_slot_count: u32,
    channel_free_at_ns: u64,
    handles: BTreeMap<u64, HandleState>,
}

/// The whole world behind the mutex.
#[derive(Debug)]
pub(crate) struct WorldState {
    timeline: Timeline<Event>,
    seed_generator: SplitMix64,
    crash_generator: SplitMix64,
    disks: Vec<DiskState>,
    next_request_id: u64,
    next_handle_id: u64,
    crashed: bool,
    epoch: u64,
    submissions_until_crash: Option<u64>,
    crash_survival_probability: f64,
    crash_decisions: Vec<Vec<(u64, bool)>>,
}

/// Where a new handle stands: its id and the disk's geometry.
pub(crate) struct OpenedHandle {
    pub(crate) handle_id: u64,
    pub(crate) info: DeviceInfo,
}

impl WorldState {
    pub(crate) fn new(seed: u64, clock: VirtualClock) -> WorldState {
        let mut seed_generator = SplitMix64::new(seed);
        let crash_generator = SplitMix64::new(seed_generator.next_u64());
        WorldState {
            timeline: Timeline::with_clock(clock),
            seed_generator,
            crash_generator,
            disks: Vec::new(),
            next_request_id: 0,
            next_handle_id: 0,
            crashed: false,
            epoch: 0,
            submissions_until_crash: None,
            crash_survival_probability: 0.5,
            crash_decisions: Vec::new(),
        }
    }

    pub(crate) fn clock(&self) -> &VirtualClock {
        self.timeline.clock()
    }

    /// The time of the earliest pending event.
    pub(crate) fn next_due_ns(&self) -> Option<u64> {
        self.timeline.next_due_ns()
    }

    pub(crate) fn disk_count(&self) -> usize {
        self.disks.len()
    }

    pub(crate) fn add_disk(&mut self, config: SimDiskConfig) -> Result<usize, DeviceError> {
        config.validate()?;
        let info = DeviceInfo {
            name: Arc::from(config.name.as_str()),
            block_size_bytes: config.block_size_bytes,
            block_count: config.block_count,
            queue_depth: config.queue_depth,
        };
        self.disks.push(DiskState {
            store: BlockStore::new(config.block_size_bytes),
            generator: SplitMix64::new(self.seed_generator.next_u64()),
            config,
            info,
            requests: BTreeMap::new(),
            waiting_for_slot: VecDeque::new(),
            busy_slot_count: 0,
            channel_free_at_ns: 0,
            handles: BTreeMap::new(),
        });
        Ok(self.disks.len() - 1)
    }

    pub(crate) fn open_handle(&mut self, disk_index: usize) -> Result<OpenedHandle, DeviceError> {
        let Some(disk) = self.disks.get_mut(disk_index) else {
            let name: Arc<str> = Arc::from(format!("sim disk {disk_index}"));
            let detail = format!("the world has {} disks", self.disks.len());
            return Err(DeviceError::new(&name, DeviceErrorKind::Open { detail }));
        };
        let handle_id = self.next_handle_id;
        self.next_handle_id += 1;
        disk.handles.insert(
            handle_id,
            HandleState {
                epoch: self.epoch,
                ready: VecDeque::new(),
                accepted_count: 0,
            },
        );
        Ok(OpenedHandle {
            handle_id,
            info: disk.info.clone(),
        })
    }

    pub(crate) fn close_handle(&mut self, disk_index: usize, handle_id: u64) {
        self.disks[disk_index].handles.remove(&handle_id);
    }

    fn handle(&self, disk_index: usize, handle_id: u64) -> &HandleState {
        self.disks[disk_index]
            .handles
            .get(&handle_id)
            .expect("a live SimDisk's handle is registered")
    }

    fn handle_mut(&mut self, disk_index: usize, handle_id: u64) -> &mut HandleState {
        self.disks[disk_index]
            .handles
            .get_mut(&handle_id)
            .expect("a live SimDisk's handle is registered")
    }

    pub(crate) fn in_flight(&self, disk_index: usize, handle_id: u64) -> usize {
        self.handle(disk_index, handle_id).accepted_count
    }

    pub(crate) fn is_crashed(&self) -> bool {
        self.crashed
    }

    pub(crate) fn set_crash_survival_probability(&mut self, probability: f64) {
        assert!(
            (0.0..=1.0).contains(&probability),
            "survival probability {probability} outside 0.0..=1.0"
        );
        self.crash_survival_probability = probability;
    }

    pub(crate) fn crash_decisions(&self) -> &[Vec<(u64, bool)>] {
        &self.crash_decisions
    }

    pub(crate) fn durable_contents(&self, disk_index: usize, block: u64) -> Vec<u8> {
        let disk = &self.disks[disk_index];
        match disk.store.durable_contents(block) {
            Some(contents) => contents.to_vec(),
            None => vec![0; disk.config.block_size_bytes as usize],
        }
    }

    /// Accepts `request` for a handle, or hands it back.
    pub(crate) fn submit(
        &mut self,
        disk_index: usize,
        handle_id: u64,
        request: Request,
    ) -> Result<(), crate::error::Rejected> {
        let disk = &self.disks[disk_index];
        let handle = self.handle(disk_index, handle_id);
        if handle.accepted_count >= disk.info.queue_depth as usize {
            return Err(disk.info.queue_full(request));
        }
        if let Err(error) = disk.info.validate(&request.operation) {
            return Err(crate::error::Rejected { request, error });
        }
        let request = disk.info.refuse_copy_by_reference(request)?;
        let handle_is_dead = self.crashed || handle.epoch != self.epoch;
        self.handle_mut(disk_index, handle_id).accepted_count += 1;
        if handle_is_dead {
            let completion = crashed_completion(&self.disks[disk_index].info.name, request);
            self.handle_mut(disk_index, handle_id)
                .ready
                .push_back(completion);
            return Ok(());
        }
        self.accept_live(disk_index, handle_id, request);
        self.count_submission_towards_crash();
        Ok(())
    }

    fn accept_live(&mut self, disk_index: usize, handle_id: u64, request: Request) {
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        let disk = &mut self.disks[disk_index];
        let flush_mark =
            matches!(request.operation, Operation::Flush).then(|| disk.store.flush_mark());
        disk.requests.insert(
            request_id,
            InFlightRequest {
                handle_id,
                request,
                flush_mark,
            },
        );
        if disk.busy_slot_count < disk.config.parallelism {
            self.start_service(disk_index, request_id);
        } else {
            disk.waiting_for_slot.push_back(request_id);
        }
    }

    fn count_submission_towards_crash(&mut self) {
        if let Some(remaining) = self.submissions_until_crash {
            let remaining = remaining - 1;
            self.submissions_until_crash = (remaining > 0).then_some(remaining);
            if remaining == 0 {
                self.crash_now();
            }
        }
    }

    fn schedule(&mut self, time_ns: u64, event: Event) {
        self.timeline.schedule(time_ns, event);
    }

    fn start_service(&mut self, disk_index: usize, request_id: u64) {
        let now_ns = self.timeline.now_ns();
        let disk = &mut self.disks[disk_index];
        assert!(disk.busy_slot_count < disk.config.parallelism);
        disk.busy_slot_count += 1;
        let jitter_ns = match disk.config.latency_jitter_ns {
            0 => 0,
            jitter_ns => disk.generator.below(jitter_ns + 1),
        };
        let latency_done_ns = now_ns + disk.config.latency_ns + jitter_ns;
        let moves_data = matches!(
            disk.requests[&request_id].request.operation,
            Operation::Read { .. } | Operation::Write { .. }
        );
        let phase = if moves_data {
            Phase::LatencyDone
        } else {
            Phase::Finished
        };
        self.schedule(
            latency_done_ns,
            Event {
                disk_index,
                request_id,
                phase,
            },
        );
    }

    /// Processes every event due at or before the current virtual time.
    pub(crate) fn run_due_events(&mut self) {
        while let Some((_, event)) = self.timeline.pop_due() {
            self.process(event);
        }
    }

    /// Moves the handle's ready completions into `completions`.
    pub(crate) fn drain_ready(
        &mut self,
        disk_index: usize,
        handle_id: u64,
        completions: &mut Vec<Completion>,
    ) -> usize {
        let handle = self.handle_mut(disk_index, handle_id);
        let count = handle.ready.len();
        handle.accepted_count -= count;
        completions.extend(handle.ready.drain(..));
        count
    }

    /// Runs events in time order until the handle has a completion to reap.
    pub(crate) fn wait_for_completion(
        &mut self,
        disk_index: usize,
        handle_id: u64,
    ) -> Result<(), DeviceError> {
        loop {
            let handle = self.handle(disk_index, handle_id);
            if !handle.ready.is_empty() {
                return Ok(());
            }
            if handle.accepted_count == 0 {
                return Err(self.disks[disk_index].info.nothing_in_flight());
            }
            assert!(
                self.run_next_event(),
                "a handle with requests in flight has an event pending"
            );
        }
    }

    /// Runs the earliest pending event (advancing virtual time to it); false when none.
    pub(crate) fn run_next_event(&mut self) -> bool {
        match self.timeline.pop_next() {
            Some((_, event)) => {
                self.process(event);
                true
            }
            None => false,
        }
    }

    fn process(&mut self, event: Event) {
        match event.phase {
            Phase::LatencyDone => self.start_transfer(event),
            Phase::Finished => self.finish(event.disk_index, event.request_id),
        }
    }

    fn start_transfer(&mut self, event: Event) {
        let now_ns = self.timeline.now_ns();
        let disk = &mut self.disks[event.disk_index];
        let size_bytes = match &disk.requests[&event.request_id].request.operation {
            Operation::Read { buffer, .. } | Operation::Write { buffer, .. } => buffer.len(),
            Operation::Flush | Operation::Trim { .. } | Operation::CopyByReference { .. } => 0,
        };
        let transfer_start_ns = now_ns.max(disk.channel_free_at_ns);
        let finished_ns = transfer_start_ns + disk.config.transfer_time_ns(size_bytes as u64);
        disk.channel_free_at_ns = finished_ns;
        self.schedule(
            finished_ns,
            Event {
                phase: Phase::Finished,
                ..event
            },
        );
    }

    fn finish(&mut self, disk_index: usize, request_id: u64) {
        let disk = &mut self.disks[disk_index];
        let in_flight = disk
            .requests
            .remove(&request_id)
            .expect("an event belongs to a request in flight");
        disk.busy_slot_count -= 1;
        let completion = disk.carry_out(in_flight.request, in_flight.flush_mark);
        if let Some(handle) = disk.handles.get_mut(&in_flight.handle_id) {
            handle.ready.push_back(completion);
        }
        if let Some(next_request_id) = disk.waiting_for_slot.pop_front() {
            self.start_service(disk_index, next_request_id);
        }
    }

    pub(crate) fn crash_after_requests(&mut self, request_count: u64) {
        if request_count == 0 {
            self.crash_now();
        } else {
            self.submissions_until_crash = Some(request_count);
        }
    }

    /// Crashes the world now: requests in flight complete with `Crashed` (buffers handed
    /// back), and the unflushed and unfinished blocks of every disk survive or revert.
    pub(crate) fn crash_now(&mut self) {
        if self.crashed {
            return;
        }
        self.crashed = true;
        self.epoch += 1;
        self.submissions_until_crash = None;
        self.timeline.clear();
        let mut decisions_per_disk = Vec::with_capacity(self.disks.len());
        for disk in &mut self.disks {
            decisions_per_disk
                .push(disk.crash(&mut self.crash_generator, self.crash_survival_probability));
        }
        self.crash_decisions = decisions_per_disk;
    }

    pub(crate) fn restart(&mut self) {
        self.crashed = false;
    }
}

impl DiskState {
    /// Applies a finished request to the store and builds its completion.
    fn carry_out(&mut self, request: Request, flush_mark: Option<u64>) -> Completion {
        let tag = request.tag;
        let mut status = Ok(());
        let buffer = match request.operation {
            Operation::Read {
                first_block,
                mut buffer,
            } => {
                if self.inject_fault(self.config.faults.read_failure_probability) {
                    status = Err(self.injected_failure(
                        TransferDirection::Read,
                        first_block,
                        buffer.len(),
                    ));
                } else {
                    self.store.read_into(first_block, &mut buffer);
                }
                Some(buffer)
            }
            Operation::Write {
                first_block,
                buffer,
            } => {
                if self.inject_fault(self.config.faults.write_failure_probability) {
                    status = Err(self.injected_failure(
                        TransferDirection::Write,
                        first_block,
                        buffer.len(),
                    ));
                } else {
                    self.store.write(first_block, &buffer);
                }
                Some(buffer)
            }
            Operation::Flush => {
                self.store
                    .make_durable(flush_mark.expect("a flush records its mark"));
                None
            }
            Operation::Trim {
                first_block,
                block_count,
            } => {
                self.store.trim(first_block, block_count);
                None
            }
            Operation::CopyByReference { .. } => {
                panic!("the simulated disk refuses copy by reference at submit")
            }
        };
        Completion {
            tag,
            status,
            buffer,
        }
    }

    fn inject_fault(&mut self, probability: f64) -> bool {
        probability > 0.0 && self.generator.chance(probability)
    }

    fn injected_failure(
        &self,
        direction: TransferDirection,
        first_block: u64,
        length_bytes: usize,
    ) -> DeviceError {
        let end_block = first_block + (length_bytes / self.config.block_size_bytes as usize) as u64;
        DeviceError::new(
            &self.info.name,
            DeviceErrorKind::InjectedFault {
                direction,
                first_block,
                end_block,
            },
        )
    }

    /// Crashes this disk: decides the fate of its unflushed and unfinished blocks, then
    /// completes every request in flight with `Crashed`.
    fn crash(&mut self, generator: &mut SplitMix64, survival_probability: f64) -> Vec<(u64, bool)> {
        let unfinished: Vec<UnfinishedChange<'_>> = self
            .requests
            .values()
            .filter_map(|in_flight| match &in_flight.request.operation {
                Operation::Write {
                    first_block,
                    buffer,
                } => Some(UnfinishedChange::Write {
                    first_block: *first_block,
                    data: buffer,
                }),
                Operation::Trim {
                    first_block,
                    block_count,
                } => Some(UnfinishedChange::Trim {
                    first_block: *first_block,
                    block_count: *block_count,
                }),
                Operation::Read { .. } | Operation::Flush | Operation::CopyByReference { .. } => {
                    None
                }
            })
            .collect();
        let decisions = self
            .store
            .crash(&unfinished, generator, survival_probability);
        for (_, in_flight) in std::mem::take(&mut self.requests) {
            let completion = crashed_completion(&self.info.name, in_flight.request);
            if let Some(handle) = self.handles.get_mut(&in_flight.handle_id) {
                handle.ready.push_back(completion);
            }
        }
        self.waiting_for_slot.clear();
        self.busy_slot_count = 0;
        self.channel_free_at_ns = 0;
        decisions
    }
}

fn crashed_completion(device_name: &Arc<str>, request: Request) -> Completion {
    Completion {
        tag: request.tag,
        status: Err(DeviceError::new(device_name, DeviceErrorKind::Crashed)),
        buffer: request.into_buffer(),
    }
}
