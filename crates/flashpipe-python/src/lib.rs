//! The native module of the Python package `flashpipe` (`flashpipe._flashpipe`), built
//! with PyO3 by maturin: one binding crate of thin wrappers, as Polars does. It holds
//! the native `Store` ([`store`]: a session in this process or through the store's
//! server, [`session`]), the store operations written once over the command set
//! ([`ops`]), kernel runs through the server streamed file by file ([`run`]), read
//! buffers exported through the buffer protocol ([`buffer`]: zero-copy
//! over a server's shared memory, or the destination mapped for a large read, [`region`]),
//! and the one mapping of errors to the Python classes
//! ([`error`]). The pure-Python part (python/flashpipe: exceptions, file objects, numpy
//! arrays, stubs) stands on it.
//!
//! Layer rule: an interface, beside the CLI. It depends on the store, the engine's
//! client, the served client and the command set, never on the CLI, and nothing depends
//! on it.

mod buffer;
mod error;
mod ops;
mod region;
mod run;
mod served_region;
mod session;
mod store;

use pyo3::prelude::*;

/// flashpipe's native module: use the `flashpipe` package instead.
#[pymodule]
fn _flashpipe(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<store::Store>()?;
    module.add_class::<buffer::ReadBuffer>()?;
    module.add_class::<run::KernelRunStream>()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
