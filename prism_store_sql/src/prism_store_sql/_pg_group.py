"""Group commit on PostgreSQL: the writes (and checkpoint loads) of concurrent runs on one
store, sent together while one is in flight.

A checkpoint store on asyncpg keeps two lanes, one for writes (checkpoint saves, and the
one-statement commits of durable turns) and one for checkpoint loads. A call that finds its
lane idle runs at once, alone, exactly the statement it runs without group commit (so one
run alone waits for nobody). A call that finds a statement of its lane in flight waits in
the lane's queue; when that statement is answered, everything queued (up to the bound,
``group_commit=``) goes as one statement (:mod:`._pg_group_sql`): one round trip, and for
writes one commit, for the whole group. Each caller waits for its own outcome and gets
exactly what its statement alone would have given:

- a refused compare-and-swap (a stale version, a lower fencing token, another owner) writes
  nothing of its own and fails only its caller (its save row is simply not written);
- a group the server refuses (a taken entry id, a foreign parent, any error it answers
  that is not transient) wrote nothing: its writes are run again one at a time, each alone,
  so each refusal is its own caller's;
- a failure of the statement itself (the connection lost, a timeout, a deadlock, a failed
  commit: anything transient, or the connection left unusable) fails every caller of the
  group with the typed error its own statement would have raised
  (``CheckpointStoreUnavailableError`` or ``CheckpointStoreError``); none of it was written.

Two writes never share a group when they touch the same row (the same checkpoint key, or
the same session's head): the later one waits for the next group, in order. A caller
cancelled while queued is taken out of the queue and never written; one cancelled while
its group is in flight leaves the group to finish (its write may land, as a cancelled
statement's may). The queue is drained by a task of its own, never by a caller, so no
caller's cancellation leaves the others waiting.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import sqlalchemy as sa

from prism_core.stores import CheckpointStoreError

from ._direct import DirectPostgres, StatementRefused
from ._engine import describe
from ._pg_group_sql import SAVE_OPS, group_statements, load_params, write_params
from ._schema import Tables

__all__ = ("GroupCommit", "GroupedLoad", "GroupedWrite", "save_op")

Row = Sequence[Any] | None
C = TypeVar("C", bound="_Call")


def save_op(expected_version: int | None) -> str:
    """The group op code of a save with ``expected_version``."""
    if expected_version is None:
        return SAVE_OPS["upsert"]
    return SAVE_OPS["create"] if expected_version == 0 else SAVE_OPS["update"]


class _Call:
    """One caller's statement: what it runs alone, and its outcome once queued."""

    __slots__ = ("action", "future", "params", "statement")

    def __init__(self, action: str, statement: sa.Executable, params: Mapping[str, Any]) -> None:
        self.action = action
        self.statement = statement
        self.params = params
        self.future: asyncio.Future[Row] | None = None


class GroupedWrite(_Call):
    """A save (op code from :func:`save_op`, its ``save_params``) with the appends of its
    turn (``append_params`` each; none for a plain save), and ``statement``/``params``, the
    one statement that writes it alone."""

    __slots__ = ("appends", "key", "op", "refuse_integrity", "save", "session")

    def __init__(
        self,
        action: str,
        statement: sa.Executable,
        params: Mapping[str, Any],
        *,
        op: str,
        save: Mapping[str, Any],
        appends: Sequence[Mapping[str, Any]] = (),
        refuse_integrity: bool = False,
    ) -> None:
        super().__init__(action, statement, params)
        self.op = op
        self.save = save
        self.appends = appends
        self.refuse_integrity = refuse_integrity
        self.key = (save["ns"], save["k"])
        self.session: str | None = appends[0]["session"] if appends else None


class GroupedLoad(_Call):
    """A checkpoint load (``params``: ``ns``, ``k``, ``owner_scope``): of the whole row, or
    with ``stamp`` of its version and fencing token alone."""

    __slots__ = ("stamp",)

    def __init__(
        self,
        action: str,
        statement: sa.Executable,
        params: Mapping[str, Any],
        *,
        stamp: bool = False,
    ) -> None:
        super().__init__(action, statement, params)
        self.stamp = stamp


class _Lane(Generic[C]):
    """One kind of call: at most one statement in flight, the rest queued for the next."""

    def __init__(
        self,
        bound: int,
        alone: Callable[[C], Awaitable[Row]],
        together: Callable[[list[C]], Awaitable[None]],
        separate: Callable[[list[C]], list[C]],
    ) -> None:
        self._bound = bound
        self._alone = alone
        self._together = together
        self._separate = separate
        self._busy = False
        self._queue: deque[C] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, call: C) -> Row:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # First use, or a store used again on a new event loop: nothing in flight on the
            # old one will ever answer here.
            self._loop, self._busy, self._drainer = loop, False, None
            self._queue.clear()
        future: asyncio.Future[Row] = loop.create_future()
        call.future = future
        if not self._busy:
            self._busy = True
            try:
                # One pass of the event loop: the tasks already runnable run a step, and any
                # call they make joins this one instead of waiting for it.
                await asyncio.sleep(0)
            except BaseException:
                self._next(loop)
                raise
            if not self._queue:
                try:
                    return await self._alone(call)
                finally:
                    self._next(loop)
            self._queue.appendleft(call)
            self._drainer = loop.create_task(self._drain())
        else:
            self._queue.append(call)
        try:
            return await future
        except asyncio.CancelledError:
            # Still queued: never sent. Taken: its group goes on without its caller.
            if call in self._queue:
                self._queue.remove(call)
            raise

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._queue and self._loop is loop:
            self._drainer = loop.create_task(self._drain())
        else:
            self._busy = False

    async def _drain(self) -> None:
        group: list[C] = []
        try:
            while self._queue:
                group = self._take()
                if len(group) == 1:
                    await _settle(group[0], self._alone)
                elif group:
                    try:
                        await self._together(group)
                    except Exception as error:  # pragma: no cover - each outcome is set
                        for call in group:
                            _fail(call, error)
                group = []
        except BaseException:
            # Cancelled (the event loop is shutting down): no caller may wait on.
            for call in (*group, *self._queue):
                if call.future is not None:
                    call.future.cancel()
            self._queue.clear()
            raise
        finally:
            self._busy = False
            self._drainer = None

    def _take(self) -> list[C]:
        queue = self._queue
        waiting = [c for c in queue if c.future is not None and not c.future.done()]
        queue.clear()
        group = self._separate(waiting[: self._bound])
        taken = {id(c) for c in group}
        queue.extend(c for c in waiting if id(c) not in taken)
        return group


async def _settle(call: _Call, alone: Callable[[Any], Awaitable[Row]]) -> None:
    """Run ``call`` alone and hand its outcome to its caller."""
    try:
        row = await alone(call)
    except Exception as error:
        _fail(call, error)
    else:
        _answer(call, row)


def _answer(call: _Call, row: Row) -> None:
    future = call.future
    if future is not None and not future.done():
        future.set_result(row)


def _fail(call: _Call, error: BaseException) -> None:
    future = call.future
    if future is not None and not future.done():
        future.set_exception(error)


def _failed_as(error: CheckpointStoreError, action: str) -> CheckpointStoreError:
    """``error`` (a group statement's failure) as the caller of ``action`` would have had it
    from its own statement: the same type, its own action named."""
    cause = error.__cause__
    text = describe(cause) if cause is not None else str(error)
    own = type(error)(f"SQL store failed to {action}: {text}")
    own.__cause__ = cause
    return own


def _apart(writes: list[GroupedWrite]) -> list[GroupedWrite]:
    """``writes`` in order, less each one that touches a row (a checkpoint key, a session's
    head) an earlier one touches: those wait for the next group, still in order."""
    group: list[GroupedWrite] = []
    keys: set[tuple[str, str]] = set()
    sessions: set[str] = set()
    for write in writes:
        clash = write.key in keys or (write.session is not None and write.session in sessions)
        keys.add(write.key)
        if write.session is not None:
            sessions.add(write.session)
        if not clash:
            group.append(write)
    return group


class GroupCommit:
    """The write and load lanes of one checkpoint store on asyncpg (see the module)."""

    def __init__(self, direct: DirectPostgres, tables: Tables, bound: int) -> None:
        self._direct = direct
        self._sql = group_statements(tables)
        self._writes: _Lane[GroupedWrite] = _Lane(
            bound, self._write_alone, self._write_together, _apart
        )
        self._loads: _Lane[GroupedLoad] = _Lane(bound, self._load_alone, self._load_together, list)

    async def write(self, write: GroupedWrite) -> Row:
        """The row ``write.statement`` alone returns (``RETURNING created_at`` of a save; the
        save's ``created_at`` or ``None`` and the entries inserted, of a turn's commit)."""
        return await self._writes.submit(write)

    async def load(self, load: GroupedLoad) -> Row:
        """The row ``load.statement`` alone returns (the checkpoint's, or its version and
        fencing token), or ``None``."""
        return await self._loads.submit(load)

    async def _write_alone(self, write: GroupedWrite) -> Row:
        return await self._direct.fetchrow(
            write.action, write.statement, write.params, refuse_integrity=write.refuse_integrity
        )

    async def _load_alone(self, load: GroupedLoad) -> Row:
        return await self._direct.fetchrow(load.action, load.statement, load.params)

    async def _write_together(self, group: list[GroupedWrite]) -> None:
        params = write_params([(w.op, w.save, w.appends) for w in group])
        try:
            rows = await self._direct.fetch(
                "commit a group of writes", self._sql.write, params, refuse_answered=True
            )
        except StatementRefused:
            for write in group:  # nothing was written: each alone names its own refusal
                await _settle(write, self._write_alone)
            return
        except CheckpointStoreError as error:
            for write in group:
                _fail(write, _failed_as(error, write.action))
            return
        created = {(row[0], row[1]): row[2] for row in rows}
        inserted = rows[0][3] if rows else 0
        if inserted != sum(len(w.appends) for w in group if w.key in created):  # pragma: no cover
            # Each entry row inserts or fails the whole statement.
            short = CheckpointStoreError("a group commit wrote fewer entries than queued")
            for write in group:
                _fail(write, short)
            return
        for write in group:
            at = created.get(write.key)
            if write.appends:
                _answer(write, (at, len(write.appends) if at is not None else 0))
            else:
                _answer(write, None if at is None else (at,))

    async def _load_together(self, group: list[GroupedLoad]) -> None:
        params = load_params([load.params for load in group])
        try:
            rows = await self._direct.fetch(
                "load checkpoints", self._sql.load, params, refuse_answered=True
            )
        except StatementRefused:
            for load in group:
                await _settle(load, self._load_alone)
            return
        except CheckpointStoreError as error:
            for load in group:
                _fail(load, _failed_as(error, load.action))
            return
        # Positions, not names, as decode_record reads them: namespace, key, owner, version,
        # fencing token first.
        found = {(row[0], row[1], row[2]): row for row in rows}
        for load in group:
            p = load.params
            row = found.get((p["ns"], p["k"], p["owner_scope"]))
            _answer(load, (row[3], row[4]) if load.stamp and row is not None else row)
