//! `flashpipe mkfs --layout`: the file system's layout on flash. `ftl` (the default) puts
//! it over the host FTL; `flash-aware` puts it straight on the pages of one flash device
//! with no FTL (docs/design/29-flash-aware.md), its block the flash page.

use flashpipe_store::flash_store::FlashLayout;

use super::*;

/// Block size of a store whose `--block-size` is not given and whose layout does not fix it.
pub const DEFAULT_BLOCK_SIZE: &str = "16KiB";

/// What `--layout` names.
pub fn parse_layout(text: Option<&str>) -> Result<FlashLayout, Failure> {
    match text {
        None | Some("ftl") => Ok(FlashLayout::Ftl),
        Some("flash-aware") => Ok(FlashLayout::FlashAware),
        Some(other) => Err(Failure::invalid_input(format!(
            "--layout {other}: the layouts are ftl (over the host FTL, the default) and flash-aware (straight on the flash pages, no FTL)"
        ))),
    }
}

/// In the flash-aware layout: checks that `devices` is one flash device with an image,
/// marks it, and gives the block size (the flash page; `--block-size` may only repeat
/// it). In the FTL layout: the block size given, or the default.
pub fn apply_layout(
    layout: FlashLayout,
    block_size: Option<&str>,
    devices: &mut [DeviceSpec],
    store: &Path,
) -> Result<u32, Box<dyn std::error::Error>> {
    let given = block_size.map(parse_block_size).transpose()?;
    if layout == FlashLayout::Ftl {
        return match given {
            Some(bytes) => Ok(bytes),
            None => parse_block_size(DEFAULT_BLOCK_SIZE),
        };
    }
    let spec = match devices {
        [DeviceSpec::Flash(spec)] => spec,
        [other] => {
            return Err(Failure::invalid_input(format!(
                "--layout flash-aware lays the file system on raw flash pages, and device {} is not flash: give one flash:PRESET:IMAGE device",
                other.describe()
            ))
            .into())
        }
        several => {
            return Err(Failure::invalid_input(format!(
                "--layout flash-aware takes exactly one flash:PRESET:IMAGE device, not {} (the layout is not striped): make one store per flash device",
                several.len()
            ))
            .into())
        }
    };
    let page_bytes = spec
        .flash_config(store)
        .map_err(Failure::invalid_input)?
        .geometry
        .page_data_bytes;
    if given.is_some_and(|bytes| bytes != page_bytes) {
        return Err(Failure::invalid_input(format!(
            "--layout flash-aware: the block is one flash page of {}, so --block-size {} cannot apply; leave --block-size out",
            HumanBytes(u64::from(page_bytes)),
            block_size.unwrap_or_default()
        ))
        .into());
    }
    spec.layout = FlashLayout::FlashAware;
    Ok(page_bytes)
}

/// `--realtime`: marks the one flash device of the flash-aware layout as paced; refused,
/// saying what to do instead, for any other store.
pub fn apply_realtime(devices: &mut [DeviceSpec]) -> Result<(), Failure> {
    match devices {
        [DeviceSpec::Flash(spec)] if spec.layout == FlashLayout::FlashAware => {
            spec.realtime = true;
            Ok(())
        }
        _ if devices.iter().any(|device| matches!(device, DeviceSpec::Flash(_))) => Err(Failure::invalid_input(
            "--realtime paces a flash device in the flash-aware layout: add --layout flash-aware, or pace a flash device over the FTL by exporting it (flashpipe nbd serve --realtime --export NAME=flash:PRESET:IMAGE)",
        )),
        _ => Err(Failure::invalid_input(
            "--realtime paces emulated flash, and the store has no flash device: give --devices flash:PRESET:IMAGE --layout flash-aware, or leave --realtime out",
        )),
    }
}

fn parse_block_size(text: &str) -> Result<u32, Box<dyn std::error::Error>> {
    let bytes = u32::try_from(parse_size_bytes(text)?)
        .map_err(|_| Failure::invalid_input(format!("block size {text} is too large")))?;
    check_block_size(bytes).map_err(Failure::invalid_input)?;
    Ok(bytes)
}
