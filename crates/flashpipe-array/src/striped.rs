//! [`StripedDevice`]: RAID-0 over any [`BlockDevice`]s, splitting each request at
//! stripe-unit boundaries into zero-copy pieces issued to the members in parallel.
//!
//! # Zero copy
//! A read or write is split into pieces whose buffers are views of the caller's buffer,
//! handed out by a [`SplitBuffer`] (the one safety argument lives in
//! `flashpipe_device::split`): the pieces cover disjoint ranges at offsets that are
//! multiples of the block size (so each stays aligned), the striped device keeps the
//! split in its parent-request table while pieces are out, and takes the caller's buffer
//! back, whole, only after the last piece has returned (as a completion or a rejection)
//! and been dropped. A piece a member never gives back keeps the caller's buffer alive
//! with it, so dropping the striped device with pieces out frees nothing under a member.
//!
//! # Queues
//! At most `queue_depth` parent requests are accepted and not yet reaped. Pieces that a
//! member refuses with `QueueFull` wait in that member's pending queue (FIFO, so each
//! member sees pieces in submission order) and are issued as the member frees up; there
//! are at most as many as the accepted parents' pieces.
//!
//! # Delivery
//! A parent completes when all its pieces have. With [`CompletionOrder::Submission`] its
//! completion is handed to the caller only after every earlier parent's (the HWFS thesis
//! 3.2.3 rule); with [`CompletionOrder::AsCompleted`] as soon as it is complete. A piece's
//! failure makes the parent fail with an error naming the stripe and the member; the
//! other pieces are still reaped.
//!
//! # Waiting
//! `wait_completions` polls every member, then blocks on the member holding the oldest
//! outstanding piece (for submission order, a piece of the oldest undelivered parent).
//! That member has something in flight, so the wait always makes progress; it works for
//! real devices (each with its own ring) and for simulated disks of one world alike.
//! Over real devices an as-completed wait may thus sit on one member while another has
//! finished (it is seen at the next wait); over simulated disks
//! [`StripedDevice::with_simulated_world`] steps the world one event at a time instead,
//! so delivery follows virtual time exactly.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use flashpipe_device::request::check_queue_depth;
use flashpipe_device::sim::SimWorld;
use flashpipe_device::{
    hand_over, wait_in_steps, BlockDevice, BufferPool, Clock, Completion, DeviceError,
    DeviceErrorKind, DeviceInfo, IoBuf, Operation, Rejected, Request, SplitBuffer, Tag,
};

use crate::layout::{Segment, StripeLayout};

/// When the striped device hands completions to its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionOrder {
    /// Strictly in the order requests were submitted.
    Submission,
    /// As soon as each request is complete.
    AsCompleted,
}

/// One member device with its label for errors and its pieces waiting for room.
struct Member {
    device: Box<dyn BlockDevice>,
    label: Arc<str>,
    pending: VecDeque<Request>,
}

/// An accepted request of the caller, while its pieces are out.
struct ParentRequest {
    tag: Tag,
    buffer: Option<SplitBuffer>,
    outstanding_pieces: usize,
    first_error: Option<DeviceError>,
}

/// RAID-0 over member devices; a [`BlockDevice`] itself.
pub struct StripedDevice {
    info: DeviceInfo,
    layout: StripeLayout,
    order: CompletionOrder,
    members: Vec<Member>,
    parents: BTreeMap<u64, ParentRequest>,
    next_parent_id: u64,
    pieces: BTreeMap<u64, (u64, usize)>,
    next_piece_id: u64,
    ready: VecDeque<Completion>,
    scratch: Vec<Completion>,
    simulated_world: Option<SimWorld>,
}

impl StripedDevice {
    /// Stripes `members` with a stripe unit of `stripe_unit_bytes`, accepting up to
    /// `queue_depth` requests. Refuses (with an `Open` error naming the stripe) no
    /// members, mixed block sizes, a stripe unit that is not a positive multiple of the
    /// block size, members smaller than one stripe unit, or a bad queue depth.
    pub fn new(
        name: &str,
        members: Vec<Box<dyn BlockDevice>>,
        stripe_unit_bytes: u64,
        order: CompletionOrder,
        queue_depth: u32,
    ) -> Result<StripedDevice, DeviceError> {
        let name: Arc<str> = Arc::from(name);
        check_queue_depth(&name, queue_depth)?;
        let member_infos: Vec<&DeviceInfo> = members.iter().map(|member| member.info()).collect();
        let layout = StripeLayout::new(&name, &member_infos, stripe_unit_bytes)?;
        let info = DeviceInfo {
            name: Arc::clone(&name),
            block_size_bytes: layout.block_size_bytes(),
            block_count: layout.block_count(),
            queue_depth,
        };
        let members = members
            .into_iter()
            .enumerate()
            .map(|(index, device)| Member {
                label: Arc::from(format!("{name} member {index} ({})", device.info().name)),
                device,
                pending: VecDeque::new(),
            })
            .collect();
        Ok(StripedDevice {
            info,
            layout,
            order,
            members,
            parents: BTreeMap::new(),
            next_parent_id: 0,
            pieces: BTreeMap::new(),
            next_piece_id: 0,
            ready: VecDeque::new(),
            scratch: Vec::new(),
            simulated_world: None,
        })
    }

    /// Declares that the members are disks of the simulated `world`: waits then run the
    /// world one event at a time and poll the members after each, so that completions
    /// reach the caller exactly when they happen in virtual time (without it, a wait
    /// blocks on one member and, in a shared world, may run past another member's
    /// earlier completion before delivering it).
    pub fn with_simulated_world(mut self, world: SimWorld) -> StripedDevice {
        self.simulated_world = Some(world);
        self
    }

    /// The striping geometry.
    pub fn layout(&self) -> &StripeLayout {
        &self.layout
    }

    /// The delivery order.
    pub fn completion_order(&self) -> CompletionOrder {
        self.order
    }

    /// Hands the members back (to inspect them or reuse them).
    ///
    /// # Panics
    /// When requests are still in flight: their buffers would be lost.
    pub fn into_members(mut self) -> Vec<Box<dyn BlockDevice>> {
        assert_eq!(
            self.in_flight(),
            0,
            "into_members needs an idle striped device"
        );
        std::mem::take(&mut self.members)
            .into_iter()
            .map(|member| member.device)
            .collect()
    }

    /// A copy by reference whose blocks would change member cannot be done by remapping.
    fn copy_across_members(&self, operation: &Operation) -> Option<DeviceError> {
        let Operation::CopyByReference {
            source_first_block,
            destination_first_block,
            ..
        } = *operation
        else {
            return None;
        };
        if !self.copies_by_reference() {
            return Some(DeviceError::new(
                &self.info.name,
                DeviceErrorKind::Unsupported {
                    operation: "copy-by-reference (a member cannot remap blocks)",
                },
            ));
        }
        if self
            .layout
            .copy_keeps_members(source_first_block, destination_first_block)
        {
            return None;
        }
        Some(DeviceError::new(
            &self.info.name,
            DeviceErrorKind::Unsupported {
                operation: "copy-by-reference between blocks on different stripe members",
            },
        ))
    }

    /// Splits an accepted request into member requests, recording the parent.
    fn split_into_pieces(&mut self, request: Request) {
        let parent_id = self.next_parent_id;
        self.next_parent_id += 1;
        let (buffer, member_requests) = self.member_requests(request.operation);
        self.parents.insert(
            parent_id,
            ParentRequest {
                tag: request.tag,
                buffer,
                outstanding_pieces: member_requests.len(),
                first_error: None,
            },
        );
        for (member_index, operation) in member_requests {
            let piece_id = self.next_piece_id;
            self.next_piece_id += 1;
            self.pieces.insert(piece_id, (parent_id, member_index));
            self.members[member_index].pending.push_back(Request {
                tag: piece_id,
                operation,
            });
        }
    }

    /// The per-member operations of one request, and the parent buffer to keep.
    fn member_requests(
        &self,
        operation: Operation,
    ) -> (Option<SplitBuffer>, Vec<(usize, Operation)>) {
        match operation {
            Operation::Read {
                first_block,
                buffer,
            } => self.data_pieces(first_block, buffer, |first_block, buffer| Operation::Read {
                first_block,
                buffer,
            }),
            Operation::Write {
                first_block,
                buffer,
            } => self.data_pieces(first_block, buffer, |first_block, buffer| {
                Operation::Write {
                    first_block,
                    buffer,
                }
            }),
            Operation::Trim {
                first_block,
                block_count,
            } => {
                let trims = self.layout.split(first_block, block_count).into_iter();
                let pieces = trims.map(|segment| {
                    let trim = Operation::Trim {
                        first_block: segment.member_first_block,
                        block_count: segment.block_count,
                    };
                    (segment.member_index, trim)
                });
                (None, pieces.collect())
            }
            Operation::Flush => {
                let flushes = (0..self.members.len()).map(|index| (index, Operation::Flush));
                (None, flushes.collect())
            }
            Operation::CopyByReference {
                source_first_block,
                destination_first_block,
                block_count,
            } => {
                let parts = self.layout.split_copy(
                    source_first_block,
                    destination_first_block,
                    block_count,
                );
                let copies = parts
                    .into_iter()
                    .map(|(member, source, destination, count)| {
                        let copy = Operation::CopyByReference {
                            source_first_block: source,
                            destination_first_block: destination,
                            block_count: count,
                        };
                        (member, copy)
                    });
                (None, copies.collect())
            }
        }
    }

    /// Splits a read or write into zero-copy pieces built by `make_operation`.
    fn data_pieces(
        &self,
        first_block: u64,
        buffer: IoBuf,
        make_operation: fn(u64, IoBuf) -> Operation,
    ) -> (Option<SplitBuffer>, Vec<(usize, Operation)>) {
        let block_size = u64::from(self.info.block_size_bytes);
        let segments = self
            .layout
            .split(first_block, buffer.len() as u64 / block_size);
        let mut buffer = SplitBuffer::new(buffer);
        let pieces = segments
            .iter()
            .map(|segment| {
                let piece = piece_view(&mut buffer, segment, block_size);
                let operation = make_operation(segment.member_first_block, piece);
                (segment.member_index, operation)
            })
            .collect();
        (Some(buffer), pieces)
    }

    /// Issues pending pieces to members with room; a refusal other than `QueueFull`
    /// fails the piece.
    fn issue_pending_pieces(&mut self) {
        for member_index in 0..self.members.len() {
            while let Some(piece) = self.members[member_index].pending.pop_front() {
                match self.members[member_index].device.submit(piece) {
                    Ok(()) => {}
                    Err(rejected) if is_queue_full(&rejected) => {
                        self.members[member_index]
                            .pending
                            .push_front(rejected.request);
                        break;
                    }
                    Err(rejected) => {
                        let failure = Completion {
                            tag: rejected.request.tag,
                            status: Err(rejected.error),
                            buffer: rejected.request.into_buffer(),
                        };
                        self.piece_done(member_index, failure);
                    }
                }
            }
        }
    }

    /// Records one piece's completion on its parent.
    fn piece_done(&mut self, member_index: usize, completion: Completion) {
        let (parent_id, expected_member) = self
            .pieces
            .remove(&completion.tag)
            .expect("members complete only the pieces the striped device gave them");
        assert_eq!(
            expected_member, member_index,
            "a piece completed on its own member"
        );
        let parent = self
            .parents
            .get_mut(&parent_id)
            .expect("a piece's parent waits for it");
        assert!(parent.outstanding_pieces > 0);
        parent.outstanding_pieces -= 1;
        if let (Err(error), None) = (completion.status, &parent.first_error) {
            let label = &self.members[member_index].label;
            parent.first_error = Some(DeviceError::new(label, error.kind));
        }
        drop(completion.buffer);
    }

    /// Polls every member without blocking and records their completions.
    fn poll_members(&mut self) {
        for member_index in 0..self.members.len() {
            let mut reaped = std::mem::take(&mut self.scratch);
            self.members[member_index]
                .device
                .poll_completions(&mut reaped);
            for completion in reaped.drain(..) {
                self.piece_done(member_index, completion);
            }
            self.scratch = reaped;
        }
    }

    /// Moves finished parents to the ready queue, in the configured order.
    fn deliver_finished_parents(&mut self) {
        let finished: Vec<u64> = match self.order {
            CompletionOrder::Submission => self
                .parents
                .iter()
                .take_while(|(_, parent)| parent.outstanding_pieces == 0)
                .map(|(&parent_id, _)| parent_id)
                .collect(),
            CompletionOrder::AsCompleted => self
                .parents
                .iter()
                .filter(|(_, parent)| parent.outstanding_pieces == 0)
                .map(|(&parent_id, _)| parent_id)
                .collect(),
        };
        for parent_id in finished {
            let parent = self.parents.remove(&parent_id).expect("listed above");
            self.ready.push_back(Completion {
                tag: parent.tag,
                status: parent.first_error.map_or(Ok(()), Err),
                buffer: parent.buffer.map(SplitBuffer::into_parent),
            });
        }
    }

    /// Polls, issues, and delivers: one non-blocking step.
    fn make_progress(&mut self) {
        self.poll_members();
        self.issue_pending_pieces();
        self.deliver_finished_parents();
    }

    /// Blocks on the member holding the oldest outstanding piece, or, over a simulated
    /// world, runs its next event.
    fn wait_on_oldest_piece(&mut self) -> Result<(), DeviceError> {
        if let Some(world) = &self.simulated_world {
            if world.run_next_event() {
                return Ok(());
            }
        }
        let oldest_member = self
            .pieces
            .values()
            .map(|&(_, member_index)| member_index)
            .next()
            .expect("undelivered parents have outstanding pieces");
        let member_index = if self.members[oldest_member].device.in_flight() > 0 {
            oldest_member
        } else {
            self.members
                .iter()
                .position(|member| member.device.in_flight() > 0)
                .ok_or_else(|| self.stuck_error())?
        };
        let mut reaped = std::mem::take(&mut self.scratch);
        let result = self.members[member_index]
            .device
            .wait_completions(&mut reaped);
        for completion in reaped.drain(..) {
            self.piece_done(member_index, completion);
        }
        self.scratch = reaped;
        result
            .map(|_| ())
            .map_err(|error| DeviceError::new(&self.members[member_index].label, error.kind))
    }

    fn stuck_error(&self) -> DeviceError {
        DeviceError::new(
            &self.info.name,
            DeviceErrorKind::IoFailed {
                detail: "pieces are pending but no member has anything in flight".to_string(),
            },
        )
    }

    /// Reaps every piece still out; a member whose wait fails is left as it is.
    fn drain_members(&mut self) {
        for member in &mut self.members {
            member.pending.clear();
        }
        let mut reaped = Vec::new();
        for member in &mut self.members {
            while member.device.in_flight() > 0 {
                reaped.clear();
                if member.device.wait_completions(&mut reaped).is_err() {
                    break;
                }
            }
        }
    }
}

fn is_queue_full(rejected: &Rejected) -> bool {
    matches!(rejected.error.kind, DeviceErrorKind::QueueFull { .. })
}

/// The view of the segment's bytes inside the parent buffer.
fn piece_view(parent: &mut SplitBuffer, segment: &Segment, block_size: u64) -> IoBuf {
    let offset_bytes = (segment.request_offset_blocks * block_size) as usize;
    let length_bytes = (segment.block_count * block_size) as usize;
    parent
        .view(offset_bytes, length_bytes)
        .unwrap_or_else(|refused| panic!("a stripe segment is a fresh window: {refused}"))
}

impl BlockDevice for StripedDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.members[0].device.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        let request = self.info.admit(self.in_flight(), request)?;
        if let Some(error) = self.copy_across_members(&request.operation) {
            return Err(Rejected { request, error });
        }
        self.split_into_pieces(request);
        self.issue_pending_pieces();
        self.deliver_finished_parents();
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.make_progress();
        hand_over(&mut self.ready, completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        wait_in_steps(self, completions, StripedDevice::wait_on_oldest_piece)
    }

    fn in_flight(&self) -> usize {
        self.parents.len() + self.ready.len()
    }

    fn copies_by_reference(&self) -> bool {
        self.members
            .iter()
            .all(|member| member.device.copies_by_reference())
    }

    /// Registers `pool` with every member (each member's requests are views of the
    /// parent's buffer); the first refusal is returned after every member was asked.
    fn register_buffer_pool(&mut self, pool: &BufferPool) -> Result<(), DeviceError> {
        let mut first_error = None;
        for member in &mut self.members {
            if let Err(error) = member.device.register_buffer_pool(pool) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn copy_alignment_blocks(&self) -> u64 {
        let member_alignment = self
            .members
            .iter()
            .map(|member| member.device.copy_alignment_blocks())
            .max()
            .unwrap_or(1);
        self.layout.stripe_unit_blocks() * self.layout.member_count() as u64 * member_alignment
    }
}

impl Drop for StripedDevice {
    /// Reaps every piece still out first, so that members are idle when they drop; a
    /// piece a member cannot give back keeps its parent buffer alive with it (the split
    /// buffer's rule), so nothing is freed under a member either way.
    fn drop(&mut self) {
        self.drain_members();
    }
}
