//! The native `Store` class: one session on one store (in this process, or through its
//! server), its methods thin wrappers over [`crate::ops`]. Every blocking call runs with
//! the interpreter detached (the GIL released), the session behind a mutex, so other
//! Python threads run meanwhile and calls on one store from several threads take turns.
//! The pure-Python `flashpipe.Store` adds file objects and numpy arrays on top.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use flashpipe_api::{CopyMethod, FileStat};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView, PyString};

use crate::buffer::{Bytes, ReadBuffer};
use crate::error::{invalid, StoreError};
use crate::ops;
use crate::region::Region;
use crate::session::{with_transport, Session};

/// A flashpipe store, opened in this process or reached through its running server.
#[pyclass(module = "flashpipe._flashpipe", name = "Store", subclass, frozen)]
pub struct Store {
    path: PathBuf,
    read_only: bool,
    /// How the session reaches its store (fixed at open), read without its lock.
    way: &'static str,
    /// Whether reads come back by reference (fixed at open).
    mapped: bool,
    /// Set by `close()`; read without the session's lock, which a call on another
    /// thread may hold for long.
    closed: AtomicBool,
    /// Set while a kernel run is in flight on the connection: its answers arrive among
    /// any other call's, so other calls wait for its end (`flashpipe.Busy`).
    kernel_run: AtomicBool,
    session: Mutex<Option<Session>>,
}

/// What an operation does to the store: a change is refused on a read-only session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Change,
    /// A kernel run reading its own answers (the one use of the session while the run
    /// is in flight).
    RunAnswers,
}

impl Store {
    fn store_name(&self) -> String {
        self.path.display().to_string()
    }

    /// Runs `operation` on the open session with the interpreter detached.
    fn run<R: Send>(
        &self,
        py: Python<'_>,
        access: Access,
        operation: impl FnOnce(&mut Session) -> Result<R, StoreError> + Send,
    ) -> PyResult<R> {
        if access == Access::Change && self.read_only {
            return Err(StoreError::ReadOnly {
                store: self.store_name(),
            }
            .into());
        }
        py.detach(|| {
            let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
            if access != Access::RunAnswers && self.kernel_run.load(Ordering::Acquire) {
                return Err(StoreError::KernelRunInFlight {
                    store: self.store_name(),
                });
            }
            match session.as_mut() {
                Some(session) => {
                    if access != Access::RunAnswers {
                        with_transport!(session, |transport| ops::settle(transport))?;
                    }
                    operation(session)
                }
                None => Err(StoreError::Closed {
                    store: self.store_name(),
                }),
            }
        })
        .map_err(PyErr::from)
    }
}

impl Store {
    /// Runs `operation` on the served client with the interpreter detached (`answers`: a
    /// kernel run reading its own answers); a store opened in this process has none
    /// (`flashpipe.Invalid`, saying to start its server).
    pub(crate) fn with_client<R: Send>(
        &self,
        py: Python<'_>,
        answers: bool,
        operation: impl FnOnce(&mut flashpipe_client::Client) -> Result<R, StoreError> + Send,
    ) -> PyResult<R> {
        let store = self.store_name();
        let access = if answers {
            Access::RunAnswers
        } else {
            Access::Read
        };
        self.run(py, access, move |session| match session.served() {
            Some(client) => operation(client),
            None => Err(StoreError::Invalid(format!(
                "kernel runs go through the store's server, and {store} is opened in this process: start `flashpipe serve {store}` and open the store again"
            ))),
        })
    }

    /// Marks a kernel run in flight (`true`) or ended (`false`).
    pub(crate) fn set_kernel_run(&self, in_flight: bool) {
        self.kernel_run.store(in_flight, Ordering::Release);
    }
}

/// A non-negative integer argument; `what` names it in the error.
fn count_argument(value: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if value.is_instance_of::<pyo3::types::PyBool>()
        || !value.is_instance_of::<pyo3::types::PyInt>()
    {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            value.get_type().name()?
        )));
    }
    match value.extract::<i64>() {
        Ok(number) if number >= 0 => Ok(number as u64),
        Ok(number) => Err(invalid(format!("{what} must be 0 or more, not {number}"))),
        Err(_) => Err(invalid(format!(
            "{what} is out of range (at most {})",
            i64::MAX
        ))),
    }
}

/// A zeroed buffer of `length_bytes`, or `MemoryError` when it cannot be had.
/// Reads of this many bytes or more are copied into a [`Region`] mapped for them (a huge
/// page: below it, a `Vec` is as fast).
const MAPPED_FROM_BYTES: u64 = 2 << 20;

fn allocate(length_bytes: u64) -> Result<Vec<u8>, StoreError> {
    let length = usize::try_from(length_bytes)
        .map_err(|_| StoreError::Invalid(format!("{length_bytes} bytes do not fit in memory")))?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(length).map_err(|_| {
        StoreError::Invalid(format!(
            "{length_bytes} bytes cannot be allocated in this process; read less at a time"
        ))
    })?;
    bytes.resize(length, 0);
    Ok(bytes)
}

/// Reads `length_bytes` at `offset_bytes` of file `name` into memory of this process: a
/// [`Region`] mapped for the read from [`MAPPED_FROM_BYTES`] on, a `Vec` below.
fn read_copied(
    session: &mut Session,
    name: &str,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<Bytes, StoreError> {
    if length_bytes < MAPPED_FROM_BYTES {
        let mut bytes = allocate(length_bytes)?;
        with_transport!(session, |transport| ops::read_into(
            transport,
            name,
            offset_bytes,
            &mut bytes
        ))?;
        return Ok(Bytes::Owned(bytes));
    }
    if let Some(regions) = session.region_reads() {
        if let Some(bytes) = regions.read(name, offset_bytes, length_bytes)? {
            return Ok(Bytes::Region(bytes));
        }
    }
    let length = usize::try_from(length_bytes)
        .map_err(|_| StoreError::Invalid(format!("{length_bytes} bytes do not fit in memory")))?;
    let mut region = Region::new(length)?;
    with_transport!(session, |transport| ops::read_into(
        transport,
        name,
        offset_bytes,
        region.as_mut_slice()
    ))?;
    Ok(Bytes::Mapped(region))
}

/// Checks that `length_bytes` at `offset_bytes` lie inside file `name` (before anything
/// is allocated for them); returns the file's facts.
fn check_range(
    session: &mut Session,
    name: &str,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<FileStat, StoreError> {
    let stat = with_transport!(session, |transport| ops::stat(transport, name))?;
    let size_bytes = stat.size_bytes;
    match offset_bytes.checked_add(length_bytes) {
        Some(end) if end <= size_bytes => Ok(stat),
        _ => Err(StoreError::Invalid(format!(
            "{name} holds {size_bytes} bytes: {length_bytes} bytes at offset {offset_bytes} lie past its end"
        ))),
    }
}

fn stat_dict<'py>(py: Python<'py>, stat: &FileStat) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("name", &stat.name)?;
    dict.set_item("size_bytes", stat.size_bytes)?;
    dict.set_item("file_id", stat.file_id.0)?;
    dict.set_item("allocated_blocks", stat.allocated_blocks)?;
    dict.set_item("shared_bytes", stat.shared_bytes)?;
    dict.set_item("modified_clock_ns", stat.modified_clock_ns)?;
    Ok(dict)
}

/// The copy method named `method`.
fn copy_method(method: &str) -> PyResult<CopyMethod> {
    match method {
        "share" => Ok(CopyMethod::Share),
        "reference" => Ok(CopyMethod::ReferenceOrFail),
        "reference-or-bytes" => Ok(CopyMethod::ReferenceOrBytes),
        "bytes" => Ok(CopyMethod::Bytes),
        other => Err(invalid(format!(
            "method {other:?} is not a copy method: give \"share\", \"reference\", \"reference-or-bytes\" or \"bytes\""
        ))),
    }
}

/// The bytes of a put's source: a `bytes` object is read in place (immutable), any other
/// bytes-like object is copied once (it may change while the interpreter is detached).
enum Source<'py> {
    Bytes(Bound<'py, PyBytes>),
    Path(PathBuf),
}

fn put_source<'py>(data: &Bound<'py, PyAny>) -> PyResult<Source<'py>> {
    if let Ok(bytes) = data.cast::<PyBytes>() {
        return Ok(Source::Bytes(bytes.clone()));
    }
    if data.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "put takes bytes, a bytes-like object or a pathlib.Path of a local file, not str: encode text first (text.encode()), or give pathlib.Path(...) for a file",
        ));
    }
    if data.hasattr("__fspath__")? {
        return Ok(Source::Path(data.extract::<PathBuf>()?));
    }
    match PyMemoryView::from(data) {
        Ok(view) => Ok(Source::Bytes(
            view.call_method0("tobytes")?.cast_into::<PyBytes>()?,
        )),
        Err(_) => Err(PyTypeError::new_err(format!(
            "put takes bytes, a bytes-like object or a pathlib.Path of a local file, not {}",
            data.get_type().name()?
        ))),
    }
}

#[pymethods]
impl Store {
    /// Opens the store whose store file is `path`: through its running `flashpipe serve`
    /// when one answers on the store's socket, otherwise in this process (holding the
    /// store's lock until `close()`; `read_only=True` shares it with other readers).
    /// `shared_memory=False` keeps a served session to the socket: every byte crosses it as
    /// it would a network, with no shared memory mapped and no reads into this process's
    /// memory (a Dask task away from its store measures the bytes it moves so).
    #[new]
    #[pyo3(signature = (path, *, read_only = false, shared_memory = true))]
    fn new(py: Python<'_>, path: PathBuf, read_only: bool, shared_memory: bool) -> PyResult<Store> {
        let session = py
            .detach(|| Session::open(&path, read_only, shared_memory))
            .map_err(PyErr::from)?;
        Ok(Store {
            path,
            read_only,
            way: session.way(),
            mapped: session.by_reference(),
            closed: AtomicBool::new(false),
            kernel_run: AtomicBool::new(false),
            session: Mutex::new(Some(session)),
        })
    }

    /// The store file's path.
    #[getter]
    fn path(&self) -> String {
        self.store_name()
    }

    /// True when the store was opened with `read_only=True`.
    #[getter]
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// How the store is reached: "in process", "served", or "closed".
    #[getter]
    fn via(&self) -> &'static str {
        if self.closed.load(Ordering::Acquire) {
            "closed"
        } else {
            self.way
        }
    }

    /// True when reads come back by reference: a server's shared memory mapped here.
    #[getter]
    fn by_reference(&self) -> bool {
        self.mapped && !self.closed.load(Ordering::Acquire)
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The names of the files, sorted; with `pattern` (`*`, `?`, `[...]` over whole
    /// names) those it matches; with `detail=True` a `stat` dict for each instead.
    #[pyo3(signature = (pattern = None, *, detail = false))]
    fn ls(
        &self,
        py: Python<'_>,
        pattern: Option<String>,
        detail: bool,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let files = self.run(py, Access::Read, |session| {
            with_transport!(session, |transport| ops::list(transport))
        })?;
        files
            .iter()
            .filter(|file| {
                pattern
                    .as_deref()
                    .is_none_or(|pattern| flashpipe_store::glob::matches(pattern, &file.name))
            })
            .map(|file| {
                Ok(if detail {
                    stat_dict(py, file)?.into_any().unbind()
                } else {
                    PyString::new(py, &file.name).into_any().unbind()
                })
            })
            .collect()
    }

    /// Facts about file `name`: a dict of name, size_bytes, file_id, allocated_blocks,
    /// shared_bytes and modified_clock_ns.
    fn stat<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyDict>> {
        let stat = self.run(py, Access::Read, |session| {
            with_transport!(session, |transport| ops::stat(transport, &name))
        })?;
        stat_dict(py, &stat)
    }

    /// Stores `data` (bytes, a bytes-like object, or a pathlib.Path of a local file) as
    /// file `name`, durably; an existing `name` is refused (`flashpipe.Exists`) unless
    /// `replace=True`. Returns the bytes stored.
    #[pyo3(signature = (name, data, *, replace = false))]
    fn put(
        &self,
        py: Python<'_>,
        name: String,
        data: &Bound<'_, PyAny>,
        replace: bool,
    ) -> PyResult<u64> {
        match put_source(data)? {
            Source::Bytes(bytes) => {
                let slice = bytes.as_bytes();
                self.run(py, Access::Change, |session| {
                    let mut source = std::io::Cursor::new(slice);
                    with_transport!(session, |transport| ops::put(
                        transport,
                        &name,
                        &mut source,
                        "the bytes given",
                        replace
                    ))
                })
            }
            Source::Path(path) => self.run(py, Access::Change, |session| {
                let what = path.display().to_string();
                let mut file = std::fs::File::open(&path).map_err(|source| StoreError::Local {
                    what: format!("cannot open {what}"),
                    source,
                })?;
                with_transport!(session, |transport| ops::put(
                    transport, &name, &mut file, &what, replace
                ))
            }),
        }
    }

    /// The whole of file `name`, as bytes.
    fn get<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.run(py, Access::Read, |session| {
            with_transport!(session, |transport| ops::get(transport, &name))
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Deletes file `name`, durably.
    fn rm(&self, py: Python<'_>, name: String) -> PyResult<()> {
        self.run(py, Access::Change, |session| {
            with_transport!(session, |transport| ops::delete(transport, &name))
        })
    }

    /// Renames file `source` to `target`, durably; an existing `target` is refused
    /// (`flashpipe.Exists`) unless `replace=True`.
    #[pyo3(signature = (source, target, *, replace = false))]
    fn mv(&self, py: Python<'_>, source: String, target: String, replace: bool) -> PyResult<()> {
        self.run(py, Access::Change, |session| {
            with_transport!(session, |transport| ops::rename(
                transport, &source, &target, replace
            ))
        })
    }

    /// Copies file `source` to the new file `target`, durably. `method`: "share" (blocks
    /// shared with the source, the default), "reference" (the device remaps blocks, or
    /// the copy fails), "reference-or-bytes", or "bytes". Returns a dict of
    /// blocks_by_reference and bytes_by_bytes.
    #[pyo3(signature = (source, target, *, method = "share"))]
    fn cp<'py>(
        &self,
        py: Python<'py>,
        source: String,
        target: String,
        method: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let method = copy_method(method)?;
        let report = self.run(py, Access::Change, |session| {
            with_transport!(session, |transport| ops::copy(
                transport, &source, &target, method
            ))
        })?;
        let dict = PyDict::new(py);
        dict.set_item("blocks_by_reference", report.blocks_by_reference)?;
        dict.set_item("bytes_by_bytes", report.bytes_by_bytes)?;
        Ok(dict)
    }

    /// Space and counts, as `flashpipe df` tells them: a dict.
    fn df<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use flashpipe_api::TransportExt;
        let stats = self.run(py, Access::Read, |session| {
            with_transport!(session, |transport| transport
                .stats()
                .map_err(StoreError::from))
        })?;
        let block = u64::from(stats.fs_block_size_bytes);
        let dict = PyDict::new(py);
        dict.set_item("block_size_bytes", stats.fs_block_size_bytes)?;
        dict.set_item("total_bytes", stats.fs_block_count * block)?;
        dict.set_item("used_bytes", stats.used_blocks * block)?;
        dict.set_item("free_bytes", stats.free_blocks * block)?;
        dict.set_item("shared_bytes", stats.shared_blocks * block)?;
        dict.set_item("saved_bytes", stats.saved_blocks * block)?;
        dict.set_item("pending_free_bytes", stats.pending_free_blocks * block)?;
        dict.set_item("reserved_bytes", stats.reserved_blocks * block)?;
        dict.set_item("file_count", stats.file_count)?;
        dict.set_item("commit_sequence", stats.commit_sequence)?;
        dict.set_item("unflushed_changes", stats.unflushed_changes)?;
        Ok(dict)
    }

    /// Checks the store's durable image, as `flashpipe fsck` does (no repair): a dict of
    /// clean, commit_sequence, file_count, findings (a list of str) and report (the text).
    fn fsck<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use crate::ops::IntoCheckFacts;
        use flashpipe_api::TransportExt;
        let facts = self.run(py, Access::Read, |session| {
            with_transport!(session, |transport| transport
                .check()
                .map(IntoCheckFacts::facts)
                .map_err(StoreError::from))
        })?;
        let dict = PyDict::new(py);
        dict.set_item("clean", facts.clean)?;
        dict.set_item("commit_sequence", facts.commit_sequence)?;
        dict.set_item("file_count", facts.file_count)?;
        dict.set_item("findings", facts.findings)?;
        dict.set_item("report", facts.report)?;
        Ok(dict)
    }

    /// Makes every change so far durable (the file objects' writes are flushed when
    /// they close).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Access::Change, |session| {
            with_transport!(session, |transport| ops::flush(transport))
        })
    }

    /// Closes the store: in this process it commits and releases its lock; through a
    /// server the connection closes. Arrays and buffers read earlier stay valid. Closing
    /// twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        py.detach(|| {
            let session = self
                .session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            match session {
                Some(session) => session.close(),
                None => Ok(()),
            }
        })
        .map_err(PyErr::from)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<flashpipe.Store {} ({}{})>",
            self.store_name(),
            self.via(),
            if self.read_only { ", read-only" } else { "" }
        )
    }

    /// Starts kernel `kernel` over the files `names` (names or patterns: `*`, `?`,
    /// `[...]`) through the store's server, with `options` as `key=value` strings and
    /// `output` the output file or prefix of a transforming kernel; returns the stream of
    /// its answers.
    #[pyo3(signature = (kernel, names, options, output = None, replace = false))]
    fn _run_start(
        slf: Bound<'_, Self>,
        kernel: String,
        names: Vec<String>,
        options: Vec<String>,
        output: Option<String>,
        replace: bool,
    ) -> PyResult<crate::run::KernelRunStream> {
        let py = slf.py();
        let store = slf.get();
        if output.is_some() && store.read_only {
            return Err(StoreError::ReadOnly {
                store: store.store_name(),
            }
            .into());
        }
        let inputs = store.with_client(py, false, move |client| {
            let mut inputs = Vec::new();
            let listed = if names
                .iter()
                .any(|name| flashpipe_store::glob::is_pattern(name))
            {
                ops::list(client)?
            } else {
                Vec::new()
            };
            for name in names {
                if flashpipe_store::glob::is_pattern(&name) {
                    let before = inputs.len();
                    inputs.extend(
                        listed
                            .iter()
                            .filter(|file| flashpipe_store::glob::matches(&name, &file.name))
                            .map(|file| file.name.clone()),
                    );
                    if inputs.len() == before {
                        return Err(StoreError::Invalid(format!(
                            "the pattern {name} matches no file of the store"
                        )));
                    }
                } else {
                    inputs.push(name);
                }
            }
            Ok(inputs)
        })?;
        let request = flashpipe_client::RunKernelRequest {
            kernel,
            options,
            inputs,
            output,
            replace_outputs: replace,
            reader_count: 0,
            worker_count: 0,
        };
        crate::run::KernelRunStream::start(py, slf.unbind(), request)
    }

    /// `length` bytes at `offset` of file `name` as a read-only buffer: through a server
    /// that maps its memory, the server's shared memory itself (by reference) when one
    /// read can hold them; a copy otherwise.
    fn _read_buffer(
        &self,
        py: Python<'_>,
        name: String,
        offset: &Bound<'_, PyAny>,
        length: &Bound<'_, PyAny>,
    ) -> PyResult<ReadBuffer> {
        let offset = count_argument(offset, "offset")?;
        let length = count_argument(length, "length")?;
        let bytes = self.run(py, Access::Read, |session| {
            let before = check_range(session, &name, offset, length)?;
            if length > 0 {
                if let Some(client) = session.served().filter(|client| client.is_mapped()) {
                    use flashpipe_api::Transport;
                    if length <= client.limits().max_read_bytes {
                        let view = ops::read_once(client, &name, offset, length)?;
                        if view.is_shared() && view.len() as u64 == length {
                            return Ok(Bytes::View(view));
                        }
                    }
                }
            }
            let bytes = read_copied(session, &name, offset, length)?;
            with_transport!(session, |transport| ops::unchanged_since(
                transport, &name, &before
            ))?;
            Ok(bytes)
        })?;
        Ok(ReadBuffer::new(bytes))
    }

    /// Up to `length` bytes at `offset` of file `name` (fewer at its end), as bytes.
    fn _read_at<'py>(
        &self,
        py: Python<'py>,
        name: String,
        offset: &Bound<'_, PyAny>,
        length: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let offset = count_argument(offset, "offset")?;
        let length = count_argument(length, "length")?;
        let bytes = self.run(py, Access::Read, |session| {
            let size_bytes =
                with_transport!(session, |transport| ops::stat(transport, &name))?.size_bytes;
            let length = length.min(size_bytes.saturating_sub(offset));
            let mut bytes = allocate(length)?;
            with_transport!(session, |transport| ops::read_into(
                transport, &name, offset, &mut bytes
            ))?;
            Ok(bytes)
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Creates file `name` empty, or empties it (a file opened for writing).
    fn _create_empty(&self, py: Python<'_>, name: String) -> PyResult<()> {
        self.run(py, Access::Change, |session| {
            with_transport!(session, |transport| ops::create_empty(transport, &name))
        })
    }

    /// Writes the bytes-like `data` at `offset` of the existing file `name` (durable at
    /// the next flush). Returns the bytes written.
    fn _write_at(
        &self,
        py: Python<'_>,
        name: String,
        offset: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let offset = count_argument(offset, "offset")?;
        let bytes = match put_source(data)? {
            Source::Bytes(bytes) => bytes,
            Source::Path(_) => {
                return Err(PyTypeError::new_err(
                    "write takes bytes or a bytes-like object",
                ))
            }
        };
        let slice = bytes.as_bytes();
        self.run(py, Access::Change, |session| {
            with_transport!(session, |transport| ops::write_at(
                transport, &name, offset, slice
            ))
        })
    }
}
