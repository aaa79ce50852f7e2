"""The scale-out crash workload: several workers, many runs, a worker SIGKILLed every few
seconds and restarted, and a host timer enqueueing ``sweep``.

Shared by the test (which checks every run finished with each tool exactly once) and by
``bench/celery_scale.py`` (which prints the figures).
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from typing import Any

import attrs

from .harness import Rig


@attrs.define
class Kill:
    """One SIGKILL: when, and which worker process."""

    at: float
    pid: int


@attrs.define
class ScaleReport:
    """What one scale-out run observed."""

    runs: int
    turns: int
    workers: int
    seconds: float
    kills: list[Kill]
    statuses: Counter[str]
    results: list[dict[str, Any]]
    effects: list[dict[str, Any]]
    recovery_delays: list[float]

    @property
    def runs_per_second(self) -> float:
        """Finished runs per second of wall time, kills and recoveries included."""
        return self.runs / self.seconds

    def duplicates(self) -> dict[str, int]:
        """Idempotency keys whose effect was applied more than once."""
        counts = Counter(e["key"] for e in self.effects)
        return {key: n for key, n in counts.items() if n > 1}

    def missing(self) -> list[tuple[str, str]]:
        """``(run_id, call)`` pairs of tool calls that never applied their effect."""
        seen = {(e["run"], e["call"]) for e in self.effects}
        return [
            (result["run_id"], f"call_{i}")
            for result in self.results
            for i in range(self.turns)
            if (result["run_id"], f"call_{i}") not in seen
        ]

    def summary(self) -> str:
        """The figures on a few lines."""
        delays = self.recovery_delays
        recovery = (
            f"median {statistics.median(delays):.2f} s, max {max(delays):.2f} s "
            f"over {len(delays)} interrupted runs"
            if delays
            else "no interrupted run had an effect after its kill"
        )
        return (
            f"{self.runs} runs x {self.turns} tool turns on {self.workers} workers: "
            f"{self.seconds:.1f} s, {self.runs_per_second:.2f} runs/s; "
            f"{len(self.kills)} workers SIGKILLed; statuses {dict(self.statuses)}\n"
            f"recovery (kill -> the interrupted run's next effect on another worker): {recovery}"
        )


def recovery_delays(kills: list[Kill], effects: list[dict[str, Any]]) -> list[float]:
    """For each kill, each run the killed worker had applied an effect for: the delay until
    that run's next effect on another worker (runs with no later effect are not counted)."""
    delays = []
    for kill in kills:
        mine = {e["run"] for e in effects if e["pid"] == kill.pid and e["time"] <= kill.at}
        for run_id in mine:
            later = [
                e["time"]
                for e in effects
                if e["run"] == run_id and e["pid"] != kill.pid and e["time"] > kill.at
            ]
            if later:
                delays.append(min(later) - kill.at)
    return delays


def _busy_workers(rig: Rig, now: float, turns: int) -> list[str]:
    # A worker that applied an effect a moment ago, before its run's last tool turn: killing
    # it interrupts a run that still has tools to run.
    latest = {e["pid"]: e for e in rig.effects.entries()}
    busy = {
        pid
        for pid, e in latest.items()
        if now - e["time"] < 1.0 and e["call"] != f"call_{turns - 1}"
    }
    return [name for name in sorted(rig.workers) if rig.pid(name) in busy]


def scale_out(
    rig: Rig,
    *,
    runs: int,
    turns: int,
    workers: int = 3,
    kill_every: float = 3.0,
    sweep_every: float = 2.0,
    timeout: float = 240.0,
    seed: int = 7,
) -> ScaleReport:
    """Start ``workers`` workers, enqueue ``runs`` starts, SIGKILL a worker in the middle of a
    run every ``kill_every`` seconds (and start a fresh one) until every run has ended, enqueue
    ``sweep`` every ``sweep_every`` seconds, and collect what happened."""
    rng = random.Random(seed)
    names = [rig.start_worker(wait=False) for _ in range(workers)]
    for name in names:
        rig.wait_ready(name)
    began = time.time()
    pending = [
        rig.tasks.start.delay("charger", f"scale-{index}", "charge every line")
        for index in range(runs)
    ]
    kills: list[Kill] = []
    next_kill, next_sweep = began + kill_every, began + sweep_every
    deadline = time.monotonic() + timeout
    while True:
        statuses = Counter(run.status for run in rig.runs())
        if statuses["succeeded"] == runs:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every run finished after {timeout}s: {dict(statuses)}")
        now = time.time()
        # Kill a worker in the middle of a run: one that applied an effect a moment ago.
        busy = _busy_workers(rig, now, turns)
        if now >= next_kill and busy:
            victim = rng.choice(busy)
            pid = rig.pid(victim)
            kills.append(Kill(at=rig.kill(victim), pid=pid))
            rig.start_worker(wait=False)
            next_kill = now + kill_every
        if now >= next_sweep:
            rig.tasks.sweep.delay()
            next_sweep = now + sweep_every
        time.sleep(0.25)
    seconds = time.time() - began
    results = [result.get(timeout=timeout) for result in pending]
    effects = rig.effects.entries()
    return ScaleReport(
        runs=runs,
        turns=turns,
        workers=workers,
        seconds=seconds,
        kills=kills,
        statuses=Counter(run.status for run in rig.runs()),
        results=results,
        effects=effects,
        recovery_delays=recovery_delays(kills, effects),
    )
