"""Fencing, transient drops and stalled stores on SQLite, PostgreSQL and Redis.

Each test runs real stores: the split brain (a stalled worker superseded by a continue runs
nothing more), a dropped connection mid-run (retried, the run finishes) and a stalled store
(the store's timeout fires, the run stops with a typed error, the record stays ``running``
and a later continue finishes it without running a tool twice).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from prism_cli._demo_stores import drop_demo_stores, open_demo_stores
from prism_core import (
    AgentRunError,
    CheckpointStoreUnavailableError,
    RunStateOptions,
    ToolDefinition,
    load_agent_run_state,
    open_stores,
    resume_agent_run,
)
from tests.conftest import POSTGRES_URL, REDIS_URL, service_unavailable
from tests.core.durable_support import CountingStore
from tests.core.fencing_support import (
    REVISION,
    check_split_brain,
    only_run,
    ref,
    split_brain,
    worker,
)
from tests.integration.stall_proxy import stall_proxy
from tests.integration.test_crash_demo import reachable
from tests.store_plugins import STORE_PLUGINS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A store URL, an isolating prefix and the backend's name (cleaned up afterwards)."""
    if request.param == "sqlite":
        yield {"url": f"sqlite:///{tmp_path / 'runs.db'}", "prefix": "t", "name": "sqlite"}
        return
    host_port = {"postgresql": ("127.0.0.1", 5432), "redis": ("127.0.0.1", 6379)}[request.param]
    reason = reachable(*host_port)
    if reason:
        service_unavailable(request.param, reason)
    url = POSTGRES_URL if request.param == "postgresql" else REDIS_URL
    prefix = f"prismft_{uuid.uuid4().hex[:8]}"
    yield {"url": url, "prefix": prefix, "name": request.param}
    drop_demo_stores(url, prefix, STORE_PLUGINS)


@pytest.fixture
def anyio_backend() -> str:
    """The SQL and Redis drivers run on asyncio."""
    return "asyncio"


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[Any]:
    """A persistent session store the faults below leave alone (its own SQLite file): a
    durable run on a persistent checkpoint store needs one, and these tests fault only the
    checkpoint store."""
    from prism_store_sql import create_sql_session_store

    store = create_sql_session_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    yield store
    await store.aclose()


class Recording(CountingStore):
    """Counts the transient errors the wrapped store raised (and passes them on)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.transient = 0

    async def load(self, *args: Any, **kw: Any) -> Any:
        try:
            return await super().load(*args, **kw)
        except CheckpointStoreUnavailableError:
            self.transient += 1
            raise

    async def save_request(self, request: Any) -> Any:
        try:
            return await super().save_request(request)
        except CheckpointStoreUnavailableError:
            self.transient += 1
            raise


@pytest.mark.anyio
@pytest.mark.parametrize("lease_ms", [None, 3000])
async def test_split_brain(backend: dict[str, str], lease_ms: int | None) -> None:
    """Worker A stalls in the model call, B continues and finishes, A wakes and runs nothing
    (with a lease: A's live, renewed lease refuses B until B forces the claim)."""
    checkpoints, sessions = open_demo_stores(backend["url"], backend["prefix"], STORE_PLUGINS)
    async with checkpoints, sessions:
        outcome = await split_brain(checkpoints, sessions, lease_ms=lease_ms)
    check_split_brain(outcome)


STALL_IN_CHILD = """
import anyio, json, sys
from pathlib import Path
from prism_core import AgentRunError, RunStateOptions
from prism_cli._demo_stores import open_demo_stores
from tests.store_plugins import STORE_PLUGINS
from tests.core.fencing_support import REVISION, worker

args = json.loads(sys.argv[1])
release = Path(args["release"])

async def stall(request):
    if sum(1 for m in request.messages if m.role == "assistant") == 1:
        print(json.dumps({"stalled": True}), flush=True)
        while not release.exists():
            await anyio.sleep(0.02)

async def main():
    checkpoints, sessions = open_demo_stores(args["url"], args["prefix"], STORE_PLUGINS)
    log, code = [], None
    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn")
    async with checkpoints, sessions:
        try:
            session = worker(sessions, log, stall=stall).create_session(id=args["session"])
            await session.run("go", run_state=options)
        except AgentRunError as exc:
            code = exc.code
    print(json.dumps({"log": log, "code": code}), flush=True)

anyio.run(main)
"""


@pytest.mark.long
@pytest.mark.anyio
async def test_split_brain_across_processes(backend: dict[str, str], tmp_path: Path) -> None:
    """Worker A is another process stalled in its model call; this process continues the run
    and finishes it; A wakes up, runs no tool and ends with the conflict error."""
    release = tmp_path / "release"
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    payload = json.dumps({**backend, "session": session_id, "release": str(release)})
    checkpoints, sessions = open_demo_stores(backend["url"], backend["prefix"], STORE_PLUGINS)
    b_log: list[Any] = []
    async with checkpoints, sessions:
        process = await anyio.open_process(
            [sys.executable, "-c", STALL_IN_CHILD, payload], cwd=ROOT
        )
        try:
            assert process.stdout is not None
            lines = TextReceiveStream(process.stdout)
            buffered = ""
            with anyio.fail_after(60):
                async for chunk in lines:
                    buffered += chunk
                    if '"stalled"' in buffered:
                        break
            run_id = await only_run(checkpoints)
            status = await load_agent_run_state(checkpoints, ref(run_id, session_id))
            assert status is not None
            done = await resume_agent_run(
                worker(sessions, b_log),
                ref(run_id, session_id),
                {"expected_version": status.version, "decision": "continue"},
                checkpoints=checkpoints,
                definition_revision=REVISION,
            )
            release.touch()
            with anyio.fail_after(60):
                async for chunk in lines:
                    buffered += chunk
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
            await process.aclose()
        record = await checkpoints.load("prism.agent-run", run_id)
    child = json.loads(buffered.strip().splitlines()[-1])
    assert done.status == "succeeded"
    assert b_log == [("echo", {"n": 2})]
    assert child == {"log": [["echo", {"n": 1}]], "code": "ERR_PRISM_CHECKPOINT_CONFLICT"}
    assert record is not None
    assert record.value["status"] == "succeeded"
    assert record.fencing_token == 1


# -- backend-specific faults ------------------------------------------------------------


def _checkpoint_store(backend: dict[str, str], tmp: Path, timeout_ms: int, tag: str) -> Any:
    """A checkpoint store whose connections the fault helpers can single out by ``tag``."""
    name = backend["name"]
    if name == "sqlite":
        from prism_store_sql import create_sql_checkpoint_store

        return create_sql_checkpoint_store(
            f"sqlite:///{tmp / 'checkpoints.db'}", timeout_ms=timeout_ms, table_prefix="t_"
        )
    if name == "postgresql":
        from sqlalchemy.ext.asyncio import create_async_engine

        from prism_store_sql import create_sql_checkpoint_store

        engine = create_async_engine(
            POSTGRES_URL.replace("postgresql://", "postgresql+asyncpg://", 1),
            connect_args={
                "server_settings": {
                    "application_name": tag,
                    "statement_timeout": str(timeout_ms),
                    "lock_timeout": str(timeout_ms),
                }
            },
        )
        return create_sql_checkpoint_store(engine, table_prefix=f"{backend['prefix']}_")
    from prism_store_redis import create_redis_checkpoint_store

    return create_redis_checkpoint_store(
        f"{REDIS_URL}?client_name={tag}", prefix=backend["prefix"], timeout_ms=timeout_ms
    )


async def _close(store: Any) -> None:
    from prism_store_sql import SqlCheckpointStore, SqliteCheckpointStore

    await store.aclose()
    # The PostgreSQL store runs on an engine made here, which a store never disposes of; the
    # thread-driven SQLite store has no engine.
    if isinstance(store, SqlCheckpointStore) and not isinstance(store, SqliteCheckpointStore):
        await store.engine.dispose()


class SqliteLock:
    """A write lock on a SQLite file held by another connection, on a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.held = threading.Event()
        self.release = threading.Event()
        self.thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        connection = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            self.held.set()
            self.release.wait(30)
            connection.execute("COMMIT")
        finally:
            connection.close()

    async def take(self) -> None:
        self.thread.start()
        await anyio.to_thread.run_sync(self.held.wait, 10)

    async def drop(self) -> None:
        self.release.set()
        await anyio.to_thread.run_sync(self.thread.join, 10)


async def _pg(sql: str, **params: Any) -> list[Any]:
    """Run one statement on a fresh PostgreSQL connection (autocommit)."""
    import asyncpg

    connection = await asyncpg.connect(POSTGRES_URL)
    try:
        return list(await connection.fetch(sql, *params.values()))
    finally:
        await connection.close()


async def _redis(*command: Any) -> Any:
    """Run one command on a fresh Redis client."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        return await client.execute_command(*command)
    finally:
        await client.aclose()


def _drop_connections(backend: dict[str, str], tmp: Path, tag: str) -> Callable[[], Awaitable[int]]:
    """An action dropping the checkpoint store's connections (how many it dropped)."""
    name = backend["name"]

    async def drop() -> int:
        if name == "postgresql":
            rows = await _pg(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = $1 AND pid <> pg_backend_pid()",
                tag=tag,
            )
            return len(rows)
        if name == "redis":
            clients = await _redis("CLIENT", "LIST")
            text = clients.decode() if isinstance(clients, bytes) else str(clients)
            ids = [
                field.split("=", 1)[1]
                for line in text.splitlines()
                if f" name={tag} " in f" {line} "
                for field in line.split()
                if field.startswith("id=")
            ]
            for client_id in ids:
                await _redis("CLIENT", "KILL", "ID", client_id)
            return len(ids)
        # SQLite has no connection to kill: a writer holds the file's lock for a while, so
        # the next checkpoint write times out and is retried until the lock is gone.
        lock = SqliteLock(tmp / "checkpoints.db")
        await lock.take()

        async def later() -> None:
            await anyio.sleep(0.6)
            await lock.drop()

        threading.Thread(target=anyio.run, args=(later,), daemon=True).start()
        return 1

    return drop


def _fault_tool(log: list[Any], fault: Callable[[], Awaitable[Any]], seen: list[Any]) -> Any:
    async def echo(args: dict[str, Any], context: Any) -> Any:
        log.append(("echo", args))
        if args == {"n": 1}:
            seen.append(await fault())
        return {"echo": args}

    return ToolDefinition("echo", echo)


@pytest.mark.anyio
async def test_dropped_connection_is_retried_and_the_run_finishes(
    backend: dict[str, str], tmp_path: Path, sessions: Any
) -> None:
    """The checkpoint store's connections are dropped while a tool runs: the next store call
    is retried and the run finishes, every tool once."""
    tag = f"prismft-{uuid.uuid4().hex[:8]}"
    inner = _checkpoint_store(backend, tmp_path, 250, tag)
    checkpoints = Recording(inner)
    log: list[Any] = []
    dropped: list[Any] = []
    tool = _fault_tool(log, _drop_connections(backend, tmp_path, tag), dropped)
    try:
        result = (
            await worker(sessions, log, tools=[tool])
            .create_session(id="s")
            .run(
                "go",
                run_state=RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn"),
            )
        )
    finally:
        await _close(inner)
    assert result.status == "succeeded"
    assert log == [("echo", {"n": 1}), ("echo", {"n": 2})]
    assert dropped[0] >= 1
    if backend["name"] != "redis":
        # redis-py reconnects a killed connection itself; the SQL stores report the drop and
        # the durable layer retries.
        assert checkpoints.transient >= 1


async def _stall(
    backend: dict[str, str],
    tmp: Path,
    release: anyio.Event,
    stalled: anyio.Event,
    redis_pause_ms: int = 2500,
) -> None:
    """Hold the checkpoint store stalled until ``release`` is set (in a background task);
    ``stalled`` is set once the stall is in place. Redis pauses writes for a bounded time
    (``redis_pause_ms``) and is unpaused on ``release``."""
    name = backend["name"]
    if name == "sqlite":
        lock = SqliteLock(tmp / "checkpoints.db")
        await lock.take()
        stalled.set()
        await release.wait()
        await lock.drop()
        return
    if name == "postgresql":
        import asyncpg

        connection = await asyncpg.connect(POSTGRES_URL)
        try:
            transaction = connection.transaction()
            await transaction.start()
            await connection.execute(
                f'LOCK TABLE "{backend["prefix"]}_checkpoints" IN ACCESS EXCLUSIVE MODE'
            )
            stalled.set()
            await release.wait()
            await transaction.rollback()
        finally:
            await connection.close()
        return
    # Redis: writes pause for a bounded time (the run's retries end well before it does).
    await _redis("CLIENT", "PAUSE", str(redis_pause_ms), "WRITE")
    stalled.set()
    await release.wait()
    await _redis("CLIENT", "UNPAUSE")


@pytest.mark.anyio
async def test_stalled_store_times_out_and_the_run_stays_continuable(
    backend: dict[str, str], tmp_path: Path, sessions: Any
) -> None:
    """The checkpoint store stalls after the first tool: its timeout fires, the run stops with
    ERR_PRISM_STORE_UNAVAILABLE, the record stays running, and a continue afterwards finishes
    without running the first tool again."""
    tag = f"prismft-{uuid.uuid4().hex[:8]}"
    inner = _checkpoint_store(backend, tmp_path, 200, tag)
    checkpoints = Recording(inner)
    log: list[Any] = []
    release = anyio.Event()
    stalled = anyio.Event()

    async with anyio.create_task_group() as group:

        async def start_stall() -> None:
            group.start_soon(_stall, backend, tmp_path, release, stalled)
            # The run goes on only once the holder has its lock or pause (a deadline, not a
            # guess at how long that takes on a busy machine).
            with anyio.fail_after(60):
                await stalled.wait()

        tool = _fault_tool(log, start_stall, [])
        try:
            with pytest.raises(AgentRunError) as info:
                await (
                    worker(sessions, log, tools=[tool])
                    .create_session(id="s")
                    .run(
                        "go",
                        run_state=RunStateOptions(
                            checkpoints, REVISION, checkpoint_policy="every-turn"
                        ),
                    )
                )
        finally:
            release.set()
    assert stalled.is_set()
    assert info.value.code == "ERR_PRISM_STORE_UNAVAILABLE"
    assert checkpoints.transient >= 1
    assert log == [("echo", {"n": 1})]
    try:
        run_id = await only_run(inner)
        status = await load_agent_run_state(inner, ref(run_id, "s"))
        assert status is not None
        assert status.state.status == "running"
        done = await resume_agent_run(
            worker(sessions, log),
            ref(run_id, "s"),
            {"expected_version": status.version, "decision": "continue"},
            checkpoints=inner,
            definition_revision=REVISION,
        )
    finally:
        await _close(inner)
    assert done.status == "succeeded"
    assert log == [("echo", {"n": 1}), ("echo", {"n": 2})]


STALLED_STORE_TIMEOUT_MS = 20000


@pytest.mark.anyio
# SQLite is left out: a SQLite call runs to its end in the driver's thread (bounded by the
# busy timeout, timeout_ms) and cannot be abandoned midway.
@pytest.mark.parametrize("backend", ["postgresql", "redis"], indirect=True)
async def test_stalled_store_call_does_not_outlive_max_wall_time(
    backend: dict[str, str], tmp_path: Path, sessions: Any
) -> None:
    """With a long store timeout (20 s), a store call stalled when the run's wall time (4 s)
    runs out is abandoned: the run ends on its limit, not on the store's timeout, and its
    record stays running."""
    tag = f"prismft-{uuid.uuid4().hex[:8]}"
    inner = _checkpoint_store(backend, tmp_path, STALLED_STORE_TIMEOUT_MS, tag)
    log: list[Any] = []
    release = anyio.Event()
    stalled = anyio.Event()
    stalled_at: list[float] = []
    async with anyio.create_task_group() as group:

        async def start_stall() -> None:
            # Redis stays paused past the wall time (until the release).
            group.start_soon(_stall, backend, tmp_path, release, stalled, 15000)
            with anyio.fail_after(60):
                await stalled.wait()
            stalled_at.append(anyio.current_time())

        tool = _fault_tool(log, start_stall, [])
        try:
            with pytest.raises(AgentRunError) as info:
                await (
                    worker(sessions, log, tools=[tool])
                    .create_session(id="s")
                    .run(
                        "go",
                        limits={"max_wall_time_ms": 4000},
                        run_state=RunStateOptions(inner, REVISION, checkpoint_policy="every-turn"),
                    )
                )
            ended = anyio.current_time()
        finally:
            release.set()
    try:
        assert info.value.code == "ERR_PRISM_RUN_LIMIT"
        # Waited out, the stalled call would have ended the run no sooner than its timeout.
        assert ended - stalled_at[0] < STALLED_STORE_TIMEOUT_MS / 1000
        run_id = await only_run(inner)
        status = await load_agent_run_state(inner, ref(run_id, "s"))
        assert status is not None
        assert status.state.status == "running"
    finally:
        await _close(inner)


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["postgresql", "redis"], indirect=True)
async def test_a_store_stalled_by_the_network_never_outlives_the_wall_time(
    backend: dict[str, str], tmp_path: Path
) -> None:
    """The stores reach their server through a TCP proxy that starts holding every byte
    during the run (a black-holed network, not a server that answers slowly): with
    ``max_wall_time_ms=3000`` the run ends on its wall-time limit within it (the PostgreSQL
    store used to wait 2 s more for a graceful close, and every store 1 s more for a terminal
    write after the deadline), and its record stays ``running``."""
    port = 5432 if backend["name"] == "postgresql" else 6379
    with stall_proxy("127.0.0.1", port) as proxy:
        if backend["name"] == "postgresql":
            url = f"postgresql://postgres@127.0.0.1:{proxy.port}/test"
            url += f"?table_prefix={backend['prefix']}_"
        else:
            url = f"redis://127.0.0.1:{proxy.port}/0?prefix={backend['prefix']}"

        def stall(args: dict[str, Any], context: Any) -> Any:
            proxy.stall()
            return {"stalled": True}

        tool = ToolDefinition("echo", stall, idempotent=True)
        async with open_stores(url, plugins=STORE_PLUGINS) as pair:
            await pair.checkpoints.load("warm", "up")
            started = anyio.current_time()
            with pytest.raises(AgentRunError) as info:
                await (
                    worker(pair.sessions, [], tools=[tool])
                    .create_session(id="s")
                    .run(
                        "go",
                        limits={"max_wall_time_ms": 3000},
                        run_state=RunStateOptions(
                            pair.checkpoints, REVISION, checkpoint_policy="every-turn"
                        ),
                    )
                )
            elapsed = anyio.current_time() - started
            proxy.flow()
            assert info.value.code == "ERR_PRISM_RUN_LIMIT"
            # The regressions this guards cost a whole second or two past the deadline; the
            # bound leaves a busy machine most of that second.
            assert elapsed < 3.9, elapsed
            run_id = await only_run(pair.checkpoints)
            status = await load_agent_run_state(pair.checkpoints, ref(run_id, "s"))
            assert status is not None
            assert status.state.status == "running"
