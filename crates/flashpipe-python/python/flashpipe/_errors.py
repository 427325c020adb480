"""The exceptions flashpipe raises: one class per kind of failure, all under
:class:`flashpipe.Error`.

The kinds follow the ``flashpipe`` command's error kinds (and so its exit statuses);
where Python has a built-in class for the same condition the flashpipe class derives
from it too, so ``except FileNotFoundError`` catches a missing store file or store name.
The native module raises these by name.
"""


class Error(Exception):
    """Base class of every error flashpipe raises."""


class NotFound(Error, FileNotFoundError):
    """A named file, store file or device does not exist (the CLI's ``not_found``)."""


class Exists(Error, FileExistsError):
    """The target exists already (the CLI's ``exists``); give ``replace=True`` where
    the method has it."""


class PermissionDenied(Error, PermissionError):
    """The user may not do this: file modes, the server's access rule, a store opened
    read-only (the CLI's ``permission``)."""


class Busy(Error):
    """Another process holds the store, or a limit of its server is reached for now;
    try again later (the CLI's ``store_in_use``)."""


class Invalid(Error, ValueError):
    """An argument is wrong: a bad name, a range past a file's end, a value out of
    range (the CLI's ``invalid_input``)."""


class Corrupt(Error):
    """Stored data or metadata failed a checksum or format check (the CLI's
    ``corrupt``)."""


class NoSpace(Error, OSError):
    """The store or a device is full (the CLI's ``no_space``)."""


class IoError(Error, OSError):
    """An operating-system or device failure (the CLI's ``io``)."""


class ConnectionLost(Error, ConnectionError):
    """The store's server could not be reached or the connection to it broke (the
    CLI's ``network``)."""


class Closed(Error, ValueError):
    """An operation on a store or file object after ``close()``."""


class KernelFailed(Error):
    """A kernel refused its run or failed on its input (the CLI's ``kernel``)."""


class Internal(Error):
    """An unforeseen condition: please report it (the CLI's ``internal``)."""


__all__ = [
    "Error",
    "NotFound",
    "Exists",
    "PermissionDenied",
    "Busy",
    "Invalid",
    "Corrupt",
    "NoSpace",
    "IoError",
    "ConnectionLost",
    "Closed",
    "KernelFailed",
    "Internal",
]
