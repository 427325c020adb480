//! flashpipe-kernels: pure compute kernels over byte slices, designed to run inside the pipeline
//! engine next to the data (read stage -> pool of kernel workers -> result stage).
//!
//! The API ([`api`]) takes chunks borrowed from the engine's read buffers, tagged with file and
//! offset, and lets each kernel say whether a file's chunks may be mapped in parallel (and then
//! reduced in order) or must be processed in order. Kernels are listed in [`registry`] with their
//! options, parsed from `key=value` strings ([`options`]).
//!
//! Kernels use well-kept crates for the heavy lifting (RustCrypto `aes`, `ctr`, `sha2`; `crc32c`;
//! `png`; `memchr`, `regex`); what is written here by hand is what no such crate offers in
//! streaming form or fast enough: the DES block function (table-driven, [`des_block`], about
//! three times RustCrypto `des`, which stays as its test reference), the chunk/fragment
//! stitching, the CBC chaining, Sobel (a 3x3 convolution),
//! the n-gram language identifier (a small multinomial naive-Bayes model with its own profile
//! file), kNN, the external merge sort with pluggable spill storage, and the sparse-index binary
//! search. This crate depends on no other flashpipe crate.

pub mod api;
pub mod binary_search;
pub mod blast;
pub mod checksums;
pub mod ciphers;
pub mod des_block;
pub mod driver;
pub mod error;
pub mod external_sort;
pub mod grep;
pub mod host_paths;
pub mod knn;
pub mod langid;
pub mod options;
pub mod records;
pub mod registry;
pub mod shared_data;
pub mod sobel;
pub mod store_files;
pub mod throughput;
pub mod wasm;
