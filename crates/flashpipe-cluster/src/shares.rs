//! Which host may program or erase which blocks of a device (the shared-memory case of
//! seed 004): each host declares block ranges per device; a range `start..end` covers the
//! blocks with that `block` index on every bus and chip of the device. Reads of any page
//! are allowed (hosts read what others published); a program or erase outside the host's
//! ranges is refused with `NotOwner` at the device's node, before it reaches the flash.

use flashpipe_flash::{FlashCommand, FlashRequest};

use crate::wire::Status;

/// Blocks `start..end` (end excluded) of every chip of a device.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize, serde::Serialize,
)]
pub struct BlockRange {
    /// First block.
    pub start: u32,
    /// One past the last block.
    pub end: u32,
}

impl BlockRange {
    /// Whether `block` is in the range.
    pub fn contains(&self, block: u32) -> bool {
        (self.start..self.end).contains(&block)
    }

    fn overlaps(&self, other: &BlockRange) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// Why a set of shares is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// A range with no block in it.
    #[error(
        "host {host}: block range {start}..{end} of device {device} is empty; give start below end"
    )]
    Empty {
        /// The host.
        host: u32,
        /// The device.
        device: u32,
        /// Its start.
        start: u32,
        /// Its end.
        end: u32,
    },
    /// A range past the device's blocks.
    #[error("host {host}: block range {start}..{end} of device {device} goes past its {blocks} blocks per chip")]
    PastGeometry {
        /// The host.
        host: u32,
        /// The device.
        device: u32,
        /// Its start.
        start: u32,
        /// Its end.
        end: u32,
        /// Blocks per chip of the device.
        blocks: u32,
    },
    /// Two ranges share blocks.
    #[error("device {device}: block ranges of host {first_host} and host {second_host} overlap at block {block}; give each block one owner")]
    Overlap {
        /// The device.
        device: u32,
        /// One owner.
        first_host: u32,
        /// The other.
        second_host: u32,
        /// The first shared block.
        block: u32,
    },
}

/// The shares of one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shares {
    device: u32,
    /// (range, host), sorted by range, no two overlapping.
    ranges: Vec<(BlockRange, u32)>,
}

impl Shares {
    /// The shares of `device` (with `blocks` blocks per chip) from (host, range) pairs.
    pub fn new(
        device: u32,
        blocks: u32,
        declared: impl IntoIterator<Item = (u32, BlockRange)>,
    ) -> Result<Shares, ShareError> {
        let mut ranges = Vec::new();
        for (host, range) in declared {
            if range.start >= range.end {
                return Err(ShareError::Empty {
                    host,
                    device,
                    start: range.start,
                    end: range.end,
                });
            }
            if range.end > blocks {
                return Err(ShareError::PastGeometry {
                    host,
                    device,
                    start: range.start,
                    end: range.end,
                    blocks,
                });
            }
            ranges.push((range, host));
        }
        ranges.sort();
        for pair in ranges.windows(2) {
            let ((first, first_host), (second, second_host)) = (pair[0], pair[1]);
            if first.overlaps(&second) {
                return Err(ShareError::Overlap {
                    device,
                    first_host,
                    second_host,
                    block: second.start,
                });
            }
        }
        Ok(Shares { device, ranges })
    }

    /// The device these shares divide.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The host owning `block`, if any.
    pub fn owner(&self, block: u32) -> Option<u32> {
        let index = self.ranges.partition_point(|(range, _)| range.end <= block);
        self.ranges
            .get(index)
            .filter(|(range, _)| range.contains(block))
            .map(|&(_, host)| host)
    }

    /// Whether the request may go to the flash: reads always; programs and erases only of
    /// the host's own blocks, else the `NotOwner` status to answer with.
    pub fn check(&self, request: &FlashRequest) -> Result<(), Status> {
        let block = match &request.command {
            FlashCommand::ReadPage { .. } => return Ok(()),
            FlashCommand::WritePage { address, .. }
            | FlashCommand::EraseBlock { address }
            | FlashCommand::CopyBack { to: address, .. } => address.block,
        };
        if self.owner(block) == Some(request.host) {
            return Ok(());
        }
        Err(Status::NotOwner {
            device: self.device,
            block,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashpipe_flash::FlashAddress;

    fn range(start: u32, end: u32) -> BlockRange {
        BlockRange { start, end }
    }

    fn request(host: u32, block: u32, command: u8) -> FlashRequest {
        let address = FlashAddress {
            device: 1,
            bus: 0,
            chip: 0,
            block,
            page: 0,
        };
        let command = match command {
            0 => FlashCommand::ReadPage { address },
            1 => FlashCommand::WritePage {
                address,
                data: vec![],
                spare: vec![],
            },
            _ => FlashCommand::EraseBlock { address },
        };
        FlashRequest {
            tag: 0,
            host,
            command,
        }
    }

    #[test]
    fn owners_program_and_erase_everyone_reads() {
        let shares = Shares::new(1, 100, [(0, range(0, 50)), (1, range(50, 60))]).unwrap();
        assert_eq!(shares.owner(49), Some(0));
        assert_eq!(shares.owner(50), Some(1));
        assert_eq!(shares.owner(60), None);
        assert_eq!(shares.check(&request(0, 10, 1)), Ok(()));
        assert_eq!(
            shares.check(&request(1, 10, 0)),
            Ok(()),
            "reads of any page"
        );
        assert_eq!(
            shares.check(&request(1, 10, 2)),
            Err(Status::NotOwner {
                device: 1,
                block: 10
            })
        );
        assert_eq!(
            shares.check(&request(0, 70, 1)),
            Err(Status::NotOwner {
                device: 1,
                block: 70
            }),
            "unowned blocks are nobody's"
        );
    }

    #[test]
    fn bad_shares_are_refused() {
        assert!(matches!(
            Shares::new(0, 100, [(0, range(0, 50)), (1, range(49, 60))]),
            Err(ShareError::Overlap { block: 49, .. })
        ));
        assert!(matches!(
            Shares::new(0, 100, [(0, range(90, 101))]),
            Err(ShareError::PastGeometry { .. })
        ));
        assert!(matches!(
            Shares::new(0, 100, [(0, range(5, 5))]),
            Err(ShareError::Empty { .. })
        ));
    }
}
