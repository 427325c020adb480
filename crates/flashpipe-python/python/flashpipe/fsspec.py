"""An fsspec file system over a flashpipe store, so ``pandas.read_csv``,
``pyarrow.parquet.read_table`` and other fsspec users read store files directly.

URLs are ``flashpipe://NAME``: the store file comes from the ``store`` storage option,
from ``?store=/path/to/store.toml`` at the end of the URL, or from the environment variable
``FLASHPIPE_STORE``::

    pandas.read_csv("flashpipe://table.csv", storage_options={"store": "/data/store.toml"})
    pandas.read_csv("flashpipe://table.csv?store=/data/store.toml")

A store is flat: names are whole strings (``photos:x.jpg``), never folders; the root
(``flashpipe://``) lists every file. Registered for the protocol ``flashpipe`` through the
``fsspec.specs`` entry point. fsspec keeps one instance per store (and options), and with it
one open :class:`flashpipe.Store`: through the store's server that is one connection; in this
process it holds the store's lock until ``clear_instance_cache()`` (or give
``read_only=True`` to share it with other readers).
"""

import os
import urllib.parse

from fsspec.spec import AbstractFileSystem

from . import Store
from ._errors import Invalid

__all__ = ["FlashpipeFileSystem", "STORE_VARIABLE"]

#: The environment variable naming the store file when a URL and the options do not.
STORE_VARIABLE = "FLASHPIPE_STORE"


class FlashpipeFileSystem(AbstractFileSystem):
    """The files of one flashpipe store (see the module's documentation)."""

    protocol = "flashpipe"
    root_marker = ""

    def __init__(self, store=None, read_only=False, **kwargs):
        super().__init__(**kwargs)
        store = store or os.environ.get(STORE_VARIABLE)
        if not store:
            raise Invalid(
                "no store file: give storage_options={'store': PATH}, end the URL with "
                f"?store=PATH, or set {STORE_VARIABLE}"
            )
        self.store_path = os.fspath(store)
        self.store = Store(self.store_path, read_only=read_only)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, (list, tuple)):
            return [cls._strip_protocol(each) for each in path]
        path = os.fspath(path)
        if path.startswith("flashpipe://"):
            path = path[len("flashpipe://") :]
        return path.split("?", 1)[0].strip("/")

    @staticmethod
    def _get_kwargs_from_urls(path):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(os.fspath(path)).query)
        return {"store": query["store"][0]} if "store" in query else {}

    @staticmethod
    def _entry(stat):
        return {"name": stat["name"], "size": stat["size_bytes"], "type": "file"}

    def ls(self, path, detail=True, **kwargs):
        name = self._strip_protocol(path)
        if name == "":
            entries = [self._entry(stat) for stat in self.store.ls(detail=True)]
        else:
            entries = [self._entry(self.store.stat(name))]
        return entries if detail else [entry["name"] for entry in entries]

    def info(self, path, **kwargs):
        name = self._strip_protocol(path)
        if name == "":
            return {"name": "", "size": 0, "type": "directory"}
        return self._entry(self.store.stat(name))

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        if mode not in ("rb", "wb"):
            raise Invalid(f"mode {mode!r}: a store file opens \"rb\" or \"wb\"")
        return self.store.open(self._strip_protocol(path), mode)

    def cat_file(self, path, start=None, end=None, **kwargs):
        name = self._strip_protocol(path)
        if start is None and end is None:
            return self.store.get(name)
        size = self.store.stat(name)["size_bytes"]
        start, end = slice(start, end).indices(size)[:2]
        return bytes(self.store.read_buffer(name, start, max(end - start, 0)))

    def pipe_file(self, path, value, **kwargs):
        self.store.put(self._strip_protocol(path), value, replace=True)

    def rm_file(self, path):
        self.store.rm(self._strip_protocol(path))

    def _rm(self, path):
        self.rm_file(path)

    def cp_file(self, path1, path2, **kwargs):
        self.store.cp(self._strip_protocol(path1), self._strip_protocol(path2))

    def mv(self, path1, path2, **kwargs):
        self.store.mv(self._strip_protocol(path1), self._strip_protocol(path2), replace=True)

    def mkdir(self, path, create_parents=True, **kwargs):
        """A store has no folders: nothing to make."""

    def makedirs(self, path, exist_ok=False):
        """A store has no folders: nothing to make."""

    def created(self, path):
        raise NotImplementedError("a store keeps no creation time")

    def modified(self, path):
        raise NotImplementedError("a store keeps device-clock times, not wall-clock ones")
