//! Part 2's anchors (issue #13): the same per-file work on tmpfs and on ext4 over a
//! RAM-backed loop device, same file sizes, same machine, same run, so that flashpipe's
//! time per file can be read as a ratio to what the kernel's own file systems take.
//!
//! Per file, as a C program would do it:
//! - **write** = `open(O_CREAT | O_TRUNC | O_WRONLY)` + one `write` of the whole file from
//!   a buffer filled before the clock starts + `fsync` + `close`;
//! - **read** = `open` + one `read` of the whole file into a buffer whose pages are
//!   already mapped + `close`. The file was just written, so on both file systems its
//!   pages are in the page cache, as a program reading back what it wrote finds them.
//!
//! The bytes read are checked against the pattern after the clock stops, then the file
//! is deleted (untimed). Each size is measured on as many files as flashpipe's part 2
//! measures, and the shortest time of each kind is kept (the machine's other load only
//! ever adds time).
//!
//! Where: tmpfs is a tmpfs mounted here (root), else a folder of `/dev/shm` when that is
//! a tmpfs. ext4-RAM is an image file in that tmpfs (so in RAM), made with
//! `mkfs.ext4 -b 4096` (an ordinary ext4 with its journal), attached with `losetup`
//! and mounted; it needs root and `losetup` and `mkfs.ext4`, otherwise its column says
//! why it is n/a.
//!
//! Clean-up on every exit path: every mount is made by a thread of its own that first
//! enters a private mount namespace (`unshare(CLONE_NEWNS)`, every mount made private),
//! so nothing mounted here is seen by the rest of the machine and every mount vanishes
//! when that thread's namespace does, however the run ends (an error, a panic, the
//! process killed). The loop device is detached (`losetup -d`) as soon as it is mounted,
//! which makes the kernel free it at unmount (autoclear), and the image is unlinked
//! then, so its RAM goes with the loop device; the image lives in the tmpfs mounted
//! here, which goes with the namespace too. [`Ext4RamDisk`] and [`TmpfsFolder`]
//! unmount, detach and remove in order on drop. The one window left is between
//! `losetup` and the mount (milliseconds): a process killed just then leaves the loop
//! device behind (and, with it, the image's RAM until `losetup -d`).
//!
//! Each file system first writes and reads one untimed file of the smallest size, so
//! that no timed file pays for the first use of the journal or of fresh metadata.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::MIB;
use crate::pattern::DataPattern;

/// Where tmpfs is looked for first, and where its folder is made.
const SHARED_MEMORY_FOLDER: &str = "/dev/shm";
/// The ext4 image is at least this large, so mkfs makes an ordinary geometry.
const EXT4_IMAGE_MIN_BYTES: u64 = 256 * MIB;
/// Room in the ext4 image beyond two copies of the largest file (journal, metadata).
const EXT4_IMAGE_ROOM_BYTES: u64 = 64 * MIB;
/// Block size given to mkfs.ext4 (its default for ordinary volumes).
const EXT4_BLOCK_BYTES: u32 = 4096;

/// How the anchors are measured, printed with them.
pub const METHOD: &str = "per file, as a C program: write = open(O_CREAT|O_TRUNC) + one \
write() of the whole file from a buffer filled before the clock starts + fsync + close; \
read = open + one read() of the whole file into a mapped buffer + close (the file just \
written, so from the page cache); the shortest over as many files per size as flashpipe's, \
each file deleted afterwards (untimed)";

/// One file size on one anchor file system.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct AnchorPoint {
    /// File size.
    pub file_size_bytes: u64,
    /// Files measured (times are the shortest over them).
    pub repetitions: u32,
    /// open + write + fsync + close, per file.
    pub write_us: f64,
    /// open + read + close, per file.
    pub read_us: f64,
}

/// One anchor file system: where it was, or why it was not measured.
#[derive(Debug, Clone, Serialize)]
pub struct AnchorColumn {
    /// What it is.
    pub file_system: String,
    /// Where the files were (folder, loop device, image), when measured.
    pub location: Option<String>,
    /// Why the column is n/a.
    pub unavailable_reason: Option<String>,
    /// One point per file size (empty when n/a).
    pub points: Vec<AnchorPoint>,
}

impl AnchorColumn {
    fn measured(file_system: &str, location: String, points: Vec<AnchorPoint>) -> AnchorColumn {
        AnchorColumn {
            file_system: file_system.to_string(),
            location: Some(location),
            unavailable_reason: None,
            points,
        }
    }

    fn unavailable(file_system: &str, reason: String) -> AnchorColumn {
        AnchorColumn {
            file_system: file_system.to_string(),
            location: None,
            unavailable_reason: Some(reason),
            points: Vec::new(),
        }
    }

    /// The point of `file_size_bytes`, when measured.
    pub fn point(&self, file_size_bytes: u64) -> Option<&AnchorPoint> {
        self.points
            .iter()
            .find(|point| point.file_size_bytes == file_size_bytes)
    }
}

/// Both anchors.
#[derive(Debug, Clone, Serialize)]
pub struct AnchorResult {
    /// How the times are measured.
    pub method: String,
    /// tmpfs.
    pub tmpfs: AnchorColumn,
    /// ext4 on a RAM-backed loop device.
    pub ext4_ram: AnchorColumn,
}

/// Measures both anchors for each `(file size, files)` of `sizes`; mounts go under
/// `folder` (the benchmark's own folder).
pub fn run(sizes: &[(u64, u32)], folder: &Path) -> AnchorResult {
    let joined = std::thread::scope(|scope| {
        scope
            .spawn(|| measure_in_own_mount_namespace(sizes, folder))
            .join()
    });
    match joined {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Runs on a thread of its own: the namespace it enters is this thread's alone.
fn measure_in_own_mount_namespace(sizes: &[(u64, u32)], folder: &Path) -> AnchorResult {
    let namespace = enter_private_mount_namespace();
    let pattern = DataPattern::new();
    let largest_bytes = sizes.iter().map(|&(size, _)| size).max().unwrap_or(0);
    let (tmpfs, tmpfs_folder) = match TmpfsFolder::create(folder, &namespace) {
        Ok(tmpfs_folder) => {
            let column = match measure_files(&tmpfs_folder.path, sizes, &pattern) {
                Ok(points) => AnchorColumn::measured("tmpfs", tmpfs_folder.describe(), points),
                Err(reason) => AnchorColumn::unavailable("tmpfs", reason),
            };
            (column, Some(tmpfs_folder))
        }
        Err(reason) => (AnchorColumn::unavailable("tmpfs", reason), None),
    };
    let ext4_label = "ext4 on a RAM-backed loop device";
    let ext4_ram = match (&namespace, &tmpfs_folder) {
        (Err(reason), _) => AnchorColumn::unavailable(ext4_label, reason.clone()),
        (Ok(()), None) => AnchorColumn::unavailable(
            ext4_label,
            "no tmpfs to hold its image (see the tmpfs column)".to_string(),
        ),
        (Ok(()), Some(tmpfs_folder)) => {
            measure_ext4_ram(ext4_label, sizes, folder, tmpfs_folder, largest_bytes)
        }
    };
    drop(tmpfs_folder);
    AnchorResult {
        method: METHOD.to_string(),
        tmpfs,
        ext4_ram,
    }
}

fn measure_ext4_ram(
    label: &str,
    sizes: &[(u64, u32)],
    folder: &Path,
    tmpfs_folder: &TmpfsFolder,
    largest_bytes: u64,
) -> AnchorColumn {
    let image_bytes = (2 * largest_bytes + EXT4_IMAGE_ROOM_BYTES)
        .max(EXT4_IMAGE_MIN_BYTES)
        .div_ceil(MIB)
        * MIB;
    let disk = match Ext4RamDisk::create(folder, &tmpfs_folder.path, image_bytes) {
        Ok(disk) => disk,
        Err(reason) => return AnchorColumn::unavailable(label, reason),
    };
    match measure_files(&disk.mount_point, sizes, &DataPattern::new()) {
        Ok(points) => AnchorColumn::measured(label, disk.describe(), points),
        Err(reason) => AnchorColumn::unavailable(label, reason),
    }
}

/// Moves the calling thread (alone) into a mount namespace of its own whose mounts
/// propagate nowhere. Needs root.
fn enter_private_mount_namespace() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let effective_user = unsafe { libc::geteuid() };
    if effective_user != 0 {
        return Err(format!(
            "not root (user {effective_user}): mounting and losetup need root"
        ));
    }
    // SAFETY: unshare takes flags only; CLONE_NEWNS (which implies CLONE_FS) changes
    // the calling thread's mount namespace and file-system context, nothing in memory.
    let status = unsafe { libc::unshare(libc::CLONE_NEWNS) };
    if status != 0 {
        return Err(format!(
            "unshare(CLONE_NEWNS) for a private mount namespace failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    let root = c_string(Path::new("/"))?;
    let none = c_string(Path::new("none"))?;
    // SAFETY: every pointer is a NUL-terminated string alive for the call (or null for
    // the file-system type and data, ignored when only propagation changes).
    let status = unsafe {
        libc::mount(
            none.as_ptr(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    match status {
        0 => Ok(()),
        _ => Err(format!(
            "making the private mount namespace's mounts private failed: {}",
            std::io::Error::last_os_error()
        )),
    }
}

fn c_string(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("path {} holds a NUL byte", path.display()))
}

/// `mount(source, target, file_system_type, 0, data)`.
fn mount(
    source: &Path,
    target: &Path,
    file_system_type: &str,
    data: Option<&str>,
) -> Result<(), String> {
    let source_c = c_string(source)?;
    let target_c = c_string(target)?;
    let type_c = c_string(Path::new(file_system_type))?;
    let data_c = data.map(|data| c_string(Path::new(data))).transpose()?;
    let data_pointer = data_c
        .as_ref()
        .map_or(std::ptr::null(), |data| data.as_ptr().cast());
    // SAFETY: every pointer is a NUL-terminated string alive for the call, or null for
    // data, which mount(2) allows.
    let status = unsafe {
        libc::mount(
            source_c.as_ptr(),
            target_c.as_ptr(),
            type_c.as_ptr(),
            0,
            data_pointer,
        )
    };
    match status {
        0 => Ok(()),
        _ => Err(format!(
            "mounting {} ({file_system_type}) at {} failed: {}",
            source.display(),
            target.display(),
            std::io::Error::last_os_error()
        )),
    }
}

/// Unmounts `target`, detaching it lazily if it is busy.
fn unmount(target: &Path) {
    let Ok(target_c) = c_string(target) else {
        return;
    };
    // SAFETY: the pointer is a NUL-terminated string alive for the call.
    let status = unsafe { libc::umount2(target_c.as_ptr(), 0) };
    if status != 0 {
        // SAFETY: as above.
        unsafe { libc::umount2(target_c.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Runs a tool, returning its standard output, or why it failed.
fn run_tool(program: &str, arguments: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(arguments)
        .output()
        .map_err(|error| format!("{program} could not be run ({error})"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} {} failed ({}): {}",
            arguments.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn folder_is_tmpfs(folder: &Path) -> bool {
    super::report::folder_file_system(folder) == "tmpfs"
}

/// A folder on tmpfs: in `/dev/shm`, or a tmpfs mounted in the benchmark's folder.
struct TmpfsFolder {
    path: PathBuf,
    mounted_here: bool,
}

impl TmpfsFolder {
    /// Mounts a tmpfs of its own when this thread has a private mount namespace (so
    /// that it, and every file in it, goes away with the namespace, however the run
    /// ends), else makes a folder in `/dev/shm` when that is a tmpfs.
    fn create(folder: &Path, namespace: &Result<(), String>) -> Result<TmpfsFolder, String> {
        let shared_memory = Path::new(SHARED_MEMORY_FOLDER);
        let no_namespace = match namespace {
            Ok(()) => return TmpfsFolder::mount_own(folder),
            Err(reason) => reason,
        };
        if !folder_is_tmpfs(shared_memory) {
            return Err(format!(
                "{SHARED_MEMORY_FOLDER} is not a tmpfs, and mounting one is not possible: \
                 {no_namespace}"
            ));
        }
        let path = shared_memory.join(format!("flashpipe-bench-fs-{}", std::process::id()));
        std::fs::create_dir(&path)
            .map_err(|error| format!("creating {}: {error}", path.display()))?;
        Ok(TmpfsFolder {
            path,
            mounted_here: false,
        })
    }

    fn mount_own(folder: &Path) -> Result<TmpfsFolder, String> {
        let path = folder.join("tmpfs-anchor");
        std::fs::create_dir(&path)
            .map_err(|error| format!("creating {}: {error}", path.display()))?;
        let mut tmpfs = TmpfsFolder {
            path,
            mounted_here: false,
        };
        mount(Path::new("tmpfs"), &tmpfs.path, "tmpfs", None)?;
        tmpfs.mounted_here = true;
        Ok(tmpfs)
    }

    fn describe(&self) -> String {
        match self.mounted_here {
            true => format!(
                "{} (a tmpfs mounted in a private mount namespace)",
                self.path.display()
            ),
            false => self.path.display().to_string(),
        }
    }
}

impl Drop for TmpfsFolder {
    fn drop(&mut self) {
        if self.mounted_here {
            unmount(&self.path);
            let _ = std::fs::remove_dir(&self.path);
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// ext4 on a loop device over an image file in tmpfs, mounted in this thread's private
/// mount namespace. Each field records what is left to undo.
struct Ext4RamDisk {
    image: PathBuf,
    image_bytes: u64,
    image_present: bool,
    loop_device: String,
    loop_device_to_detach: bool,
    mount_point: PathBuf,
    mount_point_present: bool,
    mounted: bool,
}

impl Ext4RamDisk {
    fn create(folder: &Path, tmpfs_folder: &Path, image_bytes: u64) -> Result<Ext4RamDisk, String> {
        for tool in ["losetup", "mkfs.ext4"] {
            run_tool(tool, &["-V"]).map_err(|reason| format!("{tool} is needed: {reason}"))?;
        }
        let mut disk = Ext4RamDisk {
            image: tmpfs_folder.join("ext4-ram.img"),
            image_bytes,
            image_present: false,
            loop_device: String::new(),
            loop_device_to_detach: false,
            mount_point: folder.join("ext4-ram"),
            mount_point_present: false,
            mounted: false,
        };
        let image = File::create(&disk.image)
            .map_err(|error| format!("creating {}: {error}", disk.image.display()))?;
        disk.image_present = true;
        image
            .set_len(image_bytes)
            .map_err(|error| format!("sizing {}: {error}", disk.image.display()))?;
        drop(image);
        let image_text = disk.image.display().to_string();
        let block_bytes = EXT4_BLOCK_BYTES.to_string();
        run_tool(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-b",
                &block_bytes,
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                &image_text,
            ],
        )?;
        std::fs::create_dir(&disk.mount_point)
            .map_err(|error| format!("creating {}: {error}", disk.mount_point.display()))?;
        disk.mount_point_present = true;
        disk.loop_device = run_tool("losetup", &["--find", "--show", &image_text])?;
        disk.loop_device_to_detach = true;
        mount(
            Path::new(&disk.loop_device),
            &disk.mount_point,
            "ext4",
            None,
        )?;
        disk.mounted = true;
        // Detaching a mounted loop device marks it autoclear: the kernel frees it at
        // unmount, including the unmount of a namespace that goes away.
        run_tool("losetup", &["-d", &disk.loop_device])?;
        disk.loop_device_to_detach = false;
        std::fs::remove_file(&disk.image)
            .map_err(|error| format!("removing {}: {error}", disk.image.display()))?;
        disk.image_present = false;
        Ok(disk)
    }

    fn describe(&self) -> String {
        format!(
            "{} (mkfs.ext4 -b {EXT4_BLOCK_BYTES}, journal on) over a {} MiB image in tmpfs, \
             mounted at {} in a private mount namespace",
            self.loop_device,
            self.image_bytes / MIB,
            self.mount_point.display()
        )
    }
}

impl Drop for Ext4RamDisk {
    fn drop(&mut self) {
        if self.mounted {
            unmount(&self.mount_point);
        }
        if self.loop_device_to_detach {
            let _ = run_tool("losetup", &["-d", &self.loop_device]);
        }
        if self.image_present {
            let _ = std::fs::remove_file(&self.image);
        }
        if self.mount_point_present {
            let _ = std::fs::remove_dir(&self.mount_point);
        }
    }
}

/// Measures every size in `directory`, after one untimed file of the smallest size.
fn measure_files(
    directory: &Path,
    sizes: &[(u64, u32)],
    pattern: &DataPattern,
) -> Result<Vec<AnchorPoint>, String> {
    if let Some(&(smallest_bytes, _)) = sizes.iter().min() {
        measure_size(directory, smallest_bytes, 1, pattern)?;
    }
    sizes
        .iter()
        .map(|&(size_bytes, repetitions)| measure_size(directory, size_bytes, repetitions, pattern))
        .collect()
}

fn measure_size(
    directory: &Path,
    size_bytes: u64,
    repetitions: u32,
    pattern: &DataPattern,
) -> Result<AnchorPoint, String> {
    assert!(repetitions > 0, "every size is measured at least once");
    let mut contents = vec![0u8; size_bytes as usize];
    pattern.fill(0, &mut contents);
    let mut read_back = vec![0xa5u8; size_bytes as usize];
    let mut fastest_write = Duration::MAX;
    let mut fastest_read = Duration::MAX;
    for repetition in 0..repetitions {
        let path = directory.join(format!("anchor-{size_bytes}-{repetition}"));
        fastest_write = fastest_write.min(timed_write(&path, &contents)?);
        fastest_read = fastest_read.min(timed_read(&path, &mut read_back)?);
        pattern
            .check(0, &read_back)
            .map_err(|mismatch| format!("{}: {mismatch}", path.display()))?;
        read_back.fill(0xa5);
        std::fs::remove_file(&path)
            .map_err(|error| format!("deleting {}: {error}", path.display()))?;
    }
    let micros = |duration: Duration| duration.as_secs_f64() * 1e6;
    Ok(AnchorPoint {
        file_size_bytes: size_bytes,
        repetitions,
        write_us: micros(fastest_write),
        read_us: micros(fastest_read),
    })
}

/// open(O_CREAT | O_TRUNC | O_WRONLY) + write + fsync + close.
fn timed_write(path: &Path, contents: &[u8]) -> Result<Duration, String> {
    let failed = |what: &str| {
        let what = format!("{what} {}", path.display());
        move |error: std::io::Error| format!("{what}: {error}")
    };
    let started = Instant::now();
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(failed("creating"))?;
    file.write_all(contents).map_err(failed("writing"))?;
    file.sync_all().map_err(failed("fsync of"))?;
    drop(file);
    Ok(started.elapsed())
}

/// open + read + close.
fn timed_read(path: &Path, buffer: &mut [u8]) -> Result<Duration, String> {
    let failed = |what: &str| {
        let what = format!("{what} {}", path.display());
        move |error: std::io::Error| format!("{what}: {error}")
    };
    let started = Instant::now();
    let mut file = File::open(path).map_err(failed("opening"))?;
    file.read_exact(buffer).map_err(failed("reading"))?;
    drop(file);
    Ok(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_measured_checked_and_removed_in_any_folder() {
        let folder = std::env::temp_dir().join(format!("anchors-test-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let sizes = [(1 << 10, 2), (100 << 10, 1)];
        let points = measure_files(&folder, &sizes, &DataPattern::new()).unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].file_size_bytes, 1 << 10);
        assert_eq!(points[0].repetitions, 2);
        assert!(points
            .iter()
            .all(|point| point.write_us > 0.0 && point.read_us > 0.0));
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0, "files left");
        std::fs::remove_dir(&folder).unwrap();
    }

    #[test]
    fn a_missing_folder_is_a_reason_not_a_panic() {
        let missing = Path::new("/nonexistent-flashpipe-anchor-folder");
        let reason = measure_files(missing, &[(1 << 10, 1)], &DataPattern::new()).unwrap_err();
        assert!(
            reason.contains("/nonexistent-flashpipe-anchor-folder"),
            "{reason}"
        );
    }
}
