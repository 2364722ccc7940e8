"""A Python process killed with SIGKILL in the middle of a pool run loses nothing it was
told was stored: every message whose durable enqueue returned is, after the kill, either
one the handler finished or still in the store (delivered again to the next pool)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import deadletter

CHILD = textwrap.dedent(
    """
    import os, sys
    import deadletter

    path, log_path = sys.argv[1], sys.argv[2]
    store = deadletter.Store(path)  # durable: each enqueue returns after its fsync
    q = store.queue("jobs")
    log = open(log_path, "a", buffering=1)

    def handle(msg):
        log.write(msg.text + "\\n")  # the handler finished this one
        log.flush()
        os.fsync(log.fileno())

    pool = deadletter.WorkerPool(q, handle, workers=4)
    for i in range(1_000_000):
        q.enqueue(f"job-{i}")
        print(f"job-{i}", flush=True)  # acknowledged: the enqueue returned
    """
)


def test_sigkill_mid_pool_run_loses_nothing_acknowledged(tmp_path):
    path = tmp_path / "store"
    log_path = tmp_path / "handled.log"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(log_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    acknowledged = []
    try:
        # Wait until the pool has handled a good number and enqueues are still going on.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            assert line, "the child exited early"
            acknowledged.append(line.strip())
            if len(acknowledged) % 50 == 0 and log_path.exists():
                if len(log_path.read_text().splitlines()) >= 300:
                    break
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        # What it printed after the last line read above is still in the pipe.
        acknowledged += child.stdout.read().split()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    handled_before = set(log_path.read_text().splitlines())
    assert len(handled_before) >= 300

    with deadletter.Store(path) as store:
        q = store.queue("jobs")
        drained = []
        with deadletter.WorkerPool(q, lambda m: drained.append(m.text), workers=2) as pool:
            pool.run_until_idle()
        assert len(q.dlq) == 0
        assert len(q) == 0
    survived = handled_before | set(drained)
    lost = [a for a in acknowledged if a not in survived]
    assert lost == []
    # Nothing invented: every message seen was one the child enqueued.
    attempted = len(acknowledged) + 1  # the child may have died inside one more enqueue
    assert all(int(t.split("-")[1]) < attempted for t in survived)
