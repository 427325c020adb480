"""A seconds-long smoke run of bench/bench_python.py (``--quick``): it runs and prints
every row. Never the benchmark itself: figures need an idle machine."""

import json
import pathlib
import subprocess
import sys
import tempfile

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "bench" / "bench_python.py"


@pytest.mark.bench
def test_bench_python_quick(binary):
    # A short folder: the stores' server sockets must fit a Unix socket path.
    with tempfile.TemporaryDirectory(prefix="fpb-") as folder:
        quick_run(binary, pathlib.Path(folder))


def quick_run(binary, tmp_path):
    answer = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", "--folder", str(tmp_path), "--binary", str(binary)],
        capture_output=True, text=True, timeout=120,
    )
    assert answer.returncode == 0, answer.stderr
    assert list(tmp_path.iterdir()) == [], "the run removes its stores"
    rows = {row["row"]: row for row in json.loads(answer.stdout)}
    assert "read_array, whole file" in rows and "store.stat from Python" in rows
    assert all(row["ratio"] > 0 for row in rows.values())
    try:
        import distributed  # noqa: F401
    except ImportError:
        return
    assert rows["Dask map near, 2 stores"]["target"].startswith("16/16 hits, 0 B moved")
    assert rows["Dask map away, 2 stores"]["target"].startswith(f"0/16 hits, {16 << 20} B moved")


def test_bench_python_refuses_bad_arguments(binary):
    answer = subprocess.run(
        [sys.executable, str(SCRIPT), "--size-mib", "0", "--binary", str(binary)],
        capture_output=True, text=True, timeout=60,
    )
    assert answer.returncode != 0 and "must be 1 or more" in answer.stderr
    answer = subprocess.run(
        [sys.executable, str(SCRIPT), "--dask-stores", "1", "--binary", str(binary)],
        capture_output=True, text=True, timeout=60,
    )
    assert answer.returncode != 0 and "second worker" in answer.stderr
