"""Group commit on PostgreSQL: writes queued behind a statement in flight share the next
one; a refusal fails its own write only; a failed statement fails every write of its group,
none of them written; loads queued behind a load share one query.

A write is held in flight by a row lock another connection holds; the writes started while
it waits queue behind it. Statements are counted as sent to asyncpg.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from prism_core.errors import CheckpointConflictError
from prism_core.records import (
    SessionConflictError,
    SessionEntryNotFoundError,
    create_session_entry,
)
from prism_core.stores import (
    CheckpointStamp,
    CheckpointStore,
    CheckpointStoreError,
    CheckpointStoreUnavailableError,
)
from prism_core.testing import CheckpointStampConformance
from prism_store_sql import (
    SqlStoreConfigError,
    SqlStores,
    create_sql_checkpoint_store,
    open_sql_stores,
)
from prism_store_sql._engine import async_url

from .conftest import PostgresServer, Target, aiosqlite_url, sent_statements

pytestmark = pytest.mark.anyio

NS = "group"
#: What only the group statements' text holds: the write's and the load's arrays.
GROUP_WRITE = "AS m(op, ns, k, owner"
GROUP_LOAD = "AS q(ns, k, owner)"

Write = Callable[[], Awaitable[Any]]


@pytest.fixture
def target(postgres_server: PostgresServer) -> Target:
    """A fresh prefix on the shared PostgreSQL server."""
    return postgres_server.fresh()


@pytest.fixture
async def admin(target: Target) -> AsyncIterator[AsyncEngine]:
    """A connection pool of the test's own, beside the stores'."""
    engine = create_async_engine(async_url(target.url))
    try:
        yield engine
    finally:
        await engine.dispose()


@pytest.fixture
async def stores(target: Target) -> AsyncIterator[SqlStores]:
    """Both stores on the fresh prefix, the tables created, one record to hold (``hold``)."""
    async with open_sql_stores(target.url, table_prefix=target.prefix) as opened:
        await opened.checkpoints.save(NS, "hold", {"n": 0}, version=1, expected_version=0)
        yield opened


async def _waiting_for_locks(admin: AsyncEngine, target: Target, count: int) -> None:
    """Return once ``count`` statements on the prefix's tables wait for a lock."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND strpos(query, :prefix) > 0"
    )
    with anyio.fail_after(10):
        while True:
            async with admin.connect() as connection:
                waiting = (await connection.execute(query, {"prefix": target.prefix})).scalar()
            if waiting is not None and waiting >= count:
                return
            await anyio.sleep(0.01)


async def _lock(connection: AsyncConnection, target: Target, key: str) -> None:
    """Hold the row lock of checkpoint ``key`` in the transaction open on ``connection``."""
    await connection.execute(
        sa.text(
            f'SELECT version FROM "{target.prefix}checkpoints" '
            "WHERE namespace = :ns AND key = :k FOR UPDATE"
        ),
        {"ns": NS, "k": key},
    )


async def _terminate_waiting(admin: AsyncEngine, target: Target, marker: str) -> None:
    """Terminate the one backend whose statement on the prefix's tables (holding
    ``marker``) waits for a lock."""
    waiting = sa.text(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND strpos(query, :marker) > 0 AND strpos(query, :prefix) > 0"
    )
    with anyio.fail_after(10):
        while True:
            async with admin.connect() as connection:
                found = await connection.execute(
                    waiting, {"marker": marker, "prefix": target.prefix}
                )
                pids = found.all()
            if pids:
                break
            await anyio.sleep(0.01)
    assert len(pids) == 1
    async with admin.connect() as connection:
        await connection.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pids[0][0]})


async def _behind_a_held_write(
    stores: SqlStores, admin: AsyncEngine, target: Target, *writes: Write
) -> tuple[Any, list[Any]]:
    """Start ``writes`` while a save of ``hold`` waits for its row lock, then let it go;
    the held save's outcome and each write's result or exception, in order."""
    outcomes: list[Any] = [None] * len(writes)
    held: list[Any] = [None]

    async def one(index: int) -> None:
        try:
            outcomes[index] = await writes[index]()
        except Exception as exc:
            outcomes[index] = exc

    async def hold() -> None:
        held[0] = await stores.checkpoints.save(NS, "hold", {"n": 1}, version=2)

    async with admin.connect() as holder:
        await _lock(holder, target, "hold")
        async with anyio.create_task_group() as group:
            group.start_soon(hold)
            await _waiting_for_locks(admin, target, 1)
            for index in range(len(writes)):
                group.start_soon(one, index)
            await anyio.sleep(0.05)  # every write queued behind the held one
            await holder.rollback()
    return held[0], outcomes


def _groups(statements: list[str]) -> int:
    return sum(1 for s in statements if GROUP_WRITE in s)


def _turn(stores: SqlStores, key: str, *entries: Any, version: int = 1, **save: Any) -> Write:
    """A turn's shared commit: the save of ``key`` then ``entries`` (one statement alone)."""

    async def commit() -> Any:
        async with stores.transaction() as tx:
            tx.save(NS, key, {"key": key, "version": version}, version=version, **save)
            for entry in entries:
                tx.append(entry)
        return tx.records[0]

    return commit


def _save(stores: SqlStores, key: str, version: int, **save: Any) -> Write:
    return lambda: stores.checkpoints.save(
        NS, key, {"key": key, "v": version}, version=version, **save
    )


async def test_writes_queued_behind_a_commit_share_one_statement(
    stores: SqlStores, admin: AsyncEngine, target: Target
) -> None:
    """Turn commits and plain saves of every kind (create, update, upsert) queued behind a
    statement in flight are written by one statement, each as it would be alone."""
    checkpoints, sessions = stores
    await checkpoints.save(NS, "u", {"v": 1}, version=1, expected_version=0)
    await checkpoints.save(NS, "t-old", {"v": 1}, version=1, expected_version=0)
    root = create_session_entry(session_id="old", kind="label", label="root")
    await sessions.append(root)
    turns = [
        [create_session_entry(session_id=f"s{i}", kind="label", label=f"{i}")] for i in range(3)
    ]
    first = create_session_entry(session_id="old", kind="label", label="a", parent_id=root.id)
    second = create_session_entry(session_id="old", kind="label", label="b", parent_id=first.id)
    writes = [
        *(_turn(stores, f"t{i}", *turns[i], expected_version=0) for i in range(3)),
        _turn(stores, "t-old", first, second, version=2, expected_version=1),
        _save(stores, "c", 1, expected_version=0),
        _save(stores, "u", 2, expected_version=1),
        _save(stores, "s", 5),
    ]
    with sent_statements(checkpoints.engine) as statements:
        held, outcomes = await _behind_a_held_write(stores, admin, target, *writes)
    assert held.version == 2
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    assert [o.version for o in outcomes] == [1, 1, 1, 2, 1, 2, 5]
    # The held save alone, then one statement for all seven queued behind it.
    assert len(statements) == 2
    assert _groups(statements) == 1
    for i in range(3):
        assert await sessions.list(f"s{i}") == turns[i]
        record = await checkpoints.load(NS, f"t{i}")
        assert record is not None
        assert record.value == {"key": f"t{i}", "version": 1}
        assert record.created_at == outcomes[i].created_at
    assert await sessions.list("old") == [root, first, second]
    for key, version in (("t-old", 2), ("c", 1), ("u", 2), ("s", 5)):
        record = await checkpoints.load(NS, key)
        assert record is not None
        assert record.version == version
    # The heads moved: appends expecting the group's last entries as leaves go on.
    after = create_session_entry(session_id="old", kind="label", label="c", parent_id=second.id)
    await sessions.append(after, expected_leaf_id=second.id)
    assert await sessions.read_branch_path("old", after.id) == [root, first, second, after]
    on_s0 = create_session_entry(session_id="s0", kind="label", label="n", parent_id=turns[0][0].id)
    await sessions.append(on_s0, expected_leaf_id=turns[0][0].id)


async def test_a_refused_write_fails_alone(
    stores: SqlStores, admin: AsyncEngine, target: Target
) -> None:
    """A stale version, a lower fencing token, another owner and a taken key each refuse
    their own write (nothing of it written, a refused turn's entries neither) in the same
    statement that writes the others."""
    checkpoints, sessions = stores
    await checkpoints.save(NS, "stale", {"v": 1}, version=3, expected_version=0)
    await checkpoints.save(NS, "fenced", {"v": 1}, version=1, fencing_token=9)
    await checkpoints.save(NS, "owned", {"v": 1}, version=1, ownership={"tenant": "a"})
    await checkpoints.save(NS, "taken", {"v": 1}, version=1, expected_version=0)
    lost = create_session_entry(session_id="lost", kind="label", label="x")
    kept = create_session_entry(session_id="kept", kind="label", label="y")
    writes = [
        _turn(stores, "stale", lost, version=4, expected_version=2),
        _save(stores, "fenced", 2, fencing_token=3),
        _save(stores, "owned", 2, ownership={"tenant": "b"}),
        _save(stores, "taken", 1, expected_version=0),
        _turn(stores, "fine", kept, expected_version=0),
        _save(stores, "fine-2", 1),
    ]
    with sent_statements(checkpoints.engine) as statements:
        _, outcomes = await _behind_a_held_write(stores, admin, target, *writes)
    assert [type(o) for o in outcomes[:4]] == [CheckpointConflictError] * 4
    assert not isinstance(outcomes[4], Exception)
    assert not isinstance(outcomes[5], Exception)
    # Refusals of the compare-and-swap need no second try: one group statement.
    assert len(statements) == 2
    assert _groups(statements) == 1
    assert (await checkpoints.load(NS, "stale")).version == 3  # type: ignore[union-attr]
    assert (await checkpoints.load(NS, "fenced")).version == 1  # type: ignore[union-attr]
    owned = await checkpoints.load(NS, "owned", ownership={"tenant": "a"})
    assert owned is not None
    assert owned.version == 1
    assert await checkpoints.load(NS, "owned", ownership={"tenant": "b"}) is None
    assert (await checkpoints.load(NS, "taken")).value == {"v": 1}  # type: ignore[union-attr]
    assert await sessions.list("lost") == []
    assert await sessions.list("kept") == [kept]
    assert (await checkpoints.load(NS, "fine-2")).version == 1  # type: ignore[union-attr]


async def test_a_statement_refused_for_one_entry_is_written_write_by_write(
    stores: SqlStores, admin: AsyncEngine, target: Target
) -> None:
    """A taken entry id or a parent outside the session fails the group's statement; its
    writes then run one at a time, so each refusal is its own caller's, with the error it
    gets alone, and the other writes are committed."""
    checkpoints, sessions = stores
    root = create_session_entry(session_id="a", kind="label", label="root")
    await sessions.append(root)
    taken = create_session_entry(session_id="b", kind="label", label="x", id=root.id)
    foreign = create_session_entry(session_id="c", kind="label", label="y", parent_id=root.id)
    fine = [create_session_entry(session_id=f"ok{i}", kind="label", label="z") for i in range(2)]
    writes = [
        _turn(stores, "fine0", fine[0], expected_version=0),
        _turn(stores, "taken", taken, expected_version=0),
        _turn(stores, "foreign", foreign, expected_version=0),
        _turn(stores, "fine1", fine[1], expected_version=0),
        _save(stores, "plain", 1, expected_version=0),
    ]
    with sent_statements(checkpoints.engine) as statements:
        _, outcomes = await _behind_a_held_write(stores, admin, target, *writes)
    assert isinstance(outcomes[1], SessionConflictError)
    assert isinstance(outcomes[2], SessionEntryNotFoundError)
    for index in (0, 3, 4):
        assert not isinstance(outcomes[index], Exception), outcomes[index]
    assert _groups(statements) == 1  # refused, then each write alone
    assert await checkpoints.load(NS, "taken") is None
    assert await checkpoints.load(NS, "foreign") is None
    assert await sessions.list("b") == []
    assert await sessions.list("c") == []
    for i in range(2):
        assert await sessions.list(f"ok{i}") == [fine[i]]
        assert await checkpoints.load(NS, f"fine{i}") is not None
    assert await checkpoints.load(NS, "plain") is not None


async def _fail_commits(admin: AsyncEngine, target: Target, sqlstate: str) -> None:
    """Make every commit that wrote a checkpoint row of ``NS`` other than ``hold`` fail with
    ``sqlstate`` (a deferred constraint trigger: checked at commit, after the statement)."""
    table = f'"{target.prefix}checkpoints"'
    function = f'"{target.prefix}fail_commit"'
    async with admin.begin() as connection:
        await connection.execute(
            sa.text(
                f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF NEW.key <> 'hold' THEN RAISE EXCEPTION 'commit refused' "
                f"USING ERRCODE = '{sqlstate}'; END IF; RETURN NULL; END $$"
            )
        )
        await connection.execute(
            sa.text(
                f'CREATE CONSTRAINT TRIGGER "{target.prefix}fail_commit" AFTER INSERT OR UPDATE '
                f"ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                f"EXECUTE FUNCTION {function}()"
            )
        )


async def _stop_failing(admin: AsyncEngine, target: Target) -> None:
    async with admin.begin() as connection:
        await connection.execute(sa.text(f'DROP FUNCTION "{target.prefix}fail_commit"() CASCADE'))


@pytest.mark.parametrize(
    ("sqlstate", "error"),
    [("40001", CheckpointStoreUnavailableError), ("53100", CheckpointStoreError)],
)
async def test_a_failed_commit_fails_every_write_of_its_group(
    stores: SqlStores,
    admin: AsyncEngine,
    target: Target,
    sqlstate: str,
    error: type[CheckpointStoreError],
) -> None:
    """A commit that fails fails each write of the group with the typed error its own
    commit would raise, naming its own action; none of them is written. A transient failure
    (a serialization failure) fails them at once; any other failure (a full disk) is met by
    each write again alone, as it would be without group commit."""
    checkpoints, sessions = stores
    entry = create_session_entry(session_id="t", kind="label", label="x")
    writes = [
        _save(stores, "a", 1, expected_version=0),
        _turn(stores, "turn", entry, expected_version=0),
        _save(stores, "b", 1),
    ]
    await _fail_commits(admin, target, sqlstate)
    try:
        with sent_statements(checkpoints.engine) as statements:
            held, outcomes = await _behind_a_held_write(stores, admin, target, *writes)
    finally:
        await _stop_failing(admin, target)
    assert held.version == 2
    assert all(type(o) is error for o in outcomes), outcomes
    assert "save a checkpoint" in str(outcomes[0])
    assert "commit session entries and a checkpoint" in str(outcomes[1])
    assert "commit refused" in str(outcomes[2])
    assert _groups(statements) == 1
    assert len(statements) == (2 if error is CheckpointStoreUnavailableError else 5)
    for key in ("a", "turn", "b"):
        assert await checkpoints.load(NS, key) is None
    assert await sessions.list("t") == []
    # The stores go on.
    await _save(stores, "a", 1, expected_version=0)()
    assert (await checkpoints.load(NS, "a")).version == 1  # type: ignore[union-attr]


async def test_a_lost_connection_fails_every_write_of_its_group(
    stores: SqlStores, admin: AsyncEngine, target: Target
) -> None:
    """The group's connection killed while its statement waits for a lock: every write of
    the group gets the transient error, none is written, and the connection is dropped."""
    checkpoints, sessions = stores
    await checkpoints.save(NS, "x", {"v": 0}, version=1, expected_version=0)
    entry = create_session_entry(session_id="t", kind="label", label="x")
    writes = [
        _save(stores, "a", 1, expected_version=0),
        _turn(stores, "turn", entry, expected_version=0),
        _save(stores, "x", 2, expected_version=1),  # waits for the lock held below
    ]
    outcomes: list[Any] = []

    async def run() -> None:
        outcomes.extend((await _behind_a_held_write(stores, admin, target, *writes))[1])

    async with admin.connect() as other:
        await _lock(other, target, "x")
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await _terminate_waiting(admin, target, GROUP_WRITE)
        await other.rollback()
    assert all(type(o) is CheckpointStoreUnavailableError for o in outcomes), outcomes
    assert await checkpoints.load(NS, "a") is None
    assert await checkpoints.load(NS, "turn") is None
    assert (await checkpoints.load(NS, "x")).version == 1  # type: ignore[union-attr]
    assert await sessions.list("t") == []
    assert checkpoints.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    await _save(stores, "a", 1, expected_version=0)()


async def test_writes_on_one_row_never_share_a_group_and_keep_their_order(
    stores: SqlStores, admin: AsyncEngine, target: Target
) -> None:
    """Two saves of one key and two turns on one session, queued together, go in separate
    statements, in the order they were made."""
    checkpoints, sessions = stores
    first = create_session_entry(session_id="one", kind="label", label="1")
    second = create_session_entry(session_id="one", kind="label", label="2", parent_id=first.id)
    writes = [
        _save(stores, "k", 1, expected_version=0),
        _save(stores, "k", 2, expected_version=1),
        _turn(stores, "r1", first, expected_version=0),
        _turn(stores, "r2", second, expected_version=0),
    ]
    with sent_statements(checkpoints.engine) as statements:
        _, outcomes = await _behind_a_held_write(stores, admin, target, *writes)
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    # The held save; k=1 with r1; k=2 with r2.
    assert len(statements) == 3
    assert _groups(statements) == 2
    assert (await checkpoints.load(NS, "k")).version == 2  # type: ignore[union-attr]
    assert await sessions.list("one") == [first, second]


async def test_a_group_takes_at_most_group_commit_writes(
    target: Target, admin: AsyncEngine
) -> None:
    """``group_commit=2``: five queued writes go in three statements (2, 2, 1)."""
    async with open_sql_stores(target.url, table_prefix=target.prefix, group_commit=2) as stores:
        await stores.checkpoints.save(NS, "hold", {"n": 0}, version=1, expected_version=0)
        writes = [_save(stores, f"k{i}", 1, expected_version=0) for i in range(5)]
        with sent_statements(stores.checkpoints.engine) as statements:
            _, outcomes = await _behind_a_held_write(stores, admin, target, *writes)
        assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
        assert len(statements) == 4
        assert _groups(statements) == 2
        for i in range(5):
            assert await stores.checkpoints.load(NS, f"k{i}") is not None


async def test_group_commit_one_sends_each_write_alone(target: Target, admin: AsyncEngine) -> None:
    async with open_sql_stores(target.url, table_prefix=target.prefix, group_commit=1) as stores:
        await stores.checkpoints.save(NS, "hold", {"n": 0}, version=1, expected_version=0)
        entry = create_session_entry(session_id="t", kind="label", label="x")
        writes = [
            *(_save(stores, f"k{i}", 1, expected_version=0) for i in range(3)),
            _turn(stores, "turn", entry, expected_version=0),
        ]
        with sent_statements(stores.checkpoints.engine) as statements:
            _, outcomes = await _behind_a_held_write(stores, admin, target, *writes)
        assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
        assert len(statements) == 5
        assert _groups(statements) == 0
        assert await stores.sessions.list("t") == [entry]


async def test_a_write_alone_is_its_own_statement(stores: SqlStores) -> None:
    """With nothing in flight a write goes at once, as its own statement (no group)."""
    checkpoints, sessions = stores
    entry = create_session_entry(session_id="t", kind="label", label="x")
    with sent_statements(checkpoints.engine) as statements:
        await _turn(stores, "turn", entry, expected_version=0)()
        await _save(stores, "k", 1, expected_version=0)()
        await checkpoints.load(NS, "k")
    assert len(statements) == 3
    assert not [s for s in statements if GROUP_WRITE in s or GROUP_LOAD in s]
    assert await sessions.list("t") == [entry]


@pytest.mark.parametrize("bad", [0, -1, 1025, 2.5, "8", True])
def test_group_commit_bound_is_checked(target: Target, bad: Any) -> None:
    with pytest.raises(SqlStoreConfigError, match="group_commit"):
        open_sql_stores(target.url, table_prefix=target.prefix, group_commit=bad)


async def test_loads_queued_behind_a_load_share_one_query(
    stores: SqlStores, admin: AsyncEngine, target: Target
) -> None:
    """Loads and stamp reads made while a load is in flight (here held by a table lock) are
    answered by one query, each with what it reads alone: its record (or stamp), or ``None``
    for a missing key or another owner's record."""
    checkpoints, _ = stores
    await checkpoints.save(NS, "a", {"v": "a"}, version=1)
    await checkpoints.save(NS, "b", {"v": "b"}, version=3, ownership={"tenant": "t"})
    alone = {
        "a": await checkpoints.load(NS, "a"),
        "b": await checkpoints.load(NS, "b", ownership={"tenant": "t"}),
    }
    stamps = checkpoints.load_stamp  # type: ignore[attr-defined]
    loads: list[Callable[[], Awaitable[Any]]] = [
        lambda: checkpoints.load(NS, "a"),
        lambda: checkpoints.load(NS, "b", ownership={"tenant": "t"}),
        lambda: checkpoints.load(NS, "b"),  # another owner's: None
        lambda: checkpoints.load(NS, "missing"),
        lambda: checkpoints.load(NS, "a"),  # the same load twice
        lambda: stamps(NS, "a"),
        lambda: stamps(NS, "b", ownership={"tenant": "t"}),
        lambda: stamps(NS, "b"),
    ]
    results: list[Any] = [None] * len(loads)

    async def one(index: int) -> None:
        results[index] = await loads[index]()

    with sent_statements(checkpoints.engine) as statements:
        async with admin.connect() as holder:
            await holder.execute(
                sa.text(f'LOCK TABLE "{target.prefix}checkpoints" IN ACCESS EXCLUSIVE MODE')
            )
            async with anyio.create_task_group() as group:
                group.start_soon(checkpoints.load, NS, "hold")
                await _waiting_for_locks(admin, target, 1)
                for index in range(len(loads)):
                    group.start_soon(one, index)
                await anyio.sleep(0.05)
                await holder.rollback()
    assert results == [alone["a"], alone["b"], None, None, alone["a"], (1, None), (3, None), None]
    assert isinstance(results[5], CheckpointStamp)
    assert len(statements) == 2
    assert sum(1 for s in statements if GROUP_LOAD in s) == 1


async def test_a_cancelled_queued_write_is_never_written(
    stores: SqlStores, admin: AsyncEngine, target: Target
) -> None:
    """A caller cancelled while its write waits in the queue writes nothing; the write
    queued with it is committed, also when the caller of the write in flight is cancelled
    (its connection is dropped, as without group commit)."""
    checkpoints, _ = stores
    outcomes: dict[str, Any] = {}

    async def write(key: str) -> None:
        outcomes[key] = await checkpoints.save(NS, key, {"k": key}, version=1, expected_version=0)

    async def held_write() -> None:
        outcomes["hold"] = await checkpoints.save(NS, "hold", {}, version=2)

    async def cancellable(scope: anyio.CancelScope, call: Callable[[], Awaitable[Any]]) -> None:
        with scope:
            await call()

    held, gone = anyio.CancelScope(), anyio.CancelScope()
    async with admin.connect() as holder:
        await _lock(holder, target, "hold")
        async with anyio.create_task_group() as group:
            group.start_soon(cancellable, held, held_write)
            await _waiting_for_locks(admin, target, 1)
            group.start_soon(cancellable, gone, lambda: write("gone"))
            group.start_soon(write, "kept")
            await anyio.sleep(0.05)
            gone.cancel()
            held.cancel()
            await anyio.sleep(0.05)
            await holder.rollback()
    assert set(outcomes) == {"kept"}
    assert await checkpoints.load(NS, "gone") is None
    assert await checkpoints.load(NS, "kept") is not None
    assert checkpoints.engine.pool.checkedout() == 0  # type: ignore[attr-defined]


class TestPostgresStamp(CheckpointStampConformance):
    """The stamp read on PostgreSQL (asyncpg, beside the batched loads)."""

    @pytest.fixture
    async def checkpoint_store(self, target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on a fresh prefix."""
        async with create_sql_checkpoint_store(target.url, table_prefix=target.prefix) as store:
            yield store


class TestAiosqliteStamp(CheckpointStampConformance):
    """The stamp read on the engine stores over SQLAlchemy (aiosqlite)."""

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file."""
        async with create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url)) as store:
            yield store


async def test_a_lost_connection_fails_every_load_of_its_query(
    stores: SqlStores, admin: AsyncEngine, target: Target
) -> None:
    """Loads queued behind a load whose connection is lost share the next query; that
    connection lost too, each load gets the transient error naming its own action."""
    checkpoints, _ = stores
    outcomes: dict[str, Any] = {}

    async def read(name: str, call: Callable[[], Awaitable[Any]]) -> None:
        try:
            outcomes[name] = await call()
        except Exception as exc:
            outcomes[name] = exc

    async with admin.connect() as holder:
        await holder.execute(
            sa.text(f'LOCK TABLE "{target.prefix}checkpoints" IN ACCESS EXCLUSIVE MODE')
        )
        async with anyio.create_task_group() as group:
            group.start_soon(read, "first", lambda: checkpoints.load(NS, "hold"))
            await _waiting_for_locks(admin, target, 1)
            group.start_soon(read, "load", lambda: checkpoints.load(NS, "hold"))
            stamp = checkpoints.load_stamp  # type: ignore[attr-defined]
            group.start_soon(read, "stamp", lambda: stamp(NS, "hold"))
            await anyio.sleep(0.05)
            await _terminate_waiting(admin, target, "WHERE")  # the first load, alone
            await _terminate_waiting(admin, target, GROUP_LOAD)  # then the two queued behind it
        await holder.rollback()
    assert all(type(o) is CheckpointStoreUnavailableError for o in outcomes.values()), outcomes
    assert "load a checkpoint" in str(outcomes["load"])
    assert "read a checkpoint's version" in str(outcomes["stamp"])
    assert checkpoints.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    record = await checkpoints.load(NS, "hold")
    assert record is not None
    assert record.version == 1
