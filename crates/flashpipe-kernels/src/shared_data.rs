//! Where the optional extra data sets live (UDHR texts, sample images, DES vectors): the one
//! place every crate, example and test finds them.
//!
//! `FLASHPIPE_SHARED_DATA` names the folder when set (an empty or missing folder then means "no
//! extra data", which is how the demo and the tests are checked without it); otherwise it is
//! `../shared/data` relative to the working directory (the CLI) or to the repository root
//! (tests and examples, through [`shared_data_directory_from`]). Nothing in the product needs
//! the folder: language ID ships its profile and the demo generates what is missing.
//!
//! The tests that need the folder are opt-in (`#[ignore]`, listed in `scripts/test-data`, which
//! `scripts/test` runs when the folder is there): a clone without `../shared` (CI's) reports
//! them as ignored instead of passing them. Under `FLASHPIPE_REQUIRE_DATA=1` a missing folder
//! fails the test that asked for it ([`optional_shared_folder`] panics) instead of leaving its
//! part out.

use std::path::{Path, PathBuf};

/// The environment variable that overrides the shared data folder.
pub const SHARED_DATA_VARIABLE: &str = "FLASHPIPE_SHARED_DATA";

/// The environment variable that turns a missing shared data folder into a failure.
pub const REQUIRE_DATA_VARIABLE: &str = "FLASHPIPE_REQUIRE_DATA";

/// The default shared data folder, relative to the repository root.
pub const DEFAULT_SHARED_DATA_DIRECTORY: &str = "../shared/data";

/// The shared data folder as the CLI sees it: `$FLASHPIPE_SHARED_DATA`, else `../shared/data`
/// relative to the working directory.
pub fn shared_data_directory() -> PathBuf {
    shared_data_directory_from(Path::new("."))
}

/// The shared data folder with `repository_root` as the base of the default
/// (`$FLASHPIPE_SHARED_DATA` when set, else `repository_root/../shared/data`).
pub fn shared_data_directory_from(repository_root: &Path) -> PathBuf {
    match std::env::var_os(SHARED_DATA_VARIABLE) {
        Some(folder) if !folder.is_empty() => PathBuf::from(folder),
        _ => repository_root.join(DEFAULT_SHARED_DATA_DIRECTORY),
    }
}

/// The repository root of a crate of this workspace, from its manifest folder.
pub fn repository_root(crate_manifest_directory: &str) -> PathBuf {
    Path::new(crate_manifest_directory).join("../..")
}

/// True when a missing shared data folder must fail the test (`FLASHPIPE_REQUIRE_DATA=1`).
pub fn data_required() -> bool {
    std::env::var(REQUIRE_DATA_VARIABLE).is_ok_and(|value| value == "1")
}

/// `folder` inside the shared data folder of this repository when it is a folder; otherwise
/// prints why a test or example goes on without it and returns `None`, or, under
/// `FLASHPIPE_REQUIRE_DATA=1`, panics naming the folder. For tests and examples only.
pub fn optional_shared_folder(crate_manifest_directory: &str, folder: &str) -> Option<PathBuf> {
    let path = shared_data_directory_from(&repository_root(crate_manifest_directory)).join(folder);
    folder_if_present(path, data_required())
}

/// `path` when it is a folder; otherwise `None` with a message, or a panic when `required`.
fn folder_if_present(path: PathBuf, required: bool) -> Option<PathBuf> {
    if path.is_dir() {
        return Some(path);
    }
    assert!(
        !required,
        "the shared data folder {} is absent ({SHARED_DATA_VARIABLE} names another; \
         {REQUIRE_DATA_VARIABLE}=1 makes its absence a failure)",
        path.display()
    );
    eprintln!(
        "uses extra data from ../shared when present: {} is absent, that part is left out",
        path.display()
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_relative_to_the_root() {
        if std::env::var_os(SHARED_DATA_VARIABLE).is_some() {
            return;
        }
        assert_eq!(
            shared_data_directory_from(Path::new("/repo")),
            Path::new("/repo/../shared/data")
        );
    }

    #[test]
    fn an_absent_folder_is_left_out_unless_data_is_required() {
        let absent = PathBuf::from("/nonexistent/flashpipe-shared-data-7f3a");
        assert_eq!(folder_if_present(absent, false), None);
        let present = std::env::temp_dir();
        assert_eq!(folder_if_present(present.clone(), true), Some(present));
    }

    #[test]
    #[should_panic(expected = "FLASHPIPE_REQUIRE_DATA=1 makes its absence a failure")]
    fn an_absent_folder_fails_when_data_is_required() {
        folder_if_present(
            PathBuf::from("/nonexistent/flashpipe-shared-data-7f3a"),
            true,
        );
    }
}
