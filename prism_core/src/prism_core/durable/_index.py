"""The status rule of the optional status index: which status a record is listed under.

A store that keeps an index of each record's status (a set per owner and status, an indexed
column) implements :class:`~prism_core.durable._capabilities.CheckpointStatusIndex`;
:func:`~prism_core.list_agent_runs` asks for it with ``capability()`` and pages through only
the records of one status. A store without it still works: the lister then pages through the
namespace and decodes each record.

The indexed status is the value's top-level ``"status"`` member when the value is a JSON
object and that member is a non-empty string (see :func:`indexed_status`); any other record
has no status and is in no status page.

It holds the status rule only; it must not read or write records itself.
"""

from __future__ import annotations

from typing import Any

from ._checkpoints import MAX_INDEXED_STATUS_CHARS, InvalidCheckpointError, indexed_status

__all__ = ("MAX_INDEXED_STATUS_CHARS", "check_status", "indexed_status")


def check_status(status: Any) -> str:
    """``status`` if it can be indexed, else :class:`~prism_core.InvalidCheckpointError`."""
    if not isinstance(status, str) or not status or len(status) > MAX_INDEXED_STATUS_CHARS:
        raise InvalidCheckpointError(
            f"status must be a non-empty string of at most {MAX_INDEXED_STATUS_CHARS} characters"
        )
    return status
