//! The example kernels of the repository (examples/wasm-kernels), for tests and the bench:
//! the WAT histogram is read as text; the Rust ones are built from source with cargo for
//! `wasm32-unknown-unknown` (the target `scripts/install-test-packages` installs).

use std::path::PathBuf;
use std::process::Command;

/// Why an example module could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    /// The example's source is not where the repository keeps it.
    #[error("the example {name} is not at {path} (run from a checkout of the repository)")]
    Missing {
        /// The example.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// cargo could not build it (the target not installed, most often).
    #[error(
        "cannot build the example {name} for wasm32-unknown-unknown: {reason}; install the target with `rustup target add wasm32-unknown-unknown`"
    )]
    Build {
        /// The example.
        name: String,
        /// cargo's last lines.
        reason: String,
    },
}

/// The folder of the repository's example kernels.
pub fn examples_folder() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/wasm-kernels")
}

/// The text of the WAT histogram example.
pub fn histogram_wat() -> Result<Vec<u8>, ExampleError> {
    let path = examples_folder().join("histogram.wat");
    std::fs::read(&path).map_err(|_| ExampleError::Missing {
        name: "histogram.wat".into(),
        path,
    })
}

/// Builds the Rust example `name` (`crc32c`, `wordcount`) in release mode for
/// `wasm32-unknown-unknown` and returns the module's bytes.
pub fn build_rust_example(name: &str) -> Result<Vec<u8>, ExampleError> {
    let folder = examples_folder().join(name);
    let manifest = folder.join("Cargo.toml");
    if !manifest.is_file() {
        return Err(ExampleError::Missing {
            name: name.into(),
            path: folder,
        });
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("wasm-examples");
    let build_error = |reason: String| ExampleError::Build {
        name: name.into(),
        reason,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--quiet",
            "--target",
            "wasm32-unknown-unknown",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .map_err(|error| build_error(format!("cannot run cargo ({error})")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last: Vec<&str> = stderr.lines().rev().take(3).collect();
        return Err(build_error(
            last.into_iter().rev().collect::<Vec<_>>().join(" / "),
        ));
    }
    let module = target_dir
        .join("wasm32-unknown-unknown/release")
        .join(format!("flashpipe_wasm_{name}.wasm"));
    std::fs::read(&module).map_err(|error| build_error(format!("{}: {error}", module.display())))
}

/// True when a missing tool must fail the caller (`FLASHPIPE_REQUIRE_TOOLS=1`, set by CI).
pub fn tools_required() -> bool {
    std::env::var("FLASHPIPE_REQUIRE_TOOLS").is_ok_and(|value| value == "1")
}
