//! Property test: random request sequences on striped devices of random geometry
//! (member count, stripe unit, member sizes and queue depths, RAM or simulated members)
//! behave like one plain in-memory disk, and submission order is kept when asked for.

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::sim::{SimDiskConfig, SimWorld};
use flashpipe_device::{BlockDevice, Completion, IoBuf, RamDisk, Request};
use proptest::prelude::*;

const BLOCK_SIZE_BYTES: usize = 512;

#[derive(Debug, Clone)]
struct Geometry {
    member_count: usize,
    stripe_unit_blocks: u64,
    member_blocks: Vec<u64>,
    member_queue_depth: u32,
    queue_depth: u32,
    in_submission_order: bool,
    simulated_members: bool,
    seed: u64,
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Write { start: u64, blocks: u64, byte: u8 },
    Read { start: u64, blocks: u64 },
    Trim { start: u64, blocks: u64 },
    Flush,
}

fn geometry() -> impl Strategy<Value = Geometry> {
    (
        1usize..=4,
        1u64..=4,
        1u32..=4,
        1u32..=8,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_flat_map(
            |(member_count, unit, member_qd, qd, order, simulated, seed)| {
                proptest::collection::vec(unit..=40, member_count).prop_map(move |member_blocks| {
                    Geometry {
                        member_count,
                        stripe_unit_blocks: unit,
                        member_blocks,
                        member_queue_depth: member_qd,
                        queue_depth: qd,
                        in_submission_order: order,
                        simulated_members: simulated,
                        seed,
                    }
                })
            },
        )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (any::<u64>(), 1u64..=12, any::<u8>()).prop_map(|(start, blocks, byte)| Step::Write { start, blocks, byte }),
        4 => (any::<u64>(), 1u64..=12).prop_map(|(start, blocks)| Step::Read { start, blocks }),
        1 => (any::<u64>(), 0u64..=6).prop_map(|(start, blocks)| Step::Trim { start, blocks }),
        1 => Just(Step::Flush),
    ]
}

fn build(geometry: &Geometry) -> StripedDevice {
    let world = SimWorld::new(geometry.seed);
    let members: Vec<Box<dyn BlockDevice>> = geometry
        .member_blocks
        .iter()
        .enumerate()
        .map(|(index, &blocks)| {
            let name = format!("m{index}");
            if geometry.simulated_members {
                let config = SimDiskConfig {
                    queue_depth: geometry.member_queue_depth,
                    parallelism: 1 + index as u32,
                    latency_ns: 5_000 * (index as u64 + 1),
                    ..SimDiskConfig::default_for_tests(&name, BLOCK_SIZE_BYTES as u32, blocks)
                };
                Box::new(world.add_disk(config).unwrap()) as Box<dyn BlockDevice>
            } else {
                let disk = RamDisk::new(
                    &name,
                    BLOCK_SIZE_BYTES as u32,
                    blocks,
                    geometry.member_queue_depth,
                );
                Box::new(disk.unwrap()) as Box<dyn BlockDevice>
            }
        })
        .collect();
    let order = if geometry.in_submission_order {
        CompletionOrder::Submission
    } else {
        CompletionOrder::AsCompleted
    };
    let stripe_unit_bytes = geometry.stripe_unit_blocks * BLOCK_SIZE_BYTES as u64;
    StripedDevice::new(
        "prop",
        members,
        stripe_unit_bytes,
        order,
        geometry.queue_depth,
    )
    .unwrap()
}

/// A request in flight: its block range, whether it changes data, and for reads the
/// model's bytes at submission.
struct Outstanding {
    range: (u64, u64),
    changes_data: bool,
    expected: Option<Vec<u8>>,
}

struct Runner {
    device: StripedDevice,
    model: Vec<u8>,
    outstanding: std::collections::BTreeMap<u64, Outstanding>,
    next_tag: u64,
    last_delivered_tag: Option<u64>,
    in_submission_order: bool,
}

impl Runner {
    fn reap_all(&mut self) -> Result<(), TestCaseError> {
        let mut completions = Vec::new();
        while self.device.in_flight() > 0 {
            self.device.wait_completions(&mut completions).unwrap();
            for completion in completions.drain(..) {
                self.check(completion)?;
            }
        }
        prop_assert!(self.outstanding.is_empty());
        Ok(())
    }

    fn check(&mut self, completion: Completion) -> Result<(), TestCaseError> {
        prop_assert!(completion.status.is_ok(), "{:?}", completion.status);
        if self.in_submission_order {
            prop_assert!(self
                .last_delivered_tag
                .is_none_or(|last| last < completion.tag));
        }
        self.last_delivered_tag = Some(completion.tag);
        let outstanding = self.outstanding.remove(&completion.tag).expect("known tag");
        if let Some(expected) = outstanding.expected {
            prop_assert!(
                completion.buffer.unwrap()[..] == expected[..],
                "read tag {} differs",
                completion.tag
            );
        }
        Ok(())
    }

    fn conflicts(&self, range: (u64, u64), changes_data: bool) -> bool {
        self.outstanding.values().any(|other| {
            (changes_data || other.changes_data)
                && range.0 < other.range.1
                && other.range.0 < range.1
        })
    }

    fn run(&mut self, step: Step) -> Result<(), TestCaseError> {
        let capacity = self.device.info().block_count;
        let clamp = |start: u64, blocks: u64| {
            let first = start % capacity;
            (first, blocks.min(capacity - first))
        };
        let (request, range, changes_data) = match step {
            Step::Write {
                start,
                blocks,
                byte,
            } => {
                let (first, blocks) = clamp(start, blocks);
                let buffer = IoBuf::from_slice(&vec![byte; blocks as usize * BLOCK_SIZE_BYTES]);
                (
                    Request::write(self.next_tag, first, buffer),
                    (first, first + blocks),
                    true,
                )
            }
            Step::Read { start, blocks } => {
                let (first, blocks) = clamp(start, blocks);
                let buffer = IoBuf::zeroed(blocks as usize * BLOCK_SIZE_BYTES);
                (
                    Request::read(self.next_tag, first, buffer),
                    (first, first + blocks),
                    false,
                )
            }
            Step::Trim { start, blocks } => {
                let (first, blocks) = clamp(start, blocks);
                (
                    Request::trim(self.next_tag, first, blocks),
                    (first, first + blocks),
                    true,
                )
            }
            Step::Flush => (Request::flush(self.next_tag), (0, 0), false),
        };
        if self.conflicts(range, changes_data)
            || self.device.in_flight() >= self.device.info().queue_depth as usize
        {
            self.reap_all()?;
        }
        let bytes = (range.0 as usize * BLOCK_SIZE_BYTES)..(range.1 as usize * BLOCK_SIZE_BYTES);
        let expected = match &step {
            Step::Read { .. } => Some(self.model[bytes.clone()].to_vec()),
            Step::Write { byte, .. } => {
                self.model[bytes].fill(*byte);
                None
            }
            Step::Trim { .. } => {
                self.model[bytes].fill(0);
                None
            }
            Step::Flush => None,
        };
        self.outstanding.insert(
            self.next_tag,
            Outstanding {
                range,
                changes_data,
                expected,
            },
        );
        self.next_tag += 1;
        self.device.submit(request).unwrap();
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn striped_devices_behave_like_one_plain_disk(
        geometry in geometry(),
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let device = build(&geometry);
        let smallest = *geometry.member_blocks.iter().min().unwrap();
        let expected_blocks = geometry.member_count as u64 * (smallest / geometry.stripe_unit_blocks) * geometry.stripe_unit_blocks;
        prop_assert_eq!(device.info().block_count, expected_blocks);
        let mut runner = Runner {
            model: vec![0; device.info().block_count as usize * BLOCK_SIZE_BYTES],
            device,
            outstanding: Default::default(),
            next_tag: 0,
            last_delivered_tag: None,
            in_submission_order: geometry.in_submission_order,
        };
        for step in steps {
            runner.run(step)?;
        }
        runner.reap_all()?;
        let capacity = runner.device.info().block_count;
        runner.run(Step::Read { start: 0, blocks: capacity })?;
        runner.reap_all()?;
    }
}
