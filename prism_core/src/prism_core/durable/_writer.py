"""Writing a durable run's checkpoint: bounds, redaction, sidecar metadata, CAS and fencing.

Every save is a compare-and-swap on the previous version carrying the writer's fencing token,
retried on transient store faults (:mod:`._faults`). A save that loses its compare-and-swap or
its fencing check, or that the store never answers, marks the writer ``lost``: the run no
longer owns its record and writes nothing more (not even a terminal ``failed``).

A save may carry session entries (:meth:`CheckpointWriter.save` with ``entries``): when the
checkpoint store can commit together with the session store (``SharedCommitStore``), the
entries and the checkpoint are one transaction; otherwise the entries are appended first, one
by one, as a store without the capability always did.

A run that notifies (its state's ``notify`` flag) gets its outbox records (:mod:`._outbox`)
in the same commit as the checkpoint whose change they report: with the entries in the shared
commit, else in a :class:`CheckpointBatchStore` transaction; a store with neither gets them
written right after the checkpoint (a crash between the two loses them, so the built-in
stores all commit them together). A write that reports nothing, and every write of a run
that does not notify, commits exactly what it did before.

Middleware sees each write twice: ``checkpoint_metadata`` may extend the sidecar map before
the save, and ``checkpoint_written`` observes the save (version, bytes, duration) after it.

It must not decide when to write: the durable run (``_run``) and the resume (``_resume``) do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import attrs

from .._effect_record import EffectRecord
from ..codec import dumps
from ..errors import AgentRunStateError, CanonicalJsonError, CheckpointConflictError
from ..middleware import CheckpointWrite, MiddlewareChain, MiddlewareContext
from ..redaction import Redactor, redact_value
from ._capabilities import (
    CheckpointBatchStore,
    CheckpointStampReader,
    LeaseRenewalStore,
    SharedCommitStore,
    capability,
)
from ._checkpoints import (
    CheckpointRecord,
    CheckpointStore,
    CheckpointStoreUnavailableError,
    SaveRequest,
    validate_save,
)
from ._faults import retry_transient
from ._lease import now_ms
from ._ledger import ledger_write
from ._options import (
    AGENT_RUN_NAMESPACE,
    MAX_AGENT_RUN_METADATA_BYTES,
    CheckpointMetadataSource,
    read_string_map,
)
from ._outbox import Note, outbox_notes, write_notes
from ._state import AgentRunState, check_state_bounds, state_to_json
from ._store_base import save_checkpoint
from ._transaction import queue_save

__all__ = ("CheckpointWriter", "read_metadata", "resolve_metadata")

logger = logging.getLogger(__package__ or __name__)

#: The writer has not asked its store for the shared commit yet.
_UNASKED: Any = object()


def resolve_metadata(
    source: CheckpointMetadataSource, redactor: Redactor | None
) -> dict[str, str] | None:
    """Resolve ``source`` (calling it when it is callable), redact it, and check it is a
    ``dict[str, str]`` of valid UTF-8 text and at most 4096 bytes of canonical JSON. Anything
    else, including a callable that raises, fails the write with :class:`AgentRunStateError`
    before the store is reached."""
    if source is None:
        return None
    value: Any = source
    if callable(source):
        try:
            value = source()
        except Exception as exc:  # host code; the write must fail typed
            raise AgentRunStateError(
                f"checkpoint_metadata callable raised {type(exc).__name__}"
            ) from exc
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise AgentRunStateError("checkpoint_metadata must resolve to a mapping of strings")
    plain = read_string_map(value, "checkpoint_metadata")
    redacted: dict[str, str] = redact_value(plain, redactor)
    try:
        size = len(dumps(redacted))
    except CanonicalJsonError as exc:
        raise AgentRunStateError(f"checkpoint_metadata is not JSON text: {exc}") from exc
    if size > MAX_AGENT_RUN_METADATA_BYTES:
        raise AgentRunStateError(
            f"checkpoint_metadata is {size} bytes; the limit is {MAX_AGENT_RUN_METADATA_BYTES}"
        )
    return redacted


def read_metadata(record: CheckpointRecord) -> dict[str, str] | None:
    """A record's sidecar map, or ``None`` when absent, legacy or malformed (never a failure):
    not a map of strings, not UTF-8, or over 4096 bytes of canonical JSON."""
    value = record.metadata
    if not isinstance(value, Mapping):
        return None
    try:
        plain = read_string_map(value, "checkpoint metadata")
        if len(dumps(plain)) > MAX_AGENT_RUN_METADATA_BYTES:
            return None
    except (AgentRunStateError, CanonicalJsonError):
        return None
    return plain


@attrs.define
class CheckpointWriter:
    """Saves one run's states in order, each as a compare-and-swap on the previous version."""

    store: CheckpointStore
    run_id: str
    max_state_bytes: int
    ownership: Mapping[str, str] | None = None
    fencing_token: int | None = None
    redactor: Redactor | None = None
    metadata_source: CheckpointMetadataSource = None
    version: int = 0
    metadata: dict[str, str] | None = None
    writes: int = 0
    #: The lease's length (``None``: the run holds no lease).
    lease_ms: int | None = None
    #: The run's deadline on the event loop's clock; store calls never run past it.
    deadline: Callable[[], float | None] = attrs.field(default=lambda: None, eq=False)
    #: The error that ended this writer's ownership, once a save lost it.
    lost: BaseException | None = None
    last_state: AgentRunState | None = None
    _lock: anyio.Lock = attrs.field(factory=anyio.Lock, eq=False, repr=False)
    middleware: MiddlewareChain | None = None
    context: Callable[[str], MiddlewareContext] | None = None
    #: The session store that ``entries`` of a save go to (``None``: saves carry none).
    sessions: Any = None
    #: The store as a :class:`SharedCommitStore`, or ``None``; asked for once, at the first
    #: save with entries (the store does not change during a run; the answer costs a
    #: protocol check that the turn's commit should not pay every time).
    _shared: Any = attrs.field(default=_UNASKED, init=False, eq=False, repr=False)
    #: The store as a :class:`CheckpointStampReader`, or ``None`` (asked for once, likewise).
    _stamps: Any = attrs.field(default=_UNASKED, init=False, eq=False, repr=False)
    #: The store as a :class:`CheckpointBatchStore`, or ``None`` (asked for once, likewise).
    _batch: Any = attrs.field(default=_UNASKED, init=False, eq=False, repr=False)
    #: The state the record held when this writer took it over (a loaded record), which the
    #: first save's outbox records are worked out against; then :attr:`last_state`.
    base: AgentRunState | None = attrs.field(default=None, eq=False, repr=False)
    #: How many of the run's decision records its store's ledger holds (see ``_ledger``):
    #: a save carries the audit's records past it.
    decisions_written: int = 0

    async def save(
        self,
        state: AgentRunState,
        entries: Sequence[Any] = (),
        effects: Sequence[EffectRecord] = (),
        *,
        arguments: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> int:
        """Write ``state`` as the next version, with the session ``entries`` it follows from
        and the ledger rows of ``effects`` and of the audit's new decisions; return that
        version. ``arguments`` (by tool call id) are the arguments of the calls a suspension
        waits on, for a notifying run's ``suspended`` notification.

        The state is redacted and bounded before any I/O; a lost compare-and-swap raises
        :class:`~prism_core.CheckpointConflictError` and leaves ``version`` unchanged (and,
        on a shared commit, writes none of the entries).
        """
        async with self._lock:
            return await self._save(state, tuple(entries), tuple(effects), arguments)

    async def renew(self) -> bool:
        """Write the last running state again with a fresh lease expiry; ``False`` when there
        is nothing to renew. In place (same version) on a :class:`LeaseRenewalStore`, else as
        the next version. Raises like :meth:`save`."""
        async with self._lock:
            state = self.last_state
            if self.lost is not None or state is None or state.status != "running":
                return False
            renewing = capability(self.store, LeaseRenewalStore)
            if renewing is not None:
                await self._renew_in_place(renewing, state)
            else:
                await self._save(state)
            return True

    async def _renew_in_place(self, store: LeaseRenewalStore, state: AgentRunState) -> None:
        state = self._stamp(state)
        data = redact_value(state_to_json(state), self.redactor)
        check_state_bounds(data, self.max_state_bytes)
        version = self.version

        async def attempt() -> None:
            await store.renew_lease(
                AGENT_RUN_NAMESPACE,
                self.run_id,
                data,
                version=version,
                ownership=self.ownership,
                fencing_token=self.fencing_token,
            )

        # A retried renewal that was applied before its answer was lost is harmless: the
        # record is still at this version, so the retry rewrites it again.
        try:
            await retry_transient(attempt, deadline=self.deadline())
        except (CheckpointConflictError, CheckpointStoreUnavailableError) as exc:
            self.lost = exc
            raise
        self.last_state = state

    async def check_owner(self) -> None:
        """Raise :class:`~prism_core.CheckpointConflictError` unless the stored record is still
        the one this writer last wrote (same version and fencing token): one read."""
        async with self._lock:
            if self.lost is not None:
                raise self.lost
            if self._stamps is _UNASKED:
                self._stamps = capability(self.store, CheckpointStampReader)
            try:
                stamp = await retry_transient(self._read_stamp, deadline=self.deadline())
            except CheckpointStoreUnavailableError as exc:
                self.lost = exc
                raise
            if stamp != (self.version, self.fencing_token):
                self.lost = CheckpointConflictError(
                    f"Checkpoint conflict on {AGENT_RUN_NAMESPACE}/{self.run_id}: another worker "
                    "claimed this run"
                )
                raise self.lost

    async def _read_stamp(self) -> tuple[int, int | None] | None:
        """The stored record's version and fencing token (the value is neither read nor
        decoded where the store can leave it out), or ``None``."""
        reader: CheckpointStampReader | None = self._stamps
        if reader is not None:
            return await reader.load_stamp(
                AGENT_RUN_NAMESPACE, self.run_id, ownership=self.ownership
            )
        record = await self.store.load(AGENT_RUN_NAMESPACE, self.run_id, ownership=self.ownership)
        return None if record is None else (record.version, record.fencing_token)

    @property
    def _owns_token(self) -> bool:
        # A new record (nobody else can create this run id) or one this writer's run has
        # already written: no other writer can hold this version with this token.
        return self.version == 0 or self.writes > 0

    def _stamp(self, state: AgentRunState) -> AgentRunState:
        if self.lease_ms is None:
            return state
        expires = now_ms() + self.lease_ms if state.status == "running" else None
        return attrs.evolve(state, lease_ms=self.lease_ms, lease_expires_at=expires)

    async def _commit(
        self,
        entries: tuple[Any, ...],
        request: SaveRequest,
        notes: tuple[Note, ...] = (),
    ) -> tuple[CheckpointRecord, bool]:
        """``entries``, the save ``request`` and the outbox ``notes`` in one
        commit where the stores can; else the entries one by one first. Also answers whether
        the notes were committed with the save."""
        transaction = None
        if entries:
            if self._shared is _UNASKED:
                self._shared = capability(self.store, SharedCommitStore)
            shared = self._shared
            transaction = None if shared is None else shared.shared_transaction(self.sessions)
            if transaction is None:
                for entry in entries:
                    await self.sessions.append(entry)
                entries = ()
        if transaction is None and notes:
            if self._batch is _UNASKED:
                self._batch = capability(self.store, CheckpointBatchStore)
            if self._batch is not None:
                transaction = self._batch.checkpoint_transaction()
        if transaction is None:
            return await save_checkpoint(self.store, request), False
        async with transaction as tx:
            # The save first: a commit that already landed (its answer lost) is refused by
            # the compare-and-swap, which the caller then recognises as its own write.
            queue_save(tx, request)
            for entry in entries:
                tx.append(entry)
            for note in notes:
                queue_save(tx, note.request)
        record: CheckpointRecord = tx.records[0]
        return record, True

    async def _notes_after(self, notes: tuple[Note, ...]) -> None:
        """Write ``notes`` after their checkpoint (a store that cannot commit them with it);
        a store that stays unreachable loses them, which is said at ``ERROR``."""
        try:
            await write_notes(self.store, notes)
        except Exception:
            logger.exception(
                "run %s: %d notification(s) of checkpoint version %d could not be written",
                self.run_id,
                len(notes),
                self.version,
                extra={"prism_run_id": self.run_id, "prism_version": self.version},
            )

    def _log_save(
        self, version: int, status: str, size: int, duration_ms: float, entries: int
    ) -> None:
        logger.debug(
            "run %s: checkpoint version %d written (%s, %d bytes, %.1f ms)",
            self.run_id,
            version,
            status,
            size,
            duration_ms,
            extra={
                "prism_run_id": self.run_id,
                "prism_version": version,
                "prism_status": status,
                "prism_bytes": size,
                "prism_duration_ms": duration_ms,
            },
        )
        if entries:
            logger.debug(
                "run %s: %d session entries committed with checkpoint version %d",
                self.run_id,
                entries,
                version,
                extra={
                    "prism_run_id": self.run_id,
                    "prism_version": version,
                    "prism_entries": entries,
                },
            )

    async def _save(
        self,
        state: AgentRunState,
        entries: tuple[Any, ...] = (),
        effects: tuple[EffectRecord, ...] = (),
        arguments: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> int:
        if self.lost is not None:
            raise self.lost
        state = self._stamp(state)
        data = redact_value(state_to_json(state), self.redactor)
        encoded = check_state_bounds(data, self.max_state_bytes)
        ledger, decisions = ledger_write(
            data,
            effects,
            decisions_written=self.decisions_written,
            redactor=self.redactor,
            ownership=self.ownership,
        )
        metadata = self.metadata
        if self.metadata_source is not None:
            metadata = resolve_metadata(self.metadata_source, self.redactor)
        middleware, context = self.middleware, self.context
        if middleware is None or context is None:
            middleware = None
        elif middleware.handles("checkpoint_metadata"):
            extended = await middleware.run(
                "checkpoint_metadata", dict(metadata or {}), context("checkpoint_metadata")
            )
            metadata = resolve_metadata(extended, self.redactor) or None
        self.metadata = metadata
        version = self.version + 1

        # The state is encoded once, for its bounds; the request carries those bytes.
        request = validate_save(
            AGENT_RUN_NAMESPACE,
            self.run_id,
            data,
            version=version,
            expected_version=self.version,
            ownership=self.ownership,
            fencing_token=self.fencing_token,
            metadata=metadata,
            category="agent-run",
            encoded=encoded,
            ledger=ledger,
        )

        notes: tuple[Note, ...] = ()
        if state.notify:
            notes = outbox_notes(
                self.last_state or self.base,
                state,
                version,
                arguments=arguments,
                redactor=self.redactor,
            )
        #: Whether the notes were committed with the save (set by the attempt that did).
        together = [False]

        async def attempt() -> CheckpointRecord:
            try:
                if entries or notes:
                    committed, together[0] = await self._commit(entries, request, notes)
                    return committed
                return await save_checkpoint(self.store, request)
            except CheckpointConflictError:
                # An earlier attempt (ours, or a driver's own reconnect-and-retry) may have
                # been applied before its answer was lost: then the record is this write.
                # Never for a claim: two claimers of one version may write the same state
                # with the same token, so a claim's conflict is always final.
                if not self._owns_token:
                    raise
                record = await self.store.load(
                    AGENT_RUN_NAMESPACE, self.run_id, ownership=self.ownership
                )
                if (
                    record is not None
                    and record.version == version
                    and record.fencing_token == self.fencing_token
                    and dumps(record.value) == encoded
                ):
                    return record
                raise

        started = time.perf_counter()
        try:
            record = await retry_transient(attempt, deadline=self.deadline())
        except (CheckpointConflictError, CheckpointStoreUnavailableError) as exc:
            self.lost = exc
            raise
        duration_ms = (time.perf_counter() - started) * 1000
        self.version = record.version
        self.writes += 1
        self.last_state = state
        self.decisions_written = decisions
        if notes and not together[0]:
            await self._notes_after(notes)
        if logger.isEnabledFor(logging.DEBUG):
            self._log_save(record.version, state.status, len(encoded), duration_ms, len(entries))
        if (
            middleware is not None
            and context is not None
            and middleware.handles("checkpoint_written")
        ):
            write = CheckpointWrite(
                run_id=self.run_id,
                version=record.version,
                status=state.status,
                bytes=len(encoded),
                duration_ms=duration_ms,
            )
            await middleware.inform("checkpoint_written", write, context("checkpoint_written"))
        return record.version
