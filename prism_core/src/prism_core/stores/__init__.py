"""The face for store authors and for hosts that open stores: one place to import from.

A store distribution implements :class:`CheckpointStore` and :class:`SessionStore`: a checkpoint
store subclasses :class:`CheckpointStoreBase` and writes one :class:`SaveRequest` in
``save_request`` (callers keep the keyword ``save``). It may offer the optional capabilities
below (a shared commit on a :class:`QueuedTransaction`, a status index, lease renewal, a
branch read in the same round trip, :class:`RunWakeups` for workers in other processes, an
:class:`EffectLedger` of the rows a save carries, deleting a session), which the kernel asks
for with :func:`capability`; it checks its inputs and reads its records back with the helpers,
quotes values in messages with :func:`echo`, and runs the conformance suites of
:mod:`prism_core.testing`. A host opens stores from a URL with :func:`open_stores` (a
:class:`StorePair` that commits together) or one by one.

Store distributions import the kernel only from here and the other public modules
(``prism_core.errors``, ``prism_core.codec``, ``prism_core.hookspecs``). This module only
re-exports; it must not hold behaviour.
"""

from .._capability import capability
from .._echo import echo
from .._effect_record import (
    EFFECT_STATUSES,
    EffectPage,
    EffectRecord,
    EffectStatus,
    effect_from_json,
)
from ..durable._capabilities import (
    CheckpointAndBranchLoader,
    CheckpointBatchStore,
    CheckpointStamp,
    CheckpointStampReader,
    CheckpointStatusIndex,
    CreatesOnFirstUse,
    LeaseRenewalStore,
    SharedCommitStore,
    StoreTransaction,
    shared_transaction,
)
from ..durable._checkpoints import (
    CORRUPT_CHECKPOINT_CODE,
    MAX_CHECKPOINT_PAGE_SIZE,
    MAX_STORED_INT,
    CheckpointLimitError,
    CheckpointPage,
    CheckpointRecord,
    CheckpointStore,
    CheckpointStoreError,
    CheckpointStoreUnavailableError,
    InvalidCheckpointError,
    SaveRequest,
    UnreadableRecord,
    check_name,
    check_value_bytes,
    conflict,
    corrupt_record,
    decode_cursor,
    decode_listed,
    decode_stored_metadata,
    decode_stored_value,
    encode_cursor,
    list_arguments,
    normalise_ownership,
    stored_int,
    validate_list,
    validate_save,
)
from ..durable._effects import (
    DecisionPage,
    DecisionQuery,
    EffectLedger,
    EffectLedgerUnsupportedError,
    EffectQuery,
    FreedSpaceScrubber,
    decode_ledger_cursor,
    encode_ledger_cursor,
)
from ..durable._index import MAX_INDEXED_STATUS_CHARS, check_status, indexed_status
from ..durable._ledger_rows import (
    LedgerDecision,
    LedgerEffect,
    LedgerWrite,
    effect_terms,
    erased_decision,
    erased_effect,
    owner_key,
)
from ..durable._memory import MemoryCheckpointStore, create_memory_checkpoint_store
from ..durable._pair import StorePair
from ..durable._store_base import CheckpointStoreBase
from ..durable._transaction import QueuedAppend, QueuedSave, QueuedTransaction, QueuedWrite
from ..durable._wakeups import LocalWakeups, RunWakeups, RunWatch
from ..errors import CheckpointConflictError
from ..records._decode import decode_entry_columns, decode_session_entry
from ..records._deletion import SessionDeleter
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
    PrefetchedBranchAndRunTail,
    branch_and_run_tail,
    read_branch_and_run_tail,
)
from ..records._store import UNSET, SessionConflictError, SessionEntryNotFoundError, SessionStore
from ._url import STORE_INSTALL_HINTS, open_checkpoint_store, open_session_store, open_stores

__all__ = (
    "CORRUPT_CHECKPOINT_CODE",
    "EFFECT_STATUSES",
    "ENTRY_KINDS",
    "MAX_CHECKPOINT_PAGE_SIZE",
    "MAX_STORED_INT",
    "MAX_INDEXED_STATUS_CHARS",
    "STORE_INSTALL_HINTS",
    "UNSET",
    "BranchAndRunTail",
    "BranchAndRunTailReader",
    "CheckpointAndBranchLoader",
    "CheckpointBatchStore",
    "CheckpointConflictError",
    "CheckpointLimitError",
    "CheckpointPage",
    "CheckpointRecord",
    "CheckpointStamp",
    "CheckpointStampReader",
    "CheckpointStatusIndex",
    "CheckpointStore",
    "CheckpointStoreBase",
    "CheckpointStoreError",
    "CheckpointStoreUnavailableError",
    "CreatesOnFirstUse",
    "DecisionPage",
    "DecisionQuery",
    "EffectLedger",
    "EffectLedgerUnsupportedError",
    "EffectPage",
    "EffectQuery",
    "EffectRecord",
    "EffectStatus",
    "EntryKind",
    "FreedSpaceScrubber",
    "InvalidCheckpointError",
    "LeaseRenewalStore",
    "LedgerDecision",
    "LedgerEffect",
    "LedgerWrite",
    "LocalWakeups",
    "MemoryCheckpointStore",
    "MemorySessionStore",
    "PrefetchedBranchAndRunTail",
    "QueuedAppend",
    "QueuedSave",
    "QueuedTransaction",
    "QueuedWrite",
    "RunWakeups",
    "RunWatch",
    "SaveRequest",
    "SessionConflictError",
    "SessionDeleter",
    "SessionEntry",
    "SessionEntryNotFoundError",
    "SessionStore",
    "SharedCommitStore",
    "StorePair",
    "StoreTransaction",
    "UnreadableRecord",
    "branch_and_run_tail",
    "capability",
    "check_name",
    "check_status",
    "check_value_bytes",
    "conflict",
    "corrupt_record",
    "create_memory_checkpoint_store",
    "create_memory_session_store",
    "create_session_entry",
    "decode_cursor",
    "decode_ledger_cursor",
    "decode_listed",
    "decode_entry_columns",
    "decode_session_entry",
    "decode_stored_metadata",
    "decode_stored_value",
    "echo",
    "effect_from_json",
    "effect_terms",
    "encode_cursor",
    "encode_ledger_cursor",
    "erased_decision",
    "erased_effect",
    "indexed_status",
    "list_arguments",
    "new_entry_id",
    "normalise_ownership",
    "open_checkpoint_store",
    "open_session_store",
    "open_stores",
    "owner_key",
    "read_branch_and_run_tail",
    "shared_transaction",
    "stored_int",
    "validate_list",
    "validate_save",
)
