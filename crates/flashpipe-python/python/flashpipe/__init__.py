"""flashpipe from Python: stores, file objects and zero-copy numpy arrays.

Open a store with :class:`Store` (through its running ``flashpipe serve`` when there is
one, in this process otherwise, as the ``flashpipe`` command does)::

    import flashpipe
    with flashpipe.Store("demo.toml") as store:
        store.put("hello", b"hello, world")
        print(store.ls(), store.get("hello"))
        array = store.read_array("hello", dtype="uint8")

Errors are :class:`Error` and its subclasses (``NotFound`` is also a
``FileNotFoundError``, ``Invalid`` a ``ValueError``, ...). docs/python.md has the
whole story.
"""

import io
import json

from . import _errors
from ._errors import *  # noqa: F401,F403  (the exception classes)
from ._errors import Invalid
from ._file import StoreFile
from ._flashpipe import KernelRunStream, ReadBuffer, __version__
from ._flashpipe import Store as _NativeStore

__all__ = ["Store", "StoreFile", "KernelRun", "ReadBuffer", "__version__"] + _errors.__all__

#: Bytes a buffered store file reads or writes per command.
BUFFER_SIZE_BYTES = 1 << 20


def _index(value, what, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise Invalid(f"{what} must be {minimum} or more, not {value}")
    return value


class KernelRun:
    """The answers of a kernel run (:meth:`Store.run`): iterate for one dict per input
    file, as each completes (``index``, ``name``, ``size_bytes``, ``summary`` (the kernel's
    summary, parsed from JSON), ``output_bytes``, ``output_file``, ``error`` (None, or the
    server's words for a file that failed)); :attr:`summary` once every file is done.
    Closing it (or leaving its ``with`` block) before the end cancels the run, which then
    commits nothing."""

    def __init__(self, stream):
        self._stream = stream

    def __iter__(self):
        return self

    def __next__(self):
        answer = next(self._stream)
        text = answer.pop("summary_json")
        answer["summary"] = None if text is None else json.loads(text)
        return answer

    @property
    def summary(self):
        """The run's totals and stage table (a dict) once every answer was read."""
        return self._stream.summary

    def close(self):
        """Cancels the run if it is still going."""
        self._stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Store(_NativeStore):
    """A flashpipe store: ``Store(path, *, read_only=False)``.

    ``path`` is the store file (``flashpipe mkfs`` made it). When the store's server
    (``flashpipe serve``) answers on its socket, every call goes through it, and reads
    can come back by reference from its shared memory; otherwise the store is opened in
    this process, holding its lock until :meth:`close` (``read_only=True`` shares it
    with other readers). ``via`` tells which. Use it as a context manager to close it.

    Every change (``put``, ``rm``, ``mv``, ``cp``, a file written and closed) is durable
    when the call returns. Calls release the GIL while they wait on the store.
    """

    def open(self, name, mode="rb", buffering=-1):
        """Opens store file ``name`` as a file object: ``"rb"`` to read (it must
        exist), ``"wb"`` to write (created, or emptied). Buffered like :func:`open`
        unless ``buffering=0``, which returns the raw :class:`StoreFile`."""
        raw = StoreFile(self, name, mode)
        if buffering == 0:
            return raw
        size = BUFFER_SIZE_BYTES if buffering in (-1, 1) else _index(buffering, "buffering", 1)
        if mode == "rb":
            return io.BufferedReader(raw, buffer_size=size)
        return io.BufferedWriter(raw, buffer_size=size)

    def run(self, kernel, names, *, output=None, replace=False, **options):
        """Runs near-data kernel ``kernel`` (``flashpipe kernels`` lists them) over the
        files ``names`` (a name, a pattern such as ``"logs:*"``, or a list of them)
        through the store's server, next to its engine; ``options`` are the kernel's
        (``pattern="needle"`` for grep). A transforming kernel writes its output to
        ``output`` (one input) or ``output-NAME`` files, replacing existing ones only with
        ``replace=True``. Returns a :class:`KernelRun` that yields each file's result as
        it completes. Needs the store's server (``flashpipe serve``)."""
        if isinstance(names, str):
            names = [names]
        if not isinstance(kernel, str):
            raise TypeError(f"kernel must be a str, not {type(kernel).__name__}")
        arguments = [f"{key}={value}" for key, value in options.items()]
        return KernelRun(self._run_start(kernel, list(names), arguments, output, replace))

    def read_buffer(self, name, offset=0, length=-1):
        """``length`` bytes (-1: to the end) at byte ``offset`` of file ``name`` as a
        read-only :class:`memoryview`; by reference through a server that maps its
        memory, when one read can hold them (see :meth:`read_array`)."""
        offset = _index(offset, "offset", 0)
        length = _index(length, "length", -1)
        if length == -1:
            length = max(self.stat(name)["size_bytes"] - offset, 0)
        return memoryview(self._read_buffer(name, offset, length))

    def read_array(self, name, dtype="uint8", offset=0, count=-1):
        """File ``name`` as a read-only one-dimensional numpy array of ``dtype``:
        ``count`` items (-1: every whole item to the end of the file) from byte
        ``offset``, as :func:`numpy.fromfile` reads them.

        Through a server that maps its shared memory, and when one read can hold the
        bytes (the server's ``max_read_bytes``), the array is the server's memory
        itself, no copy: the array's base owns that read buffer, which the server gets
        back when the last reference to the array (and its views) dies. Such an array
        stays valid after the store is closed, and even after the server is killed.
        A larger read (2 MiB or more) through a server of protocol version 6 or later is
        read by the server straight into memory of this process (a region this session
        registered on a connection of its own), no copy either: the array views it, and
        the region is reused for a later read once the array dies. In this process, or
        where a region cannot be had, the bytes are copied once, into memory mapped for
        the array (unmapped when it dies). A read of several requests raises
        :class:`Busy` when another client changed the file meanwhile: read it again.
        """
        import numpy

        dtype = numpy.dtype(dtype)
        if dtype.itemsize == 0 or dtype.hasobject:
            raise Invalid(f"dtype {dtype} cannot be read from bytes: give a fixed-size dtype")
        offset = _index(offset, "offset", 0)
        count = _index(count, "count", -1)
        if count == -1:
            available = self.stat(name)["size_bytes"] - offset
            if available < 0:
                raise Invalid(f"offset {offset} lies past the end of {name}")
            length = available - available % dtype.itemsize
        else:
            length = count * dtype.itemsize
        return numpy.frombuffer(self._read_buffer(name, offset, length), dtype=dtype)
