//! flashpipe-store: the one way every interface (the CLI now; the server, the network
//! front end and Python next) opens a store.
//!
//! A *store* is a file system over one or more devices striped together, described by a
//! small TOML file ([`store_config`], docs/store-file.md). This crate reads that file,
//! takes the lock that makes the opener the store's one owner or one of its readers
//! ([`store_lock`]), opens its devices ([`store`]: files and block devices through
//! io_uring, RAM, emulated flash under the host FTL ([`flash_store`]), the host FTL over
//! a minFlash cluster ([`cluster_store`]), striped together
//! when there are several), mounts the file system read-write or read-only and starts the
//! engine on it ([`running`]). Sizes are read and printed with the project's one size
//! grammar, [`units`] (the `flashpipe-units` crate, re-exported here).
//!
//! Creating a store is here too ([`create`]: devices created and formatted, the store
//! file written last, devices that hold a store or any other data refused after a look at
//! them, [`probe`] and [`probe_foreign`]),
//! with what every interface needs to name a store's files: shell patterns over store
//! names ([`glob`]) and the plan of which local files a put stores under which names
//! ([`put_plan`]).
//!
//! Rule: this crate is where device kinds, store files and locks meet. The engine below it
//! knows none of them (it depends only on the file system and the device layer); the
//! interfaces above it never open a device, take a lock or mount a store themselves, and
//! print what this crate only reports (the [`running::RunningStore::notes`]).

pub mod cluster_store;
pub mod create;
pub mod flash_activity;
pub mod flash_capacity;
pub mod flash_store;
pub mod glob;
pub mod identity;
pub mod info;
pub mod leftovers;
pub mod member_label;
pub mod member_watch;
pub mod probe;
pub mod probe_foreign;
pub mod put_plan;
pub mod raw_flash_store;
pub mod running;
pub mod store;
pub mod store_config;
pub mod store_lock;
pub mod super_block_identity;

pub use flashpipe_units as units;

pub use create::{
    create_store, create_store_with, create_store_with_options, format_file_store, CreateOptions,
};
pub use identity::{server_facts, IdentityError, ServerFacts, StoreIdentity};
pub use member_watch::MemberChanged;
pub use running::{RunningStore, StoreAccess, StoreCloseError};
pub use store::{DeviceCreation, StoreOpenError};
pub use store_config::{DeviceSpec, StoreConfig, StoreConfigError};
pub use store_lock::{LockMode, LockWait, StoreLock, StoreLockError};
