"""Durable runs: the checkpoint store contract, run state, suspension and resume."""

from ._api import (
    AgentRunLifecycle,
    ResumeEventStream,
    create_agent_run_lifecycle,
    resume_agent_run,
    resume_agent_run_stream,
)
from ._checkpoints import (
    MAX_CHECKPOINT_PAGE_SIZE,
    CheckpointLimitError,
    CheckpointPage,
    CheckpointRecord,
    CheckpointStore,
    CheckpointStoreError,
    InvalidCheckpointError,
    SaveRequest,
    conflict,
    normalise_ownership,
    validate_list,
    validate_save,
)
from ._decisions import (
    AgentRunRef,
    ResumeInput,
    RunDecision,
    validate_resume_input,
)
from ._fingerprint import (
    agent_fingerprint,
)
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
)
from ._restore import (
    CheckpointRestoreContext,
)
from ._resume import (
    AgentRunStatus,
    load_agent_run_state,
)
from ._run import (
    RunStateInfo,
)
from ._state import (
    AgentRunState,
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
    "HARD_MAX_AGENT_RUN_STATE_BYTES",
    "HARD_MAX_PENDING_DECISIONS",
    "HARD_MAX_STICKY_DECISIONS",
    "MAX_AGENT_RUN_METADATA_BYTES",
    "MAX_CHECKPOINT_PAGE_SIZE",
    "AgentRunLifecycle",
    "AgentRunRef",
    "AgentRunState",
    "AgentRunStatus",
    "CheckpointLimitError",
    "CheckpointPage",
    "CheckpointRecord",
    "CheckpointRestoreContext",
    "CheckpointStore",
    "CheckpointStoreError",
    "DecisionScope",
    "Interruption",
    "InvalidCheckpointError",
    "MemoryCheckpointStore",
    "PendingCall",
    "PendingDecision",
    "ResumeEventStream",
    "ResumeInput",
    "RunDecision",
    "RunStateInfo",
    "RunStateOptions",
    "SaveRequest",
    "StickyDecision",
    "agent_fingerprint",
    "arguments_hash",
    "conflict",
    "create_agent_run_lifecycle",
    "create_memory_checkpoint_store",
    "load_agent_run_state",
    "normalise_ownership",
    "resume_agent_run",
    "resume_agent_run_stream",
    "validate_list",
    "validate_resume_input",
    "validate_save",
)
