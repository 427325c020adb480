//! flashpipe-nbd-client: the NBD client, a remote export (doc/proto.md of the NBD project)
//! as a flashpipe [`flashpipe_device::BlockDevice`], so a store can stripe over disks on
//! other machines (HWFS 3.3.2).
//!
//! - [`uri`]: NBD URIs (doc/uri.md): `nbd://host[:port]/export`, `nbds://` (TLS),
//!   `nbd+unix:///export?socket=PATH`, `nbds+unix://`;
//! - `tls`: the rustls client configuration a `nbds` URI asks for (`tls-certificates`,
//!   `tls-verify-peer`, `tls-hostname`) and the upgrade after `NBD_OPT_STARTTLS`;
//! - `handshake`: the fixed newstyle handshake, `NBD_OPT_STARTTLS` for `nbds` URIs,
//!   structured replies when the server
//!   accepts them, `NBD_OPT_GO` with `NBD_INFO_BLOCK_SIZE` (falling back to
//!   `NBD_OPT_EXPORT_NAME` for servers without `NBD_OPT_GO`);
//! - `connection`: a writer thread sending requests as they are submitted and a reader
//!   thread decoding replies, many requests in flight, cookies naming device requests;
//! - [`device`]: [`NbdDevice`], with a bounded reconnect that re-issues every request
//!   not yet answered and errors that name the device by its URI;
//! - `transport`: TCP or Unix-socket streams;
//! - [`core`]: the protocol and policy without I/O (cookies, frames, reply decoding and
//!   checks, admission, durability ledger, reconnect policy) that both drivers share: the
//!   threads over sockets here, and the simulated client over seeded links in virtual
//!   time (`SimNbdDevice`, in `flashpipe-nbd`, beside the server core it talks to).
//!
//! The protocol's constants and message encodings are `flashpipe_nbd_wire`'s.
//!
//! Layer rule: stands on `flashpipe-nbd-wire`, the device layer and `flashpipe-base`;
//! never on the NBD server (`flashpipe-nbd`), which stands on this crate instead. The
//! store depends on this crate alone for its `nbd://` devices, so it links no server.

mod connection;
pub mod core;
pub mod device;
mod handshake;
#[doc(hidden)]
pub mod reply_fuzzing;
mod tls;
mod transport;
pub mod uri;

pub use device::{
    NbdDevice, NbdDeviceConfig, NbdDeviceCounters, ReconnectDurability,
    DEFAULT_NBD_BLOCK_SIZE_BYTES,
};
pub use handshake::NbdExport;
pub use uri::{looks_like_nbd_uri, NbdAddress, NbdUri, NbdUriError};
