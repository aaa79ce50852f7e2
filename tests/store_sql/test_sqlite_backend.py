"""The thread-driven SQLite backend: one connection, one hand-off and one commit per call,
durable pragmas, the schema checked once, compatibility with the SQLAlchemy path, trio."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_core.errors import CheckpointConflictError
from prism_core.records import create_session_entry
from prism_core.stores import CheckpointStoreError, shared_transaction
from prism_store_sql import (
    SCHEMA_VERSION,
    SqliteCheckpointStore,
    SqliteSessionStore,
    SqlStoreConfigError,
    SqlStoreSchemaError,
    create_sql_checkpoint_store,
    create_sql_session_store,
    migrate,
    open_sql_stores,
    read_schema_version,
)
from prism_store_sql._sqlite import CompiledStatement, SqliteDatabase

from .conftest import Target, aiosqlite_url


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The thread-driven stores run on both anyio backends."""
    return str(request.param)


class Tracer:
    """Every statement the connections run (the writing one and, on a file, the reading
    one), and how many thread hand-offs were made (a group commit counts as one)."""

    def __init__(self, database: SqliteDatabase) -> None:
        self.database = database
        self.statements: list[str] = []
        self.handoffs = 0
        self.inline = 0
        original = database._call
        read_call = database._read_call
        commit_group = database._commit_group
        read_now = database._read_now

        def counting(action: str, operation: Any) -> Any:
            self.handoffs += 1
            return original(action, operation)

        def counting_reads(action: str, operation: Any) -> Any:
            self.handoffs += 1
            return read_call(action, operation)

        def counting_groups(group: Any) -> Any:
            self.handoffs += 1
            return commit_group(group)

        def counting_inline(action: str, connection: Any, operation: Any, **options: Any) -> Any:
            self.inline += 1
            return read_now(action, connection, operation, **options)

        database._call = counting  # type: ignore[method-assign]
        database._read_call = counting_reads  # type: ignore[method-assign]
        database._commit_group = counting_groups  # type: ignore[method-assign]
        database._worker._batch = counting_groups
        database._read_now = counting_inline  # type: ignore[method-assign]

    async def start(self) -> None:
        def trace(connection: sqlite3.Connection) -> None:
            connection.set_trace_callback(self.statements.append)

        await self.database.run("trace", trace)
        await anyio.to_thread.run_sync(self.database._read_call, "trace", trace)
        self.reset()

    def reset(self) -> None:
        self.statements.clear()
        self.handoffs = 0
        self.inline = 0

    def words(self) -> list[str]:
        return [s.split(None, 1)[0].upper() for s in self.statements]


@pytest.fixture
async def stores(sqlite_target: Target) -> AsyncIterator[tuple[Any, Any, Tracer]]:
    """Both stores on one traced connection to a fresh file."""
    async with open_sql_stores(sqlite_target.url) as opened:
        assert isinstance(opened.checkpoints, SqliteCheckpointStore)
        tracer = Tracer(opened.checkpoints.database)
        await tracer.start()
        yield opened.checkpoints, opened.sessions, tracer


@pytest.mark.anyio
async def test_each_call_is_one_handoff_and_at_most_one_commit(
    stores: tuple[Any, Any, Tracer],
) -> None:
    """A save is one statement (its own commit); an append is one transaction of two; reads
    are one statement; each call is one hand-off, except a one-row read, which runs inline
    with no lock wait (busy timeout 0); the schema is not looked at again."""
    checkpoints, sessions, tracer = stores
    await checkpoints.save("ns", "k", {"v": 1}, version=1, expected_version=0)
    assert (tracer.handoffs, tracer.words()) == (1, ["INSERT"])
    tracer.reset()
    await checkpoints.save("ns", "k", {"v": 2}, version=2, expected_version=1)
    assert (tracer.handoffs, tracer.words()) == (1, ["UPDATE"])
    tracer.reset()
    assert await checkpoints.load("ns", "k") is not None
    assert (tracer.handoffs, tracer.inline) == (0, 1)
    # On the free writing connection, its busy timeout at zero for the one statement.
    assert tracer.statements[0] == "PRAGMA busy_timeout=0"
    assert tracer.words()[1:] == ["SELECT", "PRAGMA"]
    assert tracer.statements[2] == "PRAGMA busy_timeout=5000"
    tracer.reset()
    root = create_session_entry(session_id="s", kind="label", label="root")
    await sessions.append(root, expected_leaf_id=None)
    assert (tracer.handoffs, tracer.words()) == (1, ["BEGIN", "INSERT", "INSERT", "COMMIT"])
    tracer.reset()
    child = create_session_entry(session_id="s", kind="label", label="c", parent_id=root.id)
    await sessions.append(child, expected_leaf_id=root.id)
    assert (tracer.handoffs, tracer.words()) == (1, ["BEGIN", "UPDATE", "INSERT", "COMMIT"])
    tracer.reset()
    assert await sessions.read_branch_path("s", child.id) == [root, child]
    # No write under way: on the writing connection, in the writer thread.
    assert (tracer.handoffs, tracer.words()) == (1, ["WITH"])
    assert not any("sqlite_master" in s or "schema_version" in s for s in tracer.statements)


@pytest.mark.anyio
async def test_a_one_row_read_waits_in_the_worker_thread_not_inline(
    stores: tuple[Any, Any, Tracer],
) -> None:
    """A load reads inline on the writing connection when it is free, else on the reading
    one: a load while a write holds the writing connection still reads inline (reads of a
    file do not queue behind writes). A load while both are held, and one that SQLite
    answers "busy", are handed to the reading thread; they return the record, and the loop
    keeps running."""
    checkpoints, sessions, tracer = stores
    database = checkpoints.database
    await checkpoints.save("ns", "k", {"v": 1}, version=1, expected_version=0)
    entry = create_session_entry(session_id="s", kind="label", label="root")
    await sessions.append(entry, expected_leaf_id=None)
    tracer.reset()
    release = threading.Event()
    holding = threading.Event()
    holding_reads = threading.Event()

    def hold(connection: sqlite3.Connection) -> None:
        holding.set()
        release.wait(10)

    def hold_reads(connection: sqlite3.Connection) -> None:
        holding_reads.set()
        release.wait(10)

    ticks = 0
    loaded: list[Any] = []

    ticked = anyio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not loaded:
            ticks += 1
            if ticks >= 10:
                ticked.set()
            await anyio.sleep(0.005)

    async def load() -> None:
        await anyio.to_thread.run_sync(holding.wait, 10)
        await anyio.to_thread.run_sync(holding_reads.wait, 10)
        loaded.append(await checkpoints.load("ns", "k"))

    async with anyio.create_task_group() as group:
        group.start_soon(database.write, "hold the writing connection", hold)
        await anyio.to_thread.run_sync(holding.wait, 10)
        # A write is under way: this read goes to the reading connection's thread.
        group.start_soon(database.read_many, "hold the reading connection", hold_reads)
        group.start_soon(tick)
        group.start_soon(load)
        # The loop keeps ticking while the load waits for the reading connection: a load that
        # blocked the loop would stop the ticks and this deadline would fail.
        with anyio.fail_after(30):
            await ticked.wait()
        assert not loaded  # waiting for the connection, in the reading thread's queue
        release.set()
    assert loaded[0] is not None
    assert loaded[0].value == {"v": 1}
    assert tracer.inline == 0
    assert tracer.handoffs == 3
    assert ticks >= 10

    # A write in flight on the writing connection: the load does not wait for it.
    tracer.reset()
    holding.clear()
    release.clear()
    loaded.clear()
    async with anyio.create_task_group() as group:
        group.start_soon(database.write, "hold the writing connection", hold)
        await anyio.to_thread.run_sync(holding.wait, 10)
        loaded.append(await checkpoints.load("ns", "k"))
        assert (tracer.inline, tracer.handoffs) == (1, 1)  # the held write's hand-off only
        release.set()
    assert loaded[0] is not None
    assert loaded[0].value == {"v": 1}

    # SQLite's "busy" on the inline attempt: the same read again, in the worker thread.
    loop_thread = threading.get_ident()

    def busy_on_the_loop_thread(connection: sqlite3.Connection) -> Any:
        if threading.get_ident() == loop_thread:
            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            raise busy
        return connection.execute("PRAGMA busy_timeout").fetchone()[0]

    tracer.reset()
    assert await database.read("read", busy_on_the_loop_thread) == 5000
    assert (tracer.inline, tracer.handoffs) == (2, 1)  # each connection tried, then handed off
    assert await sessions.get(entry.id) == entry

    def broken(connection: sqlite3.Connection) -> Any:
        return connection.execute("SELECT * FROM no_such_table").fetchall()

    with pytest.raises(CheckpointStoreError, match="read a missing table"):
        await database.read("read a missing table", broken)

    def timeout(connection: sqlite3.Connection) -> Any:
        return connection.execute("PRAGMA busy_timeout").fetchone()[0]

    assert await database.run("read the busy timeout", timeout) == 5000


@pytest.mark.anyio
async def test_a_read_on_an_unopened_or_closed_connection_is_not_inline(
    sqlite_target: Target,
) -> None:
    """The first call opens the connection in the worker thread (a schema check may take
    time); a closed store refuses a read."""
    async with open_sql_stores(sqlite_target.url) as opened:
        checkpoints = opened.checkpoints
        assert isinstance(checkpoints, SqliteCheckpointStore)
        tracer = Tracer(checkpoints.database)
        assert await checkpoints.load("ns", "absent") is None
        assert (tracer.handoffs, tracer.inline) == (1, 0)
        assert await checkpoints.load("ns", "absent") is None
        assert (tracer.handoffs, tracer.inline) == (1, 1)
    with pytest.raises(CheckpointStoreError, match="closed"):
        await checkpoints.load("ns", "absent")


@pytest.mark.anyio
async def test_a_shared_commit_is_one_handoff_and_one_commit(
    stores: tuple[Any, Any, Tracer],
) -> None:
    """Two appends and a checkpoint save: one hand-off, one BEGIN and one COMMIT."""
    checkpoints, sessions, tracer = stores
    first = create_session_entry(session_id="s", kind="label", label="1")
    second = create_session_entry(session_id="s", kind="label", label="2", parent_id=first.id)
    tx = shared_transaction(checkpoints, sessions)
    assert tx is not None
    async with tx as batch:
        batch.append(first, expected_leaf_id=None)
        batch.append(second, expected_leaf_id=first.id)
        batch.save("ns", "run", {"leaf": second.id}, version=1, expected_version=0)
    assert tracer.handoffs == 1
    assert tracer.words() == ["BEGIN", "INSERT", "INSERT", "UPDATE", "INSERT", "INSERT", "COMMIT"]
    assert await sessions.list("s") == [first, second]


@pytest.mark.anyio
async def test_stores_on_other_connections_do_not_commit_together(
    sqlite_target: Target,
) -> None:
    """Stores opened separately share no connection, so no shared transaction is offered."""
    async with (
        create_sql_checkpoint_store(sqlite_target.url) as checkpoints,
        create_sql_session_store(sqlite_target.url) as sessions,
    ):
        assert shared_transaction(checkpoints, sessions) is None
        shared = create_sql_session_store(checkpoints)
        async with shared:
            assert isinstance(shared, SqliteSessionStore)
            assert shared.database is checkpoints.database
            assert shared_transaction(checkpoints, shared) is not None


@pytest.mark.anyio
async def test_the_connection_is_durable_and_waits_for_locks(sqlite_target: Target) -> None:
    """WAL, ``synchronous=FULL`` (2) and a 5 s busy timeout by default; NORMAL on request."""

    def pragmas(connection: sqlite3.Connection) -> tuple[Any, ...]:
        return tuple(
            connection.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "synchronous", "busy_timeout")
        )

    async with open_sql_stores(sqlite_target.url) as stores:
        database = stores.checkpoints.database  # type: ignore[attr-defined]
        assert await database.run("read pragmas", pragmas) == ("wal", 2, 5000)
    async with open_sql_stores(sqlite_target.url, synchronous="normal") as stores:
        database = stores.checkpoints.database  # type: ignore[attr-defined]
        assert await database.run("read pragmas", pragmas) == ("wal", 1, 5000)
    with pytest.raises(SqlStoreConfigError, match="synchronous"):
        open_sql_stores(sqlite_target.url, synchronous="sometimes")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the engine path is asyncio-only
@pytest.mark.anyio
async def test_files_move_between_the_two_sqlite_paths(sqlite_target: Target) -> None:
    """A file the SQLAlchemy path migrated and wrote opens on the thread-driven path with
    ``create_schema=False``, and the other way round: same tables, same version row."""
    engine_url = aiosqlite_url(sqlite_target.url)
    async with create_sql_checkpoint_store(engine_url) as old:
        await old.save("ns", "k", {"by": "engine"}, version=1)
    async with create_sql_checkpoint_store(sqlite_target.url, create_schema=False) as new:
        record = await new.load("ns", "k")
        assert record is not None
        assert record.value == {"by": "engine"}
        await new.save("ns", "k", {"by": "thread"}, version=2, expected_version=1)
    async with create_sql_checkpoint_store(engine_url, create_schema=False) as old:
        record = await old.load("ns", "k")
        assert record is not None
        assert (record.version, record.value) == (2, {"by": "thread"})


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # migrate() runs on an async engine
@pytest.mark.anyio
async def test_a_fresh_file_is_migrated_like_the_engine_path_migrates_it(
    tmp_path: Path,
) -> None:
    """The thread-driven path creates the same tables, indexes and version row as ``migrate``."""

    def schema(path: Path) -> list[tuple[Any, ...]]:
        connection = sqlite3.connect(path)
        try:
            tables = connection.execute(
                "SELECT type, name, sql FROM sqlite_master ORDER BY name"
            ).fetchall()
            versions = connection.execute(
                "SELECT version, description FROM prism_schema_version"
            ).fetchall()
        finally:
            connection.close()
        return [*tables, *versions]

    async with create_sql_session_store(f"sqlite:///{tmp_path / 'thread.db'}") as store:
        await store.list("s")
    await migrate(f"sqlite+aiosqlite:///{tmp_path / 'engine.db'}")
    assert schema(tmp_path / "thread.db") == schema(tmp_path / "engine.db")


@pytest.mark.anyio
async def test_a_missing_schema_is_refused_until_migrated(sqlite_target: Target) -> None:
    """``create_schema=False`` on an empty file names the migrate command; the failed check
    is not remembered."""
    async with create_sql_checkpoint_store(sqlite_target.url, create_schema=False) as store:
        with pytest.raises(SqlStoreSchemaError, match="prism_store_sql migrate"):
            await store.load("ns", "k")
        async with create_sql_checkpoint_store(sqlite_target.url) as creator:
            await creator.load("ns", "k")
        assert await store.load("ns", "k") is None


@pytest.mark.anyio
async def test_an_in_memory_database_is_shared_by_both_stores() -> None:
    """``sqlite://`` is one in-memory database, shared by the stores of ``open_sql_stores``."""
    async with open_sql_stores("sqlite://") as (checkpoints, sessions):
        async with shared_transaction(checkpoints, sessions) as tx:  # type: ignore[union-attr]
            tx.append(create_session_entry(session_id="m", kind="label", label="x"))
            tx.save("ns", "k", 1, version=1)
        assert len(await sessions.list("m")) == 1
        assert (await checkpoints.load("ns", "k")) is not None


@pytest.mark.anyio
async def test_closing_the_last_store_closes_the_connection(sqlite_target: Target) -> None:
    """The connection stays open while a store uses it; calls on a closed store fail typed."""
    checkpoints = create_sql_checkpoint_store(sqlite_target.url)
    sessions = create_sql_session_store(checkpoints)
    await checkpoints.save("ns", "k", 1, version=1)
    await checkpoints.aclose()
    await checkpoints.aclose()
    assert not sessions.database.closed  # type: ignore[attr-defined]
    assert await sessions.list("s") == []
    await sessions.aclose()
    assert sessions.database.closed  # type: ignore[attr-defined]
    with pytest.raises(CheckpointStoreError, match="closed"):
        await checkpoints.load("ns", "k")
    with pytest.raises(SqlStoreConfigError, match="no SQLAlchemy engine"):
        _ = checkpoints.engine


@pytest.mark.anyio
async def test_concurrent_writers_get_exactly_one_winner(sqlite_target: Target) -> None:
    """Many tasks racing one compare-and-swap on one connection: one wins, the rest conflict."""
    async with create_sql_checkpoint_store(sqlite_target.url) as store:
        await store.save("ns", "k", 0, version=1)
        outcomes: list[str] = []

        async def attempt(i: int) -> None:
            try:
                await store.save("ns", "k", i, version=2, expected_version=1)
                outcomes.append("won")
            except CheckpointConflictError:
                outcomes.append("lost")

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(attempt, i)
        assert sorted(outcomes) == ["lost"] * 7 + ["won"]


@pytest.mark.anyio
async def test_a_cancelled_call_still_completes_its_write(sqlite_target: Target) -> None:
    """Cancelling the caller never abandons a write midway: it is committed or not begun."""
    async with create_sql_checkpoint_store(sqlite_target.url) as store:
        await store.load("ns", "warm")
        with anyio.CancelScope() as scope:
            scope.cancel()
            await store.save("ns", "k", 1, version=1)
        record = await store.load("ns", "k")
        assert record is None or record.version == 1
        saved = await store.save("ns", "k", 2, version=2)
        assert saved.version == 2


@pytest.mark.anyio
async def test_migrate_and_status_run_on_sqlite3_under_either_backend(tmp_path: Path) -> None:
    """``migrate`` and ``read_schema_version`` on a plain ``sqlite:///`` URL need no async
    engine: they work under trio too, and a store opened after finds its schema."""
    url = f"sqlite:///{tmp_path / 'migrated.db'}"
    assert await read_schema_version(url) == 0
    assert await migrate(url, table_prefix="app_") == SCHEMA_VERSION
    assert await migrate(url, table_prefix="app_") == SCHEMA_VERSION
    assert await read_schema_version(url, table_prefix="app_") == SCHEMA_VERSION
    assert await read_schema_version(url) == 0
    async with create_sql_checkpoint_store(url, table_prefix="app_", create_schema=False) as s:
        assert await s.load("ns", "k") is None


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_under_asyncio_one_database_thread_runs_calls_in_order_until_closed(
    sqlite_target: Target,
) -> None:
    """Under asyncio a database runs its calls on its own thread, first come first served
    (calls started together run in the order they were made), and that thread ends once the
    last store on the database is closed."""
    order: list[int] = []
    threads: set[threading.Thread] = set()

    def probe(index: int) -> Any:
        def operation(connection: sqlite3.Connection) -> None:
            threads.add(threading.current_thread())
            order.append(index)

        return operation

    async with open_sql_stores(sqlite_target.url) as opened:
        database = opened.checkpoints.database  # type: ignore[attr-defined]
        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(database.run, "probe", probe(index))
        assert order == list(range(20))
        saved = await opened.checkpoints.save("ns", "k", {"n": 1}, version=1)
        assert saved.version == 1
    assert len(threads) == 1
    (thread,) = threads
    assert thread is not threading.current_thread()
    thread.join(timeout=5)
    assert not thread.is_alive()


def _save_in_child(store: Any, results: Any) -> None:
    async def save() -> int:
        record = await store.save("ns", "child", {"n": 2}, version=1)
        return int(record.version)

    results.put(asyncio.run(save()))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_forked_child_serves_the_calls_of_a_store_opened_before_the_fork(
    sqlite_target: Target,
) -> None:
    """A prefork worker inherits stores whose database thread is already running in the
    parent; the child has no copy of that thread, so it starts its own and its calls finish."""
    context = multiprocessing.get_context("fork")
    async with open_sql_stores(sqlite_target.url) as opened:
        await opened.checkpoints.save("ns", "parent", {"n": 1}, version=1)
        results = context.Queue()
        child = context.Process(target=_save_in_child, args=(opened.checkpoints, results))
        child.start()
        await anyio.to_thread.run_sync(child.join, 20)
        assert child.exitcode == 0
        assert results.get(timeout=1) == 1
        record = await opened.checkpoints.load("ns", "child")
        assert record is not None
        assert record.value == {"n": 2}


@pytest.mark.anyio
async def test_statements_compile_on_first_use(sqlite_target: Target) -> None:
    """Opening the stores builds and compiles no statement: the hot statements are stored
    text (see prism_store_sql._sqlite_text), with the store's prefix in. (A prefix of this
    test's own: statements are shared by every store on a prefix.)"""
    prefix = f"t{uuid.uuid4().hex[:12]}_"
    async with open_sql_stores(sqlite_target.url, table_prefix=prefix) as opened:
        checkpoints = opened.checkpoints
        assert isinstance(checkpoints, SqliteCheckpointStore)
        statements = [
            value
            for store in (checkpoints, opened.sessions)
            for value in vars(store).values()
            if isinstance(value, CompiledStatement)
        ]
        assert len(statements) >= 10
        assert all(statement._statement is None for statement in statements)
        assert all(prefix in statement.text for statement in statements)
        assert await checkpoints.load("ns", "absent") is None
        assert "SELECT" in checkpoints._load.text
        assert checkpoints._load.text is checkpoints._load.text


@pytest.mark.anyio
async def test_stores_opened_again_on_a_prefix_reuse_its_compiled_statements(
    tmp_path: Path,
) -> None:
    """Stores opened again on the same prefix (another file too) share the tables, the
    statements and their compiled text: nothing is built or compiled a second time."""
    prefix = f"t{uuid.uuid4().hex[:12]}_"
    first = open_sql_stores(f"sqlite:///{tmp_path / 'a.db'}", table_prefix=prefix)
    async with first:
        assert await first.checkpoints.load("ns", "absent") is None
    second = open_sql_stores(f"sqlite:///{tmp_path / 'b.db'}", table_prefix=prefix)
    async with second:
        one, two = first.checkpoints, second.checkpoints
        assert isinstance(one, SqliteCheckpointStore)
        assert isinstance(two, SqliteCheckpointStore)
        assert two.tables is one.tables
        assert two._load is one._load
        assert two._load._text is not None  # compiled by the first store's load
        assert second.sessions._branch_tail is first.sessions._branch_tail  # type: ignore[attr-defined]
        assert await two.load("ns", "absent") is None
    other = open_sql_stores(f"sqlite:///{tmp_path / 'c.db'}", table_prefix=f"{prefix}x_")
    async with other:
        assert other.checkpoints.tables is not one.tables
        assert other.checkpoints._load is not one._load  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_opening_checks_the_schema_with_one_read(sqlite_target: Target) -> None:
    """Opening a migrated file reads the version row once, by its key, and never looks
    through sqlite_master."""
    await migrate(sqlite_target.url)
    statements: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = real_connect(*args, **kwargs)
        connection.set_trace_callback(statements.append)
        return connection

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        async with open_sql_stores(sqlite_target.url) as stores:
            assert await stores.checkpoints.load("ns", "absent") is None
    finally:
        sqlite3.connect = real_connect  # type: ignore[assignment]
    assert not any("sqlite_master" in s for s in statements)
    assert [s for s in statements if "schema_version" in s] == [
        'SELECT max(version) FROM "prism_schema_version"'
    ]


@pytest.mark.parametrize(
    "url",
    ["sqlite:///runs.db", "sqlite:////tmp/runs.db", "SQLite:///a b.db", "sqlite:///:memory:"],
)
def test_a_plain_sqlite_url_read_directly_is_what_sqlalchemy_parses(url: str) -> None:
    """The common ``sqlite:///path`` form is read without SQLAlchemy's parser: the same path,
    and the same URL once it is needed; other forms go through the parser."""
    from sqlalchemy.engine import make_url

    from prism_store_sql._sqlite import sqlite_path

    target = sqlite_path(url)
    assert target is not None
    path, given = target
    assert path == make_url(url).database
    database = SqliteDatabase(path, given, "prism_", create_schema=True)
    assert database.url == make_url(url)
    assert sqlite_path("sqlite:///x.db?mode=ro") == ("x.db", make_url("sqlite:///x.db?mode=ro"))
    assert sqlite_path("sqlite+aiosqlite:///x.db") is None
    assert sqlite_path("sqlite://")[0] == ":memory:"  # type: ignore[index]


@pytest.mark.anyio
async def test_a_ready_file_is_opened_on_the_calling_thread(sqlite_target: Target) -> None:
    """On a file already in WAL mode with the current schema, the first read opens the
    connection and reads on the calling thread, no hand-off; the first write then starts the
    writer thread. An unmigrated file is opened (and migrated) by the hand-off instead."""
    await migrate(sqlite_target.url)
    async with open_sql_stores(sqlite_target.url) as opened:
        checkpoints = opened.checkpoints
        assert isinstance(checkpoints, SqliteCheckpointStore)
        tracer = Tracer(checkpoints.database)
        assert await checkpoints.load("ns", "absent") is None
        assert (tracer.handoffs, tracer.inline) == (0, 1)
        await checkpoints.save("ns", "k", {"v": 1}, version=1)
        assert tracer.handoffs == 1
        assert (await checkpoints.load("ns", "k")).value == {"v": 1}  # type: ignore[union-attr]

        def pragmas(connection: sqlite3.Connection) -> tuple[Any, ...]:
            return tuple(
                connection.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "busy_timeout")
            )

        assert await checkpoints.database.run("read the pragmas", pragmas) == ("wal", 2, 5000)
