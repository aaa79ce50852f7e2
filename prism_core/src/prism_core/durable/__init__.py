"""Durable runs below the run loop: checkpoints, run state, the writer, leases, fingerprints.

This is the durable boundary: ``runs/`` (and everything above it) imports durable names from
here, never from the private modules behind it, so the checkpointing side can change its
internals without the run loop noticing. Nothing in ``durable/`` imports ``runs/``,
``resume/``, ``sessions/`` or ``agents``; the run is read through :class:`HostRun`. This
module only re-exports; it must not hold behaviour.

It re-exports the public names of ``durable/`` and the store contract that lives here (for
store authors, :mod:`prism_core.stores` is the face). The resume API lives in
:mod:`prism_core.resume`, a layer above; this module must not name it.
"""

from __future__ import annotations

from ._capabilities import (
    CheckpointAndBranchLoader,
    CheckpointStamp,
    CheckpointStampReader,
    CheckpointStatusIndex,
    LeaseRenewalStore,
    SharedCommitStore,
    StoreTransaction,
    capability,
    shared_transaction,
)
from ._checkpoints import (
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
    UnreadableRecord,
    check_name,
    check_value_bytes,
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
from ._children import (
    NESTED_APPROVAL_PREFIX,
    child_run_id,
    child_session_id,
    nested_approval_id,
)
from ._expiry import EXPIRED, expire_agent_runs, expired_reason
from ._fingerprint import agent_fingerprint, fingerprint_parts
from ._gates import Gate, approvals_for, new_approval_id, scope_for
from ._host import HostCounters, HostRun, HostSession
from ._in_doubt import IN_DOUBT_CODE, in_doubt_calls, in_doubt_error
from ._index import MAX_INDEXED_STATUS_CHARS, check_status, indexed_status
from ._lifetime import check_store_lifetimes
from ._memory import MemoryCheckpointStore, create_memory_checkpoint_store
from ._options import (
    AGENT_RUN_NAMESPACE,
    DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS,
    DEFAULT_MAX_AGENT_RUN_STATE_BYTES,
    DEFAULT_MAX_PENDING_DECISIONS,
    DEFAULT_MAX_STICKY_DECISIONS,
    HARD_MAX_AGENT_RUN_STATE_BYTES,
    HARD_MAX_PENDING_DECISIONS,
    HARD_MAX_STICKY_DECISIONS,
    MAX_AGENT_RUN_METADATA_BYTES,
    RunStateOptions,
    coerce_run_state_options,
)
from ._options import DEFAULT_MAX_PENDING_DECISIONS as MAX_PENDING_DECISIONS
from ._pair import StorePair
from ._receipts import EXECUTED, EXECUTION_FAILED, IN_DOUBT, RECEIPT_OUTCOMES, WORKER_CHANNEL
from ._run import DurableRun, RunStateInfo
from ._run_guards import run_guardrail_identities
from ._state import (
    AgentRunState,
    DecisionKind,
    DecisionRecord,
    DecisionScope,
    Interruption,
    PendingCall,
    PendingDecision,
    StickyDecision,
    arguments_hash,
)
from ._store_base import CheckpointStoreBase
from ._transaction import QueuedAppend, QueuedSave, QueuedTransaction, QueuedWrite

__all__ = (
    "AGENT_RUN_NAMESPACE",
    "CORRUPT_CHECKPOINT_CODE",
    "DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS",
    "DEFAULT_MAX_AGENT_RUN_STATE_BYTES",
    "DEFAULT_MAX_PENDING_DECISIONS",
    "DEFAULT_MAX_STICKY_DECISIONS",
    "EXECUTED",
    "EXECUTION_FAILED",
    "EXPIRED",
    "HARD_MAX_AGENT_RUN_STATE_BYTES",
    "HARD_MAX_PENDING_DECISIONS",
    "HARD_MAX_STICKY_DECISIONS",
    "IN_DOUBT",
    "IN_DOUBT_CODE",
    "MAX_AGENT_RUN_METADATA_BYTES",
    "MAX_CHECKPOINT_PAGE_SIZE",
    "MAX_INDEXED_STATUS_CHARS",
    "MAX_PENDING_DECISIONS",
    "NESTED_APPROVAL_PREFIX",
    "RECEIPT_OUTCOMES",
    "WORKER_CHANNEL",
    "AgentRunState",
    "CheckpointAndBranchLoader",
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
    "DecisionKind",
    "DecisionRecord",
    "DecisionScope",
    "DurableRun",
    "Gate",
    "approvals_for",
    "HostCounters",
    "HostRun",
    "HostSession",
    "Interruption",
    "InvalidCheckpointError",
    "LeaseRenewalStore",
    "MemoryCheckpointStore",
    "PendingCall",
    "PendingDecision",
    "QueuedAppend",
    "QueuedSave",
    "QueuedTransaction",
    "QueuedWrite",
    "RunStateInfo",
    "RunStateOptions",
    "SaveRequest",
    "UnreadableRecord",
    "SharedCommitStore",
    "StickyDecision",
    "StorePair",
    "StoreTransaction",
    "agent_fingerprint",
    "expire_agent_runs",
    "expired_reason",
    "fingerprint_parts",
    "arguments_hash",
    "capability",
    "check_name",
    "check_status",
    "check_value_bytes",
    "check_store_lifetimes",
    "child_run_id",
    "child_session_id",
    "coerce_run_state_options",
    "create_memory_checkpoint_store",
    "conflict",
    "corrupt_record",
    "decode_cursor",
    "decode_stored_metadata",
    "decode_stored_value",
    "encode_cursor",
    "in_doubt_calls",
    "in_doubt_error",
    "indexed_status",
    "list_arguments",
    "nested_approval_id",
    "new_approval_id",
    "normalise_ownership",
    "run_guardrail_identities",
    "scope_for",
    "shared_transaction",
    "stored_int",
    "validate_list",
    "validate_save",
)
