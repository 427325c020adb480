//! The controller side of the array: a request accepted from its host (checked, its
//! write data across the host link, its hops), the controller tags of each device
//! (hosts served round-robin), and admission onto a die's queue.

use super::*;

impl FlashArray {
    pub(super) fn accept(&mut self, request: FlashRequest) {
        let now_ns = self.now_ns();
        let address = request.command.address();
        let kind = request.command.kind();
        let mut slot = Slot {
            tag: request.tag,
            address,
            host: request.host,
            kind,
            device: address.device,
            channel: 0,
            die: 0,
            submitted_ns: now_ns,
            admitted_ns: 0,
            array_busy_ns: 0,
            ecc_symbols: 0,
            status: AckStatus::CLEAN,
            data: None,
            spare: None,
            copy_back_from: None,
            copy_back_spare_bytes: 0,
        };
        let violation = self
            .check_address(address)
            .err()
            .or_else(|| match &request.command {
                FlashCommand::WritePage { data, spare, .. } => {
                    self.check_lengths(data, spare).err()
                }
                FlashCommand::CopyBack { from, to, spare } => {
                    self.check_copy_back(*from, *to, spare).err()
                }
                _ => None,
            });
        if let Some(violation) = violation {
            slot.status = AckStatus::RuleViolation(violation);
            let slot_index = self.store_slot(slot);
            self.schedule(
                now_ns + self.host_software_ns(kind),
                EventKind::Complete,
                slot_index,
            );
            return;
        }
        slot.channel = address.device * self.config.geometry.channels + address.bus;
        slot.die = slot.channel * self.config.dies_per_channel()
            + address.chip * self.config.geometry.dies
            + address.block / (self.config.geometry.planes * self.config.geometry.blocks_per_plane);
        let mut copy_back_spare_bytes = None;
        match request.command {
            FlashCommand::WritePage { data, spare, .. } => {
                slot.data = Some(data);
                slot.spare = Some(spare);
            }
            FlashCommand::CopyBack { from, spare, .. } => {
                copy_back_spare_bytes = Some(spare.len() as u64);
                slot.copy_back_from = Some(from);
                slot.copy_back_spare_bytes = spare.len() as u32;
                slot.spare = Some(spare);
            }
            _ => {}
        }
        let page_bytes = u64::from(self.config.geometry.page_data_bytes);
        let arrival_ns = match (kind, copy_back_spare_bytes) {
            (CommandKind::Write, Some(spare_bytes)) => {
                // Only the spare bytes travel: across the host link, then the hops.
                let sent_ns = self.book_host_link(request.host, now_ns, now_ns, spare_bytes);
                let attached = self.attached_device(request.host);
                self.book_links(attached, address.device, sent_ns, spare_bytes)
                    .1
            }
            (CommandKind::Write, None) => {
                let encoded_ns = self.book_host_link(request.host, now_ns, now_ns, page_bytes)
                    + self.config.timing.ecc_encode_ns;
                let attached = self.attached_device(request.host);
                self.book_links(attached, address.device, encoded_ns, page_bytes)
                    .1
            }
            _ => now_ns + self.hops(request.host, address.device) * self.config.timing.hop_ns,
        };
        let slot_index = self.store_slot(slot);
        if arrival_ns == now_ns {
            self.arrive(slot_index);
        } else {
            self.schedule(arrival_ns, EventKind::Arrive, slot_index);
        }
    }

    pub(super) fn host_software_ns(&self, kind: CommandKind) -> u64 {
        match kind {
            CommandKind::Read => self.config.timing.host_software_read_ns,
            _ => self.config.timing.host_software_write_ns,
        }
    }

    /// The device `host` is attached to (devices in a line, hosts dealt round them).
    pub(super) fn attached_device(&self, host: u32) -> u32 {
        host % self.config.geometry.devices
    }

    pub(super) fn hops(&self, host: u32, device: u32) -> u64 {
        u64::from(self.attached_device(host).abs_diff(device))
    }

    /// Books `bytes` across the link directions from device `from` to device `to`, the
    /// first byte ready at `ready_ns`; returns when the first and the last byte reach
    /// `to`. Each direction carries one message at a time at the link rate; a hop starts
    /// forwarding `hop_ns` after the first byte reached it (cut-through), never finishing
    /// before the last byte came in. Without a link rate a hop adds `hop_ns` only.
    pub(super) fn book_links(
        &mut self,
        from: u32,
        to: u32,
        ready_ns: u64,
        bytes: u64,
    ) -> (u64, u64) {
        let timing = &self.config.timing;
        let hop_ns = timing.hop_ns;
        let rate = timing.link_bytes_per_second;
        if rate == 0 || from == to {
            let at_ns = ready_ns + u64::from(from.abs_diff(to)) * hop_ns;
            return (at_ns, at_ns);
        }
        let transfer_ns = (bytes * 1_000_000_000).div_ceil(rate);
        let (mut head_ns, mut tail_ns) = (ready_ns, ready_ns);
        let mut node = from;
        while node != to {
            let (next, direction) = if to > node {
                (node + 1, 2 * node)
            } else {
                (node - 1, 2 * (node - 1) + 1)
            };
            let free_ns = &mut self.link_free_ns[direction as usize];
            let start_ns = head_ns.max(*free_ns);
            let finish_ns = (start_ns + transfer_ns).max(tail_ns);
            *free_ns = finish_ns;
            head_ns = start_ns + hop_ns;
            tail_ns = finish_ns + hop_ns;
            node = next;
        }
        (head_ns, tail_ns)
    }

    /// Books `bytes` on `host`'s link, the first byte there at `first_ns` and the last at
    /// `last_ns`; returns when the last byte has crossed it.
    pub(super) fn book_host_link(
        &mut self,
        host: u32,
        first_ns: u64,
        last_ns: u64,
        bytes: u64,
    ) -> u64 {
        let rate = self.config.timing.host_link_bytes_per_second;
        let transfer_ns = (bytes * 1_000_000_000).div_ceil(rate);
        let link = &mut self.hosts[host as usize];
        let start_ns = first_ns.max(link.link_free_ns);
        link.link_free_ns = (start_ns + transfer_ns).max(last_ns);
        link.link_busy_ns += transfer_ns;
        link.link_free_ns
    }

    pub(super) fn check_address(&self, address: FlashAddress) -> Result<(), RuleViolation> {
        let geometry = &self.config.geometry;
        for (field, value, limit) in [
            ("device", address.device, geometry.devices),
            ("bus", address.bus, geometry.channels),
            ("chip", address.chip, geometry.ways),
            ("block", address.block, self.config.blocks_per_way()),
            ("page", address.page, geometry.pages_per_block),
        ] {
            if value >= limit {
                return Err(RuleViolation::AddressOutOfRange {
                    field,
                    value: u64::from(value),
                    limit: u64::from(limit),
                });
            }
        }
        Ok(())
    }

    /// The rules of a copy-back that need no block state: allowed by the configuration,
    /// both addresses valid, in the same die and plane of one chip, spare within the host's.
    pub(super) fn check_copy_back(
        &self,
        from: FlashAddress,
        to: FlashAddress,
        spare: &[u8],
    ) -> Result<(), RuleViolation> {
        if !self.config.timing.copy_back {
            return Err(RuleViolation::CopyBackRefused {
                refusal: CopyBackRefusal::Unsupported,
            });
        }
        self.check_address(from)?;
        self.check_address(to)?;
        let blocks_per_plane = self.config.geometry.blocks_per_plane;
        let same_plane = (
            from.device,
            from.bus,
            from.chip,
            from.block / blocks_per_plane,
        ) == (to.device, to.bus, to.chip, to.block / blocks_per_plane);
        if !same_plane {
            return Err(RuleViolation::CopyBackRefused {
                refusal: CopyBackRefusal::OtherPlane,
            });
        }
        self.check_spare_length(spare)
    }

    pub(super) fn check_lengths(&self, data: &[u8], spare: &[u8]) -> Result<(), RuleViolation> {
        let page_bytes = self.config.geometry.page_data_bytes as usize;
        let data_ok = data.len() == page_bytes || (!self.keeps_data() && data.is_empty());
        if !data_ok {
            return Err(RuleViolation::WrongLength {
                field: "data",
                length: data.len(),
                expected: page_bytes,
            });
        }
        self.check_spare_length(spare)
    }

    /// A spare area of at most the host's spare bytes.
    fn check_spare_length(&self, spare: &[u8]) -> Result<(), RuleViolation> {
        if spare.len() > self.host_spare_bytes() {
            return Err(RuleViolation::WrongLength {
                field: "spare",
                length: spare.len(),
                expected: self.host_spare_bytes(),
            });
        }
        Ok(())
    }

    pub(super) fn block_index(&self, address: FlashAddress) -> Result<u64, RuleViolation> {
        self.check_address(address)?;
        let geometry = &self.config.geometry;
        let way_index = (u64::from(address.device) * u64::from(geometry.channels)
            + u64::from(address.bus))
            * u64::from(geometry.ways)
            + u64::from(address.chip);
        Ok(way_index * u64::from(self.config.blocks_per_way()) + u64::from(address.block))
    }

    pub(super) fn store_slot(&mut self, slot: Slot) -> u32 {
        match self.free_slots.pop() {
            Some(index) => {
                self.slots[index as usize] = Some(slot);
                index
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        }
    }

    pub(super) fn slot(&self, index: u32) -> &Slot {
        self.slots[index as usize].as_ref().expect("live slot")
    }

    pub(super) fn slot_mut(&mut self, index: u32) -> &mut Slot {
        self.slots[index as usize].as_mut().expect("live slot")
    }

    #[inline]
    pub(super) fn arrive(&mut self, slot_index: u32) {
        let (device_index, host) = {
            let slot = self.slot(slot_index);
            (slot.device as usize, slot.host as usize)
        };
        let device = &mut self.devices[device_index];
        if device.free_tags > 0 {
            device.free_tags -= 1;
            self.admit(slot_index);
        } else {
            device.waiting_by_host[host].push_back(slot_index);
        }
    }

    #[inline]
    pub(super) fn release_tag(&mut self, device_index: u32) {
        let host_count = self.options.host_count;
        let device = &mut self.devices[device_index as usize];
        for offset in 0..host_count {
            let host = (device.host_rotation + offset) % host_count;
            if let Some(slot_index) = device.waiting_by_host[host as usize].pop_front() {
                device.host_rotation = (host + 1) % host_count;
                self.admit(slot_index);
                return;
            }
        }
        device.free_tags += 1;
        assert!(device.free_tags <= self.config.timing.controller_queue_depth);
    }

    #[inline]
    pub(super) fn admit(&mut self, slot_index: u32) {
        let address = self.slot(slot_index).address;
        let now_ns = self.now_ns();
        self.operation_counter += 1;
        let mut generator = SplitMix64::new(
            self.options.seed
                ^ self
                    .operation_counter
                    .wrapping_mul(flashpipe_device::random::GOLDEN_GAMMA),
        );
        let kind = self.slot(slot_index).kind;
        let outcome = match kind {
            CommandKind::Read => self.apply_read(slot_index, address, &mut generator),
            CommandKind::Write => match self.slot(slot_index).copy_back_from {
                Some(from) => self.apply_copy_back(slot_index, from, address, &mut generator),
                None => self.apply_write(slot_index, address, &mut generator),
            },
            CommandKind::Erase => self.apply_erase(slot_index, address, &mut generator),
        };
        if outcome.is_ok() && kind != CommandKind::Read {
            // A clean program's record may wait (it is written before its ack leaves);
            // an erase's goes out at once, ahead of any program into the erased block.
            let clean_program =
                kind == CommandKind::Write && self.slot(slot_index).status == AckStatus::CLEAN;
            self.journal_block_of(address, !clean_program);
        }
        let slot = self.slot_mut(slot_index);
        slot.admitted_ns = now_ns;
        match outcome {
            Ok(array_busy_ns) => {
                slot.array_busy_ns = array_busy_ns;
                let die = slot.die;
                let channel = slot.channel;
                let work = QueuedWork {
                    slot_index,
                    admitted_ns: now_ns,
                    kind: slot.kind,
                };
                self.dies[die as usize].waiting.push_back(work);
                self.refresh_offer(die);
                self.channels[channel as usize].queued_count += 1;
                self.schedule_bus(channel);
            }
            Err(violation) => {
                slot.status = AckStatus::RuleViolation(violation);
                let device = slot.device;
                let kind = slot.kind;
                self.release_tag(device);
                self.schedule_return(slot_index, now_ns, kind);
            }
        }
    }
}
