"""The Python benchmark of issue 30: deadletter's binding against the one-JSON-file-per-
message DLQ of seed 000 (jsonfile_dlq.py) and against Python's sqlite3 (sqlite_queue.py,
WAL, synchronous=FULL when durable), side by side in one run, on the same workloads,
durable and not, with the machine's fdatasync rate measured in the same run.

    python crates/python/bench/bench.py [--quick] [--out DIR] [--dir SCRATCH] [--readme README.md]

Writes DIR/report.json and DIR/report.md (the table); DIR defaults to
crates/python/bench/results. The contestants' runs alternate, so that a slow minute of a
shared machine falls on all of them alike. With --readme, the table also replaces the one between the
README's markers (--from-report DIR/report.json remakes it without measuring). Every figure is the median of 3 runs, each on a fresh
directory under SCRATCH (default: the system's temporary directory, which must be on a
real disk for the durable rows to mean anything).

Workloads (each contestant its best use of its own API, one thread unless said):
- enqueue: one message (a subscriber as JSON, ~90 B) per call; the JSON design writes
  its file (durable: file and directory fsync), sqlite one INSERT commit, deadletter
  `Queue.enqueue(obj, codec="json")`.
- failure_flow: messages whose handler always raises, 3 attempts each, ending in the
  DLQ; timed from the messages' enqueue (deadletter and sqlite store them first; the
  JSON design keeps them in memory, as the post does) until every one is in the DLQ. The
  JSON design runs the post's Pipeline (retry loop, then the DLQ file); sqlite the
  harness's batch worker (lease 256 per commit, one commit per failure report);
  deadletter its WorkerPool (1 worker), whose failure reports share the next fsync.
- stats: the DLQ's statistics over 2,000 entries of 5 error kinds (calls per second).
- filtered_list: the first 100 pending entries of one error kind among those 2,000.
- replay: every pending entry handed back (entries per second): the post's replay loop
  over 2,000 files (handler, then mark_reprocessed rewriting the file); one sqlite
  transaction moving 10,000 rows back to the queue table; one `Dlq.replay()` call on
  10,000 entries.
- pool_4_workers (deadletter only): a trivial Python handler over 200,000 messages.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import deadletter  # noqa: E402
from jsonfile_dlq import DeadLetterQueue, Pipeline  # noqa: E402
from sqlite_queue import SqliteQueue  # noqa: E402

KINDS = ["Timeout", "InvalidEmail", "Bounce", "RateLimited", "Unknown"]
CONTESTANTS = ["deadletter", "jsonfile", "sqlite"]
REPS = 3
FILL = 2000
REPLAY_FILL = 10_000

# Operations per run: (workload, durable) -> {contestant: n}. Sized so that each run
# takes about a second on a 2-core machine; --quick divides by 20.
SIZES = {
    ("enqueue", False): {"deadletter": 100_000, "jsonfile": 5_000, "sqlite": 50_000},
    ("enqueue", True): {"deadletter": 3_000, "jsonfile": 1_000, "sqlite": 3_000},
    ("failure_flow", False): {"deadletter": 30_000, "jsonfile": 3_000, "sqlite": 20_000},
    ("failure_flow", True): {"deadletter": 30_000, "jsonfile": 500, "sqlite": 1_000},
    ("stats", False): {"deadletter": 20_000, "jsonfile": 3, "sqlite": 500},
    ("stats", True): {"deadletter": 20_000, "jsonfile": 3, "sqlite": 500},
    ("filtered_list", False): {"deadletter": 2_000, "jsonfile": 3, "sqlite": 2_000},
    ("filtered_list", True): {"deadletter": 2_000, "jsonfile": 3, "sqlite": 2_000},
    # The DLQ size replayed: one call (one commit) for deadletter and sqlite, so 10,000
    # entries, lest a single fsync's jitter decide the row; 2,000 files for the JSON design.
    ("replay", False): {"deadletter": REPLAY_FILL, "jsonfile": FILL, "sqlite": REPLAY_FILL},
    ("replay", True): {"deadletter": REPLAY_FILL, "jsonfile": FILL, "sqlite": REPLAY_FILL},
    ("pool_4_workers", False): {"deadletter": 200_000},
    ("pool_4_workers", True): {"deadletter": 200_000},
}


def subscriber(i: int) -> dict:
    return {"email": f"user{i}@email.com", "name": f"User {i}", "plan": "premium", "seq": i}


# Compact JSON, with the encoder made once (json.dumps with keyword arguments builds one
# per call): what deadletter's codec="json" does, so both sides pay the same encoding.
compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def payload(i: int) -> bytes:
    return compact(subscriber(i)).encode()


class Boom(Exception):
    pass


def always_fails(_msg) -> None:
    raise TimeoutError("timeout sending the newsletter")


def noop(_msg) -> None:
    return None


# ---- fills (untimed): a DLQ of FILL entries of 5 kinds ------------------------------------


def fill_deadletter(store, size: int = FILL) -> "deadletter.Dlq":
    q = store.queue("newsletter")
    q.enqueue_batch([subscriber(i) for i in range(size)], codec="json")

    def handler(msg):
        kind = KINDS[msg.id % len(KINDS)]
        raise deadletter.Permanent(f"{kind} for user{msg.id}@email.com", kind=kind)

    with deadletter.WorkerPool(q, handler, workers=2) as pool:
        pool.run_until_idle()
    dlq = q.dlq
    assert len(dlq) == size, len(dlq)
    return dlq


def fill_jsonfile(path: Path, durable: bool, size: int = FILL) -> DeadLetterQueue:
    dlq = DeadLetterQueue(str(path), durable=False)  # the files are the same either way
    for i in range(size):
        dlq.enqueue(subscriber(i), KINDS[i % len(KINDS)], attempts=3)
    dlq.durable = durable
    return dlq


def fill_sqlite(db: SqliteQueue, size: int = FILL) -> None:
    db.dlq_fill(
        "newsletter",
        [(payload(i), KINDS[i % len(KINDS)], f"failed for user{i}") for i in range(size)],
    )


# ---- one run: returns (operations, seconds) -------------------------------------------------


def run_deadletter(workload: str, durable: bool, n: int, d: Path) -> tuple[int, float]:
    with deadletter.Store(d / "store", durable=durable) as store:
        q = store.queue("newsletter")
        if workload == "enqueue":
            msgs = [subscriber(i) for i in range(n)]
            t = time.perf_counter()
            for m in msgs:
                q.enqueue(m, codec="json")
            return n, time.perf_counter() - t
        if workload == "failure_flow":
            msgs = [subscriber(i) for i in range(n)]
            t = time.perf_counter()
            q.enqueue_batch(msgs, codec="json")
            with deadletter.WorkerPool(q, always_fails, workers=1, max_attempts=3, delay=0.0, jitter=False) as pool:
                pool.run_until_idle()
            took = time.perf_counter() - t
            assert len(q.dlq) == n and len(q) == 0
            return n, took
        if workload == "pool_4_workers":
            q.enqueue_batch([payload(i) for i in range(n)])
            store.sync()
            t = time.perf_counter()
            with deadletter.WorkerPool(q, noop, workers=4) as pool:
                pool.run_until_idle()
            took = time.perf_counter() - t
            assert pool.counters["processed"] == n, pool.counters
            return n, took
        dlq = fill_deadletter(store, n if workload == "replay" else FILL)
        if workload == "stats":
            t = time.perf_counter()
            for _ in range(n):
                s = dlq.stats()
            took = time.perf_counter() - t
            assert s["total"] == FILL
            return n, took
        if workload == "filtered_list":
            f = deadletter.Filter(error_kind="InvalidEmail", pending=True)
            t = time.perf_counter()
            for _ in range(n):
                page = dlq.list(f, limit=100)
            took = time.perf_counter() - t
            assert len(page) == 100 and page[0].error_kind == "InvalidEmail"
            return n, took
        if workload == "replay":
            t = time.perf_counter()
            report = dlq.replay(reset_attempts=True)
            took = time.perf_counter() - t
            assert len(report["replayed"]) == n and len(q) == n
            return n, took
    raise ValueError(workload)


def run_jsonfile(workload: str, durable: bool, n: int, d: Path) -> tuple[int, float]:
    path = d / "dlq"
    if workload == "enqueue":
        dlq = DeadLetterQueue(str(path), durable=durable)
        msgs = [subscriber(i) for i in range(n)]
        t = time.perf_counter()
        for m in msgs:
            dlq.enqueue(m, "", attempts=0)
        return n, time.perf_counter() - t
    if workload == "failure_flow":
        dlq = DeadLetterQueue(str(path), durable=durable)
        pipeline = Pipeline(always_fails, dlq, max_retries=3, retry_delay=0)
        msgs = [subscriber(i) for i in range(n)]
        t = time.perf_counter()
        for m in msgs:
            pipeline.process(m)
        took = time.perf_counter() - t
        assert len(os.listdir(path)) == n
        return n, took
    dlq = fill_jsonfile(path, durable, n if workload == "replay" else FILL)
    if workload == "stats":
        t = time.perf_counter()
        for _ in range(n):
            s = dlq.stats()
        took = time.perf_counter() - t
        assert s["total"] == FILL
        return n, took
    if workload == "filtered_list":
        t = time.perf_counter()
        for _ in range(n):
            page = [e for e in dlq.list_pending() if e["error"] == "InvalidEmail"][:100]
        took = time.perf_counter() - t
        assert len(page) == 100
        return n, took
    if workload == "replay":
        t = time.perf_counter()
        for entry in dlq.list_pending():
            noop(entry["message"])
            dlq.mark_reprocessed(entry["id"], success=True)
        took = time.perf_counter() - t
        assert dlq.stats()["reprocessed_ok"] == n
        return n, took
    raise ValueError(workload)


def run_sqlite(workload: str, durable: bool, n: int, d: Path) -> tuple[int, float]:
    db = SqliteQueue(str(d / "queue.sqlite"), durable=durable)
    try:
        if workload == "enqueue":
            msgs = [subscriber(i) for i in range(n)]
            t = time.perf_counter()
            for m in msgs:
                db.enqueue("newsletter", compact(m).encode())
            return n, time.perf_counter() - t
        if workload == "failure_flow":
            msgs = [subscriber(i) for i in range(n)]
            t = time.perf_counter()
            db.enqueue_batch("newsletter", [compact(m).encode() for m in msgs])
            db.run_worker("newsletter", always_fails, max_attempts=3)
            took = time.perf_counter() - t
            assert db.dlq_stats()["total"] == n
            return n, took
        fill_sqlite(db, n if workload == "replay" else FILL)
        if workload == "stats":
            t = time.perf_counter()
            for _ in range(n):
                s = db.dlq_stats()
            took = time.perf_counter() - t
            assert s["total"] == FILL
            return n, took
        if workload == "filtered_list":
            t = time.perf_counter()
            for _ in range(n):
                page = db.dlq_list("InvalidEmail", 100)
            took = time.perf_counter() - t
            assert len(page) == 100
            return n, took
        if workload == "replay":
            t = time.perf_counter()
            moved = db.dlq_replay_all()
            took = time.perf_counter() - t
            assert moved == n
            return n, took
    finally:
        db.close()
    raise ValueError(workload)


RUNNERS = {"deadletter": run_deadletter, "jsonfile": run_jsonfile, "sqlite": run_sqlite}


def fdatasync_rate(scratch: Path, n: int, grow: bool = False) -> float:
    """100 B pwrites, each followed by fdatasync, per second: the machine's durable-write
    pace. As the Rust harness measures it (crates/compare, machine.rs): on a preallocated
    file, already written and synced, so that no fdatasync has metadata to write. With
    grow=True, appends that extend the file instead (what a growing SQLite WAL or a new
    JSON file pays: each sync also commits the file's new size)."""
    path = scratch / "fdatasync.probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        block = b"x" * 100
        if not grow:
            os.pwrite(fd, b"\0" * (n * 100), 0)
            os.fsync(fd)
        t = time.perf_counter()
        for i in range(n):
            os.pwrite(fd, block, i * 100)
            os.fdatasync(fd)
        return n / (time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)


def measure(scratch: Path, quick: bool) -> dict:
    rows = []
    probe_n = 100 if quick else 1000
    sync_rates = [fdatasync_rate(scratch, probe_n)]
    append_rates = [fdatasync_rate(scratch, probe_n, grow=True)]
    for (workload, durable), sizes in SIZES.items():
        if quick:
            sizes = {c: max(100 if workload == "replay" else 1, n // 20) for c, n in sizes.items()}
        runs = {c: [] for c in sizes}
        shares = {c: [] for c in sizes}  # durable enqueues: each run against the fdatasync rate around it
        # The runs of the contestants alternate (A B C A B C ...), so that a minute when the
        # shared disk or CPU is slow falls on all of them alike.
        for _ in range(1 if quick else REPS):
            for contestant, n in sizes.items():
                d = Path(tempfile.mkdtemp(prefix=f"dl-bench-{contestant}-", dir=scratch))
                yardstick = durable and workload == "enqueue"
                try:
                    before = fdatasync_rate(scratch, probe_n) if yardstick else None
                    ops, took = RUNNERS[contestant](workload, durable, n, d)
                    after = fdatasync_rate(scratch, probe_n) if yardstick else None
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                runs[contestant].append(ops / took)
                if yardstick:
                    # The disk's rate moves from minute to minute, so each run is put against
                    # the mean of the probes just before and just after it.
                    sync_rates += [before, after]
                    shares[contestant].append(100 * (ops / took) / ((before + after) / 2))
        for contestant, n in sizes.items():
            row = {
                "workload": workload,
                "durable": durable,
                "contestant": contestant,
                "n": n,
                "ops_per_s": statistics.median(runs[contestant]),
                "runs": runs[contestant],
            }
            if shares[contestant]:
                row["pct_of_fdatasync"] = statistics.median(shares[contestant])
                row["pct_of_fdatasync_runs"] = shares[contestant]
            rows.append(row)
            print(f"{workload:15} durable={str(durable):5} {contestant:10} n={n:7} "
                  f"{row['ops_per_s']:14.1f} ops/s", flush=True)
        if durable and workload == "enqueue":
            append_rates.append(fdatasync_rate(scratch, probe_n, grow=True))
    sync_rates.append(fdatasync_rate(scratch, probe_n))
    return {
        "rows": rows,
        "fdatasync_per_s": statistics.median(sync_rates),
        "fdatasync_runs": sync_rates,
        "append_fdatasync_per_s": statistics.median(append_rates),
        "append_fdatasync_runs": append_rates,
    }


def row(rows, workload, durable, contestant):
    for r in rows:
        if (r["workload"], r["durable"], r["contestant"]) == (workload, durable, contestant):
            return r
    return None


def ops(rows, workload, durable, contestant):
    r = row(rows, workload, durable, contestant)
    return r["ops_per_s"] if r else None


def goals(result: dict) -> list[dict]:
    rows = result["rows"]
    out = []

    def goal(name, value, target, unit=""):
        out.append({"goal": name, "value": value, "target": target, "met": value >= target, "unit": unit})

    for w in ("enqueue", "failure_flow"):
        goal(f"{w}, not durable: x JSON-file DLQ", ops(rows, w, False, "deadletter") / ops(rows, w, False, "jsonfile"), 20, "x")
    goal("enqueue one at a time, durable: % of fdatasync rate", row(rows, "enqueue", True, "deadletter")["pct_of_fdatasync"], 80, "%")
    for durable in (False, True):
        goal(f"stats, {'durable' if durable else 'not durable'}: x JSON-file DLQ",
             ops(rows, "stats", durable, "deadletter") / ops(rows, "stats", durable, "jsonfile"), 100, "x")
    for w in ("enqueue", "failure_flow", "stats", "filtered_list", "replay"):
        for durable in (False, True):
            goal(f"{w}, {'durable' if durable else 'not durable'}: x sqlite3",
                 ops(rows, w, durable, "deadletter") / ops(rows, w, durable, "sqlite"), 2, "x")
    # Both do one fdatasync per durable enqueue; put against the rate around their own runs,
    # they compare without the minutes in which each ran.
    goal("enqueue, durable: x sqlite3, each as % of the fdatasync rate around its runs",
         row(rows, "enqueue", True, "deadletter")["pct_of_fdatasync"]
         / row(rows, "enqueue", True, "sqlite")["pct_of_fdatasync"], 2, "x")
    goal("pool, 4 workers, trivial handler, not durable: messages/s", ops(rows, "pool_4_workers", False, "deadletter"), 100_000)
    goal("pool, 4 workers, trivial handler, durable: messages/s", ops(rows, "pool_4_workers", True, "deadletter"), 30_000)
    return out


def fmt(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    if v >= 1e4:
        return f"{v / 1e3:.1f} K"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def markdown(report: dict) -> str:
    rows, sync = report["rows"], report["fdatasync_per_s"]
    m = report["machine"]
    lines = [
        f"Measured {report['date']} by `python crates/python/bench/bench.py`"
        f"{' --quick' if report['quick'] else ''} on {m['cpus']} cores ({m['platform']}, "
        f"Python {m['python']}, SQLite {m['sqlite']}), load average {m['load_before']} before and "
        f"{m['load_after']} after. fdatasync rate in the same run: {sync:.0f}/s, median of the probes "
        f"(100 B pwrite + fdatasync on a preallocated file; appends that grow the file: "
        f"{report['append_fdatasync_per_s']:.0f}/s; the probes ranged from {min(report['fdatasync_runs']):.0f} "
        f"to {max(report['fdatasync_runs']):.0f}/s); each durable enqueue run is put against the "
        "probes just before and after it. "
        f"Median of {1 if report['quick'] else REPS} runs; "
        "ops/s are calls per second (stats, filtered_list), entries per second (replay) or "
        "messages per second.",
        "",
        "| workload | durable | deadletter | JSON-file DLQ | sqlite3 | × JSON-file | × sqlite3 | % of fdatasync rate (deadletter / JSON-file / sqlite3) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (workload, durable) in SIZES:
        d = ops(rows, workload, durable, "deadletter")
        j = ops(rows, workload, durable, "jsonfile")
        s = ops(rows, workload, durable, "sqlite")
        shares = [row(rows, workload, durable, c).get("pct_of_fdatasync") for c in CONTESTANTS if row(rows, workload, durable, c)]
        pct = " / ".join(f"{x:.0f}%" for x in shares if x is not None)
        lines.append(
            f"| {workload} | {'yes' if durable else 'no'} | {fmt(d)} | {fmt(j) if j else ''} | "
            f"{fmt(s) if s else ''} | {f'{d / j:.0f}' if j else ''} | {f'{d / s:.1f}' if s else ''} | {pct} |"
        )
    lines += ["", "| goal (issue 30) | measured | target | met |", "|---|---:|---:|---|"]
    for g in report["goals"]:
        v = f"{g['value']:.1f}{g['unit']}" if g["unit"] else fmt(g["value"])
        t = f"{g['target']}{g['unit']}" if g["unit"] else fmt(g["target"])
        lines.append(f"| {g['goal']} | {v} | {t} | {'yes' if g['met'] else '**no**'} |")
    return "\n".join(lines) + "\n"


BEGIN = "<!-- python-bench-table: generated by crates/python/bench/bench.py (results/report.md) -->"
END = "<!-- /python-bench-table -->"


def update_readme(readme: Path, table: str) -> None:
    """Puts `table` between the README's two markers (the rest of the file untouched)."""
    text = readme.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    readme.write_text(text[:start] + "\n" + table + text[end:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1/20 of the operations, one run each (a check that it runs)")
    ap.add_argument("--out", default=str(HERE / "results"), help="where report.json and report.md go")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="scratch directory (a real disk)")
    ap.add_argument("--readme", help="also put the table into this README, between its markers")
    ap.add_argument("--from-report", help="measure nothing: make the table from this report.json")
    args = ap.parse_args()
    if args.from_report:
        report = json.loads(Path(args.from_report).read_text())
    else:
        scratch = Path(tempfile.mkdtemp(prefix="dl-bench-", dir=args.dir))
        load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
        try:
            result = measure(scratch, args.quick)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        report = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "quick": args.quick,
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "sqlite": sqlite3.sqlite_version,
                "deadletter": deadletter.__version__,
                "load_before": load_before,
                "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            },
            **result,
        }
        report["goals"] = goals(report)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    if not args.from_report:
        (Path(args.out) / "report.md").write_text(table)
    if args.readme:
        update_readme(Path(args.readme), table)
    print()
    print(table)


if __name__ == "__main__":
    main()
