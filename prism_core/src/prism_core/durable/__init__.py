"""Durable runs below the run loop: checkpoints, run state, the writer, leases, fingerprints.

This is the durable boundary: ``runs/`` (and everything above it) imports durable names from
here, never from the private modules behind it, so the checkpointing side can change its
internals without the run loop noticing. Nothing in ``durable/`` imports ``runs/``,
``resume/``, ``sessions/`` or ``agents``; the run is read through :class:`HostRun`. This
module only re-exports; it must not hold behaviour.

It re-exports the public names of ``durable/`` that the layers above need. The store contract
defined here (the checkpoint protocol and records, the capabilities, the memory store, the
helpers, ``StorePair``) has one public home, :mod:`prism_core.stores`; this module must not
export it too. The resume API lives in
:mod:`prism_core.resume`, a layer above; this module must not name it.
"""

from __future__ import annotations

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
from ._lifetime import check_store_lifetimes
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
from ._receipts import EXECUTED, EXECUTION_FAILED, IN_DOUBT, RECEIPT_OUTCOMES, WORKER_CHANNEL
from ._run import DurableRun, RunStateInfo
from ._run_guards import run_guardrail_identities
from ._state import (
    MAX_PERSISTED_TOOL_NAMES,
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

__all__ = (
    "AGENT_RUN_NAMESPACE",
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
    "MAX_PENDING_DECISIONS",
    "MAX_PERSISTED_TOOL_NAMES",
    "NESTED_APPROVAL_PREFIX",
    "RECEIPT_OUTCOMES",
    "WORKER_CHANNEL",
    "AgentRunState",
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
    "PendingCall",
    "PendingDecision",
    "RunStateInfo",
    "RunStateOptions",
    "StickyDecision",
    "agent_fingerprint",
    "expire_agent_runs",
    "expired_reason",
    "fingerprint_parts",
    "arguments_hash",
    "check_store_lifetimes",
    "child_run_id",
    "child_session_id",
    "coerce_run_state_options",
    "in_doubt_calls",
    "in_doubt_error",
    "nested_approval_id",
    "new_approval_id",
    "run_guardrail_identities",
    "scope_for",
)
