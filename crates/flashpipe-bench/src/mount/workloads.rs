//! What `bench mount` times on a mounted folder: a large file written (from a source file,
//! 1 MiB at a time, then fsync) and read back into a file of the scratch folder (as `get`
//! writes one), and create, stat and unlink of many empty files in one directory.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::io_with;
use crate::BenchResult;

/// Bytes moved per `read` and `write` call.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Copies `source` into a new file `destination`, [`CHUNK_BYTES`] at a time; the new file
/// (open, not yet synced) and the bytes copied.
fn copy_in_chunks(source: &Path, destination: &Path) -> BenchResult<(File, u64)> {
    let mut input = File::open(source).map_err(io_with(format!("opening {}", source.display())))?;
    let mut output = File::create(destination)
        .map_err(io_with(format!("creating {}", destination.display())))?;
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let mut total_bytes = 0u64;
    loop {
        let read = input
            .read(&mut buffer)
            .map_err(io_with(format!("reading {}", source.display())))?;
        if read == 0 {
            break;
        }
        output
            .write_all(&buffer[..read])
            .map_err(io_with(format!("writing {}", destination.display())))?;
        total_bytes += read as u64;
    }
    Ok((output, total_bytes))
}

/// Copies `source` into a new file `destination` and fsyncs it; how long it took.
pub fn write_copy(source: &Path, destination: &Path) -> BenchResult<Duration> {
    let started = Instant::now();
    let (output, _) = copy_in_chunks(source, destination)?;
    output
        .sync_all()
        .map_err(io_with(format!("fsync of {}", destination.display())))?;
    drop(output);
    Ok(started.elapsed())
}

/// Copies `source` (on the mount) into a new file `destination` of the scratch folder, as
/// `get` writes its file; how long it took and how many bytes it gave. The copy is removed.
pub fn read_copy(source: &Path, destination: &Path) -> BenchResult<(Duration, u64)> {
    let started = Instant::now();
    let (output, total_bytes) = copy_in_chunks(source, destination)?;
    drop(output);
    let took = started.elapsed();
    std::fs::remove_file(destination)
        .map_err(io_with(format!("removing {}", destination.display())))?;
    Ok((took, total_bytes))
}

/// Microseconds per operation of each metadata phase.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct MetadataTimes {
    /// `open(O_CREAT)` then `close` of a new empty file.
    pub create_us: f64,
    /// `stat` of each file.
    pub stat_us: f64,
    /// `unlink` of each file.
    pub unlink_us: f64,
}

impl MetadataTimes {
    /// The faster of each phase of `self` and `other`.
    pub fn best(self, other: MetadataTimes) -> MetadataTimes {
        MetadataTimes {
            create_us: self.create_us.min(other.create_us),
            stat_us: self.stat_us.min(other.stat_us),
            unlink_us: self.unlink_us.min(other.unlink_us),
        }
    }
}

/// Creates `files` empty files in `folder` (which must be empty), stats each, unlinks each.
pub fn metadata(folder: &Path, files: u32) -> BenchResult<MetadataTimes> {
    let names: Vec<_> = (0..files)
        .map(|index| folder.join(format!("f{index}")))
        .collect();
    let per_op = |took: Duration| took.as_secs_f64() * 1e6 / f64::from(files.max(1));
    let started = Instant::now();
    for name in &names {
        File::create(name).map_err(io_with(format!("creating {}", name.display())))?;
    }
    let create_us = per_op(started.elapsed());
    let started = Instant::now();
    for name in &names {
        std::fs::metadata(name).map_err(io_with(format!("stat of {}", name.display())))?;
    }
    let stat_us = per_op(started.elapsed());
    let started = Instant::now();
    for name in &names {
        std::fs::remove_file(name).map_err(io_with(format!("unlinking {}", name.display())))?;
    }
    let unlink_us = per_op(started.elapsed());
    Ok(MetadataTimes {
        create_us,
        stat_us,
        unlink_us,
    })
}
