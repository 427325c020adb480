//! The store identity a file system carries in its super block (format version 4,
//! docs/format.md, "Super block"): reading it from a mount, and giving one to an image
//! formatted before identities (taken by the next commit).

use super::{FsCore, MountMode};
use crate::error::StoreIdentityError;
use flashpipe_api::store_identity_text;

impl FsCore {
    /// The identity of the store this file system belongs to: the mounted super block's
    /// (`None` for an image formatted before identities), or the one given by
    /// [`FsCore::set_store_identity`] since, which the next commit writes.
    pub fn store_identity(&self) -> Option<[u8; 16]> {
        self.state.store_identity
    }

    /// Gives the file system the store identity `identity` (a read-write mount of an
    /// image that has none, formatted before identities): the next flush commits it,
    /// writing the super block in format version 4. Setting the identity it already has
    /// changes nothing. Refuses, changing nothing, an all-zero identity (which means
    /// none), a read-only mount, a file system no longer usable, and an image that
    /// already belongs to another store.
    pub fn set_store_identity(&mut self, identity: [u8; 16]) -> Result<(), StoreIdentityError> {
        if identity.iter().all(|&byte| byte == 0) {
            return Err(StoreIdentityError::Zero);
        }
        if self.mode == MountMode::ReadOnly {
            return Err(StoreIdentityError::ReadOnly);
        }
        if let Some(reason) = &self.state.unusable_reason {
            return Err(StoreIdentityError::Unusable {
                reason: reason.clone(),
            });
        }
        match self.state.store_identity {
            Some(current) if current == identity => Ok(()),
            Some(current) => Err(StoreIdentityError::Different {
                current: store_identity_text(&current),
                requested: store_identity_text(&identity),
            }),
            None => {
                self.state.store_identity = Some(identity);
                self.state.changed_since_commit = true;
                Ok(())
            }
        }
    }
}
