"""Arrays larger than one read: copied into memory mapped for them (owned by the array's
buffer), right for every dtype, offset and count, alive after the store and its server,
larger than the server's read pool, read while other arrays hold read handles, and a file
changed during the read reported rather than returned mixed."""

import gc
import subprocess
import sys
import threading
import time

import numpy
import pytest

import flashpipe
from conftest import Server, make_store

MIB = 1 << 20


def pattern(size_bytes):
    """Bytes whose every 8-byte word differs from its neighbours (a misplaced chunk shows)."""
    return numpy.arange(size_bytes // 8, dtype="<u8").tobytes() + bytes(size_bytes % 8)


def test_a_large_array_outlives_the_store_and_the_server(binary, store_file):
    server = Server(binary, store_file)
    try:
        values = numpy.arange(8 * MIB // 8, dtype=numpy.float64)
        store = flashpipe.Store(store_file)
        store.put("floats", values)
        array = store.read_array("floats", dtype="float64")
        assert array.base.obj.by_reference is False
        assert not array.flags.writeable
        view = array[-10:]
        store.close()
        server.kill()
        assert (array == values).all(), "valid after the store closed and the server died"
        del array
        gc.collect()
        assert view.tolist() == values[-10:].tolist(), "a view keeps the mapping alive"
    finally:
        server.kill()


@pytest.mark.parametrize("way", ["in process", "served"])
def test_an_array_larger_than_the_servers_read_pool(binary, tmp_path, way):
    """The engine's read pool holds 64 buffers of 1 MiB: an 80 MiB array is read through it
    again and again."""
    store_file = make_store(binary, tmp_path, size="256MiB")
    server = Server(binary, store_file) if way == "served" else None
    try:
        data = pattern(80 * MIB + 5)
        with flashpipe.Store(store_file) as store:
            assert store.via == way
            store.put("large", data)
            array = store.read_array("large")
            assert len(array) == len(data)
            assert array.tobytes() == data
    finally:
        if server is not None:
            server.stop()


@pytest.mark.parametrize(
    "dtype, offset, count",
    [
        ("<u8", 0, -1),
        ("<u8", 3, -1),
        ("<f4", 4 * MIB - 4, -1),
        ("uint8", 0, 2 * MIB),
        ("uint8", 1, 2 * MIB - 1),
        ("uint8", 7, 2 * MIB + 1),
        (">i2", 2 * MIB, 1),
        ("<c16", 0, -1),
        ("V3", 5, -1),
    ],
)
def test_large_dtype_offset_count_as_fromfile(store, tmp_path, dtype, offset, count):
    data = pattern(5 * MIB + 3)
    store.put("data", data)
    plain = tmp_path / "plain"
    plain.write_bytes(data)
    expected = numpy.fromfile(plain, dtype=dtype, offset=offset, count=count)
    array = store.read_array("data", dtype=dtype, offset=offset, count=count)
    assert array.dtype == expected.dtype
    assert array.tobytes() == expected.tobytes()


def test_large_ranges_past_the_end_are_refused(store):
    store.put("data", pattern(3 * MIB))
    for offset, count in ((0, 3 * MIB + 1), (3 * MIB + 1, -1), (2 * MIB, 2 * MIB)):
        with pytest.raises(flashpipe.Invalid, match="past"):
            store.read_array("data", offset=offset, count=count)
    assert len(store.read_array("data", offset=3 * MIB)) == 0
    assert store.read_array("data").tobytes() == pattern(3 * MIB), "the store is unchanged"


def test_a_large_read_while_arrays_hold_most_read_handles(binary, store_file, server):
    """A client may hold 16 read handles: with 12 held by live one-read arrays, the large
    read goes on with the 4 left rather than failing."""
    with flashpipe.Store(store_file) as store:
        store.put("small", b"s" * 4096)
        store.put("large", pattern(12 * MIB))
        held = [store.read_array("small") for _ in range(12)]
        assert all(array.base.obj.by_reference for array in held)
        assert store.read_array("large").tobytes() == pattern(12 * MIB)
        assert all(bytes(array[:2]) == b"ss" for array in held)


def test_a_file_replaced_during_the_read_is_reported(binary, store_file, server):
    """Another client replaces the file again and again with one byte value repeated: every
    array read is one whole version, or the read says the file changed under it."""
    size = 8 * MIB
    with flashpipe.Store(store_file) as reader, flashpipe.Store(store_file) as writer:
        writer.put("moving", bytes([1]) * size)
        stop = threading.Event()

        def replace_again_and_again():
            value = 1
            while not stop.is_set():
                value = value % 250 + 1
                writer.put("moving", bytes([value]) * size, replace=True)

        thread = threading.Thread(target=replace_again_and_again)
        thread.start()
        changed = whole = 0
        deadline = time.monotonic() + 30
        try:
            while changed == 0 and time.monotonic() < deadline:
                try:
                    array = reader.read_array("moving", count=size)
                except flashpipe.Busy as error:
                    assert "changed while it was being read" in str(error)
                    changed += 1
                    continue
                assert (array == array[0]).all(), "a read that succeeded saw one version"
                whole += 1
        finally:
            stop.set()
            thread.join()
        assert changed > 0, f"no read overlapped a replacement in 30 s ({whole} whole reads)"


def test_an_array_the_process_cannot_map_is_a_clear_error(binary, store_file, server, tmp_path):
    """Under an address-space limit too small for the array, read_array raises Invalid and
    says what to do; the store stays usable (run in a child process, whose limit it is)."""
    script = tmp_path / "limited.py"
    script.write_text(
        "import resource, sys\n"
        "import numpy, flashpipe\n"
        "with flashpipe.Store(sys.argv[1]) as store:\n"
        "    store.put('large', bytes(48 << 20))\n"
        "    with open('/proc/self/status') as status:\n"
        "        size = next(int(line.split()[1]) for line in status if line.startswith('VmSize:'))\n"
        "    limit = (size << 10) + (16 << 20)\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))\n"
        "    try:\n"
        "        store.read_array('large')\n"
        "    except flashpipe.Invalid as error:\n"
        "        print('refused:', error)\n"
        "    print('after:', len(store.read_array('large', count=4096)))\n"
    )
    answer = subprocess.run(
        [sys.executable, str(script), str(store_file)], capture_output=True, text=True, timeout=120
    )
    assert answer.returncode == 0, answer.stderr
    assert "refused: 50331648 bytes cannot be allocated in this process" in answer.stdout
    assert "read less at a time" in answer.stdout
    assert "after: 4096" in answer.stdout


def region_mappings():
    """Mappings of this process's region memfds (the served region reads')."""
    with open("/proc/self/maps") as maps:
        return sum("/memfd:flashpipe-python-region" in line for line in maps)


def test_a_served_large_array_is_read_into_a_region_of_this_process(binary, store_file, server):
    values = pattern(8 * MIB + 24)
    with flashpipe.Store(store_file) as store:
        store.put("big", values)
        array = store.read_array("big", dtype="u1")
        assert "region" in repr(array.base.obj) and array.base.obj.by_reference is False
        assert array.tobytes() == values
        part = store.read_array("big", dtype="<u8", offset=3 * MIB + 8, count=MIB // 8)
        assert part.tobytes() == values[3 * MIB + 8 : 4 * MIB + 8]
        del array, part
        gc.collect()
        for _ in range(4):
            again = store.read_array("big", dtype="u1")
            assert again.tobytes() == values
            del again
            gc.collect()
        assert region_mappings() <= 2, "a dead array's region is reused, not one per read"


def test_live_arrays_past_the_region_limits_are_copied_and_all_right(binary, store_file, server):
    values = pattern(3 * MIB)
    with flashpipe.Store(store_file) as store:
        store.put("f", values)
        held = [store.read_array("f", dtype="u1") for _ in range(12)]
        kinds = [repr(array.base.obj) for array in held]
        assert any("region" in kind for kind in kinds)
        assert any("copied" in kind for kind in kinds), "past 8 regions the copy path reads"
        assert all(array.tobytes() == values for array in held)
        del held
        gc.collect()
        assert store.read_array("f", dtype="u1").tobytes() == values


@pytest.mark.parametrize(
    "option", [["--max-region-bytes-per-client", "2MiB"], ["--max-regions-per-client", "1"]]
)
def test_the_servers_region_limits_send_reads_past_them_to_the_copy(binary, store_file, option):
    server = Server(binary, store_file, option)
    try:
        values = pattern(3 * MIB)
        with flashpipe.Store(store_file) as store:
            store.put("f", values)
            held = [store.read_array("f", dtype="u1") for _ in range(2)]
            kinds = [repr(array.base.obj) for array in held]
            assert all(array.tobytes() == values for array in held)
            if option[0] == "--max-regions-per-client":
                assert "region" in kinds[0] and "copied" in kinds[1], kinds
            else:
                assert all("copied" in kind for kind in kinds), "a 4 MiB region is past 2 MiB"
    finally:
        server.stop()


def test_a_store_kept_off_shared_memory_copies_every_read_through_the_socket(
    binary, store_file, server
):
    values = pattern(5 * MIB + 3)
    with flashpipe.Store(store_file, shared_memory=False) as store:
        assert store.via == "served" and store.by_reference is False
        store.put("f", values)
        large = store.read_array("f", dtype="u1")
        small = store.read_array("f", dtype="u1", count=4096)
        assert "copied" in repr(large.base.obj) and "copied" in repr(small.base.obj)
        assert large.tobytes() == values and small.tobytes() == values[:4096]
        assert store.get("f") == values
    with flashpipe.Store(store_file) as store:
        assert store.by_reference is True, "the default still maps the server's memory"
