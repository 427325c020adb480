//! The NBD client (scaffold).
pub mod uri;
