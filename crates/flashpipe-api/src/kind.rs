//! [`CommandKind`]: every command once, with its number on the serve protocol's wire,
//! its name, and what it changes. Adding a command starts here: a kind, its number and
//! name, then the engine's execute arm and one codec table entry (docs/design/24-api.md).

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
}

impl CommandKind {
    /// Every kind, in wire-number order.
    pub const ALL: [CommandKind; 14] = [
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
    ];

    /// The frame kind of this command's request on the serve protocol's wire
    /// (docs/protocol.md). A write whose bytes lie in a granted slot of the client's
    /// write pool travels under its own frame kind, 0x0103 (the protocol's business).
    pub fn wire_number(self) -> u16 {
        match self {
            CommandKind::Create => 0x0101,
            CommandKind::Write => 0x0102,
            CommandKind::Read => 0x0104,
            CommandKind::ReadFiles => 0x0105,
            CommandKind::Truncate => 0x0106,
            CommandKind::Delete => 0x0107,
            CommandKind::Rename => 0x0108,
            CommandKind::RenameReplacing => 0x0109,
            CommandKind::Copy => 0x010A,
            CommandKind::Stat => 0x010B,
            CommandKind::List => 0x010C,
            CommandKind::Stats => 0x010D,
            CommandKind::Flush => 0x010E,
            CommandKind::Check => 0x010F,
        }
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
        match self {
            CommandKind::Create => "create",
            CommandKind::Write => "write",
            CommandKind::Read => "read",
            CommandKind::ReadFiles => "read-files",
            CommandKind::Truncate => "truncate",
            CommandKind::Delete => "delete",
            CommandKind::Rename => "rename",
            CommandKind::RenameReplacing => "rename-replacing",
            CommandKind::Copy => "copy",
            CommandKind::Stat => "stat",
            CommandKind::List => "list",
            CommandKind::Stats => "stats",
            CommandKind::Flush => "flush",
            CommandKind::Check => "check",
        }
    }

    /// True for the commands that change the store's names or commit it: create,
    /// truncate, delete, rename, copy and flush (a server refuses them once a device of
    /// its store changed under it). Data writes are covered by the flush that makes them
    /// durable.
    pub fn changes_names(self) -> bool {
        match self {
            CommandKind::Create
            | CommandKind::Truncate
            | CommandKind::Delete
            | CommandKind::Rename
            | CommandKind::RenameReplacing
            | CommandKind::Copy
            | CommandKind::Flush => true,
            CommandKind::Write
            | CommandKind::Read
            | CommandKind::ReadFiles
            | CommandKind::Stat
            | CommandKind::List
            | CommandKind::Stats
            | CommandKind::Check => false,
        }
    }

    /// True for the commands that change what the store holds (a read-only store
    /// refuses them): every command but the reads, stat, list, stats and check. A flush
    /// changes nothing the client sees, but writes the device.
    pub fn changes_data(self) -> bool {
        match self {
            CommandKind::Create
            | CommandKind::Write
            | CommandKind::Truncate
            | CommandKind::Delete
            | CommandKind::Rename
            | CommandKind::RenameReplacing
            | CommandKind::Copy
            | CommandKind::Flush => true,
            CommandKind::Read
            | CommandKind::ReadFiles
            | CommandKind::Stat
            | CommandKind::List
            | CommandKind::Stats
            | CommandKind::Check => false,
        }
    }
}

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
