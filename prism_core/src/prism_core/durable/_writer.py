"""Writing a durable run's checkpoint: bounds, redaction, sidecar metadata, CAS and fencing.

Every save is a compare-and-swap on the previous version carrying the writer's fencing token,
retried on transient store faults (:mod:`._faults`). A save that loses its compare-and-swap or
its fencing check, or that the store never answers, marks the writer ``lost``: the run no
longer owns its record and writes nothing more (not even a terminal ``failed``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import attrs

from ..codec import dumps
from ..errors import AgentRunStateError, CheckpointConflictError
from ..redaction import Redactor, redact_value
from ._checkpoints import CheckpointRecord, CheckpointStore, CheckpointStoreUnavailableError
from ._faults import retry_transient
from ._lease import now_ms
from ._options import (
    AGENT_RUN_NAMESPACE,
    MAX_AGENT_RUN_METADATA_BYTES,
    CheckpointMetadataSource,
)
from ._state import AgentRunState, check_state_bounds, state_to_json

__all__ = ("CheckpointWriter", "read_metadata", "resolve_metadata")


def resolve_metadata(
    source: CheckpointMetadataSource, redactor: Redactor | None
) -> dict[str, str] | None:
    """Resolve ``source`` (calling it when it is callable), redact it, and check it is a
    ``dict[str, str]`` of at most 4096 bytes of canonical JSON. Anything else fails the write
    with :class:`AgentRunStateError`."""
    if source is None:
        return None
    value: Any = source() if callable(source) else source
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise AgentRunStateError("checkpoint_metadata must resolve to a mapping of strings")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise AgentRunStateError("checkpoint_metadata keys and values must be strings")
    redacted: dict[str, str] = redact_value(dict(value), redactor)
    size = len(dumps(redacted))
    if size > MAX_AGENT_RUN_METADATA_BYTES:
        raise AgentRunStateError(
            f"checkpoint_metadata is {size} bytes; the limit is {MAX_AGENT_RUN_METADATA_BYTES}"
        )
    return redacted


def read_metadata(record: CheckpointRecord) -> dict[str, str] | None:
    """A record's sidecar map, or ``None`` when absent, legacy or malformed (never a failure)."""
    value = record.metadata
    if not isinstance(value, Mapping):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None
    try:
        if len(dumps(dict(value))) > MAX_AGENT_RUN_METADATA_BYTES:
            return None
    except (TypeError, ValueError):
        return None
    return dict(value)


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

    async def save(self, state: AgentRunState) -> int:
        """Write ``state`` as the next version; return that version.

        The state is redacted and bounded before any I/O; a lost compare-and-swap raises
        :class:`~prism_core.CheckpointConflictError` and leaves ``version`` unchanged.
        """
        async with self._lock:
            return await self._save(state)

    async def renew(self) -> bool:
        """Re-save the last running state with a fresh lease expiry; ``False`` when there is
        nothing to renew. Raises like :meth:`save`."""
        async with self._lock:
            state = self.last_state
            if self.lost is not None or state is None or state.status != "running":
                return False
            await self._save(state)
            return True

    async def check_owner(self) -> None:
        """Raise :class:`~prism_core.CheckpointConflictError` unless the stored record is still
        the one this writer last wrote (same version and fencing token): one read."""
        async with self._lock:
            if self.lost is not None:
                raise self.lost
            try:
                record = await retry_transient(
                    lambda: self.store.load(
                        AGENT_RUN_NAMESPACE, self.run_id, ownership=self.ownership
                    ),
                    deadline=self.deadline(),
                )
            except CheckpointStoreUnavailableError as exc:
                self.lost = exc
                raise
            if (
                record is None
                or record.version != self.version
                or record.fencing_token != self.fencing_token
            ):
                self.lost = CheckpointConflictError(
                    f"Checkpoint conflict on {AGENT_RUN_NAMESPACE}/{self.run_id}: another worker "
                    "claimed this run"
                )
                raise self.lost

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

    async def _save(self, state: AgentRunState) -> int:
        if self.lost is not None:
            raise self.lost
        state = self._stamp(state)
        data = redact_value(state_to_json(state), self.redactor)
        check_state_bounds(data, self.max_state_bytes)
        if self.metadata_source is not None:
            self.metadata = resolve_metadata(self.metadata_source, self.redactor)
        version = self.version + 1

        async def attempt() -> CheckpointRecord:
            try:
                return await self.store.save(
                    AGENT_RUN_NAMESPACE,
                    self.run_id,
                    data,
                    version=version,
                    expected_version=self.version,
                    ownership=self.ownership,
                    fencing_token=self.fencing_token,
                    metadata=self.metadata,
                    category="agent-run",
                )
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
                    and dumps(record.value) == dumps(data)
                ):
                    return record
                raise

        try:
            record = await retry_transient(attempt, deadline=self.deadline())
        except (CheckpointConflictError, CheckpointStoreUnavailableError) as exc:
            self.lost = exc
            raise
        self.version = record.version
        self.writes += 1
        self.last_state = state
        return record.version
