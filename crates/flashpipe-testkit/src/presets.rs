//! Flash presets written by tests: a shipped preset changed in one line, for the checks
//! that refuse it.

use std::path::Path;

/// Writes `path`: the shipped `rad` preset with 210 spare bytes a page instead of 224, which
/// leaves the host fewer spare bytes than the FTL's compact record needs.
pub fn write_tiny_spare_preset(path: &Path) {
    let rad = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../flashpipe-flash/presets/rad.toml"),
    )
    .expect("the shipped rad preset");
    assert!(
        rad.contains("page_spare_bytes = 224"),
        "rad's spare bytes moved"
    );
    std::fs::write(
        path,
        rad.replace("page_spare_bytes = 224", "page_spare_bytes = 210"),
    )
    .expect("write the tiny-spare preset");
}
