"""Scale-out under crashes: three workers, many runs, a worker SIGKILLed every few seconds.

Short in CI and by default (6 runs); ``PRISM_CELERY_FULL=1`` runs the full size (30 runs of
5 tool turns). Checked: every run finishes, every start task reports its run, each tool
call's effect is applied exactly once, and no run is left running.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from .harness import Rig
from .scale import scale_out

pytestmark = [pytest.mark.services, pytest.mark.long]

FULL = os.environ.get("PRISM_CELERY_FULL") == "1"
TURNS = 5


def test_runs_survive_workers_killed_every_few_seconds(make_rig: Callable[..., Rig]) -> None:
    runs = 30 if FULL else 6
    rig = make_rig(turns=TURNS, think=0.1 if FULL else 0.3)
    report = scale_out(rig, runs=runs, turns=TURNS, kill_every=3.0 if FULL else 2.0)
    print("\n" + report.summary())
    assert report.kills, "no worker was killed while runs were going"
    assert report.statuses == {"succeeded": runs}
    assert sorted(r["session_id"] for r in report.results) == sorted(
        f"scale-{i}" for i in range(runs)
    )
    assert all(r["status"] == "succeeded" for r in report.results)
    assert len({r["run_id"] for r in report.results}) == runs
    assert report.duplicates() == {}
    assert report.missing() == []
    assert len(report.effects) == runs * TURNS
    assert rig.recoverable() == []
