"""The face for store authors and for hosts that open stores: one place to import from.

A store distribution implements :class:`CheckpointStore` and :class:`SessionStore`, may offer
the optional capabilities below (a shared commit, a status index, lease renewal, a branch
read in the same round trip), checks its inputs with the helpers, and runs the conformance
suites of :mod:`prism_core.testing`. A host opens stores from a URL with :func:`open_stores`
(a pair that commits together) or one by one. This module only re-exports; it must not hold
behaviour.
"""

from ..durable._capabilities import (
    CheckpointAndBranchLoader,
    CheckpointStatusIndex,
    LeaseRenewalStore,
    SharedCommitStore,
    StoreTransaction,
    capability,
    shared_transaction,
)
from ..durable._checkpoints import (
    CORRUPT_CHECKPOINT_CODE,
    MAX_CHECKPOINT_PAGE_SIZE,
    CheckpointLimitError,
    CheckpointPage,
    CheckpointRecord,
    CheckpointStore,
    CheckpointStoreError,
    CheckpointStoreUnavailableError,
    InvalidCheckpointError,
    SaveRequest,
    check_name,
    conflict,
    corrupt_record,
    decode_cursor,
    decode_stored_metadata,
    decode_stored_value,
    encode_cursor,
    list_arguments,
    normalise_ownership,
    stored_int,
    validate_list,
    validate_save,
)
from ..durable._index import MAX_INDEXED_STATUS_CHARS, check_status, indexed_status
from ..durable._memory import MemoryCheckpointStore, create_memory_checkpoint_store
from ..errors import CheckpointConflictError
from ..records._decode import decode_session_entry
from ..records._entries import (
    ENTRY_KINDS,
    EntryKind,
    SessionEntry,
    create_session_entry,
    new_entry_id,
)
from ..records._memory import MemorySessionStore, create_memory_session_store
from ..records._run_tail import (
    BranchAndRunTail,
    BranchAndRunTailReader,
    branch_and_run_tail,
    read_branch_and_run_tail,
)
from ..records._store import UNSET, SessionConflictError, SessionEntryNotFoundError, SessionStore
from ._pair import StorePair
from ._url import STORE_INSTALL_HINTS, open_checkpoint_store, open_session_store, open_stores

__all__ = (
    "CORRUPT_CHECKPOINT_CODE",
    "ENTRY_KINDS",
    "MAX_CHECKPOINT_PAGE_SIZE",
    "MAX_INDEXED_STATUS_CHARS",
    "STORE_INSTALL_HINTS",
    "UNSET",
    "BranchAndRunTail",
    "BranchAndRunTailReader",
    "CheckpointAndBranchLoader",
    "CheckpointConflictError",
    "CheckpointLimitError",
    "CheckpointPage",
    "CheckpointRecord",
    "CheckpointStatusIndex",
    "CheckpointStore",
    "CheckpointStoreError",
    "CheckpointStoreUnavailableError",
    "EntryKind",
    "InvalidCheckpointError",
    "LeaseRenewalStore",
    "MemoryCheckpointStore",
    "MemorySessionStore",
    "SaveRequest",
    "SessionConflictError",
    "SessionEntry",
    "SessionEntryNotFoundError",
    "SessionStore",
    "SharedCommitStore",
    "StorePair",
    "StoreTransaction",
    "branch_and_run_tail",
    "capability",
    "check_name",
    "check_status",
    "conflict",
    "corrupt_record",
    "create_memory_checkpoint_store",
    "create_memory_session_store",
    "create_session_entry",
    "decode_cursor",
    "decode_session_entry",
    "decode_stored_metadata",
    "decode_stored_value",
    "encode_cursor",
    "indexed_status",
    "list_arguments",
    "new_entry_id",
    "normalise_ownership",
    "open_checkpoint_store",
    "open_session_store",
    "open_stores",
    "read_branch_and_run_tail",
    "shared_transaction",
    "stored_int",
    "validate_list",
    "validate_save",
)
