"""The run tasks on real workers: Celery on Redis, the stores on PostgreSQL."""

from __future__ import annotations

from collections import Counter

import pytest

from .harness import Rig

pytestmark = pytest.mark.services


def test_start_runs_a_durable_run_to_completion(rig: Rig) -> None:
    """``start`` returns the run's id, session and status; every tool ran once."""
    rig.start_worker()
    result = rig.tasks.start.delay("charger", "order-1", "charge every step").get(timeout=60)
    assert result["session_id"] == "order-1"
    assert result["status"] == "succeeded"
    assert set(result) == {"run_id", "session_id", "status"}
    (run,) = rig.runs()
    assert (run.run_id, run.status, run.agent_id) == (result["run_id"], "succeeded", "charger")
    effects = rig.effects.entries()
    assert [e["call"] for e in effects] == ["call_0", "call_1", "call_2"]
    assert {e["run"] for e in effects} == {result["run_id"]}
    assert max(Counter(e["key"] for e in effects).values()) == 1
