"""Shared commits on Redis: session appends and checkpoint saves in one Lua script.

The store side of :class:`prism_core.stores.StoreTransaction` for a checkpoint store and a
session store on one ``redis.asyncio.Redis`` client, on
:class:`~prism_core.stores.QueuedTransaction` (which keeps the queue, its states and its
refusals, among them one save per record: the script checks every operation before its first
write, so a second save of one record could not see the first). Writes are checked and
encoded when they are queued and sent as one ``EVALSHA`` of ``SHARED_COMMIT`` when the
``async with`` block ends: Redis runs the script to completion before serving anyone else, so
the commit is all or nothing.

It is handed the stores it works on and imports neither store module: what it uses of each is
the narrow protocol below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from redis.commands.core import AsyncScript

from prism_core.stores import (
    CheckpointRecord,
    QueuedAppend,
    QueuedSave,
    QueuedTransaction,
    QueuedWrite,
    SaveRequest,
    SessionEntry,
)

from ._client import RedisConnection, run_script, text
from ._refusals import append_refusal
from ._save_call import SaveCall

__all__ = ("RedisCheckpoints", "RedisSessions", "RedisTransaction")


class RedisCheckpoints(Protocol):
    """What a shared commit uses of the checkpoint store: its client, the registered
    ``SHARED_COMMIT`` script and its encoding of a save."""

    _connection: RedisConnection
    _commit: AsyncScript

    def _save_call(self, request: SaveRequest) -> SaveCall: ...


class RedisSessions(Protocol):
    """What a shared commit uses of the session store: its encoding of an append."""

    def _append_call(
        self, entry: SessionEntry, expected_leaf_id: Any
    ) -> tuple[list[str | bytes], list[str | bytes]]: ...


class RedisTransaction(QueuedTransaction):
    """Queued writes of one shared commit on Redis (one script, one round trip)."""

    def __init__(self, checkpoints: RedisCheckpoints, sessions: RedisSessions | None) -> None:
        # Without ``sessions``: the checkpoint store's saves alone (appends are refused).
        super().__init__(takes_entries=sessions is not None)
        self._checkpoints = checkpoints
        self._sessions = sessions

    def prepare_append(
        self, entry: SessionEntry, expected_leaf_id: Any
    ) -> tuple[list[str | bytes], list[str | bytes]]:
        """The append's script keys (always four) and arguments; ``TypeError`` for an
        ``expected_leaf_id`` that is neither an id nor ``None``."""
        assert self._sessions is not None  # the base refuses appends without one
        keys, args = self._sessions._append_call(entry, expected_leaf_id)
        if len(keys) == 3:
            keys.append(keys[0])  # no parent: the script still takes four keys
        return keys, args

    def prepare_save(self, request: SaveRequest) -> SaveCall:
        """The save's script keys and arguments (the store's value and record limits)."""
        return self._checkpoints._save_call(request)

    async def write(self, queue: Sequence[QueuedWrite]) -> list[CheckpointRecord]:
        """Send ``queue`` as one ``SHARED_COMMIT``; the record of each save, in order."""
        keys: list[str | bytes] = []
        args: list[str | bytes] = []
        for op in queue:
            if isinstance(op, QueuedSave):
                keys.extend(op.prepared.keys)
                args.append("s")
                args.extend(op.prepared.args)
            else:
                op_keys, op_args = op.prepared
                keys.extend(op_keys)
                args.append("a")
                args.extend(op_args)
        checkpoints = self._checkpoints
        with checkpoints._connection.guard("commit session entries and a checkpoint"):
            reply = await run_script(checkpoints._commit, keys=keys, args=args)
        outcome = text(reply[0])
        if outcome != "ok":
            failed = queue[int(reply[1]) - 1]
            if isinstance(failed, QueuedAppend):
                append_refusal(outcome, failed.entry)
            else:
                failed.prepared.record(outcome)
            raise AssertionError(f"unknown shared commit reply {outcome!r}")  # pragma: no cover
        saves = iter(reply[1:])
        return [op.prepared.record(text(next(saves))) for op in queue if isinstance(op, QueuedSave)]
