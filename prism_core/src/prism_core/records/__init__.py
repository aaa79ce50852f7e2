"""Session records: entries, the ``SessionStore`` protocol, the memory store, branch reads.

This is the bottom of the durable stack: the run loop, the checkpoints and the resume pipeline
all read and write session entries through it, and it imports none of them. It only
re-exports the public names of ``records/``; it must not hold behaviour.
"""

from ._branch import COMPACTION_SUMMARY_PREFIX, branch_messages
from ._decode import decode_session_entry
from ._entries import ENTRY_KINDS, EntryKind, SessionEntry, create_session_entry, new_entry_id
from ._memory import MemorySessionStore, create_memory_session_store
from ._meter import ContextMeter
from ._run_tail import (
    BranchAndRunTail,
    BranchAndRunTailReader,
    branch_and_run_tail,
    read_branch_and_run_tail,
)
from ._store import UNSET, SessionConflictError, SessionEntryNotFoundError, SessionStore

__all__ = (
    "COMPACTION_SUMMARY_PREFIX",
    "ENTRY_KINDS",
    "UNSET",
    "BranchAndRunTail",
    "BranchAndRunTailReader",
    "ContextMeter",
    "EntryKind",
    "MemorySessionStore",
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
