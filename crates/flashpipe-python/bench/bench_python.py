#!/usr/bin/env python3
"""flashpipe from Python beside the Rust client, side by side in one run (run by hand,
never in CI; on an idle machine):

- ``read_array`` of one large file (``--size-mib``, 1024 by default) of a served store
  whose device image lies on RAM-backed files (``--folder``, /dev/shm by default), and
  ``read_array`` of 1 MiB pieces (one read each: the zero-copy path);
- the Rust client's by-reference rate: ``flashpipe bench serve --stores ram,file --clients 1``
  (its "client, by reference, frames on socket" throughput row, 1 MiB reads, 4 in flight):
  the device file's (in ``--folder``, as the Python rows' store is) is the target's
  reference, the Rust client on the same kind of store; the RAM disk's is a stricter row
  beside it (a RAM disk has no file to copy out of);
- ``numpy.fromfile`` of the same bytes from a file in ``--folder`` (tmpfs);
- ``store.stat`` per call from Python beside the Rust client's nearest per-call row (the
  same bench serve run's QD1 4 KiB read by reference on the socket; it has no stat row) and
  the Unix-socket 64-byte round trip floor;
- with ``distributed`` installed, a Dask near-data map (``flashpipe.dask.map``) over
  ``--dask-stores`` served stores (4), one ``LocalCluster`` worker process beside each, 8
  files of ``--dask-file-mib`` (16) per store, beside the same map with every task placed
  away from its store; locality hits and bytes moved reported.

Usage: ``.venv/bin/python crates/flashpipe-python/bench/bench_python.py [--size-mib N]
[--stat-calls N] [--rounds N] [--folder DIR] [--binary PATH] [--dask-stores N]
[--dask-file-mib N] [--quick]``. The targets of
docs/python.md: read_array >= 0.9x the Rust by-reference rate and faster than
numpy.fromfile; stat <= 2x the Rust client's per-call cost. Prints a table (``--json``:
the same rows as JSON). A ``read_array`` array is not touched after it is made (numpy
makes a view, or one copy past one read); ``numpy.fromfile`` reads its bytes once.
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy

import flashpipe

MIB = 1 << 20
REPOSITORY = pathlib.Path(__file__).resolve().parents[3]


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="the large file, MiB")
    parser.add_argument("--stat-calls", type=int, default=20000, help="store.stat calls timed per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per row; the fastest counts")
    parser.add_argument("--folder", default="/dev/shm", help="RAM-backed folder for the store and the file")
    parser.add_argument("--binary", default=None, help="the flashpipe binary [target/release/flashpipe]")
    parser.add_argument("--dask-stores", type=int, default=4, help="stores (and workers) of the Dask rows, 0: none")
    parser.add_argument("--dask-file-mib", type=int, default=16, help="size of each of a store's 8 files, MiB")
    parser.add_argument("--quick", action="store_true", help="a tiny run for the smoke test (4 MiB, 200 stats, 1 round)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    options = parser.parse_args()
    if options.quick:
        options.size_mib, options.stat_calls, options.rounds = 4, 200, 1
        options.dask_stores, options.dask_file_mib = min(options.dask_stores, 2), 1
    if min(options.size_mib, options.stat_calls, options.rounds, options.dask_file_mib) < 1:
        parser.error("--size-mib, --stat-calls, --rounds and --dask-file-mib must be 1 or more")
    if options.dask_stores < 0 or options.dask_stores == 1:
        parser.error("--dask-stores must be 0 (no Dask rows) or 2 or more (away needs a second worker)")
    if options.binary is None:
        target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPOSITORY / "target"))
        options.binary = os.environ.get("FLASHPIPE_BINARY") or str(target / "release" / "flashpipe")
    if not pathlib.Path(options.binary).exists():
        parser.error(f"{options.binary} is missing: cargo build --release -p flashpipe-cli")
    return options


def fastest(rounds, work):
    best = None
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best


def rust_rows(options):
    """The Rust client's rows from one small ``flashpipe bench serve`` run."""
    command = [
        options.binary, "bench", "serve", "--stores", "ram,file", "--clients", "1", "--json",
        "--file-mib", str(options.size_mib), "--folder", options.folder,
    ]
    if options.quick:
        command += ["--quick", "--operations", "50", "--seconds", "0.1"]
    answer = subprocess.run(command, check=True, capture_output=True, text=True)
    stores = {store["store"]: store for store in json.loads(answer.stdout)["stores"]}
    store = stores["ram"]
    latency = {row["side"]: row["us_per_operation"] for row in store["latency"]}
    throughput = {row["side"]: row["gib_per_second"] for row in store["throughput"]}
    on_file = {row["side"]: row["gib_per_second"] for row in stores["file"]["throughput"]}
    return {
        "by_reference_gib_per_second": throughput["client, by reference, frames on socket"],
        "file_by_reference_gib_per_second": on_file["client, by reference, frames on socket"],
        "read_4k_us": latency["client, by reference, frames on socket"],
        "socket_floor_us": latency["Unix socket, 64 B there and back (floor)"],
    }


def start_store(binary, folder, size_mib):
    """A fresh store in ``folder`` and its running server."""
    folder.mkdir()
    store_file = folder / "store.toml"
    subprocess.run(
        [binary, "mkfs", "--devices", str(folder / "device.img"), "--size", f"{size_mib}MiB", str(store_file)],
        check=True, capture_output=True,
    )
    with open(folder / "serve.log", "w") as log:
        server = subprocess.Popen([binary, "serve", str(store_file)], stdout=subprocess.PIPE, stderr=log, text=True)
    if "ready" not in server.stdout.readline():
        server.kill()
        server.wait(timeout=30)
        said = (folder / "serve.log").read_text().strip()
        raise SystemExit(f"flashpipe serve {store_file} did not start: {said}")
    return store_file, server


def total(store, name):
    """The map's function: every byte of the file read and summed."""
    return int(store.read_array(name, dtype="uint8").sum(dtype=numpy.uint64))


def dask_rows(options, folder):
    """The near map and the away map over ``--dask-stores`` stores, one worker beside each."""
    try:
        import distributed
    except ImportError:
        return None
    import flashpipe.dask as fdask

    servers = []
    processes = not options.quick
    try:
        with distributed.LocalCluster(n_workers=options.dask_stores, threads_per_worker=1, processes=processes,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
            placed = {}
            for index, worker in enumerate(workers):
                store_file, server = start_store(options.binary, folder / f"node{index}",
                                                 options.dask_file_mib * 8 * 2 + 64)
                servers.append(server)
                with flashpipe.Store(store_file) as store:
                    for file_index in range(8):
                        store.put(f"part{file_index}", bytes([index + 1]) * (options.dask_file_mib * MIB))
                placed[str(store_file)] = worker
            dataset = fdask.Dataset.from_stores(placed, client=client)
            figures = {}
            for placement in ("near", "away"):
                outcome = {}

                def once():
                    outcome["result"] = fdask.map(dataset, total, client=client, placement=placement)

                figures[placement] = (fastest(options.rounds, once), outcome["result"].report)
            return figures
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)


def main():
    options = arguments()
    size_bytes = options.size_mib * MIB
    folder = pathlib.Path(tempfile.mkdtemp(prefix="flashpipe-bench-python-", dir=options.folder))
    server = None
    try:
        store_file, server = start_store(options.binary, folder / "large", options.size_mib * 2 + 64)
        plain = folder / "same.bin"
        generator = numpy.random.default_rng(7)
        with flashpipe.Store(store_file) as store, open(plain, "wb") as local:
            assert store.via == "served"
            with store.open("large", "wb") as handle:
                for _ in range(options.size_mib):
                    chunk = generator.integers(0, 256, MIB, dtype=numpy.uint8).tobytes()
                    handle.write(chunk)
                    local.write(chunk)
            gib = size_bytes / (1 << 30)
            whole_s = fastest(options.rounds, lambda: store.read_array("large", dtype="uint8"))
            pieces = min(options.size_mib, 256)

            def read_pieces():
                for index in range(pieces):
                    store.read_array("large", dtype="uint8", offset=index * MIB, count=MIB)

            pieces_s = fastest(options.rounds, read_pieces)
            fromfile_s = fastest(options.rounds, lambda: numpy.fromfile(plain, dtype="uint8"))
            stat_s = fastest(options.rounds, lambda: [store.stat("large") for _ in range(options.stat_calls)])
        rust = rust_rows(options)
        dask = dask_rows(options, folder) if options.dask_stores else None
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    reference = rust["by_reference_gib_per_second"]
    same_kind = rust["file_by_reference_gib_per_second"]
    read_rate = gib / whole_s
    stat_us = stat_s / options.stat_calls * 1e6
    rows = [
        ("read_array, whole file", f"{read_rate:.2f} GiB/s", read_rate / reference, "RAM disk: >= 0.9x, stricter"),
        ("read_array / Rust, same kind", f"{read_rate:.2f} GiB/s", read_rate / same_kind,
         ">= 0.9x Rust on the same kind of store"),
        ("read_array, 1 MiB pieces", f"{pieces / 1024 / pieces_s:.2f} GiB/s", pieces / 1024 / pieces_s / reference, ""),
        ("Rust client, by reference", f"{reference:.2f} GiB/s", 1.0, ""),
        ("Rust client, by reference, file", f"{same_kind:.2f} GiB/s", same_kind / reference,
         "the Python rows' kind of store"),
        ("numpy.fromfile (tmpfs)", f"{gib / fromfile_s:.2f} GiB/s", gib / fromfile_s / reference,
         "read_array faster" if read_rate > gib / fromfile_s else "read_array SLOWER"),
        ("store.stat from Python", f"{stat_us:.1f} us", stat_us / rust["read_4k_us"], "<= 2x Rust per call"),
        ("Rust client, 4 KiB read QD1", f"{rust['read_4k_us']:.1f} us", 1.0, ""),
        ("Unix socket floor, 64 B", f"{rust['socket_floor_us']:.1f} us", rust["socket_floor_us"] / rust["read_4k_us"], ""),
    ]
    if dask is not None:
        near_s, near = dask["near"]
        away_s, away = dask["away"]
        label = f"{options.dask_stores} stores"
        rows += [
            (f"Dask map near, {label}", f"{near_s * 1e3:.0f} ms", 1.0,
             f"{near['locality_hits']}/{near['tasks']} hits, {near['bytes_moved']} B moved (target 0)"),
            (f"Dask map away, {label}", f"{away_s * 1e3:.0f} ms", away_s / near_s,
             f"{away['locality_hits']}/{away['tasks']} hits, {away['bytes_moved']} B moved; "
             + ("near faster" if near_s < away_s else "near NOT faster")),
        ]
    if options.json:
        print(json.dumps([{"row": r, "value": v, "ratio": x, "target": t} for r, v, x, t in rows], indent=2))
        return
    print(f"flashpipe from Python, {options.size_mib} MiB file in {options.folder}, fastest of {options.rounds}")
    print(f"{'row':32} {'value':>14} {'ratio':>7}  target")
    for row, value, ratio, target in rows:
        print(f"{row:32} {value:>14} {ratio:>6.2f}x  {target}")


if __name__ == "__main__":
    sys.exit(main())
