//! What the FTL drives: a raw flash interface ([`FlashBackend`]), implemented by the
//! flash model's [`FlashArray`] and by [`PowerCutFlash`], a wrapper that cuts power at
//! an instant of the test's choosing.
//!
//! The flash model has no power-loss hook (it applies a request to its page store when
//! the controller admits it), so [`PowerCutFlash`] models one above it: at the cut,
//! every request the FTL has not reaped is lost. For the programs among them it picks,
//! per block in page order, a prefix that completed, at most one torn page (reads as
//! uncorrectable garbage) and the rest never programmed (reads as erased); an erase in
//! flight either finished or left the block unreadable until its next erase. The wrapped
//! array then runs to idle and its acks are dropped.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use flashpipe_device::{Clock, SplitMix64};
use flashpipe_flash::{
    Ack, AckStatus, CommandKind, FlashAddress, FlashArray, FlashConfig, FlashError, FlashRequest,
    SubmitError,
};

/// A raw, tagged flash interface (minFlash's ReadPage/WritePage/EraseBlock and Ack).
pub trait FlashBackend: Send {
    /// Geometry, timing and reliability.
    fn config(&self) -> &FlashConfig;
    /// Host spare bytes per page.
    fn host_spare_bytes(&self) -> usize;
    /// Whether page contents are kept (false: timing only, reads carry no data).
    fn keeps_data(&self) -> bool;
    /// The virtual clock.
    fn clock(&self) -> Arc<dyn Clock>;
    /// Current virtual time.
    fn now_ns(&self) -> u64;
    /// Queues a request or hands it back.
    fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError>;
    /// Moves ready acks into `acks` without advancing time.
    fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize;
    /// Advances time until at least one ack is ready; 0 only when nothing is in flight.
    fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize;
    /// Factory bad mark for arrays that keep no data (others read it from page 0).
    fn factory_bad_without_data(&self, address: FlashAddress) -> bool;
    /// The backend as `Any`, to take a concrete backend back out of the FTL.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    /// Makes the array's page contents and block table durable where it keeps them in
    /// a file ([`FlashArray::sync`]); a no-op for arrays in memory or timing only.
    fn sync_storage(&mut self) -> Result<(), FlashError> {
        Ok(())
    }
    /// Records programs and erases of a block without simulating them
    /// ([`FlashArray::mark_block_programmed`], for direct preconditioning); false where
    /// the backend cannot (the block table then stays as it was).
    fn mark_block_programmed(
        &mut self,
        _address: FlashAddress,
        _programmed_pages: u32,
        _added_erases: u32,
    ) -> bool {
        false
    }
    /// An empty buffer with room for one raw page, for a program's data (the array's free
    /// list where it has one, [`FlashArray::take_page_buffer`]; a fresh vector otherwise).
    fn take_page_buffer(&mut self) -> Vec<u8> {
        Vec::with_capacity(self.config().raw_page_bytes())
    }
    /// Gives back a buffer the FTL is done with (a read's data once copied out); dropped
    /// where the backend keeps no free list.
    fn recycle_page_buffer(&mut self, buffer: Vec<u8>) {
        drop(buffer);
    }
}

impl FlashBackend for FlashArray {
    fn config(&self) -> &FlashConfig {
        FlashArray::config(self)
    }
    fn host_spare_bytes(&self) -> usize {
        FlashArray::host_spare_bytes(self)
    }
    fn keeps_data(&self) -> bool {
        FlashArray::keeps_data(self)
    }
    fn clock(&self) -> Arc<dyn Clock> {
        self.shared_clock()
    }
    fn now_ns(&self) -> u64 {
        FlashArray::now_ns(self)
    }
    fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError> {
        FlashArray::submit(self, request)
    }
    fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        FlashArray::poll_acks(self, acks)
    }
    fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        FlashArray::wait_acks(self, acks)
    }
    fn factory_bad_without_data(&self, address: FlashAddress) -> bool {
        self.is_factory_bad(address)
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn sync_storage(&mut self) -> Result<(), FlashError> {
        FlashArray::sync(self)
    }
    fn mark_block_programmed(
        &mut self,
        address: FlashAddress,
        programmed_pages: u32,
        added_erases: u32,
    ) -> bool {
        FlashArray::mark_block_programmed(self, address, programmed_pages, added_erases).is_ok()
    }
    fn take_page_buffer(&mut self) -> Vec<u8> {
        FlashArray::take_page_buffer(self)
    }
    fn recycle_page_buffer(&mut self, buffer: Vec<u8>) {
        FlashArray::recycle_page_buffer(self, buffer);
    }
}

/// What a cut left in one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PageFate {
    /// Partly programmed: reads fail the ECC.
    Torn,
    /// Never programmed: reads as erased.
    Absent,
}

/// Counts of what the last cut did, for test reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PowerCutReport {
    /// Programs in flight that completed anyway.
    pub programs_completed: u32,
    /// Programs left torn.
    pub programs_torn: u32,
    /// Programs lost.
    pub programs_lost: u32,
    /// Erases left interrupted.
    pub erases_interrupted: u32,
    /// Reads dropped.
    pub reads_dropped: u32,
}

/// A [`FlashArray`] whose power can be cut (see the module doc).
pub struct PowerCutFlash {
    array: FlashArray,
    /// Tag -> the request passed on to the array and not yet reaped.
    in_flight: HashMap<u64, InFlightCommand>,
    page_fates: HashMap<PageKey, PageFate>,
    unreadable_blocks: HashSet<BlockKey>,
}

/// A request passed on to the array: what it does and where.
#[derive(Debug, Clone, Copy)]
struct InFlightCommand {
    kind: CommandKind,
    address: FlashAddress,
}

/// One erase block of the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct BlockKey {
    device: u32,
    bus: u32,
    chip: u32,
    block: u32,
}

/// One page of the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PageKey {
    block: BlockKey,
    page: u32,
}

fn block_key(address: FlashAddress) -> BlockKey {
    BlockKey {
        device: address.device,
        bus: address.bus,
        chip: address.chip,
        block: address.block,
    }
}

fn page_key(address: FlashAddress) -> PageKey {
    PageKey {
        block: block_key(address),
        page: address.page,
    }
}

impl PowerCutFlash {
    /// Wraps `array`.
    pub fn new(array: FlashArray) -> PowerCutFlash {
        PowerCutFlash {
            array,
            in_flight: HashMap::new(),
            page_fates: HashMap::new(),
            unreadable_blocks: HashSet::new(),
        }
    }

    /// The array underneath.
    pub fn array(&self) -> &FlashArray {
        &self.array
    }

    /// Cuts power now: decides the fate of every request in flight (seeded by `seed`),
    /// lets the array finish them and drops their acks.
    pub fn cut_power(&mut self, seed: u64) -> PowerCutReport {
        let mut generator = SplitMix64::new(seed);
        let mut report = PowerCutReport::default();
        let mut programs_by_block: HashMap<BlockKey, Vec<FlashAddress>> = HashMap::new();
        let mut in_flight: Vec<InFlightCommand> =
            self.in_flight.drain().map(|(_, entry)| entry).collect();
        in_flight.sort_by_key(|entry| entry.address);
        for InFlightCommand { kind, address } in in_flight {
            match kind {
                CommandKind::Read => report.reads_dropped += 1,
                CommandKind::Write => programs_by_block
                    .entry(block_key(address))
                    .or_default()
                    .push(address),
                CommandKind::Erase => {
                    if generator.chance(0.5) {
                        self.unreadable_blocks.insert(block_key(address));
                        report.erases_interrupted += 1;
                    }
                }
            }
        }
        let mut blocks: Vec<_> = programs_by_block.into_values().collect();
        blocks.sort();
        for mut pages in blocks {
            pages.sort_by_key(|address| address.page);
            let completed = generator.below(pages.len() as u64 + 1) as usize;
            report.programs_completed += completed as u32;
            for (index, address) in pages.into_iter().enumerate().skip(completed) {
                let fate = if index == completed && generator.chance(0.5) {
                    report.programs_torn += 1;
                    PageFate::Torn
                } else {
                    report.programs_lost += 1;
                    PageFate::Absent
                };
                self.page_fates.insert(page_key(address), fate);
            }
        }
        let mut dropped = Vec::new();
        self.array.run_until_idle(&mut dropped);
        report
    }

    fn apply_fates(&mut self, ack: &mut Ack, address: FlashAddress) {
        match ack.kind {
            CommandKind::Erase if ack.status.is_ok() => {
                self.unreadable_blocks.remove(&block_key(address));
                self.page_fates
                    .retain(|key, _| key.block != block_key(address));
            }
            CommandKind::Read => {
                let fate = if self.unreadable_blocks.contains(&block_key(address)) {
                    Some(PageFate::Torn)
                } else {
                    self.page_fates.get(&page_key(address)).copied()
                };
                match fate {
                    Some(PageFate::Torn) => {
                        ack.status = AckStatus::Uncorrectable;
                        if let Some(data) = ack.data.as_mut() {
                            data.iter_mut().for_each(|byte| *byte ^= 0x5A);
                        }
                        if let Some(spare) = ack.spare.as_mut() {
                            spare.iter_mut().for_each(|byte| *byte ^= 0x3C);
                        }
                    }
                    Some(PageFate::Absent) => {
                        ack.status = AckStatus::CLEAN;
                        if let Some(data) = ack.data.as_mut() {
                            data.fill(0xFF);
                        }
                        if let Some(spare) = ack.spare.as_mut() {
                            spare.fill(0xFF);
                        }
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }

    fn reap(&mut self, acks: &mut [Ack]) {
        for ack in acks {
            let entry = self
                .in_flight
                .remove(&ack.tag)
                .expect("an ack for a request this wrapper passed on");
            self.apply_fates(ack, entry.address);
        }
    }
}

impl FlashBackend for PowerCutFlash {
    fn config(&self) -> &FlashConfig {
        self.array.config()
    }
    fn host_spare_bytes(&self) -> usize {
        self.array.host_spare_bytes()
    }
    fn keeps_data(&self) -> bool {
        self.array.keeps_data()
    }
    fn clock(&self) -> Arc<dyn Clock> {
        self.array.shared_clock()
    }
    fn now_ns(&self) -> u64 {
        self.array.now_ns()
    }
    fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError> {
        let entry = InFlightCommand {
            kind: request.command.kind(),
            address: request.command.address(),
        };
        let tag = request.tag;
        self.array.submit(request)?;
        let previous = self.in_flight.insert(tag, entry);
        assert!(previous.is_none(), "tag {tag} submitted twice");
        Ok(())
    }
    fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        let first_new = acks.len();
        let moved = self.array.poll_acks(acks);
        self.reap(&mut acks[first_new..]);
        moved
    }
    fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        let first_new = acks.len();
        let moved = self.array.wait_acks(acks);
        self.reap(&mut acks[first_new..]);
        moved
    }
    fn factory_bad_without_data(&self, address: FlashAddress) -> bool {
        self.array.is_factory_bad(address)
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn sync_storage(&mut self) -> Result<(), FlashError> {
        self.array.sync()
    }
    fn take_page_buffer(&mut self) -> Vec<u8> {
        self.array.take_page_buffer()
    }
    fn recycle_page_buffer(&mut self, buffer: Vec<u8>) {
        self.array.recycle_page_buffer(buffer);
    }
}

/// A backend shared between owners (the FTL inside a file system and the test or tool
/// that wants the array back after dropping them, as a crash does; the trace replayer
/// and the FTL above its array). Every backend call locks it and passes on.
pub struct SharedFlash<B: ?Sized + FlashBackend = dyn FlashBackend> {
    inner: Arc<Mutex<Box<B>>>,
    config: FlashConfig,
}

impl<B: ?Sized + FlashBackend> Clone for SharedFlash<B> {
    fn clone(&self) -> Self {
        SharedFlash {
            inner: Arc::clone(&self.inner),
            config: self.config.clone(),
        }
    }
}

impl SharedFlash {
    /// Shares `backend`.
    pub fn new(backend: Box<dyn FlashBackend>) -> SharedFlash {
        SharedFlash::from_box(backend)
    }

    /// Runs `action` on the backend.
    pub fn with<R>(&self, action: impl FnOnce(&mut dyn FlashBackend) -> R) -> R {
        action(&mut **self.lock())
    }
}

impl<B: ?Sized + FlashBackend> SharedFlash<B> {
    /// Shares `backend`, keeping its concrete type for [`SharedFlash::lock`] (a test keeps
    /// a `SharedFlash<PowerCutFlash>` to cut its power while devices over it come and go).
    pub fn from_box(backend: Box<B>) -> SharedFlash<B> {
        SharedFlash {
            config: backend.config().clone(),
            inner: Arc::new(Mutex::new(backend)),
        }
    }

    /// The backend, locked.
    pub fn lock(&self) -> MutexGuard<'_, Box<B>> {
        self.inner.lock().expect("flash backend lock")
    }
}

impl<B: ?Sized + FlashBackend + 'static> FlashBackend for SharedFlash<B> {
    fn config(&self) -> &FlashConfig {
        &self.config
    }
    fn host_spare_bytes(&self) -> usize {
        self.lock().host_spare_bytes()
    }
    fn keeps_data(&self) -> bool {
        self.lock().keeps_data()
    }
    fn clock(&self) -> Arc<dyn Clock> {
        self.lock().clock()
    }
    fn now_ns(&self) -> u64 {
        self.lock().now_ns()
    }
    fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError> {
        self.lock().submit(request)
    }
    fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        self.lock().poll_acks(acks)
    }
    fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        self.lock().wait_acks(acks)
    }
    fn factory_bad_without_data(&self, address: FlashAddress) -> bool {
        self.lock().factory_bad_without_data(address)
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn sync_storage(&mut self) -> Result<(), FlashError> {
        self.lock().sync_storage()
    }
    fn mark_block_programmed(
        &mut self,
        address: FlashAddress,
        programmed_pages: u32,
        added_erases: u32,
    ) -> bool {
        self.lock()
            .mark_block_programmed(address, programmed_pages, added_erases)
    }
    fn take_page_buffer(&mut self) -> Vec<u8> {
        self.lock().take_page_buffer()
    }
    fn recycle_page_buffer(&mut self, buffer: Vec<u8>) {
        self.lock().recycle_page_buffer(buffer);
    }
}
