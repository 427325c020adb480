//! `flashpipe mkfs`: checks every argument, creates the devices, formats the file system
//! and writes the store file; nothing is left behind when any step fails.

use super::*;

mod layout;

/// `flashpipe mkfs`.
#[derive(Debug, clap::Args)]
pub struct MkfsArgs {
    /// Devices, comma-separated: file paths, `ram:SIZE`, and `flash:PRESET:IMAGE` (emulated
    /// NAND flash of a preset, minflash, minflash-rack, rad or tlc or a preset file, under the host FTL,
    /// kept in the sparse file IMAGE; `flashpipe sim presets` lists them). Paths are
    /// relative to the working directory; the store file records them relative to its own
    /// folder when they lie inside it, absolute otherwise. Remote disks: NBD URIs,
    /// `nbd://HOST[:PORT]/EXPORT` or `nbd+unix:///EXPORT?socket=PATH` (`--size`: the bytes
    /// of each export used).
    #[arg(long, required = true)]
    pub devices: String,
    /// Flash devices: share of the usable pages the FTL holds back (0.1 = 10%).
    #[arg(long)]
    pub flash_over_provisioning: Option<f64>,
    /// Flash devices: erase blocks per plane (the preset's geometry otherwise, cut to 8 GiB raw).
    #[arg(long)]
    pub flash_blocks_per_plane: Option<u32>,
    /// Size of each device (e.g. 2GiB): file devices and NBD exports need it; on a flash
    /// device the store uses that much (the emulated array grows past its default 8 GiB
    /// raw to hold it; more than the preset can hold is refused).
    #[arg(long)]
    pub size: Option<String>,
    /// File-system block size: 4KiB, 8KiB, 16KiB (the default) or a larger power of two;
    /// with --layout flash-aware, the flash page.
    #[arg(long)]
    pub block_size: Option<String>,
    /// How the file system lies on flash: ftl (over the host FTL, the default) or
    /// flash-aware (straight on the pages of one flash:PRESET:IMAGE device, no FTL: the file
    /// system allocates pages, collects garbage and erases blocks itself).
    #[arg(long, value_name = "LAYOUT")]
    pub layout: Option<String>,
    /// With --layout flash-aware: pace the flash device against the wall clock (real-time
    /// emulation) whenever the store is opened, so programs on a mount see the preset's
    /// latencies; recorded in the store file (`realtime = true`).
    #[arg(long)]
    pub realtime: bool,
    /// Bytes placed on one device before the next.
    #[arg(long, default_value = "64KiB")]
    pub stripe_unit: String,
    /// Requests in flight per device.
    #[arg(long, default_value_t = 32)]
    pub queue_depth: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Format devices that hold data already (their contents are lost): a flashpipe store
    /// or flash image, another file system, swap, LUKS, a partition table, or any non-zero
    /// byte in the first MiB; without it such a device is refused, naming what it holds.
    #[arg(long)]
    pub force: bool,
    /// Wait for a command using one of the devices to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// Allocate every block of the image files mkfs creates now (fallocate), instead of
    /// making them sparse as `qemu-img create` does. Sparse (the default): a fresh image
    /// takes almost no space and grows as data is written, so a file system that fills up
    /// fails a later write (ENOSPC, the store keeps its last commit). Preallocated: mkfs
    /// fails at once when the room is not there, and writes never meet a full file system.
    #[arg(long)]
    pub preallocate: bool,
    /// Permission bits (octal) of the image files and store file mkfs creates; 600
    /// (the owner alone) unless given, whatever the umask.
    #[arg(long, value_name = "OCTAL")]
    pub mode: Option<String>,
    /// The store file to write (must not exist).
    pub store: PathBuf,
}

/// Runs `mkfs`: validates everything, creates the devices, formats, writes the store file.
pub fn run_mkfs(arguments: MkfsArgs) -> CliResult {
    let mode = match &arguments.mode {
        Some(text) => permissions::parse_mode(text).map_err(Failure::invalid_input)?,
        None => permissions::DEFAULT_CREATED_MODE,
    };
    let config = mkfs_config(&arguments)?;
    config.validate(&arguments.store)?;
    refuse_devices_that_do_not_last(&config)?;
    let wait = if arguments.wait {
        LockWait::Wait
    } else {
        LockWait::Fail
    };
    let has_file_device = config
        .devices
        .iter()
        .any(|device| matches!(device, DeviceSpec::File { .. }));
    if arguments.preallocate && !has_file_device {
        return Err(Failure::invalid_input(
            "--preallocate applies to image files (devices named by a file path); this store has none (flash images are always sparse)",
        )
        .into());
    }
    let existing = permissions::existing_store_files(&config, &arguments.store);
    let stats = {
        let _umask = permissions::PrivateUmask::set();
        create_store_with_options(
            &config,
            &arguments.store,
            CreateOptions {
                force: arguments.force,
                wait,
                preallocate: arguments.preallocate,
            },
            &mut print_note,
        )?
    };
    permissions::apply_mode(&config, &arguments.store, &existing, mode)?;
    let capacity_bytes = stats.fs_block_count * u64::from(stats.fs_block_size_bytes);
    if arguments.json {
        println!(
            "{}",
            json!({"store": arguments.store, "devices": config.devices.len(),
                   "capacity_bytes": capacity_bytes, "block_size_bytes": config.block_size_bytes,
                   "stripe_unit_bytes": config.stripe_unit_bytes})
        );
    } else {
        eprintln!(
            "formatted {}: {} over {} device(s), {} blocks, {} stripe unit",
            arguments.store.display(),
            HumanBytes(capacity_bytes),
            config.devices.len(),
            HumanBytes(u64::from(config.block_size_bytes)),
            HumanBytes(config.stripe_unit_bytes)
        );
    }
    Ok(())
}

/// Refuses devices whose contents end with the mkfs process (`ram:SIZE`, `flash:PRESET`
/// without an image): every later command would refuse the store file mkfs wrote.
fn refuse_devices_that_do_not_last(config: &StoreConfig) -> CliResult {
    for device in &config.devices {
        let instead = match device {
            DeviceSpec::Ram { size_bytes } => format!(
                "a file device of that size: --devices dev0.img --size {}",
                HumanBytes(*size_bytes).to_string().replace(' ', "")
            ),
            DeviceSpec::Flash(spec) if spec.path.is_none() => format!(
                "an image file to keep its pages in: --devices flash:{}:{}.img",
                spec.preset,
                Path::new(&spec.preset)
                    .file_stem()
                    .map_or("flash".into(), |stem| stem.to_string_lossy())
            ),
            _ => continue,
        };
        return Err(Failure::invalid_input(format!(
            "device {} keeps its contents only inside the process that opens it, so the store mkfs would write could never be opened again; use {instead}",
            device.describe().replace(' ', "")
        ))
        .into());
    }
    Ok(())
}

fn mkfs_config(arguments: &MkfsArgs) -> Result<StoreConfig, Box<dyn std::error::Error>> {
    let size_bytes = arguments
        .size
        .as_deref()
        .map(parse_size_bytes)
        .transpose()?;
    let flash_layout = layout::parse_layout(arguments.layout.as_deref())?;
    let stripe_unit_bytes = parse_size_bytes(&arguments.stripe_unit)?;
    check_stripe_unit(stripe_unit_bytes).map_err(Failure::invalid_input)?;
    let mut devices = parse_device_list(&arguments.devices, size_bytes)?;
    record_paths_for_store_file(&mut devices, &arguments.store)?;
    apply_flash_options(arguments, &mut devices)?;
    let block_size_bytes = layout::apply_layout(
        flash_layout,
        arguments.block_size.as_deref(),
        &mut devices,
        &arguments.store,
    )?;
    if arguments.realtime {
        layout::apply_realtime(&mut devices)?;
    }
    for device in devices.iter_mut() {
        if let DeviceSpec::Cluster(spec) = device {
            spec.resolve(&arguments.store).map_err(|reason| {
                Failure::invalid_input(format!("device {}: {reason}", spec.describe()))
            })?;
        }
    }
    if let Some(size_bytes) = size_bytes {
        for device in devices.iter_mut() {
            if let DeviceSpec::Flash(spec) = device {
                spec.fit_size(&arguments.store, size_bytes)?;
            }
        }
    }
    Ok(StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        identity: None,
        block_size_bytes,
        stripe_unit_bytes,
        queue_depth: arguments.queue_depth,
        devices,
    })
}

/// Rewrites the device paths given on the command line (relative to the working
/// directory, as every Unix tool reads paths) into what the store file records, which
/// reads its paths relative to its own folder: a path inside that folder becomes relative
/// to it (the store and its devices can move together), any other becomes absolute.
fn record_paths_for_store_file(devices: &mut [DeviceSpec], store: &Path) -> CliResult {
    let working_directory = std::env::current_dir().map_err(|error| {
        Failure::context(
            &error,
            format!("the working directory cannot be read: {error}"),
        )
    })?;
    let absolute_store = lexically_normal(&working_directory.join(store));
    let store_folder = absolute_store
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let record = |path: &Path| {
        let absolute = lexically_normal(&working_directory.join(path));
        match absolute.strip_prefix(&store_folder) {
            Ok(inside) if !inside.as_os_str().is_empty() => inside.to_path_buf(),
            _ => absolute,
        }
    };
    for device in devices.iter_mut() {
        match device {
            DeviceSpec::File { path, .. } => *path = record(path),
            DeviceSpec::Flash(spec) => {
                if let Some(path) = spec.path.as_mut() {
                    *path = record(path);
                }
                if !flashpipe_flash::config::PRESET_NAMES.contains(&spec.preset.as_str()) {
                    spec.preset = record(Path::new(&spec.preset)).display().to_string();
                }
            }
            DeviceSpec::Cluster(spec) => spec.description = record(&spec.description),
            DeviceSpec::Ram { .. } | DeviceSpec::Nbd { .. } => {}
        }
    }
    Ok(())
}

/// `path` (absolute) with `.` dropped and each `..` taking off the component before it,
/// without touching the file system (the devices may not exist yet).
fn lexically_normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other.as_os_str()),
        }
    }
    normal
}

/// Applies `--flash-*` to every flash device; refuses them when there is none, so a
/// mistyped device list does not silently ignore them. Their ranges are checked with the
/// rest of the store file (`StoreConfig::validate`).
fn apply_flash_options(arguments: &MkfsArgs, devices: &mut [DeviceSpec]) -> CliResult {
    let given =
        arguments.flash_over_provisioning.is_some() || arguments.flash_blocks_per_plane.is_some();
    let mut flash_count = 0;
    for device in devices.iter_mut() {
        let DeviceSpec::Flash(spec) = device else {
            continue;
        };
        flash_count += 1;
        if let Some(over_provisioning) = arguments.flash_over_provisioning {
            spec.over_provisioning = over_provisioning;
        }
        if let Some(blocks_per_plane) = arguments.flash_blocks_per_plane {
            spec.blocks_per_plane = Some(blocks_per_plane);
        }
    }
    if given && flash_count == 0 {
        return Err(Failure::invalid_input("--flash-over-provisioning and --flash-blocks-per-plane apply to flash devices (flash:PRESET:IMAGE); this store has none").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_paths_normalize_without_the_file_system() {
        assert_eq!(
            lexically_normal(Path::new("/w/s7/./../s7/a.img")),
            Path::new("/w/s7/a.img")
        );
        assert_eq!(lexically_normal(Path::new("/../x")), Path::new("/x"));
    }
}
