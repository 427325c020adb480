"""Kernel runs through the store's server, streamed file by file."""

import hashlib

import pytest

import flashpipe


def test_sha256_through_the_server(store_file, server):
    contents = {"logs:a": b"alpha\n" * 1000, "logs:b": b"beta\n" * 3000, "other": b"x"}
    with flashpipe.Store(store_file) as store:
        for name, data in contents.items():
            store.put(name, data)
        run = store.run("sha256", "logs:*")
        results = list(run)
        assert sorted(result["name"] for result in results) == ["logs:a", "logs:b"]
        for result in results:
            assert result["error"] is None
            assert result["size_bytes"] == len(contents[result["name"]])
            digest = hashlib.sha256(contents[result["name"]]).hexdigest()
            assert digest in str(result["summary"]), result["summary"]
        summary = run.summary
        assert summary["kernel"] == "sha256"
        assert summary["file_count"] == 2
        assert summary["input_bytes"] == sum(len(contents[n]) for n in ("logs:a", "logs:b"))
        assert store.ls() == ["logs:a", "logs:b", "other"], "the store is usable after the run"


def test_grep_with_options_and_a_closed_run(store_file, server):
    with flashpipe.Store(store_file) as store:
        store.put("notes", b"one\nneedle here\nthree\n")
        results = list(store.run("grep", ["notes"], pattern="needle"))
        assert len(results) == 1 and results[0]["error"] is None
        with store.run("sha256", ["notes"]) as run:
            pass
        assert run.summary is None
        assert store.get("notes").startswith(b"one")


def test_refusals(store_file, server):
    with flashpipe.Store(store_file) as store:
        store.put("f", b"data")
        with pytest.raises(flashpipe.Invalid, match="matches no file"):
            store.run("sha256", "nothing:*")
        with pytest.raises(flashpipe.KernelFailed, match="no-such-kernel"):
            list(store.run("no-such-kernel", ["f"]))
        with pytest.raises(TypeError):
            store.run(42, ["f"])
        assert store.get("f") == b"data"


def test_in_process_runs_need_the_server(store_file):
    with flashpipe.Store(store_file) as store:
        store.put("f", b"data")
        with pytest.raises(flashpipe.Invalid, match="flashpipe serve"):
            store.run("sha256", ["f"])


def test_other_calls_wait_for_a_run_in_flight(store_file, server):
    with flashpipe.Store(store_file) as store:
        store.put("a", b"a" * 100000)
        store.put("b", b"b" * 100000)
        run = store.run("sha256", ["a", "b"])
        with pytest.raises(flashpipe.Busy, match="kernel run is in flight"):
            store.get("a")
        with pytest.raises(flashpipe.Busy):
            store.read_array("a")
        with pytest.raises(flashpipe.Busy):
            store.run("sha256", ["a"])
        next(run)
        run.close()
        assert store.get("a") == b"a" * 100000, "usable again once the run is closed"
        assert len(list(store.run("sha256", ["a", "b"]))) == 2
        assert store.ls() == ["a", "b"]
