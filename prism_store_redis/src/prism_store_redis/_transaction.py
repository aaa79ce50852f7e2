"""Shared commits on Redis: session appends and checkpoint saves in one Lua script.

The store side of :class:`prism_core.durable.StoreTransaction` for a checkpoint store and a
session store on one ``redis.asyncio.Redis`` client. Writes are checked and encoded when they
are queued and sent as one ``EVALSHA`` of ``SHARED_COMMIT`` when the ``async with`` block
ends: Redis runs the script to completion before serving anyone else, and the script checks
every operation before its first write, so the commit is all or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from prism_core.durable import CheckpointRecord, InvalidCheckpointError
from prism_core.records import UNSET, SessionEntry

from ._client import run_script, text

if TYPE_CHECKING:
    from ._checkpoints import RedisCheckpointStore, SaveCall
    from ._sessions import RedisSessionStore

__all__ = ("RedisTransaction",)


class RedisTransaction:
    """Queued writes of one shared commit on Redis (one script, one round trip).

    A transaction saves a record at most once: every check runs before any write, so a
    second save of the same record could not see the first.
    """

    def __init__(self, checkpoints: RedisCheckpointStore, sessions: RedisSessionStore) -> None:
        self._checkpoints = checkpoints
        self._sessions = sessions
        self._keys: list[str | bytes] = []
        self._args: list[str | bytes] = []
        self._ops: list[SessionEntry | SaveCall] = []
        self._state = "new"
        self._entries: tuple[SessionEntry, ...] = ()
        self._records: tuple[CheckpointRecord, ...] = ()

    @property
    def entries(self) -> tuple[SessionEntry, ...]:
        """The entries written, once committed (empty before)."""
        return self._entries

    @property
    def records(self) -> tuple[CheckpointRecord, ...]:
        """The checkpoint records written, once committed (empty before)."""
        return self._records

    def _check_open(self) -> None:
        if self._state != "open":
            raise InvalidCheckpointError(
                "queue writes inside 'async with transaction:'; this transaction is "
                + ("not entered yet" if self._state == "new" else "finished")
            )

    def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> None:
        """Queue a session append (checked now, written when the block ends)."""
        self._check_open()
        keys, args = self._sessions._append_call(entry, expected_leaf_id)
        if len(keys) == 3:
            keys.append(keys[0])  # no parent: the script still takes four keys
        self._keys.extend(keys)
        self._args.append("a")
        self._args.extend(args)
        self._ops.append(entry)

    def save(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        expected_version: int | None = None,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
        metadata: Mapping[str, str] | None = None,
        category: str | None = None,
    ) -> None:
        """Queue a checkpoint save (validated now, written when the block ends)."""
        self._check_open()
        call = self._checkpoints._save_call(
            namespace,
            key,
            value,
            version=version,
            expected_version=expected_version,
            ownership=ownership,
            fencing_token=fencing_token,
            metadata=metadata,
            category=category,
        )
        if any(not isinstance(op, SessionEntry) and op.keys[0] == call.keys[0] for op in self._ops):
            raise InvalidCheckpointError(
                f"a shared commit saves {call.request.namespace}/{call.request.key} once; "
                "queue the last state only"
            )
        self._keys.extend(call.keys)
        self._args.append("s")
        self._args.extend(call.args)
        self._ops.append(call)

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise InvalidCheckpointError("a transaction is entered once; start a new one")
        self._state = "open"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        ops, self._ops = self._ops, []
        self._state = "done"
        if exc_type is not None or not ops:
            return
        checkpoints = self._checkpoints
        with checkpoints._connection.guard("commit session entries and a checkpoint"):
            reply = await run_script(checkpoints._commit, keys=self._keys, args=self._args)
        outcome = text(reply[0])
        if outcome != "ok":
            failed = ops[int(reply[1]) - 1]
            if isinstance(failed, SessionEntry):
                from ._sessions import append_refusal

                append_refusal(outcome, failed)
            else:
                failed.record(outcome)
            raise AssertionError(f"unknown shared commit reply {outcome!r}")  # pragma: no cover
        saves = iter(reply[1:])
        records = [op.record(text(next(saves))) for op in ops if not isinstance(op, SessionEntry)]
        self._records = tuple(records)
        self._entries = tuple(op for op in ops if isinstance(op, SessionEntry))
