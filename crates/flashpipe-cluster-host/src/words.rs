//! Statuses in words, for people: what `flashpipe cluster page` prints and names in its
//! errors (no Rust debug text).

use flashpipe_cluster::wire::Status;
use flashpipe_flash::{AckStatus, CommandKind};

/// A status's short name (`Ok`, `NotErased`, `Unreachable`, ...), as docs/cluster-wire.md
/// names it.
pub fn status_name(status: &Status) -> &'static str {
    match status {
        Status::Flash(AckStatus::Ok { .. }) => "Ok",
        Status::Flash(AckStatus::Uncorrectable) => "Uncorrectable",
        Status::Flash(AckStatus::BadBlock) => "BadBlock",
        Status::Flash(AckStatus::RuleViolation(violation)) => match violation {
            flashpipe_flash::RuleViolation::AddressOutOfRange { .. } => "AddressOutOfRange",
            flashpipe_flash::RuleViolation::NotErased { .. } => "NotErased",
            flashpipe_flash::RuleViolation::OutOfOrder { .. } => "OutOfOrder",
            flashpipe_flash::RuleViolation::WrongLength { .. } => "WrongLength",
            flashpipe_flash::RuleViolation::CopyBackRefused { .. } => "CopyBackRefused",
        },
        Status::NotOwner { .. } => "NotOwner",
        Status::Unreachable { .. } => "Unreachable",
        Status::Busy { .. } => "Busy",
        Status::UnknownHost { .. } => "UnknownHost",
    }
}

/// A status in a sentence: its name, then what it means.
pub fn status_words(status: &Status) -> String {
    let name = status_name(status);
    let detail = match status {
        Status::Flash(AckStatus::Ok {
            corrected_bits,
            corrected_symbols,
        }) => format!("done ({corrected_bits} bits in {corrected_symbols} symbols corrected)"),
        Status::Flash(AckStatus::Uncorrectable) => {
            "the page had more errors than the ECC corrects; its data is returned uncorrected"
                .to_string()
        }
        Status::Flash(AckStatus::BadBlock) => "the program or erase failed: the block is bad".to_string(),
        Status::Flash(AckStatus::RuleViolation(violation)) => violation.to_string(),
        Status::NotOwner { device, block } => format!(
            "block {block} of device {device} is outside this host's share; it may read it, not program or erase it"
        ),
        Status::Unreachable { device, hop } => format!(
            "device {device} cannot be reached: a node or link is down at hop {hop} of the path"
        ),
        Status::Busy { queue_limit } => format!(
            "the node holds {queue_limit} requests of this host already; send again later"
        ),
        Status::UnknownHost { host, host_count } => {
            format!("host {host} is not in the cluster, which has {host_count} hosts")
        }
    };
    format!("{name}: {detail}")
}

/// A command kind in words.
pub fn kind_name(kind: CommandKind) -> &'static str {
    match kind {
        CommandKind::Read => "read",
        CommandKind::Write => "write",
        CommandKind::Erase => "erase",
    }
}
