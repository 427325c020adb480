"""The GIL is released while a call waits on the store: another Python thread runs
meanwhile."""

import sys
import threading
import time


def test_other_threads_run_during_a_blocking_call(store):
    payload = b"g" * (16 << 20)
    counter = [0]
    running = threading.Event()
    stop = threading.Event()

    def count():
        running.set()
        while not stop.is_set():
            counter[0] += 1
            if counter[0] % 1000 == 0:
                time.sleep(0)  # lets the caller have the GIL back as soon as it wants it

    previous = sys.getswitchinterval()
    sys.setswitchinterval(30)  # no forced switch: only a released GIL lets the counter run
    thread = threading.Thread(target=count)
    try:
        thread.start()
        running.wait()
        time.sleep(0)
        # A loaded machine may not schedule the counter within one call: a few tries.
        for _ in range(5):
            before = counter[0]
            store.put("big", payload, replace=True)
            after = counter[0]
            if after > before:
                break
    finally:
        stop.set()
        sys.setswitchinterval(previous)
        thread.join()
    assert after > before, "the counting thread ran while put waited on the store"
    assert store.stat("big")["size_bytes"] == len(payload)
