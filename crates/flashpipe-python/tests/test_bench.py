"""A seconds-long smoke run of bench/bench_python.py (``--quick``): it runs and prints
every row. Never the benchmark itself: figures need an idle machine."""

import json
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "bench" / "bench_python.py"


@pytest.mark.bench
def test_bench_python_quick(binary, tmp_path):
    answer = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", "--folder", str(tmp_path), "--binary", str(binary)],
        capture_output=True, text=True, timeout=120,
    )
    assert answer.returncode == 0, answer.stderr
    rows = {row["row"]: row for row in json.loads(answer.stdout)}
    assert "read_array, whole file" in rows and "store.stat from Python" in rows
    assert all(row["ratio"] > 0 for row in rows.values())
    assert list(tmp_path.iterdir()) == [], "the run removes its store"


def test_bench_python_refuses_bad_arguments(binary):
    answer = subprocess.run(
        [sys.executable, str(SCRIPT), "--size-mib", "0", "--binary", str(binary)],
        capture_output=True, text=True, timeout=60,
    )
    assert answer.returncode != 0 and "must be 1 or more" in answer.stderr
