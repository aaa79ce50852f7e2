"""Writing a durable run's checkpoint: bounds, redaction, sidecar metadata and CAS.

Middleware sees each write twice: ``checkpoint_metadata`` may extend the sidecar map before
the save, and ``checkpoint_written`` observes the save (version, bytes, duration) after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..codec import dumps
from ..errors import AgentRunStateError, CanonicalJsonError
from ..middleware import CheckpointWrite, MiddlewareChain, MiddlewareContext
from ..redaction import Redactor, redact_value
from ._checkpoints import CheckpointRecord, CheckpointStore
from ._options import (
    AGENT_RUN_NAMESPACE,
    MAX_AGENT_RUN_METADATA_BYTES,
    CheckpointMetadataSource,
    read_string_map,
)
from ._state import AgentRunState, check_state_bounds, state_to_json

__all__ = ("CheckpointWriter", "read_metadata", "resolve_metadata")


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
    middleware: MiddlewareChain | None = None
    context: Callable[[str], MiddlewareContext] | None = None

    async def save(self, state: AgentRunState) -> int:
        """Write ``state`` as the next version; return that version.

        The state is redacted and bounded before any I/O; a lost compare-and-swap raises
        :class:`~prism_core.CheckpointConflictError` and leaves ``version`` unchanged.
        """
        data = redact_value(state_to_json(state), self.redactor)
        encoded = check_state_bounds(data, self.max_state_bytes)
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
        started = time.perf_counter()
        record = await self.store.save(
            AGENT_RUN_NAMESPACE,
            self.run_id,
            data,
            version=self.version + 1,
            expected_version=self.version,
            ownership=self.ownership,
            fencing_token=self.fencing_token,
            metadata=self.metadata,
            category="agent-run",
        )
        self.version = record.version
        self.writes += 1
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
                duration_ms=(time.perf_counter() - started) * 1000,
            )
            await middleware.inform("checkpoint_written", write, context("checkpoint_written"))
        return record.version
