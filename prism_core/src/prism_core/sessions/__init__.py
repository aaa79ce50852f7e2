"""Sessions: entries, the ``SessionStore`` protocol, the memory store and ``AgentSession``."""

from ._branch import COMPACTION_SUMMARY_PREFIX, branch_messages
from ._decode import decode_session_entry
from ._entries import ENTRY_KINDS, EntryKind, SessionEntry, create_session_entry, new_entry_id
from ._memory import MemorySessionStore, create_memory_session_store
from ._run_tail import (
    BranchAndRunTail,
    BranchAndRunTailReader,
    branch_and_run_tail,
    read_branch_and_run_tail,
)
from ._session import AgentSession, SessionClosedError
from ._store import UNSET, SessionConflictError, SessionEntryNotFoundError, SessionStore

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
