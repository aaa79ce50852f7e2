"""The rows of ``bench/targets.py``: each target's name, limit and unit, its figures over the
runs, and the table printed at the end (ours, the yardstick, the ratio, PASS/FAIL)."""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field

from _support import format_table

#: Each ratio's limit (ratios of Prism's figure over the yardstick measured beside it).
WARM_TARGET = 2.0
COLD_TARGET = 3.0
VERSUS_LANGGRAPH = 1.0
CONCURRENT_TARGET = 0.6
IDEMPOTENT_TARGET = 2.0
EFFECT_TARGET = 3.0
FLAT_TARGET = 1.2
SYNC_TOOL_TARGET = 1.2
SESSION_ONLY_TARGET = 1.0
LEDGER_TARGET = 1.05
BYTES_GROWTH_TARGET = 512
NOTIFY_TARGET = 1.05
DISPATCH_P50_MS = 10.0
DISPATCH_P99_MS = 50.0
CLI_SECONDS = 0.3
#: No limit: the row is shown for information.
INFO = float("inf")

BACKENDS = (("sqlite", "SQLite"), ("postgres", "PostgreSQL"), ("redis", "Redis"))


@dataclass
class Figure:
    """One target's figures in one run: Prism's figure, the yardstick's, and their ratio."""

    ours: float
    raw: float
    ratio: float


@dataclass
class Target:
    """One target across runs."""

    name: str
    limit: float
    unit: str
    #: ``True``: the ratio must be at least ``limit`` (a throughput share); else at most.
    at_least: bool = False
    runs: list[Figure] = field(default_factory=list)
    note: str = ""

    def ok(self) -> bool:
        """Whether the median ratio over the runs is within the limit."""
        ratio = statistics.median(f.ratio for f in self.runs)
        return ratio >= self.limit if self.at_least else ratio <= self.limit


def make_targets(args: argparse.Namespace) -> dict[str, Target]:
    """Every row, in the order printed (the targets' numbering of the README)."""
    t: dict[str, Target] = {}
    first = args.continue_turns[0]
    # 1. warm continue
    for store, label in BACKENDS[:2]:
        for turns in args.langgraph_turns:
            t[f"lg warm {store} {turns}"] = Target(
                f"1 warm continue, {turns} turns, {label} / LangGraph's", VERSUS_LANGGRAPH, "ms"
            )
    for turns in args.continue_turns:
        t[f"warm {turns}"] = Target(
            f"1 warm continue, {turns} turns (SQLite) / floor", WARM_TARGET, "ms"
        )
    # 2. cold continue
    for store, label in BACKENDS[:2]:
        t[f"lg cold {store}"] = Target(
            f"2 cold continue, {args.langgraph_turns[0]} turns, {label} / LangGraph's",
            VERSUS_LANGGRAPH,
            "ms",
        )
    t[f"cold {first}"] = Target(
        f"2 cold continue, {first} turns, new process (SQLite) / floor", COLD_TARGET, "ms"
    )
    # 3. one session's turn
    for store, label in BACKENDS:
        t[f"idem rows {store}"] = Target(
            f"3 idempotent-tool turn, {label}: cost / the turn's own rows", IDEMPOTENT_TARGET, "ms"
        )
        t[f"effect rows {store}"] = Target(
            f"3 side-effecting turn, {label}: cost / the turn's own rows", EFFECT_TARGET, "ms"
        )
    for store, label in BACKENDS:
        t[f"flat {store}"] = Target(
            f"3 cost per turn, {label}: {args.flat_turns[1]} turns / {args.flat_turns[0]}",
            FLAT_TARGET,
            "ms",
        )
    for store, label in BACKENDS:
        for kind, what in (("idem", "idempotent-tool"), ("effect", "side-effecting")):
            t[f"{kind} {store}"] = Target(
                f"  {what} turn, {label}: cost / one-row raw write (info)", INFO, "ms"
            )
    for store, label in BACKENDS[:2]:
        t[f"bytes {store}"] = Target(
            f"3 checkpoint bytes, {label}: |last turn - first turn|", BYTES_GROWTH_TARGET, "B"
        )
    # 4. no persistence, and a session store without durable runs
    t["sync tool"] = Target(
        "4 sync tool's turn / async tool's, no persistence", SYNC_TOOL_TARGET, "ms"
    )
    t["session only postgres"] = Target(
        "4 PostgreSQL session store, no durable run / durable run (per turn)",
        SESSION_ONLY_TARGET,
        "ms",
    )
    # 5. sessions at once
    for store, label in BACKENDS[:2]:
        t[f"many {store}"] = Target(
            f"5 {args.sessions} sessions at once, {label}: turns/s / no persistence",
            CONCURRENT_TARGET,
            "turns/s",
            at_least=True,
        )
    # 6. decide -> dispatch
    for name, label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"), ("redis", "Redis")):
        for key, limit in (("p50", DISPATCH_P50_MS), ("p99", DISPATCH_P99_MS)):
            t[f"dispatch {key} {name}"] = Target(
                f"6 decide -> dispatch {key}, {label}, another process (ms)", limit, "ms"
            )
    # 7. the command line
    for command in ("list", "show"):
        t[f"cli {command}"] = Target(
            f"7 prism runs {command}, wall (s; beside: python -c pass)", CLI_SECONDS, "s"
        )
    # 8. effect records, receipts, the outbox
    for store, label in BACKENDS[:2]:
        t[f"ledger {store}"] = Target(
            f"8 side-effecting turn with effect records, {label} / without", LEDGER_TARGET, "ms"
        )
        t[f"ledger commits {store}"] = Target(
            f"  commits of that run, {label}: extra over the run without", 0.0, "commits"
        )
        t[f"notify {store}"] = Target(
            f"8 turn with notifications, {label}: wall time / without", NOTIFY_TARGET, "ms"
        )
        t[f"notify commits {store}"] = Target(
            f"  commits of that run, {label}: extra over the run without", 0.0, "commits"
        )
    t["memory"] = Target("memory store: cost per turn (ms, no target)", INFO, "ms")
    return t


def report(targets: dict[str, Target]) -> tuple[str, list[str]]:
    """The table, and the names of the targets missed."""
    rows: list[list[str]] = []
    failed: list[str] = []
    for target in targets.values():
        if not target.runs:
            rows.append([target.name, "-", "-", "-", "-", "skipped"])
            continue
        ours = statistics.median(f.ours for f in target.runs)
        raw = statistics.median(f.raw for f in target.runs)
        ratio = statistics.median(f.ratio for f in target.runs)
        each = " / ".join(f"{f.ratio:.2f}" for f in target.runs)
        if target.limit == INFO:
            verdict, limit = "info", "-"
        else:
            ok = target.ok()
            verdict = "PASS" if ok else "FAIL"
            if not ok:
                failed.append(target.name)
            limit = f"{'>=' if target.at_least else '<='} {target.limit:g}"
        fmt = "{:.0f}" if target.unit in ("turns/s", "B", "commits") else "{:.3f}"
        rows.append(
            [
                target.name,
                f"{fmt.format(ours)} {target.unit}",
                f"{fmt.format(raw)} {target.unit}" if raw else "-",
                f"{ratio:.2f} ({each})",
                limit,
                verdict,
            ]
        )
    table = format_table(
        ["target", "ours", "raw / yardstick", "ratio (each run)", "target", ""], rows
    )
    return table, failed
