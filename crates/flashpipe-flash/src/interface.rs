//! The raw flash interface of minFlash (section II.A): tagged page reads, page writes and
//! block erases addressed by (device, bus, chip, block, page), acknowledged out of order.

/// A physical flash address. `block` counts over dies x planes x blocks within the chip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlashAddress {
    /// Board in the chain.
    pub device: u32,
    /// Bus (channel) on the board.
    pub bus: u32,
    /// Chip (way) on the bus.
    pub chip: u32,
    /// Erase block in the chip.
    pub block: u32,
    /// Page in the block (ignored by erases).
    pub page: u32,
}

/// One command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlashCommand {
    /// ReadPage(tag, device, bus, chip, block, page).
    ReadPage {
        /// Where.
        address: FlashAddress,
    },
    /// WritePage(tag, device, bus, chip, block, page, data, spare).
    WritePage {
        /// Where.
        address: FlashAddress,
        /// Exactly one page of data (ignored by a timing-only array, which may get it empty).
        data: Vec<u8>,
        /// Up to the host's spare bytes; shorter spare is padded with 0xFF.
        spare: Vec<u8>,
    },
    /// EraseBlock(tag, device, bus, chip, block).
    EraseBlock {
        /// Where (the page is ignored).
        address: FlashAddress,
    },
    /// CopyBack(tag, from, to, spare): NAND's internal page move ("copy-back program with
    /// random data input"). The page at `from` is read into its die's register and
    /// programmed at `to`, in the same die and plane, without its data crossing the bus;
    /// only `spare` (the host spare bytes, rewritten) does. Refused unless the array's
    /// configuration allows copy-back (see docs/flash-model.md).
    CopyBack {
        /// The programmed page to move.
        from: FlashAddress,
        /// The erased page that receives it (the next in order of its block).
        to: FlashAddress,
        /// Up to the host's spare bytes for `to`; shorter spare is padded with 0xFF.
        spare: Vec<u8>,
    },
}

/// The three kinds of command, for statistics. A copy-back counts as a write: it programs
/// one page (its ack's kind is `Write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandKind {
    /// Page read.
    Read,
    /// Page write (a program or a copy-back).
    Write,
    /// Block erase.
    Erase,
}

impl FlashCommand {
    /// The command's address (a copy-back's destination, the page it programs).
    pub fn address(&self) -> FlashAddress {
        match self {
            FlashCommand::ReadPage { address }
            | FlashCommand::WritePage { address, .. }
            | FlashCommand::EraseBlock { address } => *address,
            FlashCommand::CopyBack { to, .. } => *to,
        }
    }

    /// Points every address of the command at `device` (a cluster node hands its own
    /// array, device 0, the requests the network addressed to the node's device id).
    pub fn set_device(&mut self, device: u32) {
        match self {
            FlashCommand::ReadPage { address }
            | FlashCommand::WritePage { address, .. }
            | FlashCommand::EraseBlock { address } => address.device = device,
            FlashCommand::CopyBack { from, to, .. } => {
                from.device = device;
                to.device = device;
            }
        }
    }

    /// The command's kind.
    pub fn kind(&self) -> CommandKind {
        match self {
            FlashCommand::ReadPage { .. } => CommandKind::Read,
            FlashCommand::WritePage { .. } | FlashCommand::CopyBack { .. } => CommandKind::Write,
            FlashCommand::EraseBlock { .. } => CommandKind::Erase,
        }
    }
}

/// A tagged request from one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlashRequest {
    /// The host's tag, echoed in the ack; unique among the host's requests in flight.
    pub tag: u64,
    /// Which host sends it (0-based); host `h` is attached to device `h % devices`.
    pub host: u32,
    /// What to do.
    pub command: FlashCommand,
}

/// A rule of the flash interface that a request broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleViolation {
    /// An address field is past the geometry.
    #[error("{field} {value} out of range (limit {limit})")]
    AddressOutOfRange {
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The first invalid value.
        limit: u64,
    },
    /// The page is already programmed: erase the block first.
    #[error("page {page} of block {block} is not erased")]
    NotErased {
        /// Block.
        block: u32,
        /// Page.
        page: u32,
    },
    /// Pages of a block must be programmed in order.
    #[error("page {page} programmed out of order: the block's next page is {expected_page}")]
    OutOfOrder {
        /// The next page in order.
        expected_page: u32,
        /// The page asked for.
        page: u32,
    },
    /// Data or spare of the wrong length.
    #[error("{field} of {length} bytes; expected {expected}")]
    WrongLength {
        /// `data` or `spare`.
        field: &'static str,
        /// Given length.
        length: usize,
        /// Expected (data) or maximum (spare) length.
        expected: usize,
    },
    /// A copy-back the array cannot carry out.
    #[error("copy-back refused: {refusal}")]
    CopyBackRefused {
        /// Why.
        refusal: CopyBackRefusal,
    },
}

/// Why a copy-back was refused (its destination's order and erase rules are reported as
/// [`RuleViolation::NotErased`] and [`RuleViolation::OutOfOrder`], as for a program).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CopyBackRefusal {
    /// The array's configuration does not offer copy-back (`copy_back = false`).
    #[error(
        "this flash configuration has no copy-back command; read and program the page instead"
    )]
    Unsupported,
    /// Source and destination are not in the same die and plane of one chip.
    #[error("source and destination must be in the same die and plane of one chip")]
    OtherPlane,
    /// The source page holds nothing to move (erased, or its block is bad).
    #[error("source page {page} of block {block} is not programmed")]
    SourceNotProgrammed {
        /// Block.
        block: u32,
        /// Page.
        page: u32,
    },
}

/// The status of an ack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckStatus {
    /// Done; for reads, the bits and symbols the ECC corrected.
    Ok {
        /// Flipped bits the ECC corrected.
        corrected_bits: u32,
        /// Symbols (bytes) the ECC corrected.
        corrected_symbols: u32,
    },
    /// A read had more errors than the ECC corrects; the data is returned uncorrected.
    Uncorrectable,
    /// A program or erase failed: the block is bad (factory-marked or grown).
    BadBlock,
    /// The request broke a rule and was not carried out.
    RuleViolation(RuleViolation),
}

impl AckStatus {
    /// A clean success.
    pub const CLEAN: AckStatus = AckStatus::Ok {
        corrected_bits: 0,
        corrected_symbols: 0,
    };

    /// True for `Ok`.
    pub fn is_ok(&self) -> bool {
        matches!(self, AckStatus::Ok { .. })
    }
}

/// Ack(tag, status), with the data of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// The request's tag.
    pub tag: u64,
    /// The request's host.
    pub host: u32,
    /// What kind of command it was.
    pub kind: CommandKind,
    /// The outcome.
    pub status: AckStatus,
    /// A read's page data (None for writes, erases, violations and timing-only arrays).
    pub data: Option<Vec<u8>>,
    /// A read's host spare bytes.
    pub spare: Option<Vec<u8>>,
    /// Virtual time of submission.
    pub submitted_ns: u64,
    /// Virtual time of completion.
    pub completed_ns: u64,
}

/// Why a request was not accepted at all.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The host already has its queue depth of requests in flight.
    #[error("host {host}: queue full ({queue_depth} requests in flight)")]
    QueueFull {
        /// The host.
        host: u32,
        /// Its queue depth.
        queue_depth: u32,
        /// The request, handed back.
        request: Box<FlashRequest>,
    },
    /// No such host.
    #[error("unknown host {host} (the array has {host_count})")]
    UnknownHost {
        /// The host asked for.
        host: u32,
        /// Hosts configured.
        host_count: u32,
        /// The request, handed back.
        request: Box<FlashRequest>,
    },
}
