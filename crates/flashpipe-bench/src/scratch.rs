//! [`Scratch`]: a benchmark's own empty folder, removed with everything in it when dropped
//! (also when the benchmark fails part-way).

use std::path::{Path, PathBuf};

use crate::error::{invalid_input, io_with};
use crate::BenchResult;

/// Most names tried before giving up on finding a free one.
const MOST_ATTEMPTS: u32 = 100;

/// A folder removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new empty folder `flashpipe-bench-LABEL-PID-N` under `parent`.
    pub fn new(parent: &Path, label: &str) -> BenchResult<Scratch> {
        for attempt in 0..MOST_ATTEMPTS {
            let path = parent.join(format!(
                "flashpipe-bench-{label}-{}-{attempt}",
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Scratch(path)),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => {
                    return Err(io_with(format!("creating {}", path.display()))(error).into())
                }
            }
        }
        Err(invalid_input(format!(
            "no free scratch folder name in {}; remove old flashpipe-bench-{label}-* folders",
            parent.display()
        ))
        .into())
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
