//! Shared test helpers: small flash geometries and FTLs over them.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use flashpipe_device::{
    run_one, BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, IoBuf,
    Operation, Rejected, Request, SplitMix64,
};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, SharedFlash, VictimPolicy};

/// A victim policy drawn at even odds.
pub fn drawn_victim_policy(rng: &mut SplitMix64) -> VictimPolicy {
    if rng.chance(0.5) {
        VictimPolicy::Greedy
    } else {
        VictimPolicy::CostBenefit
    }
}

/// A small array: 2 channels x 2 ways, `blocks` blocks per chip of `pages` 4 KiB pages.
pub fn small_config(blocks: u32, pages: u32) -> FlashConfig {
    sized_config(blocks, pages, 4096)
}

/// Like [`small_config`] with `page_bytes` per page (512 keeps the ECC cheap).
pub fn sized_config(blocks: u32, pages: u32, page_bytes: u32) -> FlashConfig {
    let mut config = FlashConfig::preset("minflash").expect("preset");
    config.name = "small".to_string();
    config.geometry.channels = 2;
    config.geometry.ways = 2;
    config.geometry.blocks_per_plane = blocks;
    config.geometry.pages_per_block = pages;
    config.geometry.page_data_bytes = page_bytes;
    config.geometry.page_spare_bytes = page_bytes / 16 + 40;
    config.reliability.factory_bad_block_fraction = 0.0;
    config.reliability.grown_bad_probability_at_rated = 0.0;
    config
}

/// A fresh array keeping data, seeded.
pub fn small_array(config: FlashConfig, seed: u64) -> FlashArray {
    FlashArray::new(
        config,
        FlashOptions {
            seed,
            ..FlashOptions::default()
        },
    )
    .expect("array")
}

/// Options for tests: a frequent checkpoint so recovery paths run.
pub fn test_options(queue_depth: u32) -> FtlOptions {
    FtlOptions {
        name: "ftl-test".to_string(),
        over_provisioning: 0.15,
        checkpoint_interval_pages: 200,
        queue_depth,
        ..FtlOptions::default()
    }
}

/// A formatted FTL over a fresh small array.
pub fn small_ftl(queue_depth: u32) -> Ftl {
    let array = small_array(small_config(32, 16), 7);
    Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        test_options(queue_depth),
    )
    .expect("format")
}

/// An FTL formatted over a shared small array (`blocks` blocks per chip of 32 pages,
/// seeded), queue depth 32: the shared flash (to mount again from), the options and the
/// FTL.
pub fn ftl_on_shared_flash(blocks: u32, seed: u64) -> (SharedFlash, FtlOptions, Ftl) {
    let flash = SharedFlash::new(Box::new(small_array(small_config(blocks, 32), seed)));
    let options = test_options(32);
    let ftl = Ftl::format(
        Box::new(flash.clone()) as Box<dyn FlashBackend>,
        options.clone(),
    )
    .expect("format the FTL");
    (flash, options, ftl)
}

/// Writes one page of `byte` at logical page `logical`, checking that the write succeeded.
pub fn fill_page(ftl: &mut Ftl, logical: u64, byte: u8) {
    let page_bytes = ftl.info().block_size_bytes as usize;
    run_one(
        ftl,
        Operation::Write {
            first_block: logical,
            buffer: IoBuf::from_slice(&vec![byte; page_bytes]),
        },
    )
    .expect("write")
    .status
    .expect("written");
}

/// Reads `bytes` from logical page `first_block` on, checking that the read succeeded.
pub fn read_pages(ftl: &mut Ftl, first_block: u64, bytes: usize) -> IoBuf {
    run_one(
        ftl,
        Operation::Read {
            first_block,
            buffer: IoBuf::zeroed(bytes),
        },
    )
    .expect("read")
    .buffer
    .expect("buffer")
}

/// What a crash campaign of 20 runs or more must have done: cut power inside file-system
/// operations (not only between them).
pub fn assert_cut_inside_operations(runs: u64, crashed_in_operation: u64) {
    assert!(
        runs < 20 || crashed_in_operation > 0,
        "the campaign cut power inside file-system operations"
    );
}

/// A device shared between the [`PowerFailing`] wrapper handed to the file system and the
/// test, which may take it back after a crash.
pub type DeviceSlot<D> = Arc<Mutex<Option<D>>>;

/// When power fails: after `countdown` more device calls (None: never).
#[derive(Debug, Default)]
pub struct PowerSwitch {
    pub countdown: Option<u64>,
    pub crashed: bool,
}

/// A [`BlockDevice`] over a shared device (an FTL, raw pages) that loses power when its
/// [`PowerSwitch`] says: from then on every call fails with `Crashed` and nothing reaches
/// the device, whose flash requests stay in flight for `PowerCutFlash::cut_power` to
/// decide. The crash campaigns of the file system over the FTL and of the flash-aware
/// layout run on it.
pub struct PowerFailing<D> {
    device: DeviceSlot<D>,
    switch: Arc<Mutex<PowerSwitch>>,
    info: DeviceInfo,
    clock: Arc<dyn Clock>,
}

impl<D: BlockDevice> PowerFailing<D> {
    /// The wrapper, the device's shared slot and the power switch (disarmed).
    pub fn new(device: D) -> (PowerFailing<D>, DeviceSlot<D>, Arc<Mutex<PowerSwitch>>) {
        let info = device.info().clone();
        let clock = device.clock();
        let slot = Arc::new(Mutex::new(Some(device)));
        let switch = Arc::new(Mutex::new(PowerSwitch::default()));
        let wrapper = PowerFailing {
            device: Arc::clone(&slot),
            switch: Arc::clone(&switch),
            info,
            clock,
        };
        (wrapper, slot, switch)
    }

    fn crash_error(&self) -> DeviceError {
        DeviceError::new(&self.info.name, DeviceErrorKind::Crashed)
    }

    /// Counts one call; true once power is gone.
    fn power_lost(&mut self) -> bool {
        let mut switch = self.switch.lock().expect("switch lock");
        if let Some(left) = switch.countdown.as_mut() {
            if *left == 0 {
                switch.crashed = true;
            } else {
                *left -= 1;
            }
        }
        switch.crashed
    }

    fn with_device<R>(&self, action: impl FnOnce(&mut D) -> R) -> R {
        let mut guard = self.device.lock().expect("device lock");
        action(
            guard
                .as_mut()
                .expect("the device is in place until the test takes it"),
        )
    }
}

impl<D: BlockDevice> BlockDevice for PowerFailing<D> {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if self.power_lost() {
            let error = self.crash_error();
            return Err(Rejected { request, error });
        }
        self.with_device(|device| device.submit(request))
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        if self.power_lost() {
            return 0;
        }
        self.with_device(|device| device.poll_completions(completions))
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        if self.power_lost() {
            return Err(self.crash_error());
        }
        self.with_device(|device| device.wait_completions(completions))
    }

    fn in_flight(&self) -> usize {
        if self.switch.lock().expect("switch lock").crashed {
            return 0;
        }
        self.with_device(|device| device.in_flight())
    }
}
