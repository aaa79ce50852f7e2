"""The optional status index of a checkpoint store: list records by their value's ``status``.

A store that keeps an index of each record's status (a set per owner and status, an indexed
column) implements :class:`CheckpointStatusIndex`; :func:`~prism_core.list_agent_runs`
discovers it with ``isinstance`` and pages through only the records of one status. A store
without it still works: the lister then pages through the namespace and decodes each record.

The indexed status is the value's top-level ``"status"`` member when the value is a JSON
object and that member is a non-empty string (see :func:`indexed_status`); any other record
has no status and is in no status page.

It declares the capability and the status rule only; it must not read or write records itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ._checkpoints import (
    MAX_INDEXED_STATUS_CHARS,
    CheckpointPage,
    InvalidCheckpointError,
    indexed_status,
)

__all__ = ("MAX_INDEXED_STATUS_CHARS", "CheckpointStatusIndex", "check_status", "indexed_status")


def check_status(status: Any) -> str:
    """``status`` if it can be indexed, else :class:`~prism_core.InvalidCheckpointError`."""
    if not isinstance(status, str) or not status or len(status) > MAX_INDEXED_STATUS_CHARS:
        raise InvalidCheckpointError(
            f"status must be a non-empty string of at most {MAX_INDEXED_STATUS_CHARS} characters"
        )
    return status


@runtime_checkable
class CheckpointStatusIndex(Protocol):
    """A checkpoint store capability: one page of the records of one status.

    Rules, as for ``list``: ``ownership`` is matched exactly (foreign records are never
    listed), pages follow ``(namespace, key)`` order, ``limit`` is 1..1000 and ``cursor`` is
    ``None`` or a cursor of a previous page of the same call. The index is maintained by
    ``save`` and ``delete`` atomically with the record, so a listed record has the status asked
    for at the moment it was read.
    """

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
        ``ownership``, in key order."""
        ...
