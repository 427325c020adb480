//! The cluster description file (TOML; docs/cluster.md) and its checks.
