"""Every method of flashpipe.Store, in process and through a server."""

import io
import pathlib
import threading

import pytest

import flashpipe


def test_put_get_stat_ls(store):
    assert store.ls() == []
    assert store.put("a", b"hello") == 5
    assert store.put("b", bytearray(b"xyz")) == 3
    assert store.put("c", memoryview(b"0123456789")[2:5]) == 3
    assert store.get("a") == b"hello"
    assert store.get("b") == b"xyz"
    assert store.get("c") == b"234"
    assert store.ls() == ["a", "b", "c"]
    assert store.ls("[ab]") == ["a", "b"]
    assert store.ls("nothing*") == []
    stat = store.stat("a")
    assert stat["name"] == "a" and stat["size_bytes"] == 5
    assert set(stat) == {
        "name",
        "size_bytes",
        "file_id",
        "allocated_blocks",
        "shared_bytes",
        "modified_clock_ns",
    }
    detail = store.ls(detail=True)
    assert [file["name"] for file in detail] == ["a", "b", "c"]


def test_put_refuses_an_existing_name_unless_replace(store):
    store.put("a", b"one")
    with pytest.raises(flashpipe.Exists, match="replace=True"):
        store.put("a", b"two")
    assert store.get("a") == b"one"
    store.put("a", b"two", replace=True)
    assert store.get("a") == b"two"
    assert store.ls() == ["a"], "no temporary is left behind"


def test_put_from_a_local_file_and_a_large_file(store, tmp_path):
    local = tmp_path / "local.bin"
    payload = bytes(range(256)) * 20000  # about 5 MiB: several commands
    local.write_bytes(payload)
    assert store.put("big", pathlib.Path(local)) == len(payload)
    assert store.get("big") == payload


def test_empty_file(store):
    store.put("empty", b"")
    assert store.get("empty") == b""
    assert store.stat("empty")["size_bytes"] == 0
    assert len(store.read_array("empty")) == 0


def test_rm_mv_cp(store):
    store.put("a", b"data" * 10000)
    report = store.cp("a", "b")
    assert set(report) == {"blocks_by_reference", "bytes_by_bytes"}
    assert store.get("b") == store.get("a")
    store.cp("a", "c", method="bytes")
    assert store.get("c") == store.get("a")
    with pytest.raises(flashpipe.Exists):
        store.cp("a", "b")
    store.mv("b", "d")
    assert store.ls() == ["a", "c", "d"]
    with pytest.raises(flashpipe.Exists):
        store.mv("c", "d")
    store.mv("c", "d", replace=True)
    store.rm("a")
    assert store.ls() == ["d"]
    with pytest.raises(flashpipe.NotFound):
        store.rm("a")
    with pytest.raises(FileNotFoundError):
        store.mv("a", "e")


def test_df_and_fsck(store):
    store.put("a", b"x" * 100000)
    df = store.df()
    assert df["file_count"] == 1
    assert df["total_bytes"] >= df["used_bytes"] > 0
    assert df["unflushed_changes"] is False, "every change is flushed"
    check = store.fsck()
    assert check["clean"] is True
    assert check["findings"] == []
    assert check["file_count"] == 1
    assert isinstance(check["report"], str)


def test_changes_are_durable_and_seen_by_the_next_opener(binary, store_file):
    with flashpipe.Store(store_file) as first:
        first.put("kept", b"across opens")
        assert first.via == "in process"
    assert first.closed and first.via == "closed"
    with flashpipe.Store(store_file, read_only=True) as second:
        assert second.get("kept") == b"across opens"


def test_read_only_refuses_changes(store_file):
    with flashpipe.Store(store_file) as writer:
        writer.put("a", b"1")
    with flashpipe.Store(store_file, read_only=True) as reader:
        assert reader.read_only
        for change in (
            lambda: reader.put("b", b"2"),
            lambda: reader.rm("a"),
            lambda: reader.mv("a", "b"),
            lambda: reader.cp("a", "b"),
            lambda: reader.open("b", "wb"),
        ):
            with pytest.raises(flashpipe.PermissionDenied, match="read-only"):
                change()
        assert reader.ls() == ["a"]


def test_a_second_writer_in_another_process_is_busy(binary, store_file):
    import subprocess

    with flashpipe.Store(store_file):
        result = subprocess.run(
            [str(binary), "ls", str(store_file)], capture_output=True, text=True
        )
        assert result.returncode == 75, result.stderr


def test_file_objects(store):
    with store.open("f", "wb") as file:
        assert file.write(b"hello ") == 6
        file.write(memoryview(b"world"))
    with store.open("f") as file:
        assert file.read(5) == b"hello"
        assert file.tell() == 5
        file.seek(-5, io.SEEK_END)
        assert file.read() == b"world"
    raw = store.open("f", "rb", buffering=0)
    assert isinstance(raw, io.RawIOBase)
    target = bytearray(4)
    assert raw.readinto(target) == 4 and target == b"hell"
    raw.seek(6)
    assert raw.readall() == b"world"
    assert raw.read(10) == b""
    raw.close()
    with pytest.raises(ValueError):
        raw.read(1)
    with io.TextIOWrapper(store.open("f"), encoding="utf-8") as text:
        assert text.read() == "hello world"


def test_a_file_opened_for_writing_replaces_the_old_bytes(store):
    store.put("f", b"old contents that are long")
    with store.open("f", "wb") as file:
        file.write(b"new")
    assert store.get("f") == b"new"


def test_threads_share_a_store(store):
    store.put("shared", b"s" * 300000)
    failures = []

    def reader():
        try:
            for _ in range(20):
                assert store.get("shared") == b"s" * 300000
        except Exception as error:  # noqa: BLE001 (collected for the assertion)
            failures.append(error)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_help_shows_docstrings():
    assert "answers on its socket" in flashpipe.Store.__doc__
    assert "replace=True" in flashpipe.Store.put.__doc__
    assert "zero" in flashpipe.Store.read_array.__doc__.lower() or "no copy" in flashpipe.Store.read_array.__doc__
