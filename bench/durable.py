"""What durable runs cost: every-turn checkpoints and ``continue`` resumes, per store.

The workload is a 40-turn investigation: a mock provider asks for one tool call per turn, the
tool returns a ~2 KB log excerpt, and after the last turn the provider answers. It runs on each
store (memory, SQLite in a temp file, PostgreSQL, Redis; the agent's ``store=`` is the
matching session store) under both checkpoint policies, with
``run_state=RunStateOptions(checkpoints, "bench-1", checkpoint_policy=...)``. Measured:

- cost per turn of durability: the wall time of an every-turn run on the store (session
  entries and checkpoints in it) minus the same run with no persistence at all (memory
  session store, no ``run_state``), divided by the turns; runs made back to back in pairs, so
  drift in machine load cancels out; once with the read-only tool (one commit a turn) and once
  with the same tool declared side-effecting (two: its ``dispatched`` mark, then the turn
  checkpoint); and each cost divided by one raw durable write through
  the plain driver (stdlib ``sqlite3`` WAL ``synchronous=FULL``, psycopg autocommit, redis-py
  pipelined ``SET`` + ``HSET``; see ``bench/_raw.py``), timed interleaved with the runs;
- for information, the same raw write made at every turn boundary of the no-persistence run
  (in the provider call, through the plain driver): its cost per turn, and Prism's cost per
  turn over it. A write made between turns of work costs more than one of a back-to-back
  batch (on the development machine SQLite's ``fsync`` took 0.25 ms back to back and 0.53 ms
  after 3 ms of other work), so this is the plain driver at the run's own cadence; the targets
  stay on the back-to-back write;
- notifications: the same every-turn run with ``notify=True`` (its state changes go to the
  outbox; this one's only event is its end, ``finished``, which rides its last commit),
  interleaved with the run without it: its wall time over the plain run's, per repeat (the
  median; target: at most 1.05), and its commits against the plain run's (target: the same);
- checkpoint bytes (canonical JSON of the saved value) at turn 1 and at turn 40 and their
  difference (target: within 512 B), from a wrapper that records every saved value;
- checkpoint writes per turn (target: exactly 1 under every-turn, 0 under decision);
- all checkpoint bytes written in a run versus the transcript bytes (canonical JSON of every
  session entry at the end); target ratio ≤ 1.5;
- ``continue`` after a crash: a worker dies at the provider call that follows its 40th turn
  (the provider raises a ``BaseException``), and ``resume_agent_run(...,
  {"expected_version": v, "decision": "continue"})`` is timed up to the moment the new
  provider's ``generate`` is called, through the timing wrappers, split into time inside
  store calls (per call) and the rest (no target: the wrappers cost time themselves);
- warm and cold ``continue`` on SQLite at 40 and 400 turns against their floor, unwrapped
  (see ``bench/_continue.py``): warm ≤ 1.5 times the floor (a plain ``sqlite3`` read and JSON
  decode of the same branch entries plus one raw durable write), cold (a new process, after
  imports and the stores' opening) ≤ 10 ms at 40 turns.

It prints one table with the figures and PASS/FAIL per target, the continue table, then a
short summary.

Run it with ``make bench`` or::

    .venv/bin/python bench/durable.py
    .venv/bin/python bench/durable.py --turns 40 --stores memory,sqlite,postgres,redis

Each run uses its own table prefix / key prefix (``bench_<random>_``) and drops its tables and
deletes its keys at the end, also on failure, so it can share servers with other users. An
unreachable PostgreSQL or Redis is reported as skipped.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from _continue import cold_child, measure_continue, report_continue
from _raw import RawPostgres, RawRedis, RawSqlite
from _support import (
    AGENT_ID,
    DEFAULT_POSTGRES_URL,
    DEFAULT_REDIS_URL,
    REVISION,
    Investigation,
    delete_redis_keys,
    drop_sql_tables_at,
    format_table,
    median_ms,
    p95_ms,
    probe_postgres,
    probe_redis,
    probe_tool,
    run_until_the_worker_dies,
    unique_prefix,
    until_wal_steady,
)

from prism_core import (
    CheckpointRecord,
    RunStateOptions,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    resume_agent_run,
)
from prism_core.codec import dumps, loads
from prism_core.records import read_branch_and_run_tail
from prism_core.stores import SaveRequest

STORES = ("memory", "sqlite", "postgres", "redis")
#: A notifying run's wall time over the same run without notifications, at most.
NOTIFY_TARGET = 1.05
#: The store calls that commit (a save or a shared commit, or an append on its own).
COMMITS = ("checkpoint.save", "session.append")
#: Cost per turn over one raw durable write: a read-only tool turn (one commit), and a
#: side-effecting tool turn (two commits: the dispatched mark, then the turn checkpoint).
OVERHEAD_TARGETS = {"sqlite": 1.5, "postgres": 1.5, "redis": 2.0}
EFFECT_TARGETS = {"sqlite": 2.5, "postgres": 2.5}
SCRIPT = Path(__file__).resolve()
BYTES_GROWTH_TARGET = 512
BYTES_RATIO_TARGET = 1.5
#: Store calls in the order a resume makes them, and their short names.
CALL_ORDER = (
    "checkpoint.load",
    "session.list",
    "session.tail",
    "session.branch",
    "session.get",
    "session.append",
    "checkpoint.save",
)
CALL_NAMES = {
    "checkpoint.load": "load",
    "session.list": "list",
    "session.tail": "branch+tail",
    "session.branch": "branch",
    "session.get": "get",
    "session.append": "append",
    "checkpoint.save": "save",
}
QUESTION = "Checkout has failed intermittently since 12:40. Find the root cause."


# -- instrumented stores ----------------------------------------------------------------------


@dataclass
class Save:
    """One checkpoint save as the wrapper saw it: ``stored`` is the saved value, or the
    ``SaveRequest`` that carried it (decoded only when the figures are made, after the run)."""

    key: str
    stored: Any
    version: int
    provider_calls: int
    start: float
    end: float

    @property
    def value(self) -> Any:
        """The saved value."""
        if isinstance(self.stored, SaveRequest):
            return loads(self.stored.value_json)
        return self.stored


@dataclass
class Trace:
    """Every store call (name, start, end) and every checkpoint save since the last reset."""

    calls: list[tuple[str, float, float]] = field(default_factory=list)
    saves: list[Save] = field(default_factory=list)
    provider: Investigation | None = None

    def reset(self, provider: Investigation | None = None) -> None:
        self.calls = []
        self.saves = []
        self.provider = provider


class RecordingCheckpoints:
    """A checkpoint store wrapper that records each saved value and times each call."""

    def __init__(self, inner: Any, trace: Trace) -> None:
        self.inner = inner
        self.trace = trace

    async def load(self, *args: Any, **kw: Any) -> CheckpointRecord | None:
        start = time.perf_counter()
        try:
            return await self.inner.load(*args, **kw)
        finally:
            self.trace.calls.append(("checkpoint.load", start, time.perf_counter()))

    async def load_stamp(self, *args: Any, **kw: Any) -> Any:
        """The wrapped store's stamp read (the pre-dispatch ownership check), timed."""
        start = time.perf_counter()
        try:
            reader = getattr(self.inner, "load_stamp", None)
            if reader is not None:
                return await reader(*args, **kw)
            # The kernel's own fallback for a store without the capability.
            record = await self.inner.load(*args, **kw)
            return None if record is None else (record.version, record.fencing_token)
        finally:
            self.trace.calls.append(("checkpoint.stamp", start, time.perf_counter()))

    async def save(self, namespace: str, key: str, value: Any, **kw: Any) -> CheckpointRecord:
        provider = self.trace.provider
        start = time.perf_counter()
        record: CheckpointRecord = await self.inner.save(namespace, key, value, **kw)
        end = time.perf_counter()
        self.trace.calls.append(("checkpoint.save", start, end))
        calls = len(provider.calls) if provider is not None else -1
        self.trace.saves.append(Save(key, value, record.version, calls, start, end))
        return record

    async def delete(self, *args: Any, **kw: Any) -> bool:
        return await self.inner.delete(*args, **kw)

    async def list(self, *args: Any, **kw: Any) -> Any:
        return await self.inner.list(*args, **kw)

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        """The durable writer's path (one request, encoded once), recorded like a save."""
        provider = self.trace.provider
        start = time.perf_counter()
        record: CheckpointRecord = await self.inner.save_request(request)
        end = time.perf_counter()
        self.trace.calls.append(("checkpoint.save", start, end))
        calls = len(provider.calls) if provider is not None else -1
        self.trace.saves.append(Save(request.key, request, record.version, calls, start, end))
        return record

    def shared_transaction(self, sessions: Any) -> Any:
        """The wrapped store's shared commit with the wrapped session store, recorded like a
        save (``None`` when the stores cannot commit together)."""
        begin = getattr(self.inner, "shared_transaction", None)
        inner = begin(getattr(sessions, "inner", sessions)) if callable(begin) else None
        return None if inner is None else RecordingTransaction(inner, self.trace)

    def checkpoint_transaction(self) -> Any:
        """The wrapped store's commit of several saves (a notifying run's checkpoint and
        outbox records), recorded like a save."""
        return RecordingTransaction(self.inner.checkpoint_transaction(), self.trace)

    async def aclose(self) -> None:
        await self.inner.aclose()


class RecordingTransaction:
    """A shared commit whose saves are recorded and whose commit is timed as a save."""

    def __init__(self, inner: Any, trace: Trace) -> None:
        self.inner = inner
        self.trace = trace
        self.values: list[Any] = []

    def append(self, *args: Any, **kw: Any) -> None:
        self.inner.append(*args, **kw)

    def save(self, namespace: str, key: str, value: Any, **kw: Any) -> None:
        self.inner.save(namespace, key, value, **kw)
        self.values.append(value)

    def save_request(self, request: SaveRequest) -> None:
        self.inner.save_request(request)
        self.values.append(request)

    @property
    def entries(self) -> Any:
        return self.inner.entries

    @property
    def records(self) -> Any:
        return self.inner.records

    async def __aenter__(self) -> RecordingTransaction:
        await self.inner.__aenter__()
        self.start = time.perf_counter()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)
        if exc[0] is not None or not self.values:
            return
        end = time.perf_counter()
        self.trace.calls.append(("checkpoint.save", self.start, end))
        provider = self.trace.provider
        calls = len(provider.calls) if provider is not None else -1
        for value, record in zip(self.values, self.inner.records, strict=True):
            self.trace.saves.append(Save(record.key, value, record.version, calls, self.start, end))


class TimedSessions:
    """A session store wrapper that times each call."""

    def __init__(self, inner: Any, trace: Trace) -> None:
        self.inner = inner
        self.trace = trace

    async def _timed(self, name: str, call: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        start = time.perf_counter()
        try:
            return await call(*args, **kw)
        finally:
            self.trace.calls.append((name, start, time.perf_counter()))

    async def append(self, *args: Any, **kw: Any) -> Any:
        return await self._timed("session.append", self.inner.append, *args, **kw)

    async def list(self, *args: Any, **kw: Any) -> Any:
        return await self._timed("session.list", self.inner.list, *args, **kw)

    async def get(self, *args: Any, **kw: Any) -> Any:
        return await self._timed("session.get", self.inner.get, *args, **kw)

    async def read_branch_path(self, *args: Any, **kw: Any) -> Any:
        return await self._timed("session.branch", self.inner.read_branch_path, *args, **kw)

    async def read_branch_and_run_tail(self, *args: Any, **kw: Any) -> Any:
        # Through the helper: the inner store's own read, or its `list` fallback.
        return await self._timed("session.tail", read_branch_and_run_tail, self.inner, *args, **kw)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def open_stores(name: str, args: argparse.Namespace, prefix: str) -> AsyncIterator[Any]:
    """``(checkpoints, sessions, raw)`` of one backend (``raw``: the plain-driver baseline,
    ``None`` for memory); tables / keys removed on the way out."""
    if name == "memory":
        yield create_memory_checkpoint_store(), create_memory_session_store(), None
    elif name in ("sqlite", "postgres"):
        from prism_store_sql import open_sql_stores

        with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
            url = f"sqlite:///{Path(tmp) / 'bench.db'}" if name == "sqlite" else args.postgres_url
            # Both stores on one connection (SQLite) or engine, as the SQL store guide advises.
            checkpoints, sessions = open_sql_stores(url, table_prefix=prefix)
            raw: Any = (
                RawSqlite(str(Path(tmp) / "raw.db"))
                if name == "sqlite"
                else RawPostgres(url, prefix)
            )
            try:
                yield checkpoints, sessions, raw
            finally:
                with anyio.CancelScope(shield=True):
                    raw.close()
                    if name == "postgres":
                        await drop_sql_tables_at(url, prefix)
                    await sessions.aclose()
                    await checkpoints.aclose()
    else:
        import redis.asyncio as aioredis

        from prism_store_redis import create_redis_checkpoint_store, create_redis_session_store

        key_prefix = prefix.rstrip("_")
        client = aioredis.Redis.from_url(args.redis_url)
        checkpoints = create_redis_checkpoint_store(client, prefix=key_prefix)
        sessions = create_redis_session_store(client, prefix=key_prefix)
        raw_redis = RawRedis(args.redis_url, key_prefix)
        try:
            yield checkpoints, sessions, raw_redis
        finally:
            with anyio.CancelScope(shield=True):
                raw_redis.close()
                await delete_redis_keys(client, key_prefix)
                await sessions.aclose()
                await checkpoints.aclose()
                await client.aclose()


# -- runs -------------------------------------------------------------------------------------


class RawEveryTurn(Investigation):
    """The investigation with one raw durable write (``write``, the plain driver) at every
    turn boundary after the first: the plain driver doing the durable write a turn needs, at
    the cadence of the run itself (a write right after others costs less than one made
    between turns of work)."""

    def __init__(self, turns: int, write: Callable[[], None]) -> None:
        super().__init__(turns)
        self.write = write

    def generate(self, request: Any) -> Any:
        if self.calls:
            self.write()
        return super().generate(request)


@dataclass
class RunOutcome:
    """One investigation: provider call times, checkpoint saves, the session it wrote."""

    session_id: str
    calls: list[float]
    saves: list[Save]
    elapsed: float = 0.0
    #: Store commits the run made (checkpoint saves and shared commits, lone appends).
    commits: int = 0

    @property
    def intervals(self) -> list[float]:
        """Per-turn wall times: from one provider call to the next."""
        return [b - a for a, b in zip(self.calls, self.calls[1:], strict=False)]


class Bench:
    """One backend's instrumented stores and the runs made on them."""

    def __init__(self, checkpoints: Any, sessions: Any, turns: int) -> None:
        self.trace = Trace()
        self.checkpoints = RecordingCheckpoints(checkpoints, self.trace)
        self.sessions = TimedSessions(sessions, self.trace)
        self.turns = turns

    def agent(
        self, provider: Investigation, *, sessions: Any = None, effect: str | None = "read"
    ) -> Any:
        return create_agent(
            id=AGENT_ID,
            model={"provider": "mock", "model": "demo"},
            store=self.sessions if sessions is None else sessions,
            tools=[probe_tool(effect=effect)],
            provider=provider,
        )

    def options(self, policy: str, *, notify: bool = False) -> RunStateOptions:
        return RunStateOptions(self.checkpoints, REVISION, checkpoint_policy=policy, notify=notify)

    async def investigate(
        self, policy: str, turns: int | None = None, raw_write: Callable[[], None] | None = None
    ) -> RunOutcome:
        """A complete investigation under ``policy``; ``"none"`` persists nothing at all
        (a memory session store, no ``run_state``); ``"raw"`` is ``"none"`` with
        ``raw_write`` made at every turn boundary; ``"every-turn-effect"`` is every-turn
        with a side-effecting tool."""
        if policy == "raw":
            assert raw_write is not None
            provider: Investigation = RawEveryTurn(turns or self.turns, raw_write)
        else:
            provider = Investigation(turns or self.turns)
        self.trace.reset(provider)
        session_id = f"s-{uuid.uuid4().hex}"
        if policy in ("none", "raw"):
            session = self.agent(provider, sessions=create_memory_session_store()).create_session(
                id=session_id
            )
            start = time.perf_counter()
            result = await session.run(QUESTION)
        else:
            effect = None if policy == "every-turn-effect" else "read"
            session = self.agent(provider, effect=effect).create_session(id=session_id)
            notify = policy.endswith("-notify")
            options = self.options(
                policy.removesuffix("-effect").removesuffix("-notify"), notify=notify
            )
            start = time.perf_counter()
            result = await session.run(QUESTION, run_state=options)
        elapsed = time.perf_counter() - start
        if result.status != "succeeded":
            raise RuntimeError(f"the investigation ended {result.status}")
        commits = sum(1 for name, _, _ in self.trace.calls if name in COMMITS)
        return RunOutcome(
            session_id, list(provider.calls), list(self.trace.saves), elapsed, commits
        )

    async def crash(self) -> tuple[str, str, int]:
        """An every-turn investigation whose worker dies at the provider call after its last
        tool turn; ``(session_id, run_id, version)`` of the checkpoint it left."""
        provider = Investigation(self.turns, die_at=self.turns)
        self.trace.reset(provider)
        session_id = f"s-{uuid.uuid4().hex}"
        session = self.agent(provider).create_session(id=session_id)
        await run_until_the_worker_dies(session.run(QUESTION, run_state=self.options("every-turn")))
        last = self.trace.saves[-1]
        if last.value["status"] != "running" or last.value["counters"]["turns"] != self.turns:
            raise RuntimeError("the crashed run did not leave a turn checkpoint after its turns")
        return session_id, last.key, last.version

    async def resume(self, session_id: str, run_id: str, version: int) -> ResumeSample:
        """Continue a crashed run; time ``resume_agent_run`` up to the provider call."""
        provider = Investigation(self.turns)
        agent = self.agent(provider)
        ref = {"run_id": run_id, "session_id": session_id}
        decision = {"expected_version": version, "decision": "continue"}
        self.trace.reset(provider)
        gc.collect()
        start = time.perf_counter()
        result = await resume_agent_run(
            agent, ref, decision, checkpoints=self.checkpoints, definition_revision=REVISION
        )
        if result.status != "succeeded" or not provider.calls:
            raise RuntimeError(f"the continued run ended {result.status}")
        reached = provider.calls[0]
        window = [(name, s, min(e, reached)) for name, s, e in self.trace.calls if s < reached]
        spent: dict[str, float] = {}
        for name, s, e in window:
            spent[name] = spent.get(name, 0.0) + (e - s)
        return ResumeSample(
            total=reached - start,
            in_store=sum(spent.values()),
            calls=Counter(name for name, _, _ in window),
            spent=spent,
        )


@dataclass
class ResumeSample:
    """One timed ``continue``: the whole time before the provider call, the part of it
    spent inside store calls, and which store calls were made."""

    total: float
    in_store: float
    calls: Counter[str]
    spent: dict[str, float]


@dataclass
class StoreResult:
    """Everything measured on one store (or why it was skipped)."""

    name: str
    skipped: str | None = None
    none_runs: list[float] = field(default_factory=list)
    every_runs: list[float] = field(default_factory=list)
    every_turns: list[float] = field(default_factory=list)
    pair_costs: list[float] = field(default_factory=list)
    effect_costs: list[float] = field(default_factory=list)
    in_run_saves: list[float] = field(default_factory=list)
    raw_writes: list[float] = field(default_factory=list)
    #: The plain driver writing a turn's own rows (checkpoint, entries, head) in one commit.
    raw_turn_writes: list[float] = field(default_factory=list)
    #: Per run pair: (the run with a raw write at every turn - none) / turns.
    raw_run_costs: list[float] = field(default_factory=list)
    bytes_turn1: int = 0
    bytes_turn_n: int = 0
    every_writes_per_turn: tuple[int, int] = (0, 0)
    every_turn_writes: int = 0
    every_total_writes: int = 0
    decision_writes: int = 0
    provider_turns: int = 0
    checkpoint_bytes: int = 0
    transcript_bytes: int = 0
    resumes: list[ResumeSample] = field(default_factory=list)
    seconds: float = 0.0
    #: Per repeat: the notifying run's wall time over the plain every-turn run's.
    notify_ratios: list[float] = field(default_factory=list)
    notify_runs: list[float] = field(default_factory=list)
    #: Commits of the plain every-turn run and of the notifying one.
    every_commits: int = 0
    notify_commits: int = 0


async def measure_store(name: str, args: argparse.Namespace, prefix: str) -> StoreResult:
    """Every figure for one store."""
    out = StoreResult(name)
    started = time.perf_counter()
    async with open_stores(name, args, prefix) as (checkpoints, sessions, raw):
        bench = Bench(checkpoints, sessions, args.turns)
        # Warm-up: schema, connections, scripts, code paths (not counted).
        await bench.investigate("none", turns=5)
        warm_run = await bench.investigate("every-turn", turns=5)
        warm = await bench.crash()
        await bench.resume(*warm)
        decision = await bench.investigate("decision")
        out.decision_writes = len(decision.saves)
        # The raw write carries a running checkpoint's bytes (varied on every write).
        raw_value = dumps(warm_run.saves[0].value).decode()
        if name == "sqlite":
            # Both files in their steady state before anything is timed: a WAL grows to the
            # checkpoint threshold once in a file's life and is rewritten in place from then
            # on (a cheaper fsync per commit); a long-running host is there within about
            # 250 turns, and each side here gets there first.
            await until_wal_steady(
                checkpoints.database.path, lambda: bench.investigate("every-turn")
            )

            async def raw_warm_up() -> None:
                for _ in range(20):
                    raw.write("warm-up", raw_value)
                    raw.write_turn("warm-up", raw_value, ["{}", "{}"])

            await until_wal_steady(raw.path, raw_warm_up)

        # A tool turn's own entries (its assistant message and tool result), as the plain
        # driver's turn write carries them beside the checkpoint.
        listed = await bench.sessions.inner.list(warm_run.session_id)
        turn_entries = [dumps(e).decode() for e in listed[-3:-1]]
        write_turn = getattr(raw, "write_turn", None)

        def raw_batch() -> None:
            for _ in range(args.turns):
                start = time.perf_counter()
                raw.write("run", raw_value)
                out.raw_writes.append(time.perf_counter() - start)
                if write_turn is not None:
                    start = time.perf_counter()
                    write_turn("turn", raw_value, turn_entries)
                    out.raw_turn_writes.append(time.perf_counter() - start)

        def raw_write() -> None:
            raw.write("run", raw_value)

        every: RunOutcome | None = None
        steps: tuple[str, ...] = (
            "none",
            "every-turn",
            "every-turn-notify",
            "every-turn-effect",
            "raw-batch",
        )
        if raw is not None:
            steps += ("raw",)
        for rep in range(args.repeats):
            pair: dict[str, float] = {}
            # Rotate the order every repeat, so drift in machine load cancels out.
            turn = rep % len(steps)
            for step in steps[turn:] + steps[:turn]:
                gc.collect()
                if step == "raw-batch":
                    if raw is not None:
                        raw_batch()
                    continue
                outcome = await bench.investigate(step, raw_write=raw_write)
                pair[step] = outcome.elapsed
                if step == "none":
                    out.none_runs.append(outcome.elapsed)
                elif step == "every-turn":
                    out.every_runs.append(outcome.elapsed)
                    out.every_turns += outcome.intervals
                    out.in_run_saves += [s.end - s.start for s in outcome.saves]
                    out.every_commits = outcome.commits
                    every = outcome
                elif step == "every-turn-notify":
                    out.notify_runs.append(outcome.elapsed)
                    out.notify_commits = outcome.commits
            out.pair_costs.append((pair["every-turn"] - pair["none"]) / args.turns)
            out.effect_costs.append((pair["every-turn-effect"] - pair["none"]) / args.turns)
            out.notify_ratios.append(pair["every-turn-notify"] / pair["every-turn"])
            if "raw" in pair:
                out.raw_run_costs.append((pair["raw"] - pair["none"]) / args.turns)
        assert every is not None

        running = [s for s in every.saves if s.value.get("status") == "running"]
        per_turn = Counter(s.provider_calls for s in running)
        out.provider_turns = len(every.calls)
        counts = [per_turn.get(turn, 0) for turn in range(out.provider_turns)]
        out.every_writes_per_turn = (min(counts), max(counts))
        out.every_turn_writes = len(running)
        out.every_total_writes = len(every.saves)
        sizes = [len(dumps(s.value)) for s in running]
        out.bytes_turn1 = sizes[0]
        out.bytes_turn_n = sizes[min(args.turns, len(sizes)) - 1]
        out.checkpoint_bytes = sum(len(dumps(s.value)) for s in every.saves)
        entries = await bench.sessions.inner.list(every.session_id)
        out.transcript_bytes = len(dumps(entries))

        for _ in range(args.resumes):
            crashed = await bench.crash()
            out.resumes.append(await bench.resume(*crashed))
    out.seconds = time.perf_counter() - started
    return out


# -- report -----------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(results: Sequence[StoreResult], turns: int) -> tuple[str, list[str]]:
    """The table and the list of failed targets."""
    failures: list[str] = []
    rows: list[list[str]] = []

    def row(metric: str, target: str, cell: Callable[[StoreResult], str]) -> None:
        cells = []
        for r in results:
            if r.skipped is not None:
                cells.append("-" if rows else "skipped (see summary)")
            else:
                cells.append(cell(r))
        rows.append([metric, target, *cells])

    def gated(r: StoreResult, text: str, ok: bool, what: str) -> str:
        if not ok:
            failures.append(f"{what} on {r.name}")
        return f"{text} {verdict(ok)}"

    def cost(r: StoreResult) -> float:
        return median_ms(r.pair_costs)

    def raw_cell(r: StoreResult) -> str:
        return f"{median_ms(r.raw_writes):.3f}" if r.raw_writes else "-"

    def ratio_cell(r: StoreResult) -> str:
        if not r.raw_writes:
            return "-"
        ratio = cost(r) / median_ms(r.raw_writes)
        target = OVERHEAD_TARGETS.get(r.name)
        if target is None:
            return f"{ratio:.2f}"
        return gated(r, f"{ratio:.2f} (<= {target})", ratio <= target, "cost per turn / raw write")

    def effect_ratio_cell(r: StoreResult) -> str:
        if not r.raw_writes:
            return "-"
        ratio = median_ms(r.effect_costs) / median_ms(r.raw_writes)
        target = EFFECT_TARGETS.get(r.name)
        if target is None:
            return f"{ratio:.2f}"
        return gated(
            r,
            f"{ratio:.2f} (<= {target})",
            ratio <= target,
            "side-effecting cost per turn / raw write",
        )

    row("run, no persistence (median ms)", "-", lambda r: f"{median_ms(r.none_runs):.1f}")
    row("run, every-turn on the store (median ms)", "-", lambda r: f"{median_ms(r.every_runs):.1f}")
    row("cost per turn: (every-turn - none) / turns (ms)", "-", lambda r: f"{cost(r):.3f}")
    row(
        "  spread over the run pairs (min..max ms)",
        "-",
        lambda r: (
            f"{min(r.pair_costs) * 1000:.3f}..{max(r.pair_costs) * 1000:.3f} "
            f"({len(r.pair_costs)} pairs)"
        ),
    )
    row(
        "  of which the store's save call (median ms)",
        "-",
        lambda r: f"{median_ms(r.in_run_saves):.3f}",
    )
    row("raw durable write, plain driver (median ms)", "-", raw_cell)
    row(
        "  the turn's own rows in one commit, plain driver (median ms)",
        "-",
        lambda r: f"{median_ms(r.raw_turn_writes):.3f}" if r.raw_turn_writes else "-",
    )
    row("cost per turn / raw write (read-only tool)", "see cell", ratio_cell)
    row(
        "  cost per turn / the turn's own rows (information)",
        "-",
        lambda r: f"{cost(r) / median_ms(r.raw_turn_writes):.2f}" if r.raw_turn_writes else "-",
    )
    row(
        "raw write at every turn of the same run: cost per turn (ms)",
        "-",
        lambda r: f"{median_ms(r.raw_run_costs):.3f}" if r.raw_run_costs else "-",
    )
    row(
        "  cost per turn / that (read-only tool; info)",
        "-",
        lambda r: f"{cost(r) / median_ms(r.raw_run_costs):.2f}" if r.raw_run_costs else "-",
    )
    row(
        "cost per turn, side-effecting tool (ms)",
        "-",
        lambda r: (
            f"{median_ms(r.effect_costs):.3f} "
            f"({min(r.effect_costs) * 1000:.3f}..{max(r.effect_costs) * 1000:.3f})"
        ),
    )
    row("cost per turn / raw write (side-effecting tool)", "see cell", effect_ratio_cell)
    row(
        "run with notifications (notify=True), every-turn (median ms)",
        "-",
        lambda r: f"{median_ms(r.notify_runs):.1f}",
    )
    row(
        "  its wall time / the same run without (median of the pairs)",
        f"<= {NOTIFY_TARGET}",
        lambda r: gated(
            r,
            f"{statistics.median(r.notify_ratios):.3f}",
            statistics.median(r.notify_ratios) <= NOTIFY_TARGET,
            "notifying run / plain run",
        ),
    )
    row(
        "  its commits / the same run without",
        "equal",
        lambda r: gated(
            r,
            f"{r.notify_commits} / {r.every_commits}",
            r.notify_commits == r.every_commits,
            "notifying run's commits",
        ),
    )
    row("checkpoint bytes at turn 1", "-", lambda r: str(r.bytes_turn1))
    row(f"checkpoint bytes at turn {turns}", "-", lambda r: str(r.bytes_turn_n))
    row(
        f"growth turn 1 -> {turns} (bytes)",
        f"<= {BYTES_GROWTH_TARGET}",
        lambda r: gated(
            r,
            str(r.bytes_turn_n - r.bytes_turn1),
            abs(r.bytes_turn_n - r.bytes_turn1) <= BYTES_GROWTH_TARGET,
            "checkpoint growth",
        ),
    )
    row(
        "writes per turn, every-turn (min-max)",
        "= 1",
        lambda r: gated(
            r,
            f"{r.every_writes_per_turn[0]}-{r.every_writes_per_turn[1]}",
            r.every_writes_per_turn == (1, 1),
            "every-turn writes per turn",
        ),
    )
    row(
        "  writes in the run (turn + terminal)",
        "-",
        lambda r: (
            f"{r.every_turn_writes}+{r.every_total_writes - r.every_turn_writes} "
            f"/ {r.provider_turns} turns"
        ),
    )
    row(
        "writes per turn, decision",
        "= 0",
        lambda r: gated(
            r,
            f"{r.decision_writes / r.provider_turns:.0f} ({r.decision_writes} writes)",
            r.decision_writes == 0,
            "decision-policy writes",
        ),
    )
    row("checkpoint bytes written in the run", "-", lambda r: str(r.checkpoint_bytes))
    row("transcript bytes (all entries)", "-", lambda r: str(r.transcript_bytes))
    row(
        "checkpoint / transcript bytes",
        f"<= {BYTES_RATIO_TARGET}",
        lambda r: gated(
            r,
            f"{r.checkpoint_bytes / r.transcript_bytes:.2f}",
            r.checkpoint_bytes / r.transcript_bytes <= BYTES_RATIO_TARGET,
            "checkpoint/transcript bytes",
        ),
    )

    row(
        "continue through the timing wrappers, before the provider (median ms)",
        "see below",
        lambda r: f"{median_ms([s.total for s in r.resumes]):.3f}",
    )
    row("  p95 (ms)", "-", lambda r: f"{p95_ms([s.total for s in r.resumes]):.3f}")
    row(
        "  inside store calls (median ms)",
        "-",
        lambda r: f"{median_ms([s.in_store for s in r.resumes]):.3f}",
    )
    row(
        "  outside store calls (median ms)",
        "-",
        lambda r: f"{median_ms([s.total - s.in_store for s in r.resumes]):.3f}",
    )

    def calls_cell(r: StoreResult) -> str:
        counts = r.resumes[0].calls
        parts = []
        for name in CALL_ORDER:
            if name in counts:
                spent = median_ms([s.spent.get(name, 0.0) for s in r.resumes])
                times = f" x{counts[name]}" if counts[name] > 1 else ""
                parts.append(f"{CALL_NAMES[name]}{times} {spent:.2f}")
        return ", ".join(parts)

    row("  store calls before the provider (median ms)", "-", calls_cell)
    row("  continues timed", "-", lambda r: str(len(r.resumes)))
    headers = ["figure", "target", *[r.name for r in results]]
    return format_table(headers, rows), failures


async def run(args: argparse.Namespace) -> int:
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = sorted(set(stores) - set(STORES))
    if unknown:
        print(f"unknown stores {unknown}; choose from {', '.join(STORES)}", file=sys.stderr)
        return 2
    prefix = unique_prefix()
    print(
        f"prism durable-run benchmark: {args.turns}-turn investigation, {args.repeats} runs per "
        f"policy per store, {args.resumes} timed continues per store; python "
        f"{platform.python_version()}, prefix {prefix}"
    )
    started = time.perf_counter()
    results: list[StoreResult] = []
    for name in stores:
        reason = None
        if name == "postgres":
            reason = await probe_postgres(args.postgres_url)
        elif name == "redis":
            reason = await probe_redis(args.redis_url)
        if reason is not None:
            results.append(StoreResult(name, skipped=reason))
            print(f"  {name}: skipped ({reason})")
            continue
        try:
            result = await measure_store(name, args, prefix)
        except Exception as exc:
            results.append(StoreResult(name, skipped=f"failed: {type(exc).__name__}: {exc}"))
            print(f"  {name}: failed ({type(exc).__name__}: {exc})")
            continue
        results.append(result)
        print(f"  {name}: measured in {result.seconds:.1f} s")
    sizes = [int(size) for size in args.continue_turns.split(",") if size.strip()]
    continues = await measure_continue(sizes, args.continue_samples, args.cold, SCRIPT)
    print(f"  continue on sqlite: measured at {', '.join(map(str, sizes))} turns")
    print()
    table, failures = report(results, args.turns)
    print(table)
    print()
    continue_table, continue_failures = report_continue(continues)
    print(continue_table)
    print()
    print(summary(results, [*failures, *continue_failures]))
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


def summary(results: Sequence[StoreResult], failures: Sequence[str]) -> str:
    live = [r for r in results if r.skipped is None]
    lines = ["summary:"]
    if failures:
        lines.append(f"- targets missed: {'; '.join(failures)}")
    else:
        lines.append("- every target met on every measured store")
    for r in live:
        over = median_ms(r.pair_costs)
        save = median_ms(r.in_run_saves)
        resume = statistics.median([s.total for s in r.resumes]) * 1000
        in_store = statistics.median([s.in_store for s in r.resumes]) * 1000
        lines.append(
            f"- {r.name}: durability costs {over:.3f} ms per turn, of which the store's save call "
            f"is {save:.3f} ms; a warm continue reaches the provider after {resume:.3f} ms "
            f"({in_store:.3f} ms in {sum(r.resumes[0].calls.values())} store calls)"
        )
    skipped = [f"{r.name} ({r.skipped})" for r in results if r.skipped is not None]
    if skipped:
        lines.append(f"- skipped: {'; '.join(skipped)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--turns", type=int, default=40, help="tool turns per investigation")
    parser.add_argument(
        "--stores", default=",".join(STORES), help="comma-separated: memory,sqlite,postgres,redis"
    )
    parser.add_argument("--repeats", type=int, default=6, help="runs per policy per store")
    parser.add_argument("--resumes", type=int, default=20, help="timed continues per store")
    parser.add_argument(
        "--continue-turns", default="40,400", help="transcript sizes of the continue figures"
    )
    parser.add_argument(
        "--continue-samples", type=int, default=15, help="warm continues (and floors) per size"
    )
    parser.add_argument("--cold", type=int, default=5, help="cold continues (new processes)")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    parser.add_argument("--continue-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.continue_child:
        seconds = anyio.run(cold_child, json.loads(args.continue_child), backend="asyncio")
        print(seconds)
        return 0
    for name in ("turns", "repeats", "resumes", "continue_samples", "cold"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    try:
        return anyio.run(run, args, backend="asyncio")
    except KeyboardInterrupt:
        print("interrupted (tables and keys of this run were removed)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
