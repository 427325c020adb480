"""Hostile arguments: each raises a flashpipe exception or TypeError, never crashes
the interpreter, and changes nothing."""

import pathlib

import numpy
import pytest

import flashpipe


@pytest.fixture
def filled(store):
    store.put("f", b"0123456789")
    yield store
    assert store.closed or "f" in store.ls()


def test_wrong_types(filled):
    with pytest.raises(TypeError):
        filled.put("g", "text is not bytes")
    with pytest.raises(TypeError):
        filled.put("g", 12)
    with pytest.raises(TypeError):
        filled.put("g", None)
    with pytest.raises(TypeError):
        filled.get(7)
    with pytest.raises(TypeError):
        filled.stat(None)
    with pytest.raises(TypeError):
        filled.read_array("f", offset="0")
    with pytest.raises(TypeError):
        filled.read_array("f", count=1.5)
    with pytest.raises(TypeError):
        filled.read_array("f", count=True)
    with pytest.raises(TypeError):
        filled.read_array("f", dtype="not a dtype")
    with pytest.raises(TypeError):
        filled._read_buffer("f", 0, "1")
    with pytest.raises(TypeError):
        flashpipe.Store(42)
    with pytest.raises(TypeError):
        flashpipe.Store(filled.path, shared_memory="no")
    with pytest.raises(TypeError):
        flashpipe.Store(filled.path, memory=False)
    with pytest.raises(TypeError):
        filled.ls(pattern=3)
    assert filled.ls() == ["f"]


def test_huge_and_negative_sizes(filled):
    for call in (
        lambda: filled.read_array("f", count=-2),
        lambda: filled.read_array("f", offset=-1),
        lambda: filled.read_array("f", count=1 << 62),
        lambda: filled.read_array("f", dtype="uint64", count=1 << 61),
        lambda: filled.read_array("f", offset=1 << 62),
        lambda: filled.read_array("f", offset=11),
        lambda: filled.read_buffer("f", 0, 1 << 70),
        lambda: filled._read_buffer("f", (1 << 63) - 1, (1 << 63) - 1),
        lambda: filled._read_buffer("f", 1 << 64, 1),
        lambda: filled._read_at("f", 0, -1),
        lambda: filled._write_at("f", -5, b"x"),
        lambda: filled.read_array("f", dtype="V0"),
        lambda: filled.read_array("f", dtype=object),
        lambda: filled.open("f", "r+"),
        lambda: filled.open("f", "rt"),
        lambda: filled.cp("f", "g", method="telepathy"),
    ):
        with pytest.raises(flashpipe.Invalid):
            call()
    assert filled.get("f") == b"0123456789"


def test_a_file_whose_size_is_not_whole_items(filled):
    with pytest.raises(flashpipe.Invalid, match="past its end"):
        filled.read_array("f", dtype="uint32", count=3)
    assert filled.read_array("f", dtype="uint32").tolist() == list(
        numpy.frombuffer(b"01234567", dtype="uint32")
    )


def test_bad_names(filled):
    for name in ("", "a/b", "nul\0name", "x" * 300):
        with pytest.raises(flashpipe.Invalid):
            filled.put(name, b"data")
    with pytest.raises(flashpipe.Invalid, match="NUL"):
        filled.get("nul\0name")
    with pytest.raises(flashpipe.Invalid):
        filled.mv("f", "a/b")
    with pytest.raises(flashpipe.NotFound):
        filled.open("missing")
    assert filled.ls() == ["f"]


def test_a_closed_store(filled):
    filled.close()
    filled.close()
    for call in (
        filled.ls,
        lambda: filled.get("f"),
        lambda: filled.put("g", b"x"),
        lambda: filled.stat("f"),
        filled.df,
        filled.fsck,
        lambda: filled.read_array("f"),
        lambda: filled.open("f"),
    ):
        with pytest.raises(flashpipe.Closed, match="closed"):
            call()


def test_a_file_object_of_a_closed_store(store):
    store.put("f", b"abc")
    file = store.open("f", buffering=0)
    store.close()
    with pytest.raises(flashpipe.Closed):
        file.read(1)


def test_stores_that_are_not_there(tmp_path):
    with pytest.raises(flashpipe.NotFound):
        flashpipe.Store(tmp_path / "missing.toml")
    not_a_store = tmp_path / "text.toml"
    not_a_store.write_text("this is not a store file\n")
    with pytest.raises(flashpipe.Error):
        flashpipe.Store(not_a_store)
    with pytest.raises(flashpipe.Error):
        flashpipe.Store(tmp_path)
    with pytest.raises((flashpipe.Invalid, flashpipe.NotFound)):
        flashpipe.Store(str(tmp_path / "nul\0.toml"))


def test_a_missing_local_source(store, tmp_path):
    with pytest.raises(flashpipe.NotFound, match="missing.bin"):
        store.put("g", pathlib.Path(tmp_path / "missing.bin"))
    assert store.ls() == []


def test_writable_export_is_refused(filled):
    buffer = filled._read_buffer("f", 0, 4)
    import ctypes

    with pytest.raises(TypeError, match="not writable"):
        ctypes.c_char.from_buffer(buffer)
    with pytest.raises(ValueError):
        numpy.frombuffer(buffer, dtype="uint8").setflags(write=True)
    with pytest.raises(TypeError):
        memoryview(buffer)[0] = 1
    assert bytes(memoryview(buffer)) == b"0123"
