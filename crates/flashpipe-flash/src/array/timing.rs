//! The timing of a request on its channel: the per-channel bus scheduler (command
//! bursts before data, older before newer, rotating among dies), the die's array time,
//! the ECC decoder, the path back through the hops and the host link, and the ack.

use super::*;

impl FlashArray {
    /// Recomputes what die `die_index` offers its channel's scheduler, after any change
    /// to its queue, register or array.
    #[inline]
    pub(super) fn refresh_offer(&mut self, die_index: u32) {
        let offer = self.bus_candidate(die_index);
        self.offers[die_index as usize] = offer;
        self.offer_keys[die_index as usize] = offer.map_or(u128::MAX, |(class, age_ns, ..)| {
            u128::from(class) << 96 | u128::from(age_ns) << 32
        });
    }

    /// The bus work a die offers its channel's scheduler: (priority class, age, slot, work).
    pub(super) fn bus_candidate(&self, die_index: u32) -> Option<(u8, u64, u32, BusWork)> {
        let die = &self.dies[die_index as usize];
        let command = match die.waiting.front() {
            Some(queued) if die.array_slot.is_none() => {
                let register_limit = if queued.kind == CommandKind::Read && self.cache_read {
                    2
                } else {
                    1
                };
                (die.registers_out.len() < register_limit).then_some(match queued.kind {
                    CommandKind::Write if self.slot(queued.slot_index).copy_back_from.is_some() => {
                        (
                            1,
                            queued.admitted_ns,
                            queued.slot_index,
                            BusWork::CommandAndSpareIn,
                        )
                    }
                    CommandKind::Write => (
                        1,
                        queued.admitted_ns,
                        queued.slot_index,
                        BusWork::CommandAndDataIn,
                    ),
                    _ => (0, queued.admitted_ns, queued.slot_index, BusWork::Command),
                })
            }
            _ => None,
        };
        let data_out = die
            .registers_out
            .front()
            .map(|queued| (1, queued.admitted_ns, queued.slot_index, BusWork::DataOut));
        match (command, data_out) {
            (Some(command), Some(data_out)) => {
                if (command.0, command.1) <= (data_out.0, data_out.1) {
                    Some(command)
                } else {
                    Some(data_out)
                }
            }
            (command, data_out) => command.or(data_out),
        }
    }

    /// The position (within its channel) of the die whose offer wins: lowest priority
    /// class, then oldest, then first from `rotation` on. Each offer becomes one integer
    /// ordered the same way, so the choice is a minimum without unpredictable branches.
    pub(super) fn best_offer_position(&self, first_die: u32, rotation: u32) -> Option<u32> {
        let dies_per_channel = self.dies_per_channel;
        let keys = &self.offer_keys[first_die as usize..(first_die + dies_per_channel) as usize];
        let mut best = u128::MAX;
        for (position, &key) in keys.iter().enumerate() {
            let position = position as u32;
            let offset = if position >= rotation {
                position - rotation
            } else {
                position + dies_per_channel - rotation
            };
            best = best.min(key | u128::from(offset));
        }
        (best != u128::MAX).then(|| {
            let offset = best as u32;
            let position = rotation + offset;
            if position >= dies_per_channel {
                position - dies_per_channel
            } else {
                position
            }
        })
    }

    /// The scoreboard: grants an idle bus to the best candidate among its dies.
    #[inline]
    pub(super) fn schedule_bus(&mut self, channel_index: u32) {
        let channel = &self.channels[channel_index as usize];
        if channel.bus_work.is_some() || channel.held || channel.queued_count == 0 {
            return;
        }
        let dies_per_channel = self.dies_per_channel;
        let first_die = channel_index * dies_per_channel;
        let rotation = self.channels[channel_index as usize].rotation;
        let Some(position) = self.best_offer_position(first_die, rotation) else {
            return;
        };
        let (_, _, slot_index, work) =
            self.offers[(first_die + position) as usize].expect("the best offer exists");
        let timing = &self.config.timing;
        let busy_ns = match work {
            BusWork::Command => timing.command_address_ns,
            BusWork::CommandAndDataIn => timing.command_address_ns + timing.page_transfer_ns,
            BusWork::DataOut => timing.page_transfer_ns,
            BusWork::CommandAndSpareIn => {
                let spare_bytes = self.slot(slot_index).copy_back_spare_bytes;
                timing.command_address_ns
                    + (timing.page_transfer_ns * u64::from(spare_bytes))
                        .div_ceil(self.config.raw_page_bytes() as u64)
            }
        };
        if work != BusWork::DataOut {
            let die = &mut self.dies[(first_die + position) as usize];
            let popped = die.waiting.pop_front().map(|queued| queued.slot_index);
            assert_eq!(
                popped,
                Some(slot_index),
                "the scheduler takes a die's oldest request"
            );
            die.array_slot = Some(slot_index);
            self.channels[channel_index as usize].queued_count -= 1;
            self.refresh_offer(first_die + position);
        }
        let overhead_ns = self.bus_overhead_ns(work);
        let channel = &mut self.channels[channel_index as usize];
        channel.bus_work = Some((slot_index, work));
        channel.rotation = (position + 1) % dies_per_channel;
        channel.busy_ns += busy_ns + overhead_ns;
        let now_ns = self.now_ns();
        self.schedule(now_ns + busy_ns, EventKind::BusDone, slot_index);
    }

    #[inline]
    pub(super) fn bus_done(&mut self, slot_index: u32) {
        let now_ns = self.now_ns();
        let (channel_index, die_index, array_busy_ns, symbols) = {
            let slot = self.slot(slot_index);
            (slot.channel, slot.die, slot.array_busy_ns, slot.ecc_symbols)
        };
        let channel = &mut self.channels[channel_index as usize];
        let (busy_slot, work) = channel
            .bus_work
            .take()
            .expect("a bus that finished was busy");
        assert_eq!(busy_slot, slot_index);
        let overhead_ns = self.bus_overhead_ns(work);
        if overhead_ns > 0 {
            self.channels[channel_index as usize].held = true;
            self.schedule(now_ns + overhead_ns, EventKind::BusFree, channel_index);
        }
        match work {
            BusWork::Command | BusWork::CommandAndDataIn | BusWork::CommandAndSpareIn => {
                self.dies[die_index as usize].busy_ns += array_busy_ns;
                self.schedule(now_ns + array_busy_ns, EventKind::ArrayDone, slot_index);
            }
            BusWork::DataOut => {
                let popped = self.dies[die_index as usize]
                    .registers_out
                    .pop_front()
                    .map(|queued| queued.slot_index);
                self.channels[channel_index as usize].queued_count -= 1;
                assert_eq!(popped, Some(slot_index));
                self.refresh_offer(die_index);
                let timing = &self.config.timing;
                let decode_ns = timing.ecc_decode_ns
                    + timing.ecc_decode_ns_per_symbol_error * u64::from(symbols);
                let channel = &mut self.channels[channel_index as usize];
                let start_ns = now_ns.max(channel.decoder_free_ns);
                channel.decoder_free_ns = start_ns + decode_ns;
                let done_ns = channel.decoder_free_ns;
                self.schedule(done_ns, EventKind::DecodeDone, slot_index);
            }
        }
        self.schedule_bus(channel_index);
    }

    /// Bus time a grant holds its channel after its work: the bus overhead, once per page
    /// transferred (a read's data out, a write's data in), none after a command burst.
    #[inline]
    fn bus_overhead_ns(&self, work: BusWork) -> u64 {
        match work {
            BusWork::Command | BusWork::CommandAndSpareIn => 0,
            BusWork::CommandAndDataIn | BusWork::DataOut => {
                self.config.timing.bus_overhead_ns_per_page
            }
        }
    }

    /// The bus overhead after a transfer on `channel_index` ended: the bus is free again.
    #[inline]
    pub(super) fn bus_free(&mut self, channel_index: u32) {
        let channel = &mut self.channels[channel_index as usize];
        assert!(channel.held, "a bus freed after its overhead was held");
        channel.held = false;
        self.schedule_bus(channel_index);
    }

    #[inline]
    pub(super) fn array_done(&mut self, slot_index: u32) {
        let (channel_index, die_index, kind, device) = {
            let slot = self.slot(slot_index);
            (slot.channel, slot.die, slot.kind, slot.device)
        };
        let die = &mut self.dies[die_index as usize];
        assert_eq!(
            die.array_slot.take(),
            Some(slot_index),
            "the die was busy with this slot"
        );
        if kind == CommandKind::Read {
            let admitted_ns = self.slot(slot_index).admitted_ns;
            let die = &mut self.dies[die_index as usize];
            die.registers_out.push_back(QueuedWork {
                slot_index,
                admitted_ns,
                kind,
            });
            self.channels[channel_index as usize].queued_count += 1;
            self.refresh_offer(die_index);
        } else {
            self.refresh_offer(die_index);
            self.release_tag(device);
            self.schedule_return(slot_index, self.now_ns(), kind);
        }
        self.schedule_bus(channel_index);
    }

    #[inline]
    pub(super) fn decode_done(&mut self, slot_index: u32) {
        let device = self.slot(slot_index).device;
        self.release_tag(device);
        self.schedule_return(slot_index, self.now_ns(), CommandKind::Read);
    }

    #[inline]
    pub(super) fn schedule_return(&mut self, slot_index: u32, ready_ns: u64, kind: CommandKind) {
        let (host, device, carries_data) = {
            let slot = self.slot(slot_index);
            let carries_data =
                kind == CommandKind::Read && !matches!(slot.status, AckStatus::RuleViolation(_));
            (slot.host, slot.device, carries_data)
        };
        let attached = self.attached_device(host);
        let delivered_ns = if carries_data {
            let page_bytes = u64::from(self.config.geometry.page_data_bytes);
            let (head_ns, tail_ns) = self.book_links(device, attached, ready_ns, page_bytes);
            self.book_host_link(host, head_ns, tail_ns, page_bytes)
        } else {
            ready_ns + self.hops(host, device) * self.config.timing.hop_ns
        };
        self.schedule(
            delivered_ns + self.host_software_ns(kind),
            EventKind::Complete,
            slot_index,
        );
    }

    #[inline]
    pub(super) fn complete(&mut self, slot_index: u32) {
        let slot = self.slots[slot_index as usize].take().expect("live slot");
        self.free_slots.push(slot_index);
        let now_ns = self.now_ns();
        self.hosts[slot.host as usize].last_ack_ns = now_ns;
        let page_bytes = u64::from(self.config.geometry.page_data_bytes);
        self.latencies.record(
            slot.kind,
            now_ns - slot.submitted_ns,
            page_bytes,
            slot.status.is_ok(),
        );
        self.ready.push(Ack {
            tag: slot.tag,
            host: slot.host,
            kind: slot.kind,
            status: slot.status,
            data: slot.data,
            spare: slot.spare,
            submitted_ns: slot.submitted_ns,
            completed_ns: now_ns,
        });
    }
}
