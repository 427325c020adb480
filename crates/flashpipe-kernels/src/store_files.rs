//! The kernel options whose values name a file in the store, which the run layer reads
//! and hands to the kernel's builder (the pipeline's `store_file_options`): kernels stay
//! pure compute and never open the store themselves. Every such option is listed here
//! with the most bytes the run layer reads.

use std::collections::BTreeMap;
use std::sync::Arc;

/// One option naming a store file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreFileOption {
    /// The kernel's name in the registry.
    pub kernel: &'static str,
    /// The option's key.
    pub key: &'static str,
    /// The largest file the run layer reads for it.
    pub max_bytes: u64,
}

/// Every kernel option that names a store file.
pub const STORE_FILE_OPTIONS: &[StoreFileOption] = &[StoreFileOption {
    kernel: "wasm",
    key: "module",
    max_bytes: crate::wasm::MAX_MODULE_BYTES,
}];

/// The store file options of `kernel`.
pub fn store_file_options(kernel: &str) -> impl Iterator<Item = &'static StoreFileOption> + '_ {
    STORE_FILE_OPTIONS
        .iter()
        .filter(move |option| option.kernel == kernel)
}

/// The contents of the store files a kernel's options name, by option key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreFiles {
    contents: BTreeMap<String, Arc<[u8]>>,
}

impl StoreFiles {
    /// No files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the contents of the file option `key` names.
    pub fn insert(&mut self, key: &str, contents: Vec<u8>) {
        self.contents.insert(key.to_string(), Arc::from(contents));
    }

    /// The contents of the file option `key` names, if read.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.contents.get(key).map(|contents| &contents[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::find_kernel;

    #[test]
    fn every_listed_option_exists() {
        for listed in STORE_FILE_OPTIONS {
            let registered =
                find_kernel(listed.kernel).is_ok_and(|kernel| kernel.takes_option(listed.key));
            assert!(registered, "{} has option {}", listed.kernel, listed.key);
        }
    }
}
