//! What the cluster campaign checks against: the pages hosts were told are programmed
//! (published: every host may read them, and each must read back as written until its
//! owner erases the block) and the page contents a seed gives.

use std::collections::BTreeMap;

use flashpipe_flash::FlashAddress;
use flashpipe_sim::SplitMix64;

/// A block of the cluster: (device, bus, chip, block).
pub(crate) type BlockKey = (u32, u32, u32, u32);
/// A page of the cluster: (device, bus, chip, block, page).
pub(crate) type PageKey = (u32, u32, u32, u32, u32);

/// A page's address in findings: device, bus, chip, block and page.
pub(crate) fn page_text(page: PageKey) -> String {
    format!(
        "device {} bus {} chip {} block {} page {}",
        page.0, page.1, page.2, page.3, page.4
    )
}

pub(crate) fn address_of(page: PageKey) -> FlashAddress {
    FlashAddress {
        device: page.0,
        bus: page.1,
        chip: page.2,
        block: page.3,
        page: page.4,
    }
}

/// Page data and host spare bytes drawn from a seed.
pub(crate) fn page_contents(
    seed: u64,
    data_bytes: usize,
    spare_bytes: usize,
) -> (Vec<u8>, Vec<u8>) {
    let mut generator = SplitMix64::new(seed);
    let mut data = Vec::with_capacity(data_bytes);
    while data.len() < data_bytes {
        data.extend_from_slice(&generator.next_u64().to_le_bytes());
    }
    data.truncate(data_bytes);
    let mut spare = seed.to_le_bytes().to_vec();
    spare.resize(spare_bytes.min(8), 0);
    (data, spare)
}

/// The pages acknowledged programmed and not erased since, with the seed of their
/// contents, and per block how many erases were issued (a read checks its page only when
/// no erase of the block was issued while it was in flight).
#[derive(Debug, Default)]
pub(crate) struct Published {
    pages: BTreeMap<PageKey, u64>,
    erases_issued: BTreeMap<BlockKey, u64>,
}

impl Published {
    /// The page's contents seed and the block's erase count, if the page is published.
    pub(crate) fn expect(&self, page: PageKey) -> Option<(u64, u64)> {
        let seed = *self.pages.get(&page)?;
        Some((seed, self.erase_count((page.0, page.1, page.2, page.3))))
    }

    pub(crate) fn erase_count(&self, block: BlockKey) -> u64 {
        self.erases_issued.get(&block).copied().unwrap_or(0)
    }

    /// An erase of the block was issued: its pages are published no longer.
    pub(crate) fn erase_issued(&mut self, block: BlockKey) {
        *self.erases_issued.entry(block).or_insert(0) += 1;
        self.pages
            .retain(|&(device, bus, chip, index, _), _| (device, bus, chip, index) != block);
    }

    /// A program was acknowledged.
    pub(crate) fn publish(&mut self, page: PageKey, seed: u64) {
        self.pages.insert(page, seed);
    }

    /// How many pages are published.
    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// The `index`th published page (in address order).
    pub(crate) fn nth(&self, index: usize) -> Option<PageKey> {
        self.pages.keys().nth(index).copied()
    }

    /// Every published page.
    pub(crate) fn all(&self) -> Vec<PageKey> {
        self.pages.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_erase_unpublishes_its_block_only() {
        let mut published = Published::default();
        published.publish((0, 0, 0, 1, 0), 7);
        published.publish((0, 0, 0, 2, 0), 8);
        published.erase_issued((0, 0, 0, 1));
        assert_eq!(published.expect((0, 0, 0, 1, 0)), None);
        assert_eq!(published.expect((0, 0, 0, 2, 0)), Some((8, 0)));
        assert_eq!(published.erase_count((0, 0, 0, 1)), 1);
        assert_eq!(published.len(), 1);
    }
}
