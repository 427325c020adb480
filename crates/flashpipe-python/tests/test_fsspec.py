"""The fsspec file system: registered by entry point, read by pandas."""

import pytest

fsspec = pytest.importorskip("fsspec")

import flashpipe  # noqa: E402
from flashpipe.fsspec import FlashpipeFileSystem  # noqa: E402


@pytest.fixture
def served_store(store_file, server):
    with flashpipe.Store(store_file) as store:
        store.put("table.csv", b"a,b\n1,2\n3,4\n")
        store.put("photos:x.jpg", b"\xff\xd8jpeg")
    yield store_file
    FlashpipeFileSystem.clear_instance_cache()


def test_the_protocol_is_registered_by_entry_point():
    assert fsspec.get_filesystem_class("flashpipe") is FlashpipeFileSystem


def test_listing_reading_and_writing(served_store):
    fs = fsspec.filesystem("flashpipe", store=str(served_store))
    assert sorted(fs.ls("flashpipe://", detail=False)) == ["photos:x.jpg", "table.csv"]
    assert fs.info("flashpipe://table.csv") == {"name": "table.csv", "size": 12, "type": "file"}
    assert fs.cat("flashpipe://photos:x.jpg") == b"\xff\xd8jpeg"
    assert fs.cat_file("table.csv", start=4, end=7) == b"1,2"
    with fs.open("flashpipe://out.txt", "wb") as file:
        file.write(b"written through fsspec")
    assert fs.cat("out.txt") == b"written through fsspec"
    fs.pipe("piped", b"p")
    fs.cp("piped", "copied")
    fs.mv("copied", "moved")
    fs.rm("piped")
    assert fs.exists("moved") and not fs.exists("piped")
    with pytest.raises(FileNotFoundError):
        fs.info("missing")


def test_the_store_in_the_url(served_store):
    with fsspec.open(f"flashpipe://table.csv?store={served_store}", "rb") as file:
        assert file.read() == b"a,b\n1,2\n3,4\n"


def test_no_store_is_invalid(monkeypatch):
    monkeypatch.delenv("FLASHPIPE_STORE", raising=False)
    with pytest.raises(flashpipe.Invalid, match="storage_options"):
        FlashpipeFileSystem()


def test_pandas_reads_a_csv(served_store):
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_csv("flashpipe://table.csv", storage_options={"store": str(served_store)})
    assert frame.to_dict("list") == {"a": [1, 3], "b": [2, 4]}
    frame.assign(c=frame.a + frame.b).to_csv(
        "flashpipe://sum.csv", index=False, storage_options={"store": str(served_store)}
    )
    with flashpipe.Store(served_store) as store:
        assert store.get("sum.csv") == b"a,b,c\n1,2,3\n3,4,7\n"
