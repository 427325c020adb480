//! The striping geometry: which member holds which block, and how a block range splits
//! at stripe-unit boundaries.
//!
//! Stripe unit `k` (blocks `k * unit .. (k + 1) * unit` of the striped device) lives on
//! member `k % members`, at member blocks starting at `(k / members) * unit`.

use std::sync::Arc;

use flashpipe_device::{DeviceError, DeviceErrorKind, DeviceInfo};

/// Where a run of blocks of the striped device lives on one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Index of the member holding the run.
    pub member_index: usize,
    /// First block of the run on that member.
    pub member_first_block: u64,
    /// Offset of the run from the start of the request, in blocks.
    pub request_offset_blocks: u64,
    /// Length of the run in blocks (never crosses a stripe-unit boundary).
    pub block_count: u64,
}

/// The geometry of a striped device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeLayout {
    member_count: u64,
    stripe_unit_blocks: u64,
    block_size_bytes: u32,
    block_count: u64,
}

impl StripeLayout {
    /// Checks the members' geometry against the stripe unit and builds the layout:
    /// at least one member, one block size for all, a stripe unit that is a positive
    /// multiple of it, and members holding at least one whole stripe unit. Capacity is
    /// `members x` the smallest member's blocks rounded down to whole stripe units.
    pub fn new(
        name: &Arc<str>,
        members: &[&DeviceInfo],
        stripe_unit_bytes: u64,
    ) -> Result<StripeLayout, DeviceError> {
        let open_error = |detail: String| DeviceError::new(name, DeviceErrorKind::Open { detail });
        let Some(first) = members.first() else {
            return Err(open_error(
                "a striped device needs at least one member".to_string(),
            ));
        };
        let block_size_bytes = first.block_size_bytes;
        if let Some((index, odd)) = members
            .iter()
            .enumerate()
            .find(|(_, member)| member.block_size_bytes != block_size_bytes)
        {
            return Err(open_error(format!(
                "member {index} ({}) has {}-byte blocks but member 0 ({}) has {block_size_bytes}-byte blocks",
                odd.name, odd.block_size_bytes, first.name
            )));
        }
        let block_size = u64::from(block_size_bytes);
        if stripe_unit_bytes == 0 || stripe_unit_bytes % block_size != 0 {
            return Err(open_error(format!(
                "stripe unit {stripe_unit_bytes} bytes is not a positive multiple of the {block_size_bytes}-byte block"
            )));
        }
        let stripe_unit_blocks = stripe_unit_bytes / block_size;
        let smallest_member_blocks = members
            .iter()
            .map(|member| member.block_count)
            .min()
            .expect("at least one member");
        let units_per_member = smallest_member_blocks / stripe_unit_blocks;
        if units_per_member == 0 {
            return Err(open_error(format!(
                "the smallest member has {smallest_member_blocks} blocks, less than one {stripe_unit_blocks}-block stripe unit"
            )));
        }
        let member_count = members.len() as u64;
        Ok(StripeLayout {
            member_count,
            stripe_unit_blocks,
            block_size_bytes,
            block_count: member_count * units_per_member * stripe_unit_blocks,
        })
    }

    /// Blocks of the striped device.
    pub fn block_count(&self) -> u64 {
        self.block_count
    }

    /// The members' common block size.
    pub fn block_size_bytes(&self) -> u32 {
        self.block_size_bytes
    }

    /// Blocks per stripe unit.
    pub fn stripe_unit_blocks(&self) -> u64 {
        self.stripe_unit_blocks
    }

    /// Number of members.
    pub fn member_count(&self) -> usize {
        self.member_count as usize
    }

    /// The member and member block holding `block` of the striped device.
    pub fn locate(&self, block: u64) -> (usize, u64) {
        assert!(block < self.block_count, "block {block} outside the stripe");
        let unit = block / self.stripe_unit_blocks;
        let member_index = (unit % self.member_count) as usize;
        let member_block =
            (unit / self.member_count) * self.stripe_unit_blocks + block % self.stripe_unit_blocks;
        (member_index, member_block)
    }

    /// Whether every block of a copy from `source_first_block` to
    /// `destination_first_block` stays on its member: the two starts differ by a whole
    /// number of stripes (stripe unit x members). Only then can members copy by reference.
    pub fn copy_keeps_members(
        &self,
        source_first_block: u64,
        destination_first_block: u64,
    ) -> bool {
        let stripe_blocks = self.stripe_unit_blocks * self.member_count;
        source_first_block.abs_diff(destination_first_block) % stripe_blocks == 0
    }

    /// The per-member copies of a copy that keeps members (see
    /// [`StripeLayout::copy_keeps_members`]): for each member holding part of the range,
    /// (member, member source block, member destination block, blocks). A member's part
    /// of a block range is contiguous on the member, so each member gets one copy and
    /// keeps memmove semantics for overlapping ranges.
    pub fn split_copy(
        &self,
        source_first_block: u64,
        destination_first_block: u64,
        block_count: u64,
    ) -> Vec<(usize, u64, u64, u64)> {
        assert!(
            self.copy_keeps_members(source_first_block, destination_first_block),
            "a striped copy by reference keeps every block on its member"
        );
        let sources = self.split(source_first_block, block_count);
        let destinations = self.split(destination_first_block, block_count);
        let mut per_member: Vec<(usize, u64, u64, u64)> = Vec::new();
        for (source, destination) in sources.iter().zip(&destinations) {
            assert_eq!(source.member_index, destination.member_index);
            assert_eq!(source.block_count, destination.block_count);
            match per_member
                .iter_mut()
                .find(|part| part.0 == source.member_index)
            {
                Some(part) => {
                    assert_eq!(part.1 + part.3, source.member_first_block);
                    assert_eq!(part.2 + part.3, destination.member_first_block);
                    part.3 += source.block_count;
                }
                None => per_member.push((
                    source.member_index,
                    source.member_first_block,
                    destination.member_first_block,
                    source.block_count,
                )),
            }
        }
        per_member
    }

    /// Splits `block_count` blocks from `first_block` at stripe-unit boundaries, in
    /// request order.
    pub fn split(&self, first_block: u64, block_count: u64) -> Vec<Segment> {
        assert!(
            first_block + block_count <= self.block_count,
            "range {first_block}+{block_count} outside the stripe"
        );
        let mut segments = Vec::new();
        let mut request_offset_blocks = 0;
        while request_offset_blocks < block_count {
            let block = first_block + request_offset_blocks;
            let (member_index, member_first_block) = self.locate(block);
            let left_in_unit = self.stripe_unit_blocks - block % self.stripe_unit_blocks;
            let run_blocks = left_in_unit.min(block_count - request_offset_blocks);
            segments.push(Segment {
                member_index,
                member_first_block,
                request_offset_blocks,
                block_count: run_blocks,
            });
            request_offset_blocks += run_blocks;
        }
        segments
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, block_size_bytes: u32, block_count: u64) -> DeviceInfo {
        DeviceInfo {
            name: Arc::from(name),
            block_size_bytes,
            block_count,
            queue_depth: 8,
        }
    }

    #[test]
    fn blocks_map_round_robin_by_stripe_unit() {
        let members = [info("a", 512, 10), info("b", 512, 9), info("c", 512, 12)];
        let references: Vec<&DeviceInfo> = members.iter().collect();
        let layout = StripeLayout::new(&Arc::from("s"), &references, 1024).unwrap();
        assert_eq!(layout.block_count(), 3 * 8, "smallest member, whole units");
        // (stripe block, member, member block)
        for (block, member, member_block) in [
            (0, 0, 0),
            (1, 0, 1),
            (2, 1, 0),
            (3, 1, 1),
            (4, 2, 0),
            (5, 2, 1),
            (6, 0, 2),
            (13, 0, 5),
            (23, 2, 7),
        ] {
            assert_eq!(
                layout.locate(block),
                (member, member_block),
                "block {block}"
            );
        }
    }

    #[test]
    fn ranges_split_at_stripe_unit_boundaries() {
        let members = [info("a", 512, 64), info("b", 512, 64)];
        let references: Vec<&DeviceInfo> = members.iter().collect();
        let layout = StripeLayout::new(&Arc::from("s"), &references, 2048).unwrap();
        let segments = layout.split(3, 7);
        let expected = [(0, 3, 0, 1), (1, 0, 1, 4), (0, 4, 5, 2)];
        let found: Vec<(usize, u64, u64, u64)> = segments
            .iter()
            .map(|segment| {
                (
                    segment.member_index,
                    segment.member_first_block,
                    segment.request_offset_blocks,
                    segment.block_count,
                )
            })
            .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn bad_geometry_is_refused_with_a_clear_error() {
        let small = info("small", 512, 3);
        let big = info("big", 4096, 64);
        let normal = info("normal", 512, 64);
        // (members, stripe unit bytes, words the error must contain)
        let cases: [(Vec<&DeviceInfo>, u64, &str); 5] = [
            (vec![], 4096, "at least one member"),
            (
                vec![&normal, &big],
                4096,
                "member 1 (big) has 4096-byte blocks",
            ),
            (vec![&normal], 0, "positive multiple"),
            (vec![&normal], 1000, "positive multiple"),
            (
                vec![&normal, &small],
                2048,
                "less than one 4-block stripe unit",
            ),
        ];
        for (members, stripe_unit_bytes, words) in cases {
            let error =
                StripeLayout::new(&Arc::from("s9"), &members, stripe_unit_bytes).unwrap_err();
            assert_eq!(&*error.device, "s9");
            assert!(error.to_string().contains(words), "{error} lacks {words:?}");
        }
    }
}
