//! How big an emulated flash device is, and why: `mkfs --size` on a flash device (the
//! store uses that much; the array grows past its default raw capacity to hold it, up to
//! the preset and the FTL's in-memory map), and the one line mkfs prints saying how the
//! store's size follows from the preset (raw capacity, what the emulation uses and why,
//! over-provisioning, the FTL's reserves and bad blocks).

use std::path::Path;

use flashpipe_device::BlockDevice;
use flashpipe_flash::FlashConfig;
use flashpipe_ftl::mount::exported_logical_pages;

use crate::flash_store::{
    default_blocks_per_plane, FlashDeviceSpec, FlashStoreDevice, DEFAULT_RAW_CAPACITY_BYTES,
    MAX_FLASH_PAGES,
};
use crate::units::HumanBytes;

/// Bytes of `config`'s raw pages.
fn raw_bytes(config: &FlashConfig) -> u64 {
    config.total_pages() * u64::from(config.geometry.page_data_bytes)
}

/// `config` with `blocks_per_plane` blocks in each plane.
fn with_blocks(config: &FlashConfig, blocks_per_plane: u32) -> FlashConfig {
    let mut config = config.clone();
    config.geometry.blocks_per_plane = blocks_per_plane;
    config
}

/// The most blocks per plane a device of `preset` may have: the preset's, cut so the
/// array has at most [`MAX_FLASH_PAGES`] pages.
fn max_blocks_per_plane(preset: &FlashConfig) -> u32 {
    let pages_per_block_row = preset.total_pages() / u64::from(preset.geometry.blocks_per_plane);
    let fitting = (MAX_FLASH_PAGES / pages_per_block_row.max(1)).max(1);
    preset.geometry.blocks_per_plane.min(fitting as u32)
}

impl FlashDeviceSpec {
    /// Bytes the FTL of an array of `config` can be counted on to export: what it exports
    /// with every block good, less twice the preset's expected share of factory bad
    /// blocks (found only at format).
    fn dependable_export_bytes(&self, config: &FlashConfig) -> u64 {
        let page_bytes = u64::from(config.geometry.page_data_bytes);
        let pages = exported_logical_pages(config, self.over_provisioning);
        let bad_share = (2.0 * config.reliability.factory_bad_block_fraction).min(1.0);
        ((pages as f64 * (1.0 - bad_share)).floor() as u64) * page_bytes
    }

    /// `mkfs --size` on this flash device: the store uses `size_bytes` of it. Without a
    /// `blocks_per_plane` of its own the array grows past the default
    /// ([`DEFAULT_RAW_CAPACITY_BYTES`] raw) until its FTL can export that much, up to the
    /// preset's blocks and [`MAX_FLASH_PAGES`]; a size no array of the preset can hold is
    /// refused naming both sizes, and so is a size that is not whole flash pages.
    pub fn fit_size(&mut self, store_file: &Path, size_bytes: u64) -> Result<(), String> {
        let preset = self.preset_config(store_file)?;
        let page_bytes = u64::from(preset.geometry.page_data_bytes);
        let device = self.describe();
        if size_bytes == 0 {
            return Err(format!(
                "{device}: --size 0 leaves the store no room: give at least one {page_bytes}-byte flash page"
            ));
        }
        if size_bytes % page_bytes != 0 {
            return Err(format!(
                "{device}: --size {} is not a whole number of the preset's {page_bytes}-byte flash pages",
                HumanBytes(size_bytes)
            ));
        }
        if let Some(blocks_per_plane) = self.blocks_per_plane {
            let config = self.flash_config(store_file)?;
            let export_bytes = self.dependable_export_bytes(&config);
            if size_bytes > export_bytes {
                return Err(format!(
                    "{device}: --size {} is larger than its {blocks_per_plane} blocks per plane can hold: {} of {} raw (less {} over-provisioning, the FTL's reserves and a margin for factory bad blocks); ask for at most {} or more blocks per plane",
                    HumanBytes(size_bytes),
                    HumanBytes(export_bytes),
                    HumanBytes(raw_bytes(&config)),
                    percent(self.over_provisioning),
                    HumanBytes(export_bytes)
                ));
            }
            self.size_bytes = Some(size_bytes);
            return Ok(());
        }
        let lowest = default_blocks_per_plane(&preset);
        let highest = max_blocks_per_plane(&preset);
        let fits =
            |blocks: u32| self.dependable_export_bytes(&with_blocks(&preset, blocks)) >= size_bytes;
        if !fits(highest) {
            let largest = with_blocks(&preset, highest);
            return Err(format!(
                "{device}: --size {} is larger than a {} device can hold: at most {} ({} raw in the preset, {} of it emulated at most because the FTL keeps its page map in memory, less {} over-provisioning, the FTL's reserves and a margin for factory bad blocks)",
                HumanBytes(size_bytes),
                preset.name,
                HumanBytes(self.dependable_export_bytes(&largest)),
                HumanBytes(raw_bytes(&preset)),
                HumanBytes(raw_bytes(&largest)),
                percent(self.over_provisioning)
            ));
        }
        if !fits(lowest) {
            // The smallest number of blocks per plane that holds the size.
            let (mut too_few, mut enough) = (lowest, highest);
            while enough - too_few > 1 {
                let middle = too_few + (enough - too_few) / 2;
                if fits(middle) {
                    enough = middle;
                } else {
                    too_few = middle;
                }
            }
            self.blocks_per_plane = Some(enough);
        }
        self.size_bytes = Some(size_bytes);
        Ok(())
    }
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

impl FlashStoreDevice {
    /// One line saying how the store's size on this device follows from its preset: the
    /// preset's raw pages, what the emulation uses of them and why, the FTL's
    /// over-provisioning, reserves and bad blocks, and what the store uses.
    pub fn capacity_note(&self, spec: &FlashDeviceSpec, store_file: &Path) -> String {
        let ftl = self.ftl();
        let config = ftl.backend().config();
        let geometry = &config.geometry;
        let device = spec.describe();
        let preset = spec
            .preset_config(store_file)
            .unwrap_or_else(|_| config.clone());
        let preset_raw = raw_bytes(&preset);
        let used_raw = raw_bytes(config);
        let chips = geometry.devices * geometry.channels * geometry.ways;
        let why = if used_raw >= preset_raw {
            "the whole preset".to_string()
        } else if spec.blocks_per_plane.is_some() {
            format!(
                "{} blocks per plane, as the store file records (grown by --size or set by --flash-blocks-per-plane)",
                geometry.blocks_per_plane
            )
        } else {
            format!(
                "{} blocks per plane: the FTL keeps its page map in memory, so a device is cut to {} raw unless --size or --flash-blocks-per-plane asks for more",
                geometry.blocks_per_plane,
                HumanBytes(DEFAULT_RAW_CAPACITY_BYTES)
            )
        };
        let exported = ftl.info().size_bytes();
        let store_bytes = self.info().size_bytes();
        let store = if store_bytes < exported {
            format!("the store uses {} of it (--size)", HumanBytes(store_bytes))
        } else {
            "the store uses all of it".to_string()
        };
        format!(
            "{device}: the {} preset has {} of raw pages ({chips} chips of {} blocks of {} pages of {} bytes); the emulation uses {} ({why}); the FTL exports {} after {} over-provisioning, its reserves and {} bad blocks; {store}",
            config.name,
            HumanBytes(preset_raw),
            preset.blocks_per_way(),
            geometry.pages_per_block,
            geometry.page_data_bytes,
            HumanBytes(used_raw),
            HumanBytes(exported),
            percent(spec.over_provisioning),
            ftl.stats().retired_blocks
        )
    }
}
