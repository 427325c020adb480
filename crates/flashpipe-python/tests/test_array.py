"""Zero-copy reads: arrays over the server's shared memory, valid after the store closes
and after the server is killed; copies in process."""

import gc

import numpy
import pytest

import flashpipe
from conftest import Server

#: Bytes one read by reference can hold (the engine's read buffer).
ONE_READ_BYTES = 1 << 20


def test_read_array_in_process_is_a_copy(store_file):
    values = numpy.arange(1000, dtype=numpy.int32)
    with flashpipe.Store(store_file) as store:
        store.put("ints", values)
        array = store.read_array("ints", dtype="int32")
        assert array.base.obj.by_reference is False
    assert (array == values).all()
    assert not array.flags.writeable


def test_read_array_dtype_offset_count(store):
    values = numpy.arange(100, dtype="<u8")
    store.put("v", values.tobytes())
    assert (store.read_array("v", dtype="<u8") == values).all()
    assert (store.read_array("v", "<u8", offset=8 * 10, count=5) == values[10:15]).all()
    assert store.read_array("v", "uint8", count=3).tolist() == [0, 0, 0]
    assert len(store.read_array("v", "<u8", offset=800)) == 0
    memory = store.read_buffer("v", 8, 8)
    assert isinstance(memory, memoryview) and memory.readonly
    assert bytes(memory) == (1).to_bytes(8, "little")
    assert len(store.read_buffer("v")) == 800


def test_a_served_array_is_the_servers_memory_and_outlives_store_and_server(binary, store_file):
    server = Server(binary, store_file)
    try:
        values = numpy.arange(ONE_READ_BYTES // 8, dtype=numpy.float64)
        store = flashpipe.Store(store_file)
        assert store.via == "served" and store.by_reference
        store.put("floats", values)
        array = store.read_array("floats", dtype="float64")
        assert array.base.obj.by_reference, "no copy: a window of the server's read pool"
        view = array[10:20]
        store.close()
        assert (array == values).all(), "valid after the store closed"
        server.kill()
        assert (array == values).all(), "valid after the server was killed"
        del array
        gc.collect()
        assert view.tolist() == values[10:20].tolist(), "a view keeps the buffer alive"
        del view
        gc.collect()
    finally:
        server.kill()


def test_a_large_served_array_is_copied_once(binary, store_file, server):
    values = numpy.arange(3 * ONE_READ_BYTES // 8, dtype=numpy.int64)
    with flashpipe.Store(store_file) as store:
        store.put("big", values)
        array = store.read_array("big", dtype="int64")
        assert array.base.obj.by_reference is False
        assert (array == values).all()


def test_dropped_arrays_give_their_read_buffers_back(binary, store_file, server):
    """More arrays than the server lets one client hold at once, each dropped before the
    next: every one is released when its last reference dies."""
    with flashpipe.Store(store_file) as store:
        store.put("small", b"z" * 4096)
        for _ in range(300):
            array = store.read_array("small")
            assert array.base.obj.by_reference
            del array
        held = [store.read_array("small") for _ in range(8)]
        assert all(array.base.obj.by_reference for array in held)


def test_arrays_after_a_server_is_killed_midway(binary, store_file):
    server = Server(binary, store_file)
    store = flashpipe.Store(store_file)
    try:
        store.put("f", b"abc" * 1000)
        array = store.read_array("f")
        server.kill()
        with pytest.raises(flashpipe.ConnectionLost):
            store.read_array("f")
        for call in (
            lambda: store.get("f"),
            lambda: store.put("g", b"x" * 3_000_000),
            store.ls,
            lambda: store.read_array("f"),
            lambda: list(store.run("sha256", ["f"])),
            store.fsck,
        ):
            with pytest.raises(flashpipe.ConnectionLost):
                call()
        assert bytes(array[:6]) == b"abcabc"
    finally:
        store.close()
        server.kill()
