"""What a run looks like as an A2A task: its state, its status message, its answer, its history.

One table maps a run's status to a task state, for the live updates and for ``tasks/get``
alike; the other pieces are built the same way in both, so a task read from the checkpoint
after a restart looks like the one the stream ended with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus

from prism_core import AgentRunStatus, ErrorInfo, SessionEntry

from ._runs import MESSAGE_ID_KEY

__all__ = (
    "ANSWER_ARTIFACT_ID",
    "TASK_STATES",
    "agent_message",
    "answer_artifact",
    "error_message",
    "pending_decisions",
    "suspended_message",
    "task_view",
)

#: A run's status → the state of its task.
TASK_STATES: Mapping[str, TaskState] = {
    "running": TaskState.TASK_STATE_WORKING,
    "suspended": TaskState.TASK_STATE_INPUT_REQUIRED,
    "succeeded": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "aborted": TaskState.TASK_STATE_CANCELED,
    "denied": TaskState.TASK_STATE_CANCELED,
}

#: The id of the artifact that carries a finished run's answer.
ANSWER_ARTIFACT_ID = "answer"


def pending_decisions(interruption: Any) -> list[dict[str, Any]]:
    """One entry per decision the suspended run waits for (never the call's arguments)."""
    return [
        {
            "approval_id": decision.approval_id,
            "tool_name": decision.scope.tool_name if decision.scope is not None else None,
            "tool_call_id": decision.tool_call_id,
            "kind": decision.kind,
            "reason": decision.reason,
        }
        for decision in interruption.pending_decisions
    ]


def agent_message(task_id: str, context_id: str, parts: list[Part], message_id: str) -> Message:
    """An agent message of the task."""
    return Message(
        role=Role.ROLE_AGENT,
        parts=parts,
        message_id=message_id,
        task_id=task_id,
        context_id=context_id,
    )


def suspended_message(task_id: str, context_id: str, interruption: Any, version: int) -> Message:
    """The status message of a task that waits for decisions: a line of text and the data
    part ``{"pending_decisions": [...]}``."""
    pending = pending_decisions(interruption)
    text = f"waiting for {len(pending)} decision(s)"
    parts = [new_text_part(text), new_data_part({"pending_decisions": pending})]
    return agent_message(task_id, context_id, parts, f"{task_id}:suspended:{version}")


def error_message(task_id: str, context_id: str, error: ErrorInfo | None) -> Message:
    """The status message of a failed task: the error's text and ``{"error": {...}}``."""
    message = error.message if error is not None else "the run failed"
    code = error.code if error is not None else None
    parts = [new_text_part(message), new_data_part({"error": {"code": code, "message": message}})]
    return agent_message(task_id, context_id, parts, f"{task_id}:error")


def answer_artifact(text: str) -> Artifact:
    """The artifact that carries a finished run's answer."""
    return Artifact(artifact_id=ANSWER_ARTIFACT_ID, name="answer", parts=[new_text_part(text)])


def _text(message: Any) -> str:
    return "".join(
        block.text for block in message.content if getattr(block, "type", None) == "text"
    )


def _history(
    entries: Iterable[SessionEntry], task_id: str, context_id: str, input_id: str | None
) -> tuple[list[Message], str | None]:
    """The run's user and assistant messages that hold text (the first user message under
    ``input_id``, the A2A id of the message that started the run), and the last answer."""
    history: list[Message] = []
    answer: str | None = None
    for entry in entries:
        message = entry.message
        if entry.run_id != task_id or message is None or message.role not in ("user", "assistant"):
            continue
        text = _text(message)
        if not text:
            continue
        role = Role.ROLE_USER if message.role == "user" else Role.ROLE_AGENT
        message_id = entry.id
        if role == Role.ROLE_USER and input_id is not None:
            message_id, input_id = input_id, None
        history.append(
            Message(
                role=role,
                parts=[new_text_part(text)],
                message_id=message_id,
                task_id=task_id,
                context_id=context_id,
            )
        )
        if message.role == "assistant":
            answer = text
    return history, answer


async def task_view(
    found: AgentRunStatus, sessions: Any, *, updated_at: float | None = None
) -> Task:
    """The task of the run ``found`` describes, as its checkpoint and session record it;
    ``updated_at`` (epoch seconds: when the checkpoint was written) is its status timestamp."""
    state = found.state
    task_id, context_id = state.run_id, state.session_id
    entries = (
        await sessions.read_branch_path(context_id, state.leaf_id)
        if state.leaf_id is not None
        else []
    )
    input_id = (found.metadata or {}).get(MESSAGE_ID_KEY)
    history, answer = _history(entries, task_id, context_id, input_id)
    status = TaskStatus(state=TASK_STATES[state.status])
    if updated_at is not None:
        status.timestamp.FromNanoseconds(round(updated_at * 1e9))
    artifacts: list[Artifact] = []
    if state.status == "suspended" and state.interruption is not None:
        status.message.CopyFrom(
            suspended_message(task_id, context_id, state.interruption, found.version)
        )
    elif state.status == "failed":
        status.message.CopyFrom(error_message(task_id, context_id, state.error))
    elif state.status == "succeeded":
        artifacts.append(answer_artifact(answer or ""))
    return Task(
        id=task_id, context_id=context_id, status=status, history=history, artifacts=artifacts
    )
