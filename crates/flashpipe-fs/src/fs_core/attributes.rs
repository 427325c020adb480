//! A file's attributes (format version 6, docs/format.md, "Inode table"): the mode,
//! owner and wall-clock modification time a user set, kept in the inode record and
//! committed like any other change by the next flush, all or nothing.

use super::FsCore;
use crate::attributes::{inode_record_header_bytes, FileAttributes};
use crate::error::{NamespaceError, SetAttributesError};
use crate::fs_core::{check_namespace_space, FileId};

impl FsCore {
    /// What the user set of the attributes of `file` ([`FileAttributes::NONE`] for a new
    /// file and for every file of an image older than version 6).
    pub fn attributes(&self, file: FileId) -> Result<FileAttributes, NamespaceError> {
        self.state
            .files
            .get(&file.0)
            .map(|node| node.attributes)
            .ok_or(NamespaceError::StaleHandle { file_id: file.0 })
    }

    /// [`FsCore::attributes`] of the file named `name`.
    pub fn attributes_by_name(&self, name: &str) -> Result<FileAttributes, NamespaceError> {
        self.attributes(self.open(name)?)
    }

    /// Replaces the attributes of the file named `name` with `attributes` (a field
    /// `None` is cleared: the mount shows its default). Like a truncate, the next flush
    /// commits the change, all or nothing; the device clock of the last change
    /// (`modified_clock_ns`) is left as it is. A rename keeps the attributes; a copy
    /// starts with none (what `cp -p` keeps is the caller's to set). Refuses, changing
    /// nothing, a mode with bits outside `0o7777`, a read-only mount, an unusable mount,
    /// and a change whose longer inode record would not fit the next checkpoint.
    pub fn set_attributes(
        &mut self,
        name: &str,
        attributes: FileAttributes,
    ) -> Result<(), SetAttributesError> {
        self.check_writable("set attributes")?;
        self.check_usable()?;
        attributes.check()?;
        let file = self.open(name)?;
        let node = &self.state.files[&file.0];
        if node.attributes == attributes {
            return Ok(());
        }
        let after_bytes =
            inode_record_header_bytes(attributes.flags()) - inode_record_header_bytes(0);
        let mut totals_after = self.state.totals;
        totals_after.inode_table_bytes =
            totals_after.inode_table_bytes - node.attribute_bytes() as u64 + after_bytes as u64;
        check_namespace_space(&self.state, &totals_after)?;
        let mut node = self.state.remove_file(file.0);
        node.attributes = attributes;
        self.state.insert_file(file.0, node);
        self.state.changed_since_commit = true;
        Ok(())
    }
}
