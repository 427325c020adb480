//! What one host's FTL sees of the cluster: ONE raw array made of the devices it owns
//! blocks on, side by side.
//!
//! The view has a device for every cluster device on which the host holds a share, in
//! ascending device id; view device `i` is cluster device `devices[i].device`. Every
//! view device has the preset's buses and chips and `blocks_per_chip` blocks per chip
//! (one die, one plane): view block `b` of a chip is block `devices[i].first_block + b` of
//! that chip on the cluster device, the first blocks of the host's share. The FTL numbers
//! buses across devices (view device `d`'s bus `b` is its bus `d * buses + b`) and rotates
//! its writes over all of them, so a host striping all devices is the paper's RAID-0 case,
//! and hosts holding disjoint shares of every device (the shared case) each program and
//! erase only their own blocks: the blocks outside the share are not in the view at all.
//!
//! Rules, each refused with a [`ViewError`] naming the entry: the host exists, holds at
//! least one share, one range per device, every device of the view runs the same preset,
//! and `blocks_per_chip` fits in every share.

use flashpipe_cluster::description::ClusterDescription;
use flashpipe_flash::{FlashAddress, FlashCommand, FlashConfig};

/// Blocks per chip of a view when the store names none: a minflash device then gives
/// 64 chips x 8 blocks x 2 MiB = 1 GiB of raw flash (the FTL's map lives in memory,
/// and its format reads page 0 of every block over the network).
pub const DEFAULT_BLOCKS_PER_CHIP: u32 = 8;

/// Why a host has no view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// The host is not in the description.
    #[error("host {host} is not in the cluster description (it has {count} hosts)")]
    NoSuchHost {
        /// The host.
        host: u32,
        /// Hosts described.
        count: usize,
    },
    /// The host owns no block anywhere.
    #[error("host {host} holds no share of any device, so it may program no block; give it `shares` in the cluster description")]
    NoShare {
        /// The host.
        host: u32,
    },
    /// More than one range on one device.
    #[error("host {host} holds {ranges} block ranges of device {device}; a store over the cluster uses one range per device (merge them)")]
    SplitShare {
        /// The host.
        host: u32,
        /// The device.
        device: u32,
        /// Its ranges there.
        ranges: usize,
    },
    /// Devices of different presets.
    #[error("device {device} runs preset {preset}, device {first_device} runs {first_preset}: a store stripes devices of one preset only")]
    MixedPresets {
        /// The first device of the view.
        first_device: u32,
        /// Its preset.
        first_preset: String,
        /// A device with another.
        device: u32,
        /// Its preset.
        preset: String,
    },
    /// The preset is unknown (the description's check should have refused it).
    #[error("device {device}: {detail}")]
    Preset {
        /// The device.
        device: u32,
        /// Why.
        detail: String,
    },
    /// `blocks_per_chip` does not fit.
    #[error("{blocks_per_chip} blocks per chip do not fit host {host}'s share of device {device}, which holds {available}; name at most {available}")]
    TooManyBlocks {
        /// The host.
        host: u32,
        /// The device.
        device: u32,
        /// What was asked for.
        blocks_per_chip: u32,
        /// What the share holds.
        available: u32,
    },
    /// Zero blocks per chip.
    #[error("blocks per chip must be at least 1")]
    NoBlocks,
}

/// A cluster device in the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewDevice {
    /// The cluster's device id (its node id).
    pub device: u32,
    /// The first block of every chip in the view (the start of the host's share).
    pub first_block: u32,
}

/// One host's array (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterView {
    host: u32,
    config: FlashConfig,
    devices: Vec<ViewDevice>,
}

impl ClusterView {
    /// The view of host `host`; `blocks_per_chip` defaults to the smaller of
    /// [`DEFAULT_BLOCKS_PER_CHIP`] and the smallest share.
    pub fn of_host(
        description: &ClusterDescription,
        host: u32,
        blocks_per_chip: Option<u32>,
    ) -> Result<ClusterView, ViewError> {
        let entry = description
            .hosts
            .iter()
            .find(|entry| entry.id == host)
            .ok_or(ViewError::NoSuchHost {
                host,
                count: description.hosts.len(),
            })?;
        if entry.shares.is_empty() {
            return Err(ViewError::NoShare { host });
        }
        let mut owned: Vec<u32> = entry.shares.iter().map(|share| share.device).collect();
        owned.sort_unstable();
        owned.dedup();
        let mut devices = Vec::with_capacity(owned.len());
        let mut smallest = u32::MAX;
        let mut first: Option<(u32, String, FlashConfig)> = None;
        for device in owned {
            let ranges: Vec<_> = entry
                .shares
                .iter()
                .filter(|share| share.device == device)
                .collect();
            if ranges.len() != 1 {
                return Err(ViewError::SplitShare {
                    host,
                    device,
                    ranges: ranges.len(),
                });
            }
            let share = ranges[0];
            let node = description.node(device).ok_or(ViewError::Preset {
                device,
                detail: "no node has this id".to_string(),
            })?;
            let config = description
                .preset_config(node)
                .map_err(|error| ViewError::Preset {
                    device,
                    detail: error.to_string(),
                })?;
            match &first {
                None => first = Some((device, node.preset.clone(), config)),
                Some((first_device, first_preset, first_config)) => {
                    if *first_config != config {
                        return Err(ViewError::MixedPresets {
                            first_device: *first_device,
                            first_preset: first_preset.clone(),
                            device,
                            preset: node.preset.clone(),
                        });
                    }
                }
            }
            let available = share.end.saturating_sub(share.start);
            if let Some(asked) = blocks_per_chip.filter(|&asked| asked > available) {
                return Err(ViewError::TooManyBlocks {
                    host,
                    device,
                    blocks_per_chip: asked,
                    available,
                });
            }
            smallest = smallest.min(available);
            devices.push(ViewDevice {
                device,
                first_block: share.start,
            });
        }
        let blocks = blocks_per_chip.unwrap_or(DEFAULT_BLOCKS_PER_CHIP.min(smallest));
        if blocks == 0 {
            return Err(ViewError::NoBlocks);
        }
        let (_, _, mut config) = first.expect("a host with shares has a first device");
        config.geometry.devices = devices.len() as u32;
        config.geometry.dies = 1;
        config.geometry.planes = 1;
        config.geometry.blocks_per_plane = blocks;
        Ok(ClusterView {
            host,
            config,
            devices,
        })
    }

    /// The host.
    pub fn host(&self) -> u32 {
        self.host
    }

    /// The array the FTL sees.
    pub fn config(&self) -> &FlashConfig {
        &self.config
    }

    /// The cluster devices, by view device.
    pub fn devices(&self) -> &[ViewDevice] {
        &self.devices
    }

    /// Blocks per chip of every view device.
    pub fn blocks_per_chip(&self) -> u32 {
        self.config.geometry.blocks_per_plane
    }

    /// The cluster address of a view address.
    ///
    /// # Panics
    /// When the address is outside the view (the FTL addresses its own geometry only).
    pub fn to_cluster(&self, address: FlashAddress) -> FlashAddress {
        let device = self.devices[address.device as usize];
        assert!(
            address.block < self.blocks_per_chip(),
            "block {} is outside the view's {} blocks per chip",
            address.block,
            self.blocks_per_chip()
        );
        FlashAddress {
            device: device.device,
            block: device.first_block + address.block,
            ..address
        }
    }

    /// `command` with its address in the cluster.
    pub fn command_to_cluster(&self, command: FlashCommand) -> FlashCommand {
        match command {
            FlashCommand::ReadPage { address } => FlashCommand::ReadPage {
                address: self.to_cluster(address),
            },
            FlashCommand::WritePage {
                address,
                data,
                spare,
            } => FlashCommand::WritePage {
                address: self.to_cluster(address),
                data,
                spare,
            },
            FlashCommand::EraseBlock { address } => FlashCommand::EraseBlock {
                address: self.to_cluster(address),
            },
            FlashCommand::CopyBack { from, to, spare } => FlashCommand::CopyBack {
                from: self.to_cluster(from),
                to: self.to_cluster(to),
                spare,
            },
        }
    }

    /// The view in words: `devices 0, 1 (blocks 0..8 of every chip)`.
    pub fn describe(&self) -> String {
        let devices: Vec<String> = self
            .devices
            .iter()
            .map(|device| {
                format!(
                    "device {} blocks {}..{}",
                    device.device,
                    device.first_block,
                    device.first_block + self.blocks_per_chip()
                )
            })
            .collect();
        format!("host {}: {} of every chip", self.host, devices.join(", "))
    }
}
