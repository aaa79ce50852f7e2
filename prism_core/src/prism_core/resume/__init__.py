"""Resuming durable runs: the public resume API, the resume pipeline, restore hooks, listing.

``resume/`` sits above the run loop (it starts the resumed run) and below ``agents`` and
``sessions/``: it reads the agent and the session it rebuilds through the protocols of
``resume/_ports.py``. It only re-exports the public names of ``resume/``; it must not hold
behaviour.
"""

from ._api import (
    AgentRunLifecycle,
    ResumeEventStream,
    create_agent_run_lifecycle,
    decide_agent_run,
    resume_agent_run,
    resume_agent_run_stream,
)
from ._checks import AgentRunStatus, load_agent_run_state
from ._input import (
    MAX_APPROVAL_ID_CHARS,
    MAX_DECISION_BATCH,
    MAX_DECISION_PAYLOAD_BYTES,
    MAX_DECISION_REASON_BYTES,
    MAX_EXPECTED_VERSION,
    AgentRunRef,
    DecisionOutcome,
    LegacyDecision,
    ResumeInput,
    RunDecision,
    coerce_run_ref,
    validate_resume_input,
)
from ._inspect import (
    AgentRunDetail,
    CallView,
    InDoubtCallView,
    PendingCallView,
    inspect_agent_run,
)
from ._listing import (
    AgentRunPage,
    AgentRunSummary,
    is_recoverable,
    lease_expires_at,
    list_agent_runs,
    summarize_run,
)
from ._observe import ObservedEvent, RunLeftError, observation_point, observe_agent_run
from ._preview import ResumePreview, preview_resume
from ._resolver import call_resolve_agent
from ._restore import CheckpointRestoreContext
from ._retention import (
    SessionActiveError,
    SessionDeletionUnsupportedError,
    SessionErasure,
    erase_session,
    purge_agent_runs,
)
from ._signal import ResumeAbortedError

__all__ = (
    "MAX_APPROVAL_ID_CHARS",
    "MAX_DECISION_BATCH",
    "MAX_DECISION_PAYLOAD_BYTES",
    "MAX_DECISION_REASON_BYTES",
    "MAX_EXPECTED_VERSION",
    "AgentRunDetail",
    "AgentRunLifecycle",
    "AgentRunPage",
    "AgentRunRef",
    "AgentRunStatus",
    "AgentRunSummary",
    "CallView",
    "CheckpointRestoreContext",
    "DecisionOutcome",
    "InDoubtCallView",
    "LegacyDecision",
    "ObservedEvent",
    "PendingCallView",
    "ResumeAbortedError",
    "RunLeftError",
    "ResumeEventStream",
    "ResumeInput",
    "ResumePreview",
    "RunDecision",
    "SessionActiveError",
    "SessionDeletionUnsupportedError",
    "SessionErasure",
    "coerce_run_ref",
    "call_resolve_agent",
    "create_agent_run_lifecycle",
    "decide_agent_run",
    "erase_session",
    "inspect_agent_run",
    "is_recoverable",
    "lease_expires_at",
    "list_agent_runs",
    "observation_point",
    "observe_agent_run",
    "load_agent_run_state",
    "preview_resume",
    "purge_agent_runs",
    "resume_agent_run",
    "resume_agent_run_stream",
    "summarize_run",
    "validate_resume_input",
)
