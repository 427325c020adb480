//! The bytes of file attributes on the wire (protocol version 5, docs/protocol.md,
//! "File attributes"): the `set-attributes` request body and the attribute tail of a
//! stat entry in the `stat-attributes-reply` and `list-attributes-reply` frames. A
//! stat with no attribute set travels as the version-4 entry, byte for byte, under the
//! old reply kinds, so a version-3/4 peer never sees the new kinds.

use flashpipe_api::{AttributeChange, Command, FileOwner, FileStat};

use crate::error::DecodeError;
use crate::frame::WireCommand;
use crate::wire::{Reader, Writer};

/// The first protocol version that carries file attributes (the `set-attributes`
/// request and the attribute reply kinds).
pub const ATTRIBUTES_VERSION: u16 = 5;

/// Stat flag: the mode field holds a mode.
const MODE_SET: u8 = 1;
/// Stat flag: the uid and gid fields hold an owner.
const OWNER_SET: u8 = 1 << 1;
/// Stat flag: the wall-time field holds a time.
const WALL_TIME_SET: u8 = 1 << 2;
/// Every defined stat flag.
const DEFINED_FLAGS: u8 = MODE_SET | OWNER_SET | WALL_TIME_SET;

/// True when `stat` has an attribute set (it travels under an attribute reply kind).
pub fn has_attributes(stat: &FileStat) -> bool {
    stat.mode.is_some() || stat.owner.is_some() || stat.modified_wall_ns.is_some()
}

/// `stat` as a peer of `version` may see it: without attributes before version 5.
pub fn stat_for_version(mut stat: FileStat, version: u16) -> FileStat {
    if version < ATTRIBUTES_VERSION {
        stat.mode = None;
        stat.owner = None;
        stat.modified_wall_ns = None;
    }
    stat
}

/// The 21-byte attribute tail of a stat entry: flags, mode, uid, gid, wall time (a
/// field whose flag is clear is zero).
pub(crate) fn encode_stat_attributes(stat: &FileStat, writer: &mut Writer) {
    let flags = flag(stat.mode.is_some(), MODE_SET)
        | flag(stat.owner.is_some(), OWNER_SET)
        | flag(stat.modified_wall_ns.is_some(), WALL_TIME_SET);
    writer.u8(flags);
    let owner = stat.owner.unwrap_or(FileOwner { uid: 0, gid: 0 });
    writer.u32(stat.mode.unwrap_or(0));
    writer.u32(owner.uid);
    writer.u32(owner.gid);
    writer.u64(stat.modified_wall_ns.unwrap_or(0) as u64);
}

/// Reads the attribute tail into `stat`; undefined flags and non-zero fields whose
/// flag is clear are refused.
pub(crate) fn decode_stat_attributes(
    reader: &mut Reader<'_>,
    stat: &mut FileStat,
) -> Result<(), DecodeError> {
    let flags = reader.u8("stat.attribute_flags")?;
    if flags & !DEFINED_FLAGS != 0 {
        return Err(bad("stat.attribute_flags", u64::from(flags)));
    }
    let mode = reader.u32("stat.mode")?;
    let uid = reader.u32("stat.uid")?;
    let gid = reader.u32("stat.gid")?;
    let wall = reader.u64("stat.modified_wall_ns")?;
    stat.mode = field(flags & MODE_SET != 0, mode, "stat.mode", u64::from(mode))?;
    let owner_word = u64::from(uid) | u64::from(gid);
    stat.owner = field(
        flags & OWNER_SET != 0,
        FileOwner { uid, gid },
        "stat.owner",
        owner_word,
    )?;
    stat.modified_wall_ns = field(
        flags & WALL_TIME_SET != 0,
        wall as i64,
        "stat.modified_wall_ns",
        wall,
    )?;
    Ok(())
}

/// The `set-attributes` request body: name, a change byte (two bits per attribute:
/// 0 keep, 1 set, 2 clear), then mode, uid, gid and wall time (zero unless set).
pub(crate) fn encode_set_attributes(command: &WireCommand, writer: &mut Writer) {
    let Command::SetAttributes {
        name,
        mode,
        owner,
        modified_wall_ns,
    } = command
    else {
        unreachable!("the set-attributes codec was handed another command");
    };
    writer.string(name);
    writer.u8(change_bits(mode) | change_bits(owner) << 2 | change_bits(modified_wall_ns) << 4);
    let owner = set_value(owner).unwrap_or(FileOwner { uid: 0, gid: 0 });
    writer.u32(set_value(mode).unwrap_or(0));
    writer.u32(owner.uid);
    writer.u32(owner.gid);
    writer.u64(set_value(modified_wall_ns).unwrap_or(0) as u64);
}

/// Reads a `set-attributes` body (the mode's bits are the engine's to check).
pub(crate) fn decode_set_attributes(
    reader: &mut Reader<'_>,
    name: String,
) -> Result<WireCommand, DecodeError> {
    let changes = reader.u8("set_attributes.changes")?;
    if changes & 0xC0 != 0 {
        return Err(bad("set_attributes.changes", u64::from(changes)));
    }
    let mode = reader.u32("set_attributes.mode")?;
    let uid = reader.u32("set_attributes.uid")?;
    let gid = reader.u32("set_attributes.gid")?;
    let wall = reader.u64("set_attributes.modified_wall_ns")?;
    let mode = change(changes & 3, mode, u64::from(mode), "set_attributes.mode")?;
    let owner = change(
        (changes >> 2) & 3,
        FileOwner { uid, gid },
        u64::from(uid) | u64::from(gid),
        "set_attributes.owner",
    )?;
    let modified_wall_ns = change(
        (changes >> 4) & 3,
        wall as i64,
        wall,
        "set_attributes.modified_wall_ns",
    )?;
    Ok(Command::SetAttributes {
        name,
        mode,
        owner,
        modified_wall_ns,
    })
}

fn flag(set: bool, bit: u8) -> u8 {
    if set {
        bit
    } else {
        0
    }
}

fn bad(field: &'static str, value: u64) -> DecodeError {
    DecodeError::BadValue { field, value }
}

/// A stat field: `Some(value)` when its flag is set, else `None` (its bytes must be zero).
fn field<T>(set: bool, value: T, name: &'static str, raw: u64) -> Result<Option<T>, DecodeError> {
    match (set, raw) {
        (true, _) => Ok(Some(value)),
        (false, 0) => Ok(None),
        (false, raw) => Err(bad(name, raw)),
    }
}

fn change_bits<T>(change: &AttributeChange<T>) -> u8 {
    match change {
        AttributeChange::Keep => 0,
        AttributeChange::Set(_) => 1,
        AttributeChange::Clear => 2,
    }
}

fn set_value<T: Copy>(change: &AttributeChange<T>) -> Option<T> {
    match change {
        AttributeChange::Set(value) => Some(*value),
        AttributeChange::Keep | AttributeChange::Clear => None,
    }
}

/// A change from its two bits; the value's bytes must be zero unless it is set.
fn change<T>(
    bits: u8,
    value: T,
    raw: u64,
    name: &'static str,
) -> Result<AttributeChange<T>, DecodeError> {
    match (bits, raw) {
        (1, _) => Ok(AttributeChange::Set(value)),
        (0, 0) => Ok(AttributeChange::Keep),
        (2, 0) => Ok(AttributeChange::Clear),
        (3, _) => Err(bad(name, u64::from(bits))),
        (_, raw) => Err(bad(name, raw)),
    }
}
