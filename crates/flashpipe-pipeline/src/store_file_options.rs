//! The one place a kernel option naming a store file is resolved: before the kernel is
//! built, the run layer (`flashpipe run` in process, and the server) reads each file its
//! options name (`flashpipe_kernels::store_files` lists them, with a size limit each) from
//! the engine it runs on, and hands the bytes to the kernel's builder. The kernel never
//! opens the store; a file over the limit is refused before it is read whole.

use std::sync::Arc;

use flashpipe_engine::{EngineClient, StreamError};
use flashpipe_kernels::api::Kernel;
use flashpipe_kernels::error::OptionsError;
use flashpipe_kernels::registry::KernelSpec;
use flashpipe_kernels::store_files::{store_file_options, StoreFiles};

/// Reads in flight while a store file named by an option is read.
const READS_IN_FLIGHT: usize = 4;

/// Why a kernel whose options name store files could not be built.
#[derive(Debug, thiserror::Error)]
pub enum StoreFileOptionError {
    /// The options are refused, or the file over its limit, or the kernel refuses it.
    #[error("{0}")]
    Options(#[source] OptionsError),
    /// The store file could not be read (not found, an engine error).
    #[error("option {key}={name}: cannot read the store file: {source}")]
    Read {
        /// The option.
        key: String,
        /// The store file.
        name: String,
        /// The engine's error.
        #[source]
        source: StreamError,
    },
}

/// True when `spec` has options naming store files (it is then built with
/// [`build_reading_store_files`] where the store is open).
pub fn names_store_files(spec: &KernelSpec) -> bool {
    store_file_options(spec.name).next().is_some()
}

/// Builds the kernel of `spec` from `arguments`, with the store files they name read
/// through `client` first.
pub fn build_reading_store_files(
    spec: &KernelSpec,
    arguments: &[String],
    client: &mut EngineClient,
) -> Result<Arc<dyn Kernel>, StoreFileOptionError> {
    let mut files = StoreFiles::new();
    for listed in store_file_options(spec.name) {
        let Some(name) = arguments
            .iter()
            .filter_map(|argument| argument.split_once('='))
            .find(|(key, _)| *key == listed.key)
            .map(|(_, value)| value)
            .filter(|value| !value.is_empty())
        else {
            continue;
        };
        let mut contents = Vec::new();
        let mut too_big = false;
        let max_bytes = listed.max_bytes;
        let mut sink = |bytes: &[u8]| {
            if contents.len() as u64 + bytes.len() as u64 > max_bytes {
                too_big = true;
                return Err(std::io::Error::other("over the limit"));
            }
            contents.extend_from_slice(bytes);
            Ok(())
        };
        let chunk_bytes = client.max_read_bytes();
        let read = client.read_stream(name, &mut sink, chunk_bytes, READS_IN_FLIGHT, &mut |_| {});
        if too_big {
            return Err(StoreFileOptionError::Options(OptionsError::BadFile {
                key: listed.key.to_string(),
                reason: format!(
                    "the store file {name} is larger than the limit of {max_bytes} bytes"
                ),
            }));
        }
        read.map_err(|source| StoreFileOptionError::Read {
            key: listed.key.to_string(),
            name: name.to_string(),
            source,
        })?;
        files.insert(listed.key, contents);
    }
    spec.build_with_store_files(arguments, files)
        .map_err(StoreFileOptionError::Options)
}
