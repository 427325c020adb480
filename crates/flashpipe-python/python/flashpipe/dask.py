"""Near-data maps with Dask: a :class:`Dataset` of files spread over several stores, one
per storage node, each served by ``flashpipe serve`` with a Dask worker (``dask worker``) beside it;
:func:`map` runs one task per file on the worker beside the file's store.

Each task is submitted with ``workers=[the worker beside its store]`` and
``allow_other_workers=True``, so Dask may still run it elsewhere when that worker is busy
or gone. A task that runs away from its store opens the store by its path with
``shared_memory=False``, so every byte it reads crosses that store's server socket as it
would a network (no shared memory, no reads into its own memory); the bytes it reads that
way are counted as bytes moved between workers. :func:`map` returns the results with a report: tasks, locality hits,
bytes moved. docs/python.md ("Dask") shows a multi-node set-up.

Needs ``distributed`` (``pip install "dask[distributed]"``), imported on first use.
"""

import os

from . import Store
from ._errors import ConnectionLost, Error, Invalid, NotFound

__all__ = ["Dataset", "DatasetFile", "MapResult", "map"]

#: Where :func:`map` places tasks: beside their store, or (to measure the difference)
#: on a worker that is not.
PLACEMENTS = ("near", "away")


def _text(value, what):
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise Invalid(f"{what} must not be empty")
    return value


class DatasetFile:
    """One file of a :class:`Dataset`: ``name`` in the store whose store file is
    ``store`` (a path on the storage node), beside the Dask worker at address ``worker``
    (``"tcp://HOST:PORT"``, as ``Client.scheduler_info()`` lists it)."""

    __slots__ = ("store", "worker", "name")

    def __init__(self, store, worker, name):
        self.store = _text(store, "store")
        self.worker = _text(worker, "worker")
        self.name = _text(name, "name")

    def __repr__(self):
        return f"DatasetFile(store={self.store!r}, worker={self.worker!r}, name={self.name!r})"


class Dataset:
    """Files spread over several stores: ``Dataset(files)`` with ``files`` an iterable of
    :class:`DatasetFile` or ``(store, worker, name)`` tuples, or
    :meth:`from_stores` to list every store's files on the worker beside it."""

    def __init__(self, files):
        entries = []
        for entry in files:
            if isinstance(entry, DatasetFile):
                entries.append(entry)
            elif isinstance(entry, tuple) and len(entry) == 3:
                entries.append(DatasetFile(*entry))
            else:
                raise TypeError(
                    "a dataset file is a DatasetFile or a (store, worker, name) tuple, "
                    f"not {type(entry).__name__}"
                )
        if not entries:
            raise Invalid("a dataset needs at least one file: the stores given hold none")
        workers = {}
        for entry in entries:
            if workers.setdefault(entry.store, entry.worker) != entry.worker:
                raise Invalid(
                    f"store {entry.store} is given beside two workers, "
                    f"{workers[entry.store]} and {entry.worker}: give one worker per store"
                )
        self.files = tuple(entries)

    @classmethod
    def from_stores(cls, stores, pattern="*", client=None):
        """The files matching ``pattern`` in each store of ``stores``, a mapping of store
        file path to the address of the worker beside it; each store is listed by a task
        on that worker (so the path is the storage node's)."""
        client = _client(client)
        if not hasattr(stores, "items"):
            raise TypeError(f"stores must map store paths to worker addresses, not {type(stores).__name__}")
        pattern = _text(pattern, "pattern")
        pairs = [(_text(store, "store"), _text(worker, "worker")) for store, worker in stores.items()]
        if not pairs:
            raise Invalid("stores is empty: give each store's path and the worker beside it")
        _check_workers(client, {worker for _, worker in pairs})
        futures = [
            client.submit(_list_task, store, pattern, workers=[worker], allow_other_workers=False, pure=False)
            for store, worker in pairs
        ]
        listings = client.gather(futures)
        return cls(
            DatasetFile(store, worker, name) for (store, worker), names in zip(pairs, listings) for name in names
        )

    @property
    def workers(self):
        """The workers beside the dataset's stores, sorted."""
        return sorted({entry.worker for entry in self.files})

    def __len__(self):
        return len(self.files)

    def __iter__(self):
        return iter(self.files)

    def __repr__(self):
        return f"Dataset({len(self.files)} files in {len({f.store for f in self.files})} stores)"


class MapResult:
    """What :func:`map` returns: ``results`` (one per dataset file, in its order) and
    ``report``, a dict: ``tasks``, ``locality_hits`` (tasks that ran on the worker beside
    their store), ``ran_away``, ``bytes_moved`` (file bytes read by tasks away from their
    store, through its server socket; 0 when every task was local) and ``files`` (one
    dict per task: ``name``, ``store``, ``wanted_worker``, ``worker``, ``local``,
    ``bytes_moved``)."""

    def __init__(self, results, report):
        self.results = results
        self.report = report

    def __repr__(self):
        report = self.report
        return (
            f"MapResult({report['tasks']} tasks, {report['locality_hits']} locality hits, "
            f"{report['bytes_moved']} bytes moved)"
        )


def map(dataset, func, *, client=None, placement="near", **options):
    """Runs ``func`` once per file of ``dataset`` (a :class:`Dataset`), each task on the
    worker beside the file's store (``workers=[that worker]``, ``allow_other_workers=True``).

    ``func`` is a Python function called as ``func(store, name, **options)`` with the
    file's :class:`flashpipe.Store` open on the worker (through its server), or the name
    of a near-data kernel (``flashpipe kernels``) run by the store's server over the file
    (``store.run(func, [name], **options)``; its answer dict is the result).
    ``placement="away"`` puts every task on a worker that is not beside its store (and
    forbids the fallback), to measure what locality saves. ``client`` defaults to the
    current ``distributed`` client. Returns a :class:`MapResult`; a task's error is
    raised here, naming its file and store."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"dataset must be a flashpipe.dask.Dataset, not {type(dataset).__name__}")
    if isinstance(func, str):
        if not func:
            raise Invalid("kernel name must not be empty")
    elif not callable(func):
        raise TypeError(f"func must be a function or a kernel name, not {type(func).__name__}")
    if placement not in PLACEMENTS:
        raise Invalid(f"placement must be one of {', '.join(PLACEMENTS)}, not {placement!r}")
    client = _client(client)
    known = _check_workers(client, set(dataset.workers))
    futures = []
    for entry in dataset.files:
        if placement == "near":
            workers, fallback = [entry.worker], True
        else:
            others = sorted(worker for worker in known if worker != entry.worker)
            if not others:
                raise Invalid("placement away needs a second worker: the cluster has only the one beside the store")
            workers, fallback = [others[len(futures) % len(others)]], False
        futures.append(
            client.submit(
                _map_task,
                entry.store,
                entry.worker,
                entry.name,
                func,
                options,
                workers=workers,
                allow_other_workers=fallback,
                pure=False,
            )
        )
    outcomes = client.gather(futures)
    rows = []
    for entry, outcome in zip(dataset.files, outcomes):
        rows.append(
            {
                "name": entry.name,
                "store": entry.store,
                "wanted_worker": entry.worker,
                "worker": outcome["worker"],
                "local": outcome["local"],
                "bytes_moved": outcome["bytes_moved"],
            }
        )
    hits = sum(1 for row in rows if row["local"])
    report = {
        "tasks": len(rows),
        "locality_hits": hits,
        "ran_away": len(rows) - hits,
        "bytes_moved": sum(row["bytes_moved"] for row in rows),
        "files": rows,
    }
    return MapResult([outcome["value"] for outcome in outcomes], report)


def _client(client):
    try:
        import distributed
    except ImportError as error:
        raise ImportError('flashpipe.dask needs distributed: pip install "dask[distributed]"') from error
    if client is None:
        try:
            return distributed.get_client()
        except ValueError as error:
            raise Invalid(
                "no Dask client: make one (distributed.Client(SCHEDULER_ADDRESS)) or pass client="
            ) from error
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a distributed.Client, not {type(client).__name__}")
    return client


def _check_workers(client, wanted):
    if _takes_n_workers(client):
        info = client.scheduler_info(n_workers=-1)
    else:
        info = client.scheduler_info()
    known = set(info["workers"])
    unknown = sorted(wanted - known)
    if unknown:
        raise Invalid(
            f"no Dask worker at {', '.join(unknown)}: the scheduler knows "
            f"{', '.join(sorted(known)) or 'no worker'}; start a Dask worker (dask worker SCHEDULER) beside each store"
        )
    return known


def _takes_n_workers(client):
    """Whether this ``distributed`` lists only some workers unless asked for all."""
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters


def _here():
    from distributed import get_worker

    return get_worker().address


class _CountingStore(Store):
    """A store that counts the file bytes its reads return."""

    def _count(self, size):
        self.__dict__["read_bytes"] = self.__dict__.get("read_bytes", 0) + size

    def get(self, name):
        data = super().get(name)
        self._count(len(data))
        return data

    def _read_at(self, name, offset, length):
        data = super()._read_at(name, offset, length)
        self._count(len(data))
        return data

    def _read_buffer(self, name, offset, length):
        data = super()._read_buffer(name, offset, length)
        self._count(memoryview(data).nbytes)
        return data


def _open_served(store, shared_memory=True):
    opened = _CountingStore(store, shared_memory=shared_memory)
    if opened.via != "served":
        opened.close()
        raise ConnectionLost(
            f"store {store} has no running server: start flashpipe serve {store} on its node "
            "(a near-data map reads stores only through their servers)"
        )
    return opened


def _list_task(store, pattern):
    try:
        with _open_served(store) as opened:
            return sorted(opened.ls(pattern))
    except Error as error:
        raise type(error)(f"listing store {store}: {error}") from None


def _open_for_task(store, here, wanted_worker):
    try:
        return _open_served(store, shared_memory=here == wanted_worker)
    except (NotFound, ConnectionLost) as error:
        if here == wanted_worker:
            raise
        raise type(error)(
            f"the task ran on worker {here}, away from {wanted_worker} beside the store, and "
            f"cannot reach the store from there ({error}); a task away from its store reads "
            "through the store's server socket, which only the store's own machine sees"
        ) from None


def _map_task(store, wanted_worker, name, func, options):
    here = _here()
    local = here == wanted_worker
    try:
        with _open_for_task(store, here, wanted_worker) as opened:
            if isinstance(func, str):
                with opened.run(func, [name], **options) as run:
                    value = list(run)
                    value = value[0] if len(value) == 1 else value
            else:
                value = func(opened, name, **options)
            read_bytes = opened.__dict__.get("read_bytes", 0)
    except Error as error:
        raise type(error)(f"store {store}, file {name}: {error}") from None
    return {
        "value": value,
        "worker": here,
        "local": local,
        "bytes_moved": 0 if local else read_bytes,
    }
