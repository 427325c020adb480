//! [`CommandKind`]: every command once, with its number on the serve protocol's wire,
//! its name, and what it changes, in one table (`CommandKind::row`). Adding a command
//! starts here: a kind and its row, then the engine's execute arm and one codec table
//! entry (docs/design/24-api.md).

/// Every kind of command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandKind {
    /// Create an empty file.
    Create,
    /// Write bytes.
    Write,
    /// Read a range of a file.
    Read,
    /// Read several small files whole.
    ReadFiles,
    /// Set a file's size.
    Truncate,
    /// Delete a file.
    Delete,
    /// Rename a file (the target must not exist).
    Rename,
    /// Rename a file, replacing the target.
    RenameReplacing,
    /// Copy a whole file.
    Copy,
    /// Facts about one file.
    Stat,
    /// Every file.
    List,
    /// Space and counts.
    Stats,
    /// Make every change durable.
    Flush,
    /// Check the durable image.
    Check,
    /// Change a file's attributes (mode, owner, wall-clock time).
    SetAttributes,
}

impl CommandKind {
    /// Every kind, in wire-number order.
    pub const ALL: [CommandKind; 15] = [
        CommandKind::Create,
        CommandKind::Write,
        CommandKind::Read,
        CommandKind::ReadFiles,
        CommandKind::Truncate,
        CommandKind::Delete,
        CommandKind::Rename,
        CommandKind::RenameReplacing,
        CommandKind::Copy,
        CommandKind::Stat,
        CommandKind::List,
        CommandKind::Stats,
        CommandKind::Flush,
        CommandKind::Check,
        CommandKind::SetAttributes,
    ];

    /// The kind's row in the one table of kinds: its wire number, its name and what it
    /// changes ([`NAMES`], [`DATA`]).
    fn row(self) -> (u16, &'static str, u8) {
        match self {
            CommandKind::Create => (0x0101, "create", NAMES | DATA),
            CommandKind::Write => (0x0102, "write", DATA),
            CommandKind::Read => (0x0104, "read", 0),
            CommandKind::ReadFiles => (0x0105, "read-files", 0),
            CommandKind::Truncate => (0x0106, "truncate", NAMES | DATA),
            CommandKind::Delete => (0x0107, "delete", NAMES | DATA),
            CommandKind::Rename => (0x0108, "rename", NAMES | DATA),
            CommandKind::RenameReplacing => (0x0109, "rename-replacing", NAMES | DATA),
            CommandKind::Copy => (0x010A, "copy", NAMES | DATA),
            CommandKind::Stat => (0x010B, "stat", 0),
            CommandKind::List => (0x010C, "list", 0),
            CommandKind::Stats => (0x010D, "stats", 0),
            CommandKind::Flush => (0x010E, "flush", NAMES | DATA),
            CommandKind::Check => (0x010F, "check", 0),
            CommandKind::SetAttributes => (0x0112, "set-attributes", NAMES | DATA),
        }
    }

    /// The frame kind of this command's request on the serve protocol's wire
    /// (docs/protocol.md). A write whose bytes lie in a granted slot of the client's
    /// write pool travels under its own frame kind, 0x0103 (the protocol's business).
    pub fn wire_number(self) -> u16 {
        self.row().0
    }

    /// The kind of a rename: replacing an existing target or not (one command,
    /// [`crate::Command::Rename`], two kinds on the wire).
    pub fn rename(replace: bool) -> CommandKind {
        if replace {
            CommandKind::RenameReplacing
        } else {
            CommandKind::Rename
        }
    }

    /// The kind numbered `number` on the wire, if any.
    pub fn from_wire(number: u16) -> Option<CommandKind> {
        CommandKind::ALL
            .into_iter()
            .find(|kind| kind.wire_number() == number)
    }

    /// The kind's name, for messages (the protocol's frame kind name).
    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// True for the commands that change the store's names or commit it: create,
    /// truncate, delete, rename, copy, set attributes and flush (a server refuses them once a device of
    /// its store changed under it). Data writes are covered by the flush that makes them
    /// durable.
    pub fn changes_names(self) -> bool {
        self.row().2 & NAMES != 0
    }

    /// True for the commands that change what the store holds (a read-only store
    /// refuses them): every command but the reads, stat, list, stats and check. A flush
    /// changes nothing the client sees, but writes the device.
    pub fn changes_data(self) -> bool {
        self.row().2 & DATA != 0
    }
}

/// A kind's flag in [`CommandKind::row`]: it changes the store's names or commits it.
const NAMES: u8 = 1;
/// A kind's flag in [`CommandKind::row`]: it changes what the store holds.
const DATA: u8 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_wire_number_and_one_name() {
        for (index, kind) in CommandKind::ALL.iter().enumerate() {
            assert_eq!(CommandKind::from_wire(kind.wire_number()), Some(*kind));
            for other in &CommandKind::ALL[index + 1..] {
                assert_ne!(kind.wire_number(), other.wire_number());
                assert_ne!(kind.name(), other.name());
            }
            assert!(
                kind.wire_number() > CommandKind::ALL[index.saturating_sub(1)].wire_number()
                    || index == 0,
                "ALL is in wire-number order"
            );
        }
        assert_eq!(CommandKind::from_wire(0x0103), None);
    }

    #[test]
    fn a_command_that_changes_names_changes_data() {
        for kind in CommandKind::ALL {
            assert!(
                !kind.changes_names() || kind.changes_data(),
                "{}",
                kind.name()
            );
        }
    }
}
