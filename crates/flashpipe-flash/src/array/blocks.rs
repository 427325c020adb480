//! What an admitted request does to the medium: block rules and wear, page contents
//! with their ECC, injected bit flips and program times, reads decoded, writes and
//! erases applied (and journaled when the store keeps a journal).

use super::*;

impl FlashArray {
    pub(super) fn wear(&self, block_index: u64) -> BlockWear {
        let block = &self.blocks[block_index as usize];
        BlockWear {
            pe_cycles: block.pe_cycles,
            reads_since_erase: block.reads_since_erase,
            programmed_at_ns: block.programmed_at_ns,
        }
    }

    /// Appends the new state of the block at `address` to the image's journal (after a
    /// program wrote its page, or an erase), so a process death keeps it.
    pub(super) fn journal_block_of(&mut self, address: FlashAddress, write_now: bool) {
        let block_index = self
            .block_index(address)
            .expect("an admitted command has a valid address");
        let now_ns = self.now_ns();
        self.store.journal_block(
            block_index,
            &self.blocks[block_index as usize],
            now_ns,
            write_now,
        );
    }

    pub(super) fn page_index(&self, block_index: u64, page: u32) -> u64 {
        block_index * u64::from(self.config.geometry.pages_per_block) + u64::from(page)
    }

    pub(super) fn apply_read(
        &mut self,
        slot_index: u32,
        address: FlashAddress,
        generator: &mut SplitMix64,
    ) -> Result<u64, RuleViolation> {
        let block_index = self.block_index(address)?;
        let array_read_ns = self.config.timing.array_read_ns;
        let keeps_data = self.keeps_data();
        let data_bytes = self.config.geometry.page_data_bytes as usize;
        let spare_bytes = self.host_spare_bytes();
        let factory_bad = reliability::is_factory_bad(
            &self.config.reliability,
            self.options.seed,
            block_index,
            address.block,
        );
        let programmed = address.page < self.blocks[block_index as usize].next_page;
        if factory_bad || !programmed {
            if keeps_data {
                let mut spare = vec![0xFF; spare_bytes];
                if factory_bad && address.page == 0 && !spare.is_empty() {
                    spare[0] = 0x00;
                }
                let data = self.pool.take_filled(data_bytes, 0xFF);
                let slot = self.slot_mut(slot_index);
                slot.data = Some(data);
                slot.spare = Some(spare);
            }
            return Ok(array_read_ns);
        }
        let rber = reliability::raw_bit_error_rate(
            &self.config.reliability,
            self.wear(block_index),
            self.now_ns(),
        );
        self.blocks[block_index as usize].reads_since_erase += 1;
        let raw_bytes = self.config.raw_page_bytes();
        let flips = reliability::poisson(generator, rber * (raw_bytes * 8) as f64);
        let (status, symbols, data, spare) = if keeps_data {
            self.read_and_decode(block_index, address.page, flips, generator)
        } else {
            let (status, symbols) = self.judge_flips(flips, generator);
            (status, symbols, None, None)
        };
        let slot = self.slot_mut(slot_index);
        slot.status = status;
        slot.ecc_symbols = symbols;
        slot.data = data;
        slot.spare = spare;
        Ok(array_read_ns)
    }

    pub(super) fn flip_positions(
        &self,
        flips: u32,
        generator: &mut SplitMix64,
    ) -> Vec<(usize, u8)> {
        let raw_bits = (self.config.raw_page_bytes() * 8) as u64;
        (0..flips)
            .map(|_| {
                let bit = generator.below(raw_bits);
                ((bit / 8) as usize, 1u8 << (bit % 8))
            })
            .collect()
    }

    /// Status and corrected symbols of a read with `flips` bit errors, without data.
    pub(super) fn judge_flips(&self, flips: u32, generator: &mut SplitMix64) -> (AckStatus, u32) {
        if flips == 0 {
            return (AckStatus::CLEAN, 0);
        }
        let positions = self.flip_positions(flips, generator);
        Self::status_of(self.codec.judge_flips(&positions))
    }

    pub(super) fn status_of(judgement: crate::ecc::FlipJudgement) -> (AckStatus, u32) {
        match judgement.outcome {
            DecodeOutcome::Corrected { symbols } => (
                AckStatus::Ok {
                    corrected_bits: judgement.wrong_bits,
                    corrected_symbols: symbols,
                },
                symbols,
            ),
            DecodeOutcome::Uncorrectable => (AckStatus::Uncorrectable, 0),
        }
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn read_and_decode(
        &mut self,
        block_index: u64,
        page: u32,
        flips: u32,
        generator: &mut SplitMix64,
    ) -> (AckStatus, u32, Option<Vec<u8>>, Option<Vec<u8>>) {
        let mut raw = self.pool.take_filled(self.config.raw_page_bytes(), 0);
        let page_index = self.page_index(block_index, page);
        if self.store.read_page(page_index, &mut raw).is_err() {
            self.pool.give(raw);
            return (AckStatus::Uncorrectable, 0, None, None);
        }
        let positions = self.flip_positions(flips, generator);
        let (status, symbols) = match self.ecc_mode {
            EccMode::OutcomeModel => self.judge_read(&mut raw, &positions),
            EccMode::Decoder => self.decode_read(&mut raw, &positions),
        };
        let data_bytes = self.config.geometry.page_data_bytes as usize;
        let message_bytes = data_bytes + self.host_spare_bytes();
        let spare = raw[data_bytes..message_bytes].to_vec();
        raw.truncate(data_bytes);
        (status, symbols, Some(raw), Some(spare))
    }

    /// The outcome model on a read page: a correctable read returns the programmed bytes
    /// (what the decoder would give back), an uncorrectable one the bytes with every flip.
    pub(super) fn judge_read(&self, raw: &mut [u8], positions: &[(usize, u8)]) -> (AckStatus, u32) {
        if positions.is_empty() {
            return (AckStatus::CLEAN, 0);
        }
        let judgement = self.codec.judge_flips(positions);
        if judgement.outcome == DecodeOutcome::Uncorrectable {
            for &(byte, bit) in positions {
                raw[byte] ^= bit;
            }
        }
        Self::status_of(judgement)
    }

    /// The real decoder on a read page: flips applied, then every touched codeword decoded.
    pub(super) fn decode_read(
        &self,
        raw: &mut [u8],
        positions: &[(usize, u8)],
    ) -> (AckStatus, u32) {
        if positions.is_empty() {
            // No flips: no codeword is touched, nothing to decode (and no copies made).
            return (AckStatus::CLEAN, 0);
        }
        let message_bytes = self.codec.layout().message_bytes;
        if !self.store.stores_parity() {
            // What the page would hold with its parity: the programmed message encoded.
            self.codec.encode_in_place(raw);
        }
        let original = raw.to_vec();
        let mut touched: Vec<usize> = Vec::new();
        for &(byte, bit) in positions {
            raw[byte] ^= bit;
            if let Some(codeword) = self.codec.codeword_of_byte(byte) {
                if !touched.contains(&codeword) {
                    touched.push(codeword);
                }
            }
        }
        let corrupted = raw.to_vec();
        match self.codec.decode(raw, &touched) {
            DecodeOutcome::Corrected { symbols } => {
                assert!(
                    raw[..message_bytes] == original[..message_bytes] || symbols > 0,
                    "a decode that corrected nothing returned altered data"
                );
                let corrected_bits = corrupted
                    .iter()
                    .zip(raw.iter())
                    .map(|(before, after)| (before ^ after).count_ones())
                    .sum();
                (
                    AckStatus::Ok {
                        corrected_bits,
                        corrected_symbols: symbols,
                    },
                    symbols,
                )
            }
            DecodeOutcome::Uncorrectable => (AckStatus::Uncorrectable, 0),
        }
    }

    pub(super) fn program_time_ns(&self, page: u32, generator: &mut SplitMix64) -> u64 {
        let timing = &self.config.timing;
        let types = &timing.program_ns_by_page_type;
        let typical_ns = types[page as usize % types.len()];
        if generator.chance(timing.program_slow_fraction) {
            typical_ns + generator.below(timing.program_ns_max - typical_ns + 1)
        } else {
            typical_ns
        }
    }

    /// The raw page a program stores: data, host spare (0xFF after the host's bytes), parity
    /// (only where the store keeps it: an image; in memory the bytes after the message stay
    /// 0xFF). Built in `data`'s own vector (no copy when it has room for the raw page).
    pub(super) fn encoded_page(&self, data: Vec<u8>, spare: &[u8]) -> Vec<u8> {
        let message_bytes = self.codec.layout().message_bytes;
        let mut raw = data;
        raw.extend_from_slice(spare);
        assert!(raw.len() <= message_bytes, "data and spare fit the message");
        raw.resize(self.config.raw_page_bytes(), 0xFF);
        if self.store.stores_parity() {
            self.codec.encode_in_place(&mut raw);
        }
        raw
    }

    pub(super) fn apply_write(
        &mut self,
        slot_index: u32,
        address: FlashAddress,
        generator: &mut SplitMix64,
    ) -> Result<u64, RuleViolation> {
        let block_index = self.block_index(address)?;
        let program_ns = self.program_time_ns(address.page, generator);
        let slot = self.slot_mut(slot_index);
        let data = slot.data.take().unwrap_or_default();
        let spare = slot.spare.take().unwrap_or_default();
        if self.program_target_ready(slot_index, block_index, address)? {
            self.program_page(slot_index, block_index, generator, |array| {
                let raw = array.encoded_page(data, &spare);
                let page_index = array.page_index(block_index, address.page);
                array.store_page(page_index, raw)
            });
        }
        Ok(program_ns)
    }

    /// A copy-back: the page at `from` read into the die's register (tR) and programmed at
    /// `to` (tPROG) with the slot's spare and its parity recomputed. The model stores pages
    /// exact and draws bit errors at read, so the raw errors a real copy-back carries along
    /// uncorrected are not modelled; the source block's read count grows as for a read.
    pub(super) fn apply_copy_back(
        &mut self,
        slot_index: u32,
        from: FlashAddress,
        to: FlashAddress,
        generator: &mut SplitMix64,
    ) -> Result<u64, RuleViolation> {
        let from_index = self.block_index(from)?;
        let to_index = self.block_index(to)?;
        let busy_ns = self.config.timing.array_read_ns + self.program_time_ns(to.page, generator);
        let spare = self.slot_mut(slot_index).spare.take().unwrap_or_default();
        let source = self.blocks[from_index as usize];
        let source_bad = source.grown_bad || self.is_factory_bad(from);
        if source_bad || from.page >= source.next_page {
            return Err(RuleViolation::CopyBackRefused {
                refusal: CopyBackRefusal::SourceNotProgrammed {
                    block: from.block,
                    page: from.page,
                },
            });
        }
        if !self.program_target_ready(slot_index, to_index, to)? {
            return Ok(busy_ns);
        }
        self.blocks[from_index as usize].reads_since_erase += 1;
        self.program_page(slot_index, to_index, generator, |array| {
            let mut raw = array.pool.take_filled(array.config.raw_page_bytes(), 0);
            let source_page = array.page_index(from_index, from.page);
            array.store.read_page(source_page, &mut raw).is_ok() && {
                raw.truncate(array.config.geometry.page_data_bytes as usize);
                let raw = array.encoded_page(raw, &spare);
                let page_index = array.page_index(to_index, to.page);
                array.store_page(page_index, raw)
            }
        });
        Ok(busy_ns)
    }

    /// Writes one encoded page into the store, its freed buffer back to the pool; false when
    /// the store fails (the caller grows the block bad).
    fn store_page(&mut self, page_index: u64, raw: Vec<u8>) -> bool {
        match self.store.write_page(page_index, raw) {
            Ok(free) => {
                self.recycle(free);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether a program may go on at `address` (block `block_index`): a bad block acks
    /// `BadBlock` (false); a page already programmed, or one past the next, breaks the rules.
    fn program_target_ready(
        &mut self,
        slot_index: u32,
        block_index: u64,
        address: FlashAddress,
    ) -> Result<bool, RuleViolation> {
        let block = self.blocks[block_index as usize];
        if block.grown_bad || self.is_factory_bad(address) {
            self.slot_mut(slot_index).status = AckStatus::BadBlock;
            return Ok(false);
        }
        if address.page < block.next_page {
            return Err(RuleViolation::NotErased {
                block: address.block,
                page: address.page,
            });
        }
        if address.page > block.next_page {
            return Err(RuleViolation::OutOfOrder {
                expected_page: block.next_page,
                page: address.page,
            });
        }
        Ok(true)
    }

    /// Programs the next page of block `block_index`: a program failure drawn from the
    /// block's wear, or `store_page` (run only when the model keeps data) failing, grows the
    /// block bad and acks `BadBlock`; otherwise the block's next page moves on.
    fn program_page(
        &mut self,
        slot_index: u32,
        block_index: u64,
        generator: &mut SplitMix64,
        store_page: impl FnOnce(&mut FlashArray) -> bool,
    ) {
        let pe_cycles = self.blocks[block_index as usize].pe_cycles;
        let failure =
            reliability::operation_failure_probability(&self.config.reliability, pe_cycles);
        let programmed = !generator.chance(failure) && (!self.keeps_data() || store_page(self));
        if !programmed {
            self.blocks[block_index as usize].grown_bad = true;
            self.slot_mut(slot_index).status = AckStatus::BadBlock;
            return;
        }
        let now_ns = self.now_ns();
        let block = &mut self.blocks[block_index as usize];
        if block.next_page == 0 {
            block.programmed_at_ns = now_ns;
        }
        block.next_page += 1;
    }

    pub(super) fn apply_erase(
        &mut self,
        slot_index: u32,
        address: FlashAddress,
        generator: &mut SplitMix64,
    ) -> Result<u64, RuleViolation> {
        let block_index = self.block_index(address)?;
        let erase_ns = self.config.timing.erase_ns;
        let pages = u64::from(self.config.geometry.pages_per_block);
        let factory_bad = self.is_factory_bad(address);
        let reliability = &self.config.reliability;
        let block = &mut self.blocks[block_index as usize];
        if block.grown_bad || factory_bad {
            self.slot_mut(slot_index).status = AckStatus::BadBlock;
            return Ok(erase_ns);
        }
        let failure = reliability::operation_failure_probability(reliability, block.pe_cycles);
        block.pe_cycles += 1;
        if generator.chance(failure) {
            block.grown_bad = true;
            self.slot_mut(slot_index).status = AckStatus::BadBlock;
            return Ok(erase_ns);
        }
        block.next_page = 0;
        block.reads_since_erase = 0;
        block.programmed_at_ns = 0;
        self.store
            .erase_block(block_index * pages, pages, &mut self.pool);
        Ok(erase_ns)
    }

    /// Puts a buffer the store handed back on the free list.
    fn recycle(&mut self, free: Option<Vec<u8>>) {
        if let Some(buffer) = free {
            self.pool.give(buffer);
        }
    }
}
