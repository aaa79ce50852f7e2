"""The normalized events a run streams. Every event has ``type``, ``session_id`` and ``run_id``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

from .content import ErrorInfo, Message, ToolResult, Usage
from .guardrails._decisions import GuardrailRecord
from .limits import RunLimitBreach

__all__ = (
    "AgentDeniedEvent",
    "AgentEvent",
    "AgentFinishedEvent",
    "AgentResumedEvent",
    "AgentStartedEvent",
    "AgentSuspendedEvent",
    "AttentionCompiledEvent",
    "BudgetExhaustedEvent",
    "CompactionFinishedEvent",
    "CompactionStartedEvent",
    "ErrorEvent",
    "EventSubscriberOverflowEvent",
    "GuardrailDecisionEvent",
    "MessageDelta",
    "MessageDeltaEvent",
    "MessageFinishedEvent",
    "MessageStartedEvent",
    "RetryScheduledEvent",
    "RunLimitExceededEvent",
    "SteerRejectedEvent",
    "SubAgentEvent",
    "ToolExecutionBlockedEvent",
    "ToolExecutionErrorEvent",
    "ToolExecutionFinishedEvent",
    "ToolExecutionProgressEvent",
    "ToolExecutionStartedEvent",
    "TurnFinishedEvent",
    "TurnStartedEvent",
)


@attrs.frozen(kw_only=True)
class AgentStartedEvent:
    """A run (or a resumed run) started."""

    session_id: str
    run_id: str
    type: Literal["agent_started"] = "agent_started"


@attrs.frozen(kw_only=True)
class TurnStartedEvent:
    """A provider turn is about to be assembled and requested. ``turn`` counts from 1."""

    session_id: str
    run_id: str
    turn: int
    type: Literal["turn_started"] = "turn_started"


@attrs.frozen(kw_only=True)
class MessageStartedEvent:
    """The provider began an assistant message."""

    session_id: str
    run_id: str
    role: str = "assistant"
    type: Literal["message_started"] = "message_started"


@attrs.frozen(kw_only=True)
class MessageDelta:
    """One streamed fragment: text, thinking, or a tool-call fragment (live only, never stored)."""

    kind: Literal["text", "thinking", "tool_call"]
    text: str | None = None
    index: int | None = None
    id: str | None = None
    name: str | None = None
    arguments_text: str | None = None


@attrs.frozen(kw_only=True)
class MessageDeltaEvent:
    """A streamed fragment of the assistant message."""

    session_id: str
    run_id: str
    delta: MessageDelta
    type: Literal["message_delta"] = "message_delta"


@attrs.frozen(kw_only=True)
class MessageFinishedEvent:
    """The complete assistant message of the turn (final tool calls, no deltas)."""

    session_id: str
    run_id: str
    message: Message
    #: The provider's finish reason for this turn (``"stop"``, ``"tool_calls"``, ``"length"``
    #: ...), when it gave one.
    finish_reason: str | None = None
    type: Literal["message_finished"] = "message_finished"


@attrs.frozen(kw_only=True)
class TurnFinishedEvent:
    """A provider turn and its tool round completed."""

    session_id: str
    run_id: str
    turn: int
    usage: Usage | None = None
    tool_calls: int = 0
    type: Literal["turn_finished"] = "turn_finished"


@attrs.frozen(kw_only=True)
class ToolExecutionStartedEvent:
    """A complete tool call passed every check and its tool is about to run."""

    session_id: str
    run_id: str
    tool_call_id: str
    name: str
    arguments: Any = None
    type: Literal["tool_execution_started"] = "tool_execution_started"


@attrs.frozen(kw_only=True)
class ToolExecutionProgressEvent:
    """A running tool reported progress through its context."""

    session_id: str
    run_id: str
    tool_call_id: str
    name: str
    progress: Any = None
    type: Literal["tool_execution_progress"] = "tool_execution_progress"


@attrs.frozen(kw_only=True)
class ToolExecutionFinishedEvent:
    """A tool call produced its result (which may be an error result)."""

    session_id: str
    run_id: str
    tool_call_id: str
    name: str
    result: ToolResult
    type: Literal["tool_execution_finished"] = "tool_execution_finished"


@attrs.frozen(kw_only=True)
class ToolExecutionErrorEvent:
    """A tool raised; the run continues with an error result."""

    session_id: str
    run_id: str
    tool_call_id: str
    name: str
    error: ErrorInfo
    type: Literal["tool_execution_error"] = "tool_execution_error"


@attrs.frozen(kw_only=True)
class ToolExecutionBlockedEvent:
    """A tool call failed closed before its side effect (unknown, not allowed, invalid, guarded)."""

    session_id: str
    run_id: str
    tool_call_id: str
    name: str
    reason: str
    error: ErrorInfo
    type: Literal["tool_execution_blocked"] = "tool_execution_blocked"


@attrs.frozen(kw_only=True)
class AgentFinishedEvent:
    """The run succeeded."""

    session_id: str
    run_id: str
    status: str = "succeeded"
    text: str = ""
    usage: Usage | None = None
    leaf_id: str | None = None
    #: Why a run stopped on purpose: ``"host_policy"`` (a turn policy's stop), ``"turn_limit"``
    #: (``turn_policy.max_turns``) or ``"hook_limit"`` (stop hooks past
    #: ``limits.max_stop_continuations``); ``None`` when the run ended on its own.
    finish_reason: str | None = None
    #: The same as ``finish_reason`` (as the result's ``stop_reason``).
    stop_reason: str | None = None
    #: The stop's detail: a turn policy's redacted reason, ``"max_turns"`` for a turn limit.
    stop_detail: str | None = None
    type: Literal["agent_finished"] = "agent_finished"


@attrs.frozen(kw_only=True)
class ErrorEvent:
    """The run failed or was aborted (``status``); the run then rejects with ``AgentRunError``."""

    session_id: str
    run_id: str
    error: ErrorInfo
    status: str = "failed"
    type: Literal["error"] = "error"


@attrs.frozen(kw_only=True)
class RunLimitExceededEvent:
    """A run limit was crossed; emitted once, right before the run fails."""

    session_id: str
    run_id: str
    limit: RunLimitBreach
    type: Literal["run_limit_exceeded"] = "run_limit_exceeded"


@attrs.frozen(kw_only=True)
class BudgetExhaustedEvent:
    """Why a limit ended the run, after ``run_limit_exceeded`` and before ``error``: the axis
    (``limit``), what each axis had used (``consumed``), the other axes nearest their limits
    (``closest_other_axes``: ``{"axis", "used", "limit", "ratio"}``, nearest first) and the
    last 10 dispatched calls (``recent_tool_calls``: ``{"tool_name", "tool_call_id",
    "arg_hash"}``, the arguments as ``"sha256:"`` + 64 hex, never raw)."""

    session_id: str
    run_id: str
    limit: str
    consumed: Mapping[str, float] = attrs.field(factory=dict)
    closest_other_axes: tuple[Mapping[str, Any], ...] = ()
    recent_tool_calls: tuple[Mapping[str, str], ...] = ()
    type: Literal["budget_exhausted"] = "budget_exhausted"


@attrs.frozen(kw_only=True)
class AttentionCompiledEvent:
    """The attention compiler trimmed a turn's provider input: ``used`` (estimated tokens
    after), ``cap``, and what it did (``used_before``, ``stubbed_tool_results``,
    ``dropped_thinking_turns``)."""

    session_id: str
    run_id: str
    used: int
    cap: int
    used_before: int = 0
    trigger_ratio: float = 0.0
    stubbed_tool_results: int = 0
    dropped_thinking_turns: int = 0
    type: Literal["attention_compiled"] = "attention_compiled"


@attrs.frozen(kw_only=True)
class RetryScheduledEvent:
    """A failed provider turn (before any output) will be retried after ``delay_ms``."""

    session_id: str
    run_id: str
    attempt: int
    delay_ms: float
    error: ErrorInfo
    type: Literal["retry_scheduled"] = "retry_scheduled"


@attrs.frozen(kw_only=True)
class CompactionStartedEvent:
    """Compaction of the current branch began."""

    session_id: str
    run_id: str | None = None
    type: Literal["compaction_started"] = "compaction_started"


@attrs.frozen(kw_only=True)
class CompactionFinishedEvent:
    """Compaction appended its ``compaction`` entry."""

    session_id: str
    run_id: str | None = None
    entry_id: str | None = None
    summary: str | None = None
    type: Literal["compaction_finished"] = "compaction_finished"


@attrs.frozen(kw_only=True)
class GuardrailDecisionEvent:
    """One guard was evaluated; at a tool stage ``tool_call_id``/``tool_name`` name the call."""

    session_id: str
    run_id: str
    record: GuardrailRecord
    tool_call_id: str | None = None
    tool_name: str | None = None
    type: Literal["guardrail_decision"] = "guardrail_decision"


@attrs.frozen(kw_only=True)
class SteerRejectedEvent:
    """A steered message was blocked by an input guardrail and dropped; the run continues."""

    session_id: str
    run_id: str
    message: Message
    record: GuardrailRecord
    type: Literal["steer_rejected"] = "steer_rejected"


@attrs.frozen(kw_only=True)
class EventSubscriberOverflowEvent:
    """A subscriber's bounded queue overflowed (delivered once, to that subscriber only)."""

    session_id: str
    run_id: str | None
    max_queued_events: int
    overflow: str
    dropped: int = 0
    type: Literal["event_subscriber_overflow"] = "event_subscriber_overflow"


@attrs.frozen(kw_only=True)
class AgentSuspendedEvent:
    """A durable run suspended before a side effect; ``version`` is the checkpoint version."""

    session_id: str
    run_id: str
    interruption: Any
    version: int
    type: Literal["agent_suspended"] = "agent_suspended"


@attrs.frozen(kw_only=True)
class AgentResumedEvent:
    """A durable run was claimed and resumes; ``restore`` audits restore hooks when any ran;
    ``checkpoint_metadata`` is the sidecar map of the checkpoint it resumed from."""

    session_id: str
    run_id: str
    version: int
    decision: str | None = None
    restore: Any = None
    checkpoint_metadata: dict[str, str] | None = None
    type: Literal["agent_resumed"] = "agent_resumed"


@attrs.frozen(kw_only=True)
class AgentDeniedEvent:
    """A suspended durable run was denied and ended ``denied``."""

    session_id: str
    run_id: str
    version: int
    reason: str | None = None
    type: Literal["agent_denied"] = "agent_denied"


@attrs.frozen(kw_only=True)
class SubAgentEvent:
    """An event of a sub-agent run (``agent.as_tool()``), as its parent's subscribers see it.

    ``session_id``/``run_id`` are the parent's; ``tool_call_id`` is the parent's call that runs
    the child, ``child_run_id``/``child_session_id`` name the child run, and ``event`` is the
    child's own event (itself a ``SubAgentEvent`` for a grandchild's)."""

    session_id: str
    run_id: str
    tool_call_id: str
    child_run_id: str
    child_session_id: str
    event: Any
    type: Literal["subagent_event"] = "subagent_event"


AgentEvent: TypeAlias = (
    AgentStartedEvent
    | TurnStartedEvent
    | MessageStartedEvent
    | MessageDeltaEvent
    | MessageFinishedEvent
    | TurnFinishedEvent
    | ToolExecutionStartedEvent
    | ToolExecutionProgressEvent
    | ToolExecutionFinishedEvent
    | ToolExecutionErrorEvent
    | ToolExecutionBlockedEvent
    | AgentFinishedEvent
    | ErrorEvent
    | RunLimitExceededEvent
    | BudgetExhaustedEvent
    | AttentionCompiledEvent
    | RetryScheduledEvent
    | CompactionStartedEvent
    | CompactionFinishedEvent
    | GuardrailDecisionEvent
    | SteerRejectedEvent
    | EventSubscriberOverflowEvent
    | AgentSuspendedEvent
    | AgentResumedEvent
    | AgentDeniedEvent
    | SubAgentEvent
)
