"""Near-data maps with Dask (flashpipe.dask): a LocalCluster of two workers, each beside
one served store. The workers are threads of this process (``processes=False``), so the
tests need no worker processes; locality is the scheduler's placement all the same."""

import pytest

import flashpipe
from conftest import Server, make_store

distributed = pytest.importorskip("distributed")
import flashpipe.dask as fdask  # noqa: E402

FILES = {"a:0": 4096, "a:1": 10000, "b:0": 3 << 20}


@pytest.fixture
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as local, distributed.Client(local) as client:
        yield client


@pytest.fixture
def stores(binary, tmp_path, cluster):
    """Two served stores, each given to one worker: {store path: worker address}."""
    workers = sorted(cluster.scheduler_info()["workers"])
    assert len(workers) == 2
    placed, servers = {}, []
    for index, worker in enumerate(workers):
        folder = tmp_path / f"node{index}"
        folder.mkdir()
        store = make_store(binary, folder)
        servers.append(Server(binary, store))
        with flashpipe.Store(store) as opened:
            for name, size in FILES.items():
                opened.put(name, bytes([index + 1]) * size)
        placed[str(store)] = worker
    yield placed, servers
    for server in servers:
        server.stop()


def total(store, name):
    return int(store.read_array(name, dtype="uint8").sum())


def test_near_map_runs_every_task_beside_its_store(cluster, stores):
    placed, _ = stores
    dataset = fdask.Dataset.from_stores(placed, client=cluster)
    assert len(dataset) == 2 * len(FILES)
    result = fdask.map(dataset, total, client=cluster)
    report = result.report
    assert report["tasks"] == len(dataset)
    assert report["locality_hits"] == len(dataset)
    assert report["ran_away"] == 0
    assert report["bytes_moved"] == 0
    by_store = {store: index + 1 for index, store in enumerate(sorted(placed, key=placed.get))}
    for entry, value, row in zip(dataset, result.results, report["files"]):
        assert value == by_store[entry.store] * FILES[entry.name]
        assert row["worker"] == entry.worker and row["local"]


def test_away_map_counts_the_bytes_read_through_the_other_server(cluster, stores):
    placed, _ = stores
    dataset = fdask.Dataset.from_stores(placed, pattern="a:*", client=cluster)
    result = fdask.map(dataset, total, client=cluster, placement="away")
    report = result.report
    assert report["locality_hits"] == 0
    assert report["ran_away"] == len(dataset) == 4
    assert report["bytes_moved"] == 2 * (FILES["a:0"] + FILES["a:1"])
    for row in report["files"]:
        assert row["worker"] != row["wanted_worker"]


def test_file_objects_and_get_are_counted_too(cluster, stores):
    placed, _ = stores
    store, worker = next(iter(placed.items()))
    dataset = fdask.Dataset([(store, worker, "a:1")])

    def read_twice(opened, name, chunk):
        with opened.open(name) as handle:
            head = handle.read(chunk)
        return len(head) + len(opened.get(name))

    result = fdask.map(dataset, read_twice, client=cluster, placement="away", chunk=100)
    assert result.results == [100 + FILES["a:1"]]
    assert result.report["bytes_moved"] >= FILES["a:1"] + 100


def test_kernel_map(cluster, stores):
    placed, _ = stores
    dataset = fdask.Dataset.from_stores(placed, pattern="a:0", client=cluster)
    result = fdask.map(dataset, "sha256", client=cluster)
    assert result.report["locality_hits"] == 2
    for answer in result.results:
        assert answer["error"] is None and answer["size_bytes"] == FILES["a:0"]


def test_hostile_arguments(cluster, stores):
    placed, servers = stores
    store, worker = next(iter(placed.items()))
    with pytest.raises(flashpipe.Invalid, match="at least one file"):
        fdask.Dataset([])
    with pytest.raises(TypeError):
        fdask.Dataset([42])
    with pytest.raises(TypeError):
        fdask.Dataset([(store, None, "a:0")])
    with pytest.raises(flashpipe.Invalid, match="two workers"):
        fdask.Dataset([(store, worker, "a:0"), (store, "tcp://10.0.0.1:1", "a:1")])
    with pytest.raises(TypeError):
        fdask.Dataset.from_stores([store], client=cluster)
    with pytest.raises(flashpipe.Invalid, match="stores is empty"):
        fdask.Dataset.from_stores({}, client=cluster)
    bad = fdask.Dataset([(store, "tcp://127.0.0.1:1", "a:0")])
    with pytest.raises(flashpipe.Invalid, match="no Dask worker at tcp://127.0.0.1:1"):
        fdask.map(bad, total, client=cluster)
    with pytest.raises(flashpipe.Invalid, match="no Dask worker"):
        fdask.Dataset.from_stores({store: "not an address"}, client=cluster)
    good = fdask.Dataset([(store, worker, "a:0")])
    with pytest.raises(TypeError):
        fdask.map(good, 42, client=cluster)
    with pytest.raises(flashpipe.Invalid, match="kernel name"):
        fdask.map(good, "", client=cluster)
    with pytest.raises(TypeError):
        fdask.map([("x", "y", "z")], total, client=cluster)
    with pytest.raises(TypeError):
        fdask.map(good, total, client="tcp://127.0.0.1:1")
    with pytest.raises(flashpipe.Invalid, match="placement"):
        fdask.map(good, total, client=cluster, placement="anywhere")
    missing = fdask.Dataset([(store, worker, "no such file")])
    with pytest.raises(flashpipe.NotFound, match="no such file"):
        fdask.map(missing, total, client=cluster)
    elsewhere = fdask.Dataset([(store + ".elsewhere", worker, "a:0")])
    with pytest.raises(flashpipe.NotFound, match="away from"):
        fdask.map(elsewhere, total, client=cluster, placement="away")
    servers[0].stop()
    with pytest.raises(flashpipe.ConnectionLost, match="no running server"):
        fdask.map(good, total, client=cluster)
    with pytest.raises(flashpipe.ConnectionLost, match="no running server"):
        fdask.Dataset.from_stores({store: worker}, client=cluster)
