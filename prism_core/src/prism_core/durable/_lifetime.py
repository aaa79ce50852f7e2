"""How long a run's stores live, and the durable runs that could never be resumed.

A durable run is written so that another call, worker or process can resume it. That needs the
session store to outlive the process whenever the checkpoint store does: a checkpoint that
survives a restart but points at a session kept in memory names a history that no longer
exists. This module tells which stores are local to the process and refuses such a pairing
before anything is written.

It must not read or write a store: it judges their kinds.
"""

from __future__ import annotations

from typing import Any

from ..errors import AgentRunStateError
from ._memory import MemoryCheckpointStore

__all__ = ("STORE_LIFETIME_CODE", "check_store_lifetimes", "process_local")

#: The code of a durable run refused because its session store dies with the process.
STORE_LIFETIME_CODE = "ERR_PRISM_SESSION_STORE_LIFETIME"


def process_local(store: Any) -> bool:
    """Whether ``store`` lives only as long as the process: the built-in memory stores, or a
    store that says so with a ``process_local`` attribute (a wrapper forwards its inner one's).
    """
    marker = getattr(store, "process_local", None)
    if isinstance(marker, bool):
        return marker
    return isinstance(store, MemoryCheckpointStore)


def check_store_lifetimes(checkpoints: Any, session_store: Any) -> None:
    """Refuse a durable run whose checkpoints outlive the process but whose session does not.

    Raises :class:`~prism_core.errors.AgentRunStateError` (``ERR_PRISM_SESSION_STORE_LIFETIME``)
    saying what to pass; it reads nothing and writes nothing.
    """
    if process_local(checkpoints) or not process_local(session_store):
        return
    raise AgentRunStateError(
        "this durable run writes checkpoints that outlive the process, but its session is kept "
        "in memory, so the run could never be resumed after a restart: pass a persistent "
        "session store, create_agent(store=open_session_store(url, plugins=...)) (or "
        "create_session(store=...)), or use create_memory_checkpoint_store() for runs that "
        "only resume in this process",
        code=STORE_LIFETIME_CODE,
    )
