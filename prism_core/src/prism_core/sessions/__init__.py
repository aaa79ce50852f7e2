"""Sessions: ``AgentSession``, the object a host runs an agent on.

The session records it appends (entries, the ``SessionStore`` protocol, the memory store,
branch reads) live in :mod:`prism_core.records`, below the run loop; this package re-exports
them for one release, so ``from prism_core.sessions import SessionEntry`` keeps working. It
only re-exports; it must not hold behaviour.
"""

from ..records import (
    COMPACTION_SUMMARY_PREFIX,
    ENTRY_KINDS,
    UNSET,
    BranchAndRunTail,
    BranchAndRunTailReader,
    EntryKind,
    MemorySessionStore,
    SessionConflictError,
    SessionEntry,
    SessionEntryNotFoundError,
    SessionStore,
    branch_and_run_tail,
    branch_messages,
    create_memory_session_store,
    create_session_entry,
    decode_session_entry,
    new_entry_id,
    read_branch_and_run_tail,
)
from ._session import AgentSession, SessionClosedError

__all__ = (
    "COMPACTION_SUMMARY_PREFIX",
    "ENTRY_KINDS",
    "UNSET",
    "AgentSession",
    "BranchAndRunTail",
    "BranchAndRunTailReader",
    "EntryKind",
    "MemorySessionStore",
    "SessionClosedError",
    "SessionConflictError",
    "SessionEntry",
    "SessionEntryNotFoundError",
    "SessionStore",
    "branch_and_run_tail",
    "branch_messages",
    "create_memory_session_store",
    "create_session_entry",
    "decode_session_entry",
    "new_entry_id",
    "read_branch_and_run_tail",
)
