"""The in-process checkpoint store (tests, single-process hosts, the ``memory://`` URL).

It is a store: it must not know about runs, sessions or the run loop beyond the record contract.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs

from .._echo import echo
from .._effect_record import EffectPage
from ..records._memory import MemorySessionStore
from ._capabilities import CheckpointStamp
from ._checkpoints import (
    CheckpointLimitError,
    CheckpointPage,
    CheckpointRecord,
    InvalidCheckpointError,
    SaveRequest,
    check_name,
    check_value_bytes,
    conflict,
    decode_stored_value,
    encode_cursor,
    list_arguments,
    normalise_ownership,
    validate_save,
)
from ._effects import DecisionPage, DecisionQuery, EffectQuery
from ._index import check_status
from ._memory_commit import MemoryTransaction
from ._memory_ledger import MemoryLedger
from ._store_base import CheckpointStoreBase
from ._wakeups import LocalWakeups, RunWatch

__all__ = ("MemoryCheckpointStore", "create_memory_checkpoint_store")


@attrs.frozen(kw_only=True)
class _Stored:
    namespace: str
    key: str
    version: int
    value_json: str
    metadata: dict[str, str] | None
    ownership: dict[str, str] | None
    fencing_token: int | None
    category: str | None
    created_at: float
    updated_at: float
    status: str | None = None

    def to_record(self) -> CheckpointRecord:
        # Fresh containers on every read: callers can never reach the stored state.
        return CheckpointRecord(
            namespace=self.namespace,
            key=self.key,
            version=self.version,
            value=decode_stored_value(self.value_json, self.namespace, self.key),
            metadata=dict(self.metadata) if self.metadata is not None else None,
            ownership=dict(self.ownership) if self.ownership is not None else None,
            fencing_token=self.fencing_token,
            category=self.category,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )


def _check_limit(value: int | None, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidCheckpointError(
            f"{what} must be a positive integer or None, got {echo(value)}"
        )
    return value


class MemoryCheckpointStore(CheckpointStoreBase):
    """Keeps checkpoints in a dict. Each operation is atomic: it never awaits mid-way.

    Values are held as canonical JSON text and parsed afresh on every read, so neither the
    caller's value nor a loaded one shares state with the store.
    """

    def __init__(
        self, *, max_records: int | None = None, max_value_bytes: int | None = None
    ) -> None:
        self.max_records = _check_limit(max_records, "max_records")
        self.max_value_bytes = _check_limit(max_value_bytes, "max_value_bytes")
        self._records: dict[tuple[str, str], _Stored] = {}
        self._wakeups = LocalWakeups()
        #: The effect ledger (see :class:`~prism_core.stores.EffectLedger`).
        self._ledger = MemoryLedger()

    async def notify_runs(self) -> None:
        """Wake the workers watching this store (they share its process)."""
        await self._wakeups.notify_runs()

    def watch_runs(self) -> AbstractAsyncContextManager[RunWatch]:
        """Watch this store's run notifications (see ``RunWakeups``)."""
        return self._wakeups.watch_runs()

    async def load(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointRecord | None:
        """The record, or ``None`` when absent or owned by someone else."""
        stored = self._visible(namespace, key, ownership)
        return None if stored is None else stored.to_record()

    async def load_stamp(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointStamp | None:
        """The record's version and fencing token, or ``None`` when absent or owned by
        someone else (see :class:`~prism_core.stores.CheckpointStampReader`)."""
        stored = self._visible(namespace, key, ownership)
        return None if stored is None else CheckpointStamp(stored.version, stored.fencing_token)

    def _visible(
        self, namespace: str, key: str, ownership: Mapping[str, str] | None
    ) -> _Stored | None:
        """The stored record ``ownership`` may read (names checked first), or ``None``."""
        check_name(namespace, "namespace")
        check_name(key, "key")
        owner = normalise_ownership(ownership)
        stored = self._records.get((namespace, key))
        if stored is None or stored.ownership != owner:
            return None
        return stored

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        """Write the record ``request`` describes atomically or raise
        ``CheckpointConflictError``; :class:`~prism_core.CheckpointLimitError` when a limit of
        this store would be exceeded (see :meth:`CheckpointStoreBase.save` for the keyword
        form)."""
        check_value_bytes(request, self.max_value_bytes)
        stored = self._apply(request)
        self._ledger.apply(request.ledger)
        return stored.to_record()

    def _apply(self, req: SaveRequest) -> _Stored:
        """Write a validated save now (no await: atomic), or raise a conflict or limit."""
        slot = (req.namespace, req.key)
        current = self._records.get(slot)
        if current is not None:
            if current.ownership != req.ownership:
                raise conflict(req.namespace, req.key)
            if req.expected_version is not None and req.expected_version != current.version:
                raise conflict(req.namespace, req.key)
            if req.version <= current.version:
                raise conflict(req.namespace, req.key)
            if current.fencing_token is not None and (
                req.fencing_token is None or req.fencing_token < current.fencing_token
            ):
                raise conflict(req.namespace, req.key)
        else:
            if req.expected_version is not None and req.expected_version != 0:
                raise conflict(req.namespace, req.key)
            if self.max_records is not None and len(self._records) >= self.max_records:
                raise CheckpointLimitError(
                    f"this checkpoint store holds at most {self.max_records} records; "
                    "delete finished runs' checkpoints or raise max_records"
                )
        now = time.time()
        stored = _Stored(
            namespace=req.namespace,
            key=req.key,
            version=req.version,
            value_json=req.value_json,
            metadata=req.metadata,
            ownership=req.ownership,
            fencing_token=req.fencing_token,
            category=req.category,
            created_at=current.created_at if current is not None else now,
            updated_at=now,
            status=req.status,
        )
        self._records[slot] = stored
        return stored

    async def renew_lease(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
    ) -> None:
        """Replace the value of the record at exactly ``version``, keeping its version (see
        :class:`~prism_core.stores.LeaseRenewalStore`); ``CheckpointConflictError`` otherwise."""
        req = validate_save(
            namespace,
            key,
            value,
            version=version,
            expected_version=version,
            ownership=ownership,
            fencing_token=fencing_token,
            max_value_bytes=self.max_value_bytes,
        )
        current = self._records.get((req.namespace, req.key))
        if (
            current is None
            or current.ownership != req.ownership
            or current.version != req.version
            or (
                current.fencing_token is not None
                and (req.fencing_token is None or req.fencing_token < current.fencing_token)
            )
        ):
            raise conflict(req.namespace, req.key)
        self._records[(req.namespace, req.key)] = attrs.evolve(
            current, value_json=req.value_json, updated_at=time.time()
        )

    async def delete(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> bool:
        """Delete the record; ``False`` when absent or owned by someone else."""
        check_name(namespace, "namespace")
        check_name(key, "key")
        owner = normalise_ownership(ownership)
        stored = self._records.get((namespace, key))
        if stored is None or stored.ownership != owner:
            return False
        del self._records[(namespace, key)]
        return True

    async def list(
        self,
        namespace: str | None = None,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records visible to ``ownership`` (in ``namespace`` when given), in key order."""
        owner, after = list_arguments(namespace, ownership, limit, cursor)
        slots = sorted(
            slot
            for slot, stored in self._records.items()
            if stored.ownership == owner
            and (namespace is None or slot[0] == namespace)
            and (after is None or slot > after)
        )
        page = slots[:limit]
        records = tuple(self._records[slot].to_record() for slot in page)
        next_cursor = encode_cursor(*page[-1]) if len(slots) > limit else None
        return CheckpointPage(records, next_cursor)

    async def list_by_status(
        self,
        namespace: str,
        status: str,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records in ``namespace`` whose value's status is ``status``, visible to
        ``ownership``, in key order (see :class:`~prism_core.CheckpointStatusIndex`)."""
        check_name(namespace, "namespace")
        check_status(status)
        owner, after = list_arguments(namespace, ownership, limit, cursor)
        # The status was read off the value at save time: nothing is decoded to filter.
        slots = sorted(
            slot
            for slot, stored in self._records.items()
            if slot[0] == namespace
            and stored.status == status
            and stored.ownership == owner
            and (after is None or slot > after)
        )
        page = slots[:limit]
        records = tuple(self._records[slot].to_record() for slot in page)
        next_cursor = encode_cursor(*page[-1]) if len(slots) > limit else None
        return CheckpointPage(records, next_cursor)

    async def query_effects(self, query: EffectQuery) -> EffectPage:
        """The effect rows ``query`` matches (see :class:`~prism_core.stores.EffectLedger`)."""
        return self._ledger.query_effects(query)

    async def query_decisions(self, query: DecisionQuery) -> DecisionPage:
        """The decision rows ``query`` matches, in the order they were written."""
        return self._ledger.query_decisions(query)

    async def mark_in_doubt(
        self, run_id: str, tool_call_ids: Sequence[str], *, ownership: Mapping[str, str] | None
    ) -> int:
        """Move the named calls of ``run_id`` from ``dispatched`` to ``in_doubt``."""
        return self._ledger.mark_in_doubt(run_id, tool_call_ids, normalise_ownership(ownership))

    async def erase_session(self, session_id: str, *, ownership: Mapping[str, str] | None) -> int:
        """Rewrite the session's effect and decision rows in their erased form."""
        return self._ledger.erase_session(session_id, normalise_ownership(ownership))

    def shared_transaction(self, sessions: object) -> MemoryTransaction | None:
        """One commit over this store and ``sessions`` (see
        :func:`prism_core.stores.shared_transaction`), or ``None`` unless ``sessions`` is a
        memory session store."""
        if not isinstance(sessions, MemorySessionStore):
            return None
        return MemoryTransaction(self, sessions)

    def checkpoint_transaction(self) -> MemoryTransaction:
        """One commit of several saves of this store (see
        :class:`~prism_core.stores.CheckpointBatchStore`)."""
        return MemoryTransaction(self, None)

    async def aclose(self) -> None:
        """Nothing to release; idempotent."""


def create_memory_checkpoint_store(
    *, max_records: int | None = None, max_value_bytes: int | None = None
) -> MemoryCheckpointStore:
    """A fresh in-memory checkpoint store.

    ``max_records`` caps how many records it holds and ``max_value_bytes`` the canonical JSON
    size of one value; a save past either raises :class:`~prism_core.CheckpointLimitError`.
    """
    return MemoryCheckpointStore(max_records=max_records, max_value_bytes=max_value_bytes)
