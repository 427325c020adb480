//! The filesystem core of flashpipe (HWFS ch. 1, 3.3.1) and the store it runs.
//!
//! A *store* is a file system over one or more devices striped together, described by a
//! small TOML file ([`store_config`]). The engine is a dedicated thread that owns the
//! store; clients submit commands through bounded queues and receive completions.

pub mod store_config;
pub mod units;
