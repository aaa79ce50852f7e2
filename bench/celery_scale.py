"""Durable runs as Celery tasks under crashes: throughput and recovery delay.

The scale-out crash workload of ``tests/celery/test_scale.py``, at full size: real Celery
workers (``celery -A tests.celery.app worker --pool=solo``, Redis broker and result backend)
run ``start`` tasks for N runs of T tool turns each, on PostgreSQL stores; every few seconds a
worker that is in the middle of a run is SIGKILLed and a fresh one started, and a host timer
enqueues ``sweep``. The scripted model thinks for a while each turn and each tool logs its
effect under the call's idempotency key. Printed:

- runs/s: runs finished per second of wall time, from the first ``start`` to the last run's
  end, kills, restarts and recoveries included; with ``--baseline``, the same workload with
  no kill first;
- recovery delay, median and max: from a kill to the interrupted run's next tool effect on
  another worker (runs the killed worker had applied an effect for and that had a later
  tool turn). With the lease of 2 s, it is bounded below by the lease plus the 2 s clock
  skew allowance, plus up to one sweep interval;
- checks: every run succeeded, no effect applied twice, none missing, no run left running.

Run it with::

    .venv/bin/python bench/celery_scale.py
    .venv/bin/python bench/celery_scale.py --runs 30 --turns 5 --workers 3 --kill-every 3

Each run of the script uses its own Redis key prefix and PostgreSQL table prefix
(``pcel_<random>``) and removes them at the end, also on failure. An unreachable PostgreSQL
or Redis is reported as skipped (exit status 0).
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.celery.harness import Rig  # noqa: E402
from tests.celery.scale import ScaleReport, scale_out  # noqa: E402


def _unreachable() -> str | None:
    for name, port in (("Redis", 6379), ("PostgreSQL", 5432)):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass
        except OSError as exc:
            return f"{name} at 127.0.0.1:{port}: {exc}"
    return None


def _measure(args: argparse.Namespace, kill_every: float) -> ScaleReport:
    with tempfile.TemporaryDirectory(prefix="prism-celery-bench-") as work:
        rig = Rig(Path(work), turns=args.turns, think=args.think)
        try:
            return scale_out(
                rig,
                runs=args.runs,
                turns=args.turns,
                workers=args.workers,
                kill_every=kill_every,
                sweep_every=args.sweep_every,
                timeout=args.timeout,
            )
        finally:
            rig.close()


def _check(report: ScaleReport) -> list[str]:
    problems = []
    if report.statuses != {"succeeded": report.runs}:
        problems.append(f"statuses {dict(report.statuses)}")
    if report.duplicates():
        problems.append(f"effects applied twice: {report.duplicates()}")
    if report.missing():
        problems.append(f"effects missing: {report.missing()}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--turns", type=int, default=5, help="tool turns per run")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kill-every", type=float, default=3.0, help="seconds between kills")
    parser.add_argument("--sweep-every", type=float, default=2.0, help="seconds between sweeps")
    parser.add_argument("--think", type=float, default=0.1, help="model seconds per turn")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--baseline", action="store_true", help="first measure with no kill")
    args = parser.parse_args()
    reason = _unreachable()
    if reason:
        print(f"skipped: {reason}")
        return 0
    os.chdir(ROOT)
    failed = False
    if args.baseline:
        calm = _measure(args, math.inf)
        print(f"baseline (no kill)\n{calm.summary()}\n")
        failed |= bool(_check(calm))
    report = _measure(args, args.kill_every)
    print(f"with a worker SIGKILLed every {args.kill_every:g} s\n{report.summary()}")
    problems = _check(report)
    print(
        "checks: "
        + (
            "; ".join(problems)
            if problems
            else "PASS (every run succeeded, each tool effect exactly once, no run left running)"
        )
    )
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
