//! The statuses an Ack carries, and their codes on the wire (docs/cluster-wire.md, "Status
//! codes"): the flash's own statuses and the cluster's (NotOwner, Unreachable, Busy,
//! UnknownHost), each as (code, field, a, b) with every value bounded by its type.

use flashpipe_flash::{AckStatus, RuleViolation};

use super::{bounded_u32, zero, EncodeError, WireError};

/// Address fields named by `AddressOutOfRange`, in code order.
const ADDRESS_FIELDS: [&str; 5] = ["device", "bus", "chip", "block", "page"];
/// Length fields named by `WrongLength`, in code order.
const LENGTH_FIELDS: [&str; 2] = ["data", "spare"];

/// Status codes of an Ack (the code is the position: `Ok` is 0, `UnknownHost` 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum StatusCode {
    /// Done; a = corrected bits, b = corrected symbols.
    Ok,
    /// A read had more errors than the ECC corrects.
    Uncorrectable,
    /// A program or erase failed: the block is bad.
    BadBlock,
    /// The page is already programmed; a = block, b = page.
    NotErased,
    /// Pages programmed out of order; a = the block's next page, b = the page asked for.
    OutOfOrder,
    /// An address field past the geometry; field = which, a = value, b = limit.
    AddressOutOfRange,
    /// Data or spare of the wrong length; field = which, a = length, b = expected.
    WrongLength,
    /// A program or erase of a block the host does not own; a = device, b = block.
    NotOwner,
    /// A node or link on the path is down; a = device, b = hop.
    Unreachable,
    /// The node's queue is full; a = its limit.
    Busy,
    /// No such host in the cluster; a = host, b = host count.
    UnknownHost,
}

impl StatusCode {
    /// The status of a code, if any.
    pub fn from_code(code: u16) -> Option<StatusCode> {
        Some(match code {
            0 => StatusCode::Ok,
            1 => StatusCode::Uncorrectable,
            2 => StatusCode::BadBlock,
            3 => StatusCode::NotErased,
            4 => StatusCode::OutOfOrder,
            5 => StatusCode::AddressOutOfRange,
            6 => StatusCode::WrongLength,
            7 => StatusCode::NotOwner,
            8 => StatusCode::Unreachable,
            9 => StatusCode::Busy,
            10 => StatusCode::UnknownHost,
            _ => return None,
        })
    }
}

/// The outcome an Ack carries: the flash's own statuses and the cluster's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// What the flash device answered.
    Flash(AckStatus),
    /// A program or erase of a block outside the host's share, refused at the device's node.
    NotOwner {
        /// The device.
        device: u32,
        /// The block asked for.
        block: u32,
    },
    /// A node or link on the path is down.
    Unreachable {
        /// The device the request was for.
        device: u32,
        /// Hops the request had made when it could go no further.
        hop: u8,
    },
    /// The node held as many requests as it may; send again later.
    Busy {
        /// The queue's limit.
        queue_limit: u32,
    },
    /// The request named a host the cluster does not have.
    UnknownHost {
        /// The host named.
        host: u32,
        /// Hosts in the cluster.
        host_count: u32,
    },
}

/// A status as (code, field, a, b).
pub(super) fn status_fields(status: &Status) -> Result<(StatusCode, u16, u64, u64), EncodeError> {
    let field_code = |names: &[&str], field: &'static str| {
        names
            .iter()
            .position(|name| *name == field)
            .map(|index| index as u16)
            .ok_or(EncodeError::UnknownField { field })
    };
    // Most statuses carry two 32-bit values and no field.
    let values = |code, a: u32, b: u32| (code, 0, u64::from(a), u64::from(b));
    Ok(match status {
        Status::Flash(AckStatus::Ok {
            corrected_bits: bits,
            corrected_symbols: symbols,
        }) => values(StatusCode::Ok, *bits, *symbols),
        Status::Flash(AckStatus::Uncorrectable) => values(StatusCode::Uncorrectable, 0, 0),
        Status::Flash(AckStatus::BadBlock) => values(StatusCode::BadBlock, 0, 0),
        Status::Flash(AckStatus::RuleViolation(violation)) => match violation {
            RuleViolation::NotErased { block, page } => {
                values(StatusCode::NotErased, *block, *page)
            }
            RuleViolation::OutOfOrder {
                expected_page: next,
                page,
            } => values(StatusCode::OutOfOrder, *next, *page),
            RuleViolation::AddressOutOfRange {
                field,
                value,
                limit,
            } => {
                let field = field_code(&ADDRESS_FIELDS, field)?;
                (StatusCode::AddressOutOfRange, field, *value, *limit)
            }
            RuleViolation::WrongLength {
                field,
                length,
                expected,
            } => {
                let field = field_code(&LENGTH_FIELDS, field)?;
                let (length, expected) = (*length as u64, *expected as u64);
                (StatusCode::WrongLength, field, length, expected)
            }
            RuleViolation::CopyBackRefused { .. } => return Err(EncodeError::CopyBackNotCarried),
        },
        Status::NotOwner { device, block } => values(StatusCode::NotOwner, *device, *block),
        Status::Unreachable { device, hop } => {
            values(StatusCode::Unreachable, *device, u32::from(*hop))
        }
        Status::Busy { queue_limit } => values(StatusCode::Busy, *queue_limit, 0),
        Status::UnknownHost { host, host_count } => {
            values(StatusCode::UnknownHost, *host, *host_count)
        }
    })
}

/// The status of (code, field, a, b), every value checked.
pub(super) fn decode_status(code: u16, field: u16, a: u64, b: u64) -> Result<Status, WireError> {
    let field_name = |names: &[&'static str]| {
        names
            .get(usize::from(field))
            .copied()
            .ok_or(WireError::UnknownCode {
                field: "status field",
                value: u64::from(field),
            })
    };
    let code = StatusCode::from_code(code).ok_or(WireError::UnknownCode {
        field: "status",
        value: u64::from(code),
    })?;
    if !matches!(
        code,
        StatusCode::AddressOutOfRange | StatusCode::WrongLength
    ) {
        zero("status field", u64::from(field))?;
    }
    let status = match code {
        StatusCode::Ok => Status::Flash(AckStatus::Ok {
            corrected_bits: bounded_u32("corrected bits", a)?,
            corrected_symbols: bounded_u32("corrected symbols", b)?,
        }),
        StatusCode::Uncorrectable | StatusCode::BadBlock => {
            zero("status value a", a)?;
            zero("status value b", b)?;
            Status::Flash(if code == StatusCode::Uncorrectable {
                AckStatus::Uncorrectable
            } else {
                AckStatus::BadBlock
            })
        }
        StatusCode::NotErased => {
            Status::Flash(AckStatus::RuleViolation(RuleViolation::NotErased {
                block: bounded_u32("block", a)?,
                page: bounded_u32("page", b)?,
            }))
        }
        StatusCode::OutOfOrder => {
            Status::Flash(AckStatus::RuleViolation(RuleViolation::OutOfOrder {
                expected_page: bounded_u32("expected page", a)?,
                page: bounded_u32("page", b)?,
            }))
        }
        StatusCode::AddressOutOfRange => {
            Status::Flash(AckStatus::RuleViolation(RuleViolation::AddressOutOfRange {
                field: field_name(&ADDRESS_FIELDS)?,
                value: a,
                limit: b,
            }))
        }
        StatusCode::WrongLength => {
            let field = field_name(&LENGTH_FIELDS)?;
            let length = bounded_u32("length", a)? as usize;
            let expected = bounded_u32("expected length", b)? as usize;
            Status::Flash(AckStatus::RuleViolation(RuleViolation::WrongLength {
                field,
                length,
                expected,
            }))
        }
        StatusCode::NotOwner => Status::NotOwner {
            device: bounded_u32("device", a)?,
            block: bounded_u32("block", b)?,
        },
        StatusCode::Unreachable => Status::Unreachable {
            device: bounded_u32("device", a)?,
            hop: u8::try_from(b).map_err(|_| WireError::FieldTooLarge {
                field: "hop",
                value: b,
                limit: u64::from(u8::MAX),
            })?,
        },
        StatusCode::Busy => {
            zero("status value b", b)?;
            Status::Busy {
                queue_limit: bounded_u32("queue limit", a)?,
            }
        }
        StatusCode::UnknownHost => Status::UnknownHost {
            host: bounded_u32("host", a)?,
            host_count: bounded_u32("host count", b)?,
        },
    };
    Ok(status)
}
