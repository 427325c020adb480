//! The handshake's frames (docs/protocol.md, "Handshake frames"): the hello and welcome
//! bodies, and the version both sides speak. Every frame's header carries
//! [`FRAME_VERSION`] whatever version is spoken (version 4 changed no frame but the
//! welcome); the welcome's own `version` field says which layout its body has, and from
//! [`STORE_CLOCK_VERSION`] on it ends with the store's clock kind.

use crate::error::DecodeError;
use crate::frame::{ClockKind, Hello, ServerLimits, SharedRegion, Welcome};
use crate::wire::{Reader, Writer};
use crate::{MAX_NAME_BYTES, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

#[cfg(doc)]
use crate::FRAME_VERSION;

/// The first version whose welcome tells the store's clock kind.
pub const STORE_CLOCK_VERSION: u16 = 4;

/// The first version whose welcome ends with its flags byte (bit 0: the store is served
/// read-only).
pub const WELCOME_FLAGS_VERSION: u16 = 6;

/// The welcome flags' bit saying the store is served read-only.
const READ_ONLY_FLAG: u8 = 1;

impl Hello {
    /// The version a server of this build speaks with this client: the highest one both
    /// speak; `None` when their ranges do not meet (the server answers
    /// `UnsupportedVersion`).
    pub fn common_version(&self) -> Option<u16> {
        let highest = self.max_version.min(PROTOCOL_VERSION);
        let lowest = self.min_version.max(MIN_PROTOCOL_VERSION);
        (highest >= lowest).then_some(highest)
    }
}

impl Welcome {
    /// True when a welcome of `version` carries the store's clock kind.
    pub fn carries_store_clock(version: u16) -> bool {
        version >= STORE_CLOCK_VERSION
    }

    /// True when a welcome of `version` ends with the flags byte (read-only).
    pub fn carries_flags(version: u16) -> bool {
        version >= WELCOME_FLAGS_VERSION
    }
}

pub(crate) fn encode_hello(hello: &Hello, writer: &mut Writer) {
    writer.u16(hello.min_version);
    writer.u16(hello.max_version);
    writer.bool(hello.map_memory);
    writer.string(&hello.client_name);
}

pub(crate) fn decode_hello(reader: &mut Reader<'_>) -> Result<Hello, DecodeError> {
    Ok(Hello {
        min_version: reader.u16("hello.min_version")?,
        max_version: reader.u16("hello.max_version")?,
        map_memory: reader.bool("hello.map_memory")?,
        client_name: reader.string("hello.client_name", MAX_NAME_BYTES)?,
    })
}

pub(crate) fn encode_welcome(welcome: &Welcome, writer: &mut Writer) {
    let carries_clock = Welcome::carries_store_clock(welcome.version);
    assert!(
        carries_clock || welcome.store_clock.is_none(),
        "a welcome of version {} has no field for the store's clock kind",
        welcome.version
    );
    let carries_flags = Welcome::carries_flags(welcome.version);
    assert!(
        carries_flags || !welcome.read_only,
        "a welcome of version {} has no field for the read-only flag",
        welcome.version
    );
    writer.u16(welcome.version);
    writer.u32(welcome.server_pid);
    writer.string(&welcome.store_path);
    writer
        .bytes
        .extend_from_slice(&welcome.store_identity.unwrap_or([0u8; 16]));
    let limits = &welcome.limits;
    writer.u32(limits.max_body_bytes);
    writer.u32(limits.max_write_bytes);
    writer.u64(limits.max_read_bytes);
    writer.u32(limits.max_read_files_count);
    writer.u64(limits.max_read_files_bytes);
    writer.u32(limits.max_in_flight_per_client);
    writer.u64(limits.max_bytes_in_flight_per_client);
    writer.u32(limits.max_read_handles_per_client);
    encode_region(welcome.read_region, writer);
    encode_region(welcome.write_region, writer);
    if carries_clock {
        writer.u8(clock_byte(welcome.store_clock));
    }
    if carries_flags {
        writer.u8(if welcome.read_only { READ_ONLY_FLAG } else { 0 });
    }
}

fn encode_region(region: Option<SharedRegion>, writer: &mut Writer) {
    match region {
        None => writer.u8(0),
        Some(region) => {
            writer.u8(1);
            writer.u32(region.slot_count);
            writer.u64(region.slot_size_bytes);
        }
    }
}

/// The welcome's `store_clock` byte: `0` not told, `1` real, `2` virtual.
fn clock_byte(clock: Option<ClockKind>) -> u8 {
    match clock {
        None => 0,
        Some(ClockKind::Real) => 1,
        Some(ClockKind::Virtual) => 2,
    }
}

pub(crate) fn decode_welcome(reader: &mut Reader<'_>) -> Result<Welcome, DecodeError> {
    let version = reader.u16("welcome.version")?;
    Ok(Welcome {
        version,
        server_pid: reader.u32("welcome.server_pid")?,
        store_path: reader.string("welcome.store_path", MAX_NAME_BYTES)?,
        store_identity: decode_identity(reader)?,
        limits: ServerLimits {
            max_body_bytes: reader.u32("welcome.max_body_bytes")?,
            max_write_bytes: reader.u32("welcome.max_write_bytes")?,
            max_read_bytes: reader.u64("welcome.max_read_bytes")?,
            max_read_files_count: reader.u32("welcome.max_read_files_count")?,
            max_read_files_bytes: reader.u64("welcome.max_read_files_bytes")?,
            max_in_flight_per_client: reader.u32("welcome.max_in_flight_per_client")?,
            max_bytes_in_flight_per_client: reader.u64("welcome.max_bytes_in_flight_per_client")?,
            max_read_handles_per_client: reader.u32("welcome.max_read_handles_per_client")?,
        },
        read_region: decode_region(reader, "welcome.read_region")?,
        write_region: decode_region(reader, "welcome.write_region")?,
        store_clock: if Welcome::carries_store_clock(version) {
            decode_clock(reader)?
        } else {
            None
        },
        read_only: Welcome::carries_flags(version) && decode_flags(reader)?,
    })
}

/// The welcome's flags byte: whether the store is served read-only; a bit this version
/// does not define is refused.
fn decode_flags(reader: &mut Reader<'_>) -> Result<bool, DecodeError> {
    let flags = reader.u8("welcome.flags")?;
    if flags & !READ_ONLY_FLAG != 0 {
        return Err(DecodeError::BadValue {
            field: "welcome.flags",
            value: u64::from(flags),
        });
    }
    Ok(flags & READ_ONLY_FLAG != 0)
}

/// The welcome's 16 identity bytes; all zero means the store has no identity yet.
fn decode_identity(reader: &mut Reader<'_>) -> Result<Option<[u8; 16]>, DecodeError> {
    let mut identity = [0u8; 16];
    for byte in identity.iter_mut() {
        *byte = reader.u8("welcome.store_identity")?;
    }
    Ok(Some(identity).filter(|identity| identity.iter().any(|&byte| byte != 0)))
}

fn decode_region(
    reader: &mut Reader<'_>,
    field: &'static str,
) -> Result<Option<SharedRegion>, DecodeError> {
    match reader.u8(field)? {
        0 => Ok(None),
        1 => Ok(Some(SharedRegion {
            slot_count: reader.u32(field)?,
            slot_size_bytes: reader.u64(field)?,
        })),
        value => Err(DecodeError::BadValue {
            field,
            value: u64::from(value),
        }),
    }
}

fn decode_clock(reader: &mut Reader<'_>) -> Result<Option<ClockKind>, DecodeError> {
    const FIELD: &str = "welcome.store_clock";
    match reader.u8(FIELD)? {
        0 => Ok(None),
        1 => Ok(Some(ClockKind::Real)),
        2 => Ok(Some(ClockKind::Virtual)),
        value => Err(DecodeError::BadValue {
            field: FIELD,
            value: u64::from(value),
        }),
    }
}
