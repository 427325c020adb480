"""Fixtures of the flashpipe package's tests: stores made with the real ``flashpipe``
binary (``mkfs``), served by it (``serve``) where a test needs a server.

The binary is ``$FLASHPIPE_BINARY``, else ``$CARGO_TARGET_DIR/release/flashpipe``, else
the repository's ``target/release/flashpipe`` (scripts/test-python builds it).
"""

import os
import pathlib
import signal
import subprocess
import time

import pytest

import flashpipe

REPOSITORY = pathlib.Path(__file__).resolve().parents[3]


def flashpipe_binary():
    if os.environ.get("FLASHPIPE_BINARY"):
        return pathlib.Path(os.environ["FLASHPIPE_BINARY"])
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPOSITORY / "target"))
    return target / "release" / "flashpipe"


@pytest.fixture(scope="session")
def binary():
    path = flashpipe_binary()
    if not path.exists():
        pytest.fail(f"{path} is missing: build it with cargo build --release -p flashpipe-cli")
    return path


def make_store(binary, folder, size="64MiB"):
    store = folder / "store.toml"
    subprocess.run(
        [str(binary), "mkfs", "--devices", str(folder / "device.img"), "--size", size, str(store)],
        check=True,
        capture_output=True,
    )
    return store


class Server:
    """A running ``flashpipe serve`` of one store."""

    def __init__(self, binary, store, options=()):
        self.process = subprocess.Popen(
            [str(binary), "serve", str(store), *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.process.stdout.readline()
        if "ready" not in line:
            self.process.kill()
            raise RuntimeError(f"flashpipe serve did not start: {line!r}")
        self.pid = self.process.pid

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def store_file(binary, tmp_path):
    return make_store(binary, tmp_path)


@pytest.fixture
def server(binary, store_file):
    running = Server(binary, store_file)
    yield running
    running.stop()


@pytest.fixture(params=["in process", "served"])
def store(request, binary, store_file):
    """An open store, each test run once in process and once through a server."""
    running = Server(binary, store_file) if request.param == "served" else None
    opened = flashpipe.Store(store_file)
    assert opened.via == request.param
    yield opened
    opened.close()
    if running is not None:
        running.stop()


def wait_until(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)
