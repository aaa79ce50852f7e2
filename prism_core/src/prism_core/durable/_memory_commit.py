"""Shared commits on the memory stores: session appends and checkpoint saves, all or none.

The memory stores never await inside an operation, so the queued writes are applied one after
the other without yielding; a refusal undoes the ones applied before it, in reverse order.

It must not decide what is committed or when: it applies what the writer queues.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ._checkpoints import CheckpointRecord, InvalidCheckpointError, SaveRequest, validate_save

if TYPE_CHECKING:
    from ..records._entries import SessionEntry
    from ..records._memory import MemorySessionStore

__all__ = ("MemoryTransaction",)

_UNSET: Any = object()


class MemoryTransaction:
    """The writes of one shared commit over a memory checkpoint store and a memory session
    store (see :class:`prism_core.durable.StoreTransaction`)."""

    def __init__(self, checkpoints: Any, sessions: MemorySessionStore) -> None:
        # ``checkpoints`` is the MemoryCheckpointStore that opens this transaction (not named
        # here: that module imports this one).
        self._checkpoints = checkpoints
        self._sessions = sessions
        self._ops: list[tuple[SessionEntry, Any] | SaveRequest] = []
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

    def append(self, entry: SessionEntry, *, expected_leaf_id: Any = _UNSET) -> None:
        """Queue a session append (checked now, written when the block ends)."""
        from ..records._entries import SessionEntry
        from ..records._store import UNSET

        self._check_open()
        if not isinstance(entry, SessionEntry):
            raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
        self._ops.append((entry, UNSET if expected_leaf_id is _UNSET else expected_leaf_id))

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
        self._ops.append(
            validate_save(
                namespace,
                key,
                value,
                version=version,
                expected_version=expected_version,
                ownership=ownership,
                fencing_token=fencing_token,
                metadata=metadata,
                category=category,
                max_value_bytes=self._checkpoints.max_value_bytes,
            )
        )

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
        checkpoints, sessions = self._checkpoints, self._sessions
        undo: list[Any] = []
        entries: list[SessionEntry] = []
        records: list[CheckpointRecord] = []
        try:
            for op in ops:
                if isinstance(op, SaveRequest):
                    slot = (op.namespace, op.key)
                    before = checkpoints._records.get(slot)
                    stored = checkpoints._apply(op)
                    undo.append((slot, before))
                    records.append(stored.to_record())
                else:
                    entries.append(sessions._append_now(*op))
                    undo.append(op[0].id)
        except BaseException:
            for step in reversed(undo):
                if isinstance(step, str):
                    sessions._forget(step)
                elif step[1] is None:
                    del checkpoints._records[step[0]]
                else:
                    checkpoints._records[step[0]] = step[1]
            raise
        self._entries, self._records = tuple(entries), tuple(records)
