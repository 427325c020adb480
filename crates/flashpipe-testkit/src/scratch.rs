//! [`ScratchFolder`]: a fresh folder for one test, removed when dropped, with the listing
//! a "bad input changes nothing" check compares before and after; [`TestFolder`]: the same
//! fresh folder, kept with its path printed when the test fails.

use std::path::{Path, PathBuf};

/// A fresh, empty folder for one test (its name and the process id make it unique),
/// removed with its contents when dropped.
pub struct ScratchFolder(PathBuf);

impl ScratchFolder {
    /// Creates `flashpipe-<name>-<pid>` in the temporary folder, emptied if it exists.
    pub fn new(name: &str) -> ScratchFolder {
        ScratchFolder(fresh_path(name))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path of `name` inside the folder, as text (for command lines).
    pub fn join(&self, name: &str) -> String {
        self.0
            .join(name)
            .to_str()
            .expect("UTF-8 temporary path")
            .to_string()
    }

    /// Every entry's name and size, sorted.
    pub fn listing(&self) -> Vec<(String, u64)> {
        let mut entries: Vec<(String, u64)> = std::fs::read_dir(&self.0)
            .expect("scratch folder readable")
            .map(|entry| {
                let entry = entry.expect("folder entry");
                let name = entry.file_name().to_string_lossy().to_string();
                (name, entry.metadata().expect("entry metadata").len())
            })
            .collect();
        entries.sort();
        entries
    }
}

impl Drop for ScratchFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Creates `flashpipe-<name>-<pid>` in the temporary folder, emptied if it exists.
fn fresh_path(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("flashpipe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).expect("scratch folder");
    path
}

/// A fresh, empty folder for one test (a `Path` by `Deref`), removed when dropped after the
/// test passed, kept with its path printed when dropped while the test fails, to look at.
#[derive(Debug)]
pub struct TestFolder(PathBuf);

impl TestFolder {
    /// Creates `flashpipe-<name>-<pid>` in the temporary folder, emptied if it exists.
    pub fn new(name: &str) -> TestFolder {
        TestFolder(fresh_path(name))
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for TestFolder {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TestFolder {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestFolder {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test failed: its folder {} is kept", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
