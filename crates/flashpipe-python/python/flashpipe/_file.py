"""File objects over store files: :meth:`flashpipe.Store.open` returns them.

:class:`StoreFile` is an :class:`io.RawIOBase`: ``readinto``, ``read``, ``write``,
``seek``, ``tell``; ``Store.open`` wraps it in :class:`io.BufferedReader` or
:class:`io.BufferedWriter` unless ``buffering=0``, as the built-in :func:`open` does.
A file opened for writing is created empty (or emptied) at open, and its writes are made
durable when it closes.
"""

import io
import os

from ._errors import Closed, Invalid

__all__ = ["StoreFile"]


def _index(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


class StoreFile(io.RawIOBase):
    """One store file opened for reading (``"rb"``) or writing (``"wb"``)."""

    def __init__(self, store, name, mode):
        super().__init__()
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if mode not in ("rb", "wb"):
            raise Invalid(f"mode {mode!r} is not a store file mode: give \"rb\" or \"wb\"")
        self._store = store
        self.name = name
        self.mode = mode
        self._position = 0
        if mode == "rb":
            self._size = store.stat(name)["size_bytes"]
        else:
            store._create_empty(name)
            self._size = 0

    def _check_open(self):
        if self.closed:
            raise Closed(f"{self.name}: the file is closed")

    def readable(self):
        self._check_open()
        return self.mode == "rb"

    def writable(self):
        self._check_open()
        return self.mode == "wb"

    def seekable(self):
        self._check_open()
        return True

    def readinto(self, buffer):
        """Reads up to ``len(buffer)`` bytes at the position into ``buffer``; returns
        how many (0 at the end)."""
        self._check_open()
        if self.mode != "rb":
            raise io.UnsupportedOperation("the file was opened for writing (\"wb\")")
        with memoryview(buffer) as view, view.cast("B") as target:
            if len(target) == 0:
                return 0
            data = self._store._read_at(self.name, self._position, len(target))
            target[: len(data)] = data
        self._position += len(data)
        return len(data)

    def readall(self):
        """Reads from the position to the end."""
        self._check_open()
        if self.mode != "rb":
            raise io.UnsupportedOperation("the file was opened for writing (\"wb\")")
        size = self._store.stat(self.name)["size_bytes"]
        if self._position >= size:
            return b""
        data = self._store._read_at(self.name, self._position, size - self._position)
        self._position += len(data)
        return data

    def write(self, data):
        """Writes the bytes-like ``data`` at the position; returns how many bytes."""
        self._check_open()
        if self.mode != "wb":
            raise io.UnsupportedOperation("the file was opened for reading (\"rb\")")
        written = self._store._write_at(self.name, self._position, data)
        self._position += written
        self._size = max(self._size, self._position)
        return written

    def seek(self, offset, whence=os.SEEK_SET):
        """Moves the position: from the start (``SEEK_SET``), the position
        (``SEEK_CUR``) or the end (``SEEK_END``); returns the new position."""
        self._check_open()
        offset = _index(offset, "offset")
        if whence == os.SEEK_SET:
            base = 0
        elif whence == os.SEEK_CUR:
            base = self._position
        elif whence == os.SEEK_END:
            base = self._store.stat(self.name)["size_bytes"] if self.mode == "rb" else self._size
        else:
            raise Invalid(f"whence {whence!r} is not SEEK_SET, SEEK_CUR or SEEK_END")
        position = base + offset
        if position < 0:
            raise Invalid(f"seek to {position}: a position is 0 or more")
        if self.mode == "wb" and position > self._size:
            raise Invalid(f"seek to {position}: past the end ({self._size}) of a file being written")
        self._position = position
        return position

    def tell(self):
        """The position."""
        self._check_open()
        return self._position

    def close(self):
        """Closes the file; a file opened for writing is made durable first."""
        if self.closed:
            return
        try:
            if self.mode == "wb":
                self._store.flush()
        finally:
            super().close()

    def __repr__(self):
        return f"<flashpipe StoreFile {self.name!r} mode={self.mode!r}>"
