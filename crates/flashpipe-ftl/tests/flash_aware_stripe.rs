//! The flash-aware layout's data pages spread over the raw device's units (chips),
//! docs/design/29-flash-aware.md, "Pages over chips": the allocator keeps several erase
//! blocks open and hands out pages round-robin over them, so a 16 KiB write (two pages)
//! programs on two units and a large write on every unit, while each erase block still
//! programs in page order (the raw device refuses anything else). Checked on the device's
//! addresses: erase block `e` is on unit `e % U` (`RawPageDevice`'s module doc). The
//! layout then survives a clean remount and a power cut with its open erase blocks part
//! programmed.

mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceInfo, Operation, Rejected, Request,
};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_ftl::{RawPageDevice, SharedFlash};

const PAGES_PER_BLOCK: u64 = 16;
const PAGE_BYTES: usize = 8192;
/// Sixteen units: four buses of four chips.
const BUSES: u32 = 4;
const CHIPS_PER_BUS: u32 = 4;
const UNITS: u64 = (BUSES * CHIPS_PER_BUS) as u64;
/// An InnoDB page: two flash pages.
const OVERWRITE_BYTES: usize = 16 * 1024;
const FILE_BYTES: usize = 1024 * 1024;

/// A raw device that records the first page of every program it is asked for, in order.
struct Recorder {
    inner: RawPageDevice,
    programs: Arc<Mutex<Vec<u64>>>,
}

impl BlockDevice for Recorder {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if let Operation::Write {
            first_block,
            buffer,
        } = &request.operation
        {
            let pages = (buffer.len() / PAGE_BYTES) as u64;
            let mut programs = self.programs.lock().expect("programs lock");
            programs.extend(*first_block..*first_block + pages);
        }
        self.inner.submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.inner.poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.inner.wait_completions(completions)
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
}

/// Raw flash of sixteen units kept while file systems over it come and go.
struct Rig {
    flash: SharedFlash,
    programs: Arc<Mutex<Vec<u64>>>,
}

impl Rig {
    fn new() -> Rig {
        let mut config = support::sized_config(32, PAGES_PER_BLOCK as u32, PAGE_BYTES as u32);
        config.geometry.channels = BUSES;
        config.geometry.ways = CHIPS_PER_BUS;
        assert_eq!(config.geometry.devices, 1, "units are buses x chips here");
        Rig {
            flash: SharedFlash::new(Box::new(support::small_array(config, 29))),
            programs: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn device(&self) -> Box<dyn BlockDevice> {
        let inner = RawPageDevice::new(Box::new(self.flash.clone()), "raw").expect("raw pages");
        Box::new(Recorder {
            inner,
            programs: Arc::clone(&self.programs),
        })
    }

    /// The pages programmed since the last call.
    fn take_programs(&self) -> Vec<u64> {
        std::mem::take(&mut *self.programs.lock().expect("programs lock"))
    }
}

fn unit_of(page: u64) -> u64 {
    (page / PAGES_PER_BLOCK) % UNITS
}

fn contents(round: usize, length: usize) -> Vec<u8> {
    (0..length)
        .map(|offset| (offset.wrapping_mul(131) ^ round.wrapping_mul(7919)) as u8)
        .collect()
}

fn format(rig: &Rig) -> Filesystem {
    let options = FormatOptions {
        fs_block_size_bytes: PAGE_BYTES as u32,
        store_identity: None,
    };
    Filesystem::format_flash_aware(rig.device(), &options, PAGES_PER_BLOCK).expect("mkfs")
}

/// Overwrites 16 KiB of `db` at round `round` (the model too): the pages the write
/// programmed, before its flush.
fn overwrite(rig: &Rig, fs: &mut Filesystem, model: &mut [u8], round: usize) -> Vec<u64> {
    let offset = (round * 7 * OVERWRITE_BYTES) % FILE_BYTES;
    let patch = contents(round, OVERWRITE_BYTES);
    model[offset..offset + OVERWRITE_BYTES].copy_from_slice(&patch);
    let file = fs.open("db").expect("open");
    rig.take_programs();
    fs.write(file, offset as u64, &patch).expect("overwrite");
    let programs = rig.take_programs();
    fs.flush().expect("flush");
    programs
}

fn check(fs: &mut Filesystem, model: &[u8], when: &str) {
    let file = fs.open("db").expect("open");
    let read = fs.read(file, 0, FILE_BYTES as u64).expect("read").to_vec();
    assert!(read == model, "{when}: the file's bytes");
}

#[test]
fn a_large_write_programs_on_every_unit_and_each_erase_block_in_order() {
    let rig = Rig::new();
    let mut fs = format(&rig);
    let file = fs.create("db").expect("create");
    rig.take_programs();
    fs.write(file, 0, &contents(0, FILE_BYTES)).expect("write");
    let programs = rig.take_programs();
    assert_eq!(programs.len(), FILE_BYTES / PAGE_BYTES);
    let mut per_unit = vec![0; UNITS as usize];
    for &page in &programs {
        per_unit[unit_of(page) as usize] += 1;
    }
    assert!(
        per_unit
            .iter()
            .all(|&count| count == programs.len() / UNITS as usize),
        "128 pages spread evenly over 16 units: {per_unit:?}"
    );
    for pair in programs.windows(2) {
        assert_ne!(
            unit_of(pair[0]),
            unit_of(pair[1]),
            "consecutive pages on one unit"
        );
    }
    let mut last_in_block = std::collections::BTreeMap::new();
    for &page in &programs {
        if let Some(previous) = last_in_block.insert(page / PAGES_PER_BLOCK, page) {
            assert_eq!(
                page,
                previous + 1,
                "page {page} out of its erase block's order"
            );
        }
    }
    fs.flush().expect("flush");
}

#[test]
fn each_innodb_page_overwrite_programs_on_two_units_through_a_remount_and_a_power_cut() {
    let rig = Rig::new();
    let mut fs = format(&rig);
    let mut model = contents(0, FILE_BYTES);
    let file = fs.create("db").expect("create");
    fs.write(file, 0, &model).expect("write");
    fs.flush().expect("flush");
    let mut units_used = BTreeSet::new();
    for round in 1..=40 {
        let programs = overwrite(&rig, &mut fs, &mut model, round);
        assert_eq!(programs.len(), 2, "round {round}: two data pages");
        assert_ne!(unit_of(programs[0]), unit_of(programs[1]), "round {round}");
        units_used.extend(programs.iter().map(|&page| unit_of(page)));
    }
    assert_eq!(
        units_used.len(),
        UNITS as usize,
        "every unit took data pages"
    );
    fs.unmount().expect("clean unmount");
    let mut fs = Filesystem::mount(rig.device()).expect("mount after a clean end");
    check(&mut fs, &model, "after a clean remount");
    for round in 41..=60 {
        let programs = overwrite(&rig, &mut fs, &mut model, round);
        assert_ne!(unit_of(programs[0]), unit_of(programs[1]), "round {round}");
    }
    let file = fs.open("db").expect("open");
    fs.write(file, 0, &contents(99, OVERWRITE_BYTES))
        .expect("a write the power cut loses");
    drop(fs);
    let mut fs = Filesystem::mount(rig.device()).expect("mount after an unclean end");
    check(&mut fs, &model, "after an unclean end");
    for round in 61..=80 {
        overwrite(&rig, &mut fs, &mut model, round);
    }
    fs.unmount().expect("clean unmount");
    let mut fs = Filesystem::mount(rig.device()).expect("mount");
    check(&mut fs, &model, "at the end");
}
