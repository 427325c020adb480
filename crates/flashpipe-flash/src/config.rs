//! Flash array configuration: geometry, timing and reliability, read from TOML presets.
//!
//! Three presets ship inside the crate (`presets/*.toml`), each field citing its source
//! in a comment: `minflash` (minFlash, seed 004), `rad` (RAD, seed 001) and `tlc` (a
//! modern TLC device with lower/middle/upper page latencies). A user may write their own
//! file; every malformed file is refused with the line of the fault.

use serde::{Deserialize, Serialize};

use crate::ecc::{CODEWORD_DATA_BYTES, CODEWORD_PARITY_BYTES};

/// Largest preset file read: 1 MiB.
pub const MAX_PRESET_FILE_BYTES: u64 = 1 << 20;
/// Most boards in one array (`geometry.devices`).
pub const MAX_DEVICES: u32 = 64;
/// Most channels (buses) per board (`geometry.channels`).
pub const MAX_CHANNELS: u32 = 64;
/// Most ways (chips) per channel (`geometry.ways`).
pub const MAX_WAYS: u32 = 64;
/// Most dies per chip (`geometry.dies`).
pub const MAX_DIES: u32 = 16;
/// Most planes per die (`geometry.planes`).
pub const MAX_PLANES: u32 = 16;
/// Most erase blocks per plane (`geometry.blocks_per_plane`).
pub const MAX_BLOCKS_PER_PLANE: u32 = 1 << 20;
/// Most pages per erase block (`geometry.pages_per_block`).
pub const MAX_PAGES_PER_BLOCK: u32 = 4096;
/// Largest page (`geometry.page_data_bytes`): 64 KiB.
pub const MAX_PAGE_DATA_BYTES: u32 = 1 << 16;
/// Largest spare area (`geometry.page_spare_bytes`): 16 KiB.
pub const MAX_PAGE_SPARE_BYTES: u32 = 1 << 14;
/// Most dies in the whole array (devices x channels x ways x dies): the model keeps state per die.
pub const MAX_TOTAL_DIES: u64 = 1 << 16;
/// Most erase blocks in the whole array: the model keeps 24 bytes of state per block (96 MiB at most).
pub const MAX_TOTAL_BLOCKS: u64 = 1 << 22;
/// Longest latency any timing field may give: 10 seconds, so that sums of latencies never
/// overflow the 64-bit virtual clock.
pub const MAX_OPERATION_NS: u64 = 10_000_000_000;
/// Most page types in `program_ns_by_page_type` (SLC 1, MLC 2, TLC 3, QLC 4, PLC 5).
pub const MAX_PAGE_TYPES: usize = 8;
/// Fastest host link (`host_link_bytes_per_second`): 10^12 bytes per second.
pub const MAX_HOST_LINK_BYTES_PER_SECOND: u64 = 1_000_000_000_000;
/// Most controller tags per board (`controller_queue_depth`).
pub const MAX_CONTROLLER_QUEUE_DEPTH: u32 = 1 << 16;
/// Highest rated endurance (`rated_pe_cycles`).
pub const MAX_RATED_PE_CYCLES: u32 = 10_000_000;
/// Largest wear exponent (`wear_exponent`, `grown_bad_exponent`).
pub const MAX_WEAR_EXPONENT: f64 = 16.0;

/// Why a configuration could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not valid TOML or a field has the wrong type or is missing.
    #[error("{source_name}:{line}: {message}")]
    Malformed {
        /// The file or preset name.
        source_name: String,
        /// 1-based line of the fault.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A field parses but its value is unusable.
    #[error("{source_name}:{line}: field `{field}`: {message}")]
    Invalid {
        /// The file or preset name.
        source_name: String,
        /// 1-based line where the field is set (0 if it could not be found).
        line: usize,
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// No preset has this name.
    #[error("unknown preset `{name}` (known: minflash, minflash-rack, rad, tlc)")]
    UnknownPreset {
        /// The name asked for.
        name: String,
    },
    /// The file could not be read.
    #[error("cannot read {path}: {detail}")]
    Unreadable {
        /// The path.
        path: String,
        /// The operating system's message.
        detail: String,
    },
}

/// The array's shape. The address of a page is (device, channel, way, block, page) where
/// `block` counts over dies x planes x blocks_per_plane within one way (chip).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashGeometry {
    /// Boards linked in a chain (minFlash's inter-controller network).
    pub devices: u32,
    /// Buses per device.
    pub channels: u32,
    /// Chips per bus.
    pub ways: u32,
    /// Dies per chip; each die is an independent array.
    pub dies: u32,
    /// Planes per die (address space only).
    pub planes: u32,
    /// Erase blocks per plane.
    pub blocks_per_plane: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// User data per page.
    pub page_data_bytes: u32,
    /// Out-of-band bytes per page (ECC parity plus the host's spare bytes).
    pub page_spare_bytes: u32,
}

/// Latencies of the chips, the controller and the host link, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashTiming {
    /// Bus time of one command/address burst.
    pub command_address_ns: u64,
    /// Array read (tR): cells to the page register.
    pub array_read_ns: u64,
    /// Bus time to move one whole page (data plus spare) between register and controller.
    pub page_transfer_ns: u64,
    /// Typical program time (tPROG) by page type; page `p` has type `p % len`.
    pub program_ns_by_page_type: Vec<u64>,
    /// Share of programs that take longer than typical, uniformly up to `program_ns_max`.
    pub program_slow_fraction: f64,
    /// Longest program time.
    pub program_ns_max: u64,
    /// Block erase (tBERS).
    pub erase_ns: u64,
    /// Whether a chip may start the next array read while its previous page is still on the bus.
    pub cache_read: bool,
    /// ECC decode of one page with no errors.
    pub ecc_decode_ns: u64,
    /// Extra decode time per corrected symbol.
    pub ecc_decode_ns_per_symbol_error: u64,
    /// ECC encode of one page.
    pub ecc_encode_ns: u64,
    /// Host link (PCIe) data rate, shared by all requests of one host.
    pub host_link_bytes_per_second: u64,
    /// Fixed host-side latency of a read (driver, interrupts, DMA set-up).
    pub host_software_read_ns: u64,
    /// Fixed host-side latency of a write.
    pub host_software_write_ns: u64,
    /// One inter-controller hop, each way.
    pub hop_ns: u64,
    /// Bus time each page transfer holds its channel after the page has moved: chip
    /// status polling, command and address cycles of the scheduler and its turnaround
    /// between grants. It lowers what a busy bus carries, not a lone request's latency
    /// (the page goes on to the decoder when its transfer ends). 0, the default: none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bus_overhead_ns_per_page: u64,
    /// Usable data rate of the inter-controller links between two neighbouring devices,
    /// each direction (bytes per second): a page crossing a hop holds that direction for
    /// its bytes at this rate (cut-through: the next hop starts after `hop_ns`).
    /// 0, the default: links add latency only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub link_bytes_per_second: u64,
    /// Controller tags per device: requests it executes at once.
    pub controller_queue_depth: u32,
    /// Whether the chips offer copy-back (an internal page move within a die and plane,
    /// only the spare bytes on the bus). false, the default: the command is refused.
    #[serde(default, skip_serializing_if = "is_false")]
    pub copy_back: bool,
}

/// Parameters of the error, wear and bad-block model (see docs/flash-model.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashReliability {
    /// Program/erase cycles the chips are rated for.
    pub rated_pe_cycles: u32,
    /// Raw bit error rate of a fresh block.
    pub base_rber: f64,
    /// Extra raw bit error rate at rated wear.
    pub wear_rber_at_rated: f64,
    /// Exponent of the wear term.
    pub wear_exponent: f64,
    /// Raw bit error rate added per hour since programming (scaled by wear).
    pub retention_rber_per_hour: f64,
    /// Raw bit error rate added per read of the block since its erase.
    pub read_disturb_rber_per_read: f64,
    /// Share of blocks bad when the chip ships.
    pub factory_bad_block_fraction: f64,
    /// Probability that one program or erase fails at rated wear.
    pub grown_bad_probability_at_rated: f64,
    /// Exponent of the failure probability in wear.
    pub grown_bad_exponent: f64,
}

/// A whole configuration: a preset or a user's file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashConfig {
    /// Name for reports.
    pub name: String,
    /// Shape.
    pub geometry: FlashGeometry,
    /// Latencies.
    pub timing: FlashTiming,
    /// Errors and wear.
    pub reliability: FlashReliability,
}

const MINFLASH_TOML: &str = include_str!("../presets/minflash.toml");
const RAD_TOML: &str = include_str!("../presets/rad.toml");
const TLC_TOML: &str = include_str!("../presets/tlc.toml");
/// What `minflash-rack` adds to `minflash`: its opening comment and `[timing]` lines.
const MINFLASH_RACK_TOML: &str = include_str!("../presets/minflash-rack.toml");

/// The names of the presets shipped with the crate.
pub const PRESET_NAMES: [&str; 4] = ["minflash", "minflash-rack", "rad", "tlc"];

/// The `minflash-rack` preset as one TOML text: the `minflash` file under its own name,
/// with the rack file's `[timing]` lines added to the `[timing]` table.
fn minflash_rack_text() -> String {
    let (_, timing_lines) = MINFLASH_RACK_TOML
        .split_once("[timing]\n")
        .expect("the minflash-rack file has a [timing] table");
    MINFLASH_TOML
        .replacen("name = \"minflash\"", "name = \"minflash-rack\"", 1)
        .replacen("[timing]\n", &format!("[timing]\n{timing_lines}"), 1)
}

/// A shipped preset as `flashpipe sim presets` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PresetListing {
    /// Its name (`--preset NAME`, `flash:NAME:IMAGE`).
    pub name: &'static str,
    /// Where its numbers come from: the comment lines that open its file.
    pub source: String,
}

/// Every shipped preset with its source, in [`PRESET_NAMES`] order.
pub fn preset_listings() -> Vec<PresetListing> {
    [MINFLASH_TOML, MINFLASH_RACK_TOML, RAD_TOML, TLC_TOML]
        .iter()
        .zip(PRESET_NAMES)
        .map(|(text, name)| PresetListing {
            name,
            source: text
                .lines()
                .map_while(|line| line.strip_prefix('#'))
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" "),
        })
        .collect()
}

impl FlashConfig {
    /// A shipped preset by name.
    pub fn preset(name: &str) -> Result<FlashConfig, ConfigError> {
        let text = match name {
            "minflash" => MINFLASH_TOML,
            "minflash-rack" => return FlashConfig::from_toml(&minflash_rack_text(), name),
            "rad" => RAD_TOML,
            "tlc" => TLC_TOML,
            _ => {
                return Err(ConfigError::UnknownPreset {
                    name: name.to_string(),
                })
            }
        };
        FlashConfig::from_toml(text, name)
    }

    /// A preset name or, failing that, a path to a TOML file.
    pub fn preset_or_file(name_or_path: &str) -> Result<FlashConfig, ConfigError> {
        if PRESET_NAMES.contains(&name_or_path) {
            return FlashConfig::preset(name_or_path);
        }
        let unreadable = |detail: String| ConfigError::Unreadable {
            path: name_or_path.to_string(),
            detail,
        };
        let metadata = std::fs::metadata(name_or_path).map_err(|error| {
            unreadable(format!(
                "{error}; it is no preset either (presets: {}; `flashpipe sim presets` lists them)",
                PRESET_NAMES.join(", ")
            ))
        })?;
        if !metadata.is_file() {
            return Err(unreadable("not a regular file".to_string()));
        }
        if metadata.len() > MAX_PRESET_FILE_BYTES {
            return Err(unreadable(format!(
                "{} bytes, above the limit of {MAX_PRESET_FILE_BYTES} bytes for a preset file",
                metadata.len()
            )));
        }
        let text =
            std::fs::read_to_string(name_or_path).map_err(|error| unreadable(error.to_string()))?;
        FlashConfig::from_toml(&text, name_or_path)
    }

    /// Parses and validates `text`; `source_name` names it in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<FlashConfig, ConfigError> {
        let config: FlashConfig = toml::from_str(text).map_err(|error| {
            let line = error
                .span()
                .map(|span| line_of_offset(text, span.start))
                .unwrap_or(0);
            let message = match field_set_on_line(text, line) {
                Some(field) => format!("field `{field}`: {}", error.message()),
                None => error.message().to_string(),
            };
            ConfigError::Malformed {
                source_name: source_name.to_string(),
                line,
                message,
            }
        })?;
        config
            .validate()
            .map_err(|(field, message)| ConfigError::Invalid {
                source_name: source_name.to_string(),
                line: line_of_field(text, field),
                field,
                message,
            })?;
        Ok(config)
    }

    /// This configuration as TOML (for persistence).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a validated configuration serializes")
    }

    fn validate(&self) -> Result<(), (&'static str, String)> {
        let geometry = &self.geometry;
        let bounded = [
            ("devices", geometry.devices, MAX_DEVICES),
            ("channels", geometry.channels, MAX_CHANNELS),
            ("ways", geometry.ways, MAX_WAYS),
            ("dies", geometry.dies, MAX_DIES),
            ("planes", geometry.planes, MAX_PLANES),
            (
                "blocks_per_plane",
                geometry.blocks_per_plane,
                MAX_BLOCKS_PER_PLANE,
            ),
            (
                "pages_per_block",
                geometry.pages_per_block,
                MAX_PAGES_PER_BLOCK,
            ),
            (
                "controller_queue_depth",
                self.timing.controller_queue_depth,
                MAX_CONTROLLER_QUEUE_DEPTH,
            ),
        ];
        for (field, value, maximum) in bounded {
            if !(1..=maximum).contains(&value) {
                return Err((field, format!("{value} is not within 1..={maximum}")));
            }
        }
        if geometry.page_data_bytes < 512
            || geometry.page_data_bytes > MAX_PAGE_DATA_BYTES
            || !geometry.page_data_bytes.is_power_of_two()
        {
            return Err((
                "page_data_bytes",
                format!(
                    "{} is not a power of two from 512 to {MAX_PAGE_DATA_BYTES}",
                    geometry.page_data_bytes
                ),
            ));
        }
        if geometry.page_spare_bytes > MAX_PAGE_SPARE_BYTES {
            return Err((
                "page_spare_bytes",
                format!(
                    "{} is above the limit of {MAX_PAGE_SPARE_BYTES}",
                    geometry.page_spare_bytes
                ),
            ));
        }
        if self.host_spare_bytes_checked().is_none() {
            return Err((
                "page_spare_bytes",
                format!(
                    "{} bytes cannot hold the RS(255,243) parity of a {}-byte page ({} bytes needed)",
                    geometry.page_spare_bytes,
                    geometry.page_data_bytes,
                    codewords_for(geometry.page_data_bytes as usize) * CODEWORD_PARITY_BYTES
                ),
            ));
        }
        self.validate_totals()?;
        self.validate_timing()?;
        self.validate_reliability()
    }

    /// The products of the geometry, which size the model's tables.
    fn validate_totals(&self) -> Result<(), (&'static str, String)> {
        let geometry = &self.geometry;
        let total_dies = u64::from(geometry.devices)
            * u64::from(geometry.channels)
            * u64::from(geometry.ways)
            * u64::from(geometry.dies);
        if total_dies > MAX_TOTAL_DIES {
            return Err((
                "dies",
                format!(
                    "devices x channels x ways x dies = {total_dies} dies, above the limit of {MAX_TOTAL_DIES}"
                ),
            ));
        }
        let total_blocks =
            total_dies * u64::from(geometry.planes) * u64::from(geometry.blocks_per_plane);
        if total_blocks > MAX_TOTAL_BLOCKS {
            return Err((
                "blocks_per_plane",
                format!(
                    "devices x channels x ways x dies x planes x blocks_per_plane = {total_blocks} erase blocks, above the limit of {MAX_TOTAL_BLOCKS}"
                ),
            ));
        }
        Ok(())
    }

    fn validate_timing(&self) -> Result<(), (&'static str, String)> {
        let timing = &self.timing;
        if timing.program_ns_by_page_type.is_empty()
            || timing.program_ns_by_page_type.len() > MAX_PAGE_TYPES
        {
            return Err((
                "program_ns_by_page_type",
                format!(
                    "{} page types: needs 1 to {MAX_PAGE_TYPES}",
                    timing.program_ns_by_page_type.len()
                ),
            ));
        }
        for (field, value) in timing.latencies_ns() {
            if value > MAX_OPERATION_NS {
                return Err((
                    field,
                    format!("{value} ns is above the limit of {MAX_OPERATION_NS} ns (10 s)"),
                ));
            }
        }
        let slowest_typical = timing
            .program_ns_by_page_type
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        if timing.program_ns_max < slowest_typical {
            return Err((
                "program_ns_max",
                format!(
                    "{} is below a typical program time ({slowest_typical})",
                    timing.program_ns_max
                ),
            ));
        }
        if !(1..=MAX_HOST_LINK_BYTES_PER_SECOND).contains(&timing.host_link_bytes_per_second) {
            return Err((
                "host_link_bytes_per_second",
                format!(
                    "{} is not within 1..={MAX_HOST_LINK_BYTES_PER_SECOND}",
                    timing.host_link_bytes_per_second
                ),
            ));
        }
        if timing.link_bytes_per_second > MAX_HOST_LINK_BYTES_PER_SECOND {
            return Err((
                "link_bytes_per_second",
                format!(
                    "{} is above {MAX_HOST_LINK_BYTES_PER_SECOND} (0 leaves the links' rate out)",
                    timing.link_bytes_per_second
                ),
            ));
        }
        check_probability("program_slow_fraction", timing.program_slow_fraction)
    }

    fn validate_reliability(&self) -> Result<(), (&'static str, String)> {
        let reliability = &self.reliability;
        if !(1..=MAX_RATED_PE_CYCLES).contains(&reliability.rated_pe_cycles) {
            return Err((
                "rated_pe_cycles",
                format!(
                    "{} is not within 1..={MAX_RATED_PE_CYCLES}",
                    reliability.rated_pe_cycles
                ),
            ));
        }
        for (field, value) in [
            ("base_rber", reliability.base_rber),
            ("wear_rber_at_rated", reliability.wear_rber_at_rated),
            (
                "retention_rber_per_hour",
                reliability.retention_rber_per_hour,
            ),
            (
                "read_disturb_rber_per_read",
                reliability.read_disturb_rber_per_read,
            ),
            (
                "factory_bad_block_fraction",
                reliability.factory_bad_block_fraction,
            ),
            (
                "grown_bad_probability_at_rated",
                reliability.grown_bad_probability_at_rated,
            ),
        ] {
            check_probability(field, value)?;
        }
        for (field, value) in [
            ("wear_exponent", reliability.wear_exponent),
            ("grown_bad_exponent", reliability.grown_bad_exponent),
        ] {
            if !(0.0..=MAX_WEAR_EXPONENT).contains(&value) {
                return Err((
                    field,
                    format!("{value} is not within 0..={MAX_WEAR_EXPONENT}"),
                ));
            }
        }
        Ok(())
    }

    fn host_spare_bytes_checked(&self) -> Option<u32> {
        let data = self.geometry.page_data_bytes as usize;
        let raw = data + self.geometry.page_spare_bytes as usize;
        let mut best = None;
        for host_spare in 0..=self.geometry.page_spare_bytes as usize {
            let message = data + host_spare;
            if message + codewords_for(message) * CODEWORD_PARITY_BYTES <= raw {
                best = Some(host_spare as u32);
            } else {
                break;
            }
        }
        best
    }

    /// Spare bytes left to the host after the ECC parity (protected by the ECC too).
    pub fn host_spare_bytes(&self) -> u32 {
        self.host_spare_bytes_checked()
            .expect("validated configurations have room for the parity")
    }

    /// Chips (ways x dies count as separate arrays) per channel.
    pub fn dies_per_channel(&self) -> u32 {
        self.geometry.ways * self.geometry.dies
    }

    /// Erase blocks per way (chip): dies x planes x blocks per plane.
    pub fn blocks_per_way(&self) -> u32 {
        self.geometry.dies * self.geometry.planes * self.geometry.blocks_per_plane
    }

    /// Erase blocks in the whole array.
    pub fn total_blocks(&self) -> u64 {
        u64::from(self.geometry.devices)
            * u64::from(self.geometry.channels)
            * u64::from(self.geometry.ways)
            * u64::from(self.blocks_per_way())
    }

    /// Pages in the whole array.
    pub fn total_pages(&self) -> u64 {
        self.total_blocks() * u64::from(self.geometry.pages_per_block)
    }

    /// Raw bytes stored per page (data plus spare).
    pub fn raw_page_bytes(&self) -> usize {
        (self.geometry.page_data_bytes + self.geometry.page_spare_bytes) as usize
    }
}

impl FlashTiming {
    /// Every latency field with its name (the program times by page type under one name).
    fn latencies_ns(&self) -> Vec<(&'static str, u64)> {
        let mut fields = vec![
            ("command_address_ns", self.command_address_ns),
            ("array_read_ns", self.array_read_ns),
            ("page_transfer_ns", self.page_transfer_ns),
            ("program_ns_max", self.program_ns_max),
            ("erase_ns", self.erase_ns),
            ("ecc_decode_ns", self.ecc_decode_ns),
            (
                "ecc_decode_ns_per_symbol_error",
                self.ecc_decode_ns_per_symbol_error,
            ),
            ("ecc_encode_ns", self.ecc_encode_ns),
            ("host_software_read_ns", self.host_software_read_ns),
            ("host_software_write_ns", self.host_software_write_ns),
            ("hop_ns", self.hop_ns),
            ("bus_overhead_ns_per_page", self.bus_overhead_ns_per_page),
        ];
        for &program_ns in &self.program_ns_by_page_type {
            fields.push(("program_ns_by_page_type", program_ns));
        }
        fields
    }
}

/// Whether an optional timing field holds its default (left out of the TOML text, so
/// configurations without it write the same bytes as before it existed).
fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Codewords needed to protect `message_bytes`.
pub fn codewords_for(message_bytes: usize) -> usize {
    message_bytes.div_ceil(CODEWORD_DATA_BYTES)
}

fn check_probability(field: &'static str, value: f64) -> Result<(), (&'static str, String)> {
    if !(0.0..=1.0).contains(&value) {
        return Err((field, format!("{value} is not within 0..=1")));
    }
    Ok(())
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&byte| byte == b'\n')
        .count()
        + 1
}

/// The key a `key = value` line sets, if line `line` (1-based) is one.
fn field_set_on_line(text: &str, line: usize) -> Option<&str> {
    let (key, _) = text.lines().nth(line.checked_sub(1)?)?.split_once('=')?;
    let key = key.trim();
    let is_bare_key = !key.is_empty()
        && key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    is_bare_key.then_some(key)
}

fn line_of_field(text: &str, field: &str) -> usize {
    text.lines()
        .position(|line| {
            line.trim_start()
                .strip_prefix(field)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(0, |index| index + 1)
}
