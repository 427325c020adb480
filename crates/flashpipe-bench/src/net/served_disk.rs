//! What each server of `bench net` serves: a RAM disk of its own, or one file shared by
//! every server (the "same file" rows), with the caching choice stated for all three.
//!
//! The file lives in a folder the user names (its file system is printed beside the
//! tables), is allocated once (`fallocate`) before any server opens it, and is removed at
//! the end. Caching ([`FileCache`]):
//! - `direct` (default): flashpipe's file export as `flashpipe serve --export d=file:PATH`
//!   opens it (`O_DIRECT`, io_uring), `qemu-nbd --cache=none --aio=native` (`O_DIRECT`),
//!   `nbdkit file cache=none` (nbdkit's file plugin has no `O_DIRECT`; `cache=none` evicts
//!   each request's pages from the page cache after it, the nearest it offers);
//! - `buffered`: every server through the page cache: flashpipe's file device with
//!   `direct_io: false`, `qemu-nbd --cache=writeback --aio=threads`, `nbdkit file` as it
//!   comes.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use flashpipe_device::file::{FileDevice, FileDeviceConfig};
use flashpipe_nbd::server::export::EXPORT_QUEUE_DEPTH;
use flashpipe_nbd::server::{Export, ExportDeviceSpec, InitialAllocation};

use crate::error::io_with;
use crate::BenchResult;

/// qemu-nbd's RAM disk: a raw image of this name in the scratch folder (in `/dev/shm`).
pub const QEMU_NBD_RAM_IMAGE: &str = "qemu-nbd.raw";

/// The disks `--disks` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NetDisk {
    /// A RAM disk per server (`ram:`, `/dev/shm` for qemu-nbd, `nbdkit memory`).
    Ram,
    /// The same file for every server, in `--file-dir`.
    File,
}

impl NetDisk {
    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            NetDisk::Ram => "ram",
            NetDisk::File => "file",
        }
    }
}

/// How every server caches the served file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FileCache {
    /// Past the page cache: `O_DIRECT` for flashpipe and qemu-nbd, `cache=none` for nbdkit.
    Direct,
    /// Through the page cache, for every server.
    Buffered,
}

impl FileCache {
    /// What each server was told, for the report.
    pub fn describe(self) -> &'static str {
        match self {
            FileCache::Direct => {
                "direct: flashpipe O_DIRECT (io_uring), qemu-nbd --cache=none --aio=native \
                 (O_DIRECT), nbdkit file cache=none (page cache evicted per request; \
                 its file plugin has no O_DIRECT)"
            }
            FileCache::Buffered => {
                "buffered: flashpipe page cache (direct_io off), qemu-nbd --cache=writeback \
                 --aio=threads, nbdkit file default caching"
            }
        }
    }
}

/// One disk as the servers are told to serve it.
#[derive(Debug, Clone)]
pub enum ServedDisk {
    /// A RAM disk of this size per server.
    Ram {
        /// Bytes.
        size_bytes: u64,
    },
    /// The shared file.
    File {
        /// Its path (absolute).
        path: PathBuf,
        /// The caching every server uses.
        cache: FileCache,
    },
}

impl ServedDisk {
    /// The disk's kind.
    pub fn kind(&self) -> NetDisk {
        match self {
            ServedDisk::Ram { .. } => NetDisk::Ram,
            ServedDisk::File { .. } => NetDisk::File,
        }
    }

    /// flashpipe's export of this disk, opened in this process.
    pub fn flashpipe_export(&self, name: &str) -> BenchResult<Export> {
        match self {
            ServedDisk::Ram { size_bytes } => Ok(Export::open(
                name,
                &ExportDeviceSpec::Ram {
                    size_bytes: *size_bytes,
                },
            )?),
            ServedDisk::File {
                path,
                cache: FileCache::Direct,
                ..
            } => Ok(Export::open(
                name,
                &ExportDeviceSpec::File { path: path.clone() },
            )?),
            ServedDisk::File {
                path,
                cache: FileCache::Buffered,
                ..
            } => buffered_file_export(name, path),
        }
    }

    /// Adds qemu-nbd's image, format and caching arguments (the image last).
    pub fn qemu_nbd_arguments(
        &self,
        command: &mut Command,
        ram_image_folder: &Path,
    ) -> BenchResult {
        let (image, cache_arguments) = match self {
            ServedDisk::Ram { size_bytes } => {
                let image = ram_image_folder.join(QEMU_NBD_RAM_IMAGE);
                if !image.exists() {
                    std::fs::File::create(&image)?.set_len(*size_bytes)?;
                }
                (image, ["--cache=writeback", "--aio=threads"])
            }
            ServedDisk::File {
                path,
                cache: FileCache::Direct,
                ..
            } => (path.clone(), ["--cache=none", "--aio=native"]),
            ServedDisk::File {
                path,
                cache: FileCache::Buffered,
                ..
            } => (path.clone(), ["--cache=writeback", "--aio=threads"]),
        };
        command.args(cache_arguments).arg(image);
        Ok(())
    }

    /// nbdkit's plugin and its parameters.
    pub fn nbdkit_plugin_arguments(&self) -> Vec<String> {
        match self {
            ServedDisk::Ram { size_bytes } => {
                vec!["memory".to_string(), format!("size={size_bytes}")]
            }
            ServedDisk::File { path, cache, .. } => {
                let mut arguments = vec!["file".to_string(), format!("file={}", path.display())];
                if *cache == FileCache::Direct {
                    arguments.push("cache=none".to_string());
                }
                arguments
            }
        }
    }
}

/// flashpipe's file device through the page cache, exported as `Export::open` exports a
/// file (same queue depth, allocation map and trim answer).
fn buffered_file_export(name: &str, path: &Path) -> BenchResult<Export> {
    let mut config = FileDeviceConfig::new(path);
    config.queue_depth = EXPORT_QUEUE_DEPTH;
    config.direct_io = false;
    let device = FileDevice::open(config)?;
    Ok(Export {
        name: name.to_string(),
        description: format!("flashpipe file device {} (buffered)", path.display()),
        device: Box::new(device),
        read_only: false,
        trim_reads_zeroes: true,
        initial_allocation: InitialAllocation::AllData,
    })
}

/// The shared file: made in `folder` and allocated, removed on drop.
pub struct SharedFile {
    /// Its absolute path.
    pub path: PathBuf,
    /// The folder's file system (`df`'s name for it).
    pub file_system: String,
}

impl SharedFile {
    /// Makes `flashpipe-bench-net-PID.img` of `size_bytes` in `folder`, every block
    /// allocated so that no server pays for allocation in a measured row.
    pub fn create(folder: &Path, size_bytes: u64) -> BenchResult<SharedFile> {
        std::fs::create_dir_all(folder)
            .map_err(io_with(format!("--file-dir {}", folder.display())))?;
        let folder = std::fs::canonicalize(folder)
            .map_err(io_with(format!("--file-dir {}", folder.display())))?;
        let path = folder.join(format!("flashpipe-bench-net-{}.img", std::process::id()));
        let file = std::fs::File::create(&path)
            .map_err(io_with(format!("creating {}", path.display())))?;
        let shared = SharedFile {
            file_system: crate::fs::folder_file_system(&folder),
            path,
        };
        allocate(&file, size_bytes)
            .map_err(io_with(format!("allocating {}", shared.path.display())))?;
        Ok(shared)
    }
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `fallocate` over the whole length; `set_len` where the file system refuses it.
fn allocate(file: &std::fs::File, size_bytes: u64) -> std::io::Result<()> {
    let length = libc::off_t::try_from(size_bytes)
        .map_err(|_| std::io::Error::other("size beyond off_t"))?;
    // SAFETY: fallocate takes an open descriptor, which `file` holds for the call.
    let status = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, length) };
    if status == 0 {
        return Ok(());
    }
    file.set_len(size_bytes)
}
