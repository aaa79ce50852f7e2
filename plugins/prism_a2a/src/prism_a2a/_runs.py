"""The Prism side of the endpoint: one agent's durable runs on the host's two stores.

Every run starts with every-turn checkpoints under the caller's ownership; a resume carries a
``decisions`` batch (never ``continue`` or ``resolutions``: those are host actions), a cancel
is a ``deny``. Nothing here knows the A2A protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStatus,
    CheckpointStore,
    ResumeEventStream,
    RunEventStream,
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
    resume_agent_run_stream,
)

from ._errors import InputRefused

__all__ = ("MAX_MESSAGE_ID_CHARS", "MESSAGE_ID_KEY", "PrismRuns", "Scope")

#: The caller's ownership scope (``None``: the unscoped tenant).
Scope = Mapping[str, str] | None
#: The checkpoint metadata key that holds the A2A id of the message that started the run.
MESSAGE_ID_KEY = "a2a.message_id"
#: The longest message id a new task may start with (it rides every checkpoint).
MAX_MESSAGE_ID_CHARS = 256


class PrismRuns:
    """Starts, reads, resumes and denies the runs of ``agent`` on ``checkpoints`` and
    ``sessions`` (the agent runs on ``sessions`` whatever store it was built with)."""

    def __init__(
        self,
        agent: Any,
        *,
        definition_revision: str,
        checkpoints: CheckpointStore,
        sessions: Any,
        interrupt_before_tool: bool = False,
        restore_hooks: Sequence[Any] = (),
    ) -> None:
        if not isinstance(definition_revision, str) or not definition_revision:
            raise ValueError("definition_revision must be a non-empty string")
        if not (agent.id or agent.name):
            raise ValueError("an agent served over A2A needs an id or a name: its runs are durable")
        if getattr(agent, "store", None) is not sessions:
            # A copy: the host's agent object keeps its own store.
            agent = agent.evolve(store=sessions)
        self.agent = agent
        self.agent_id: str = agent.id or agent.name or ""
        self.definition_revision = definition_revision
        self.checkpoints = checkpoints
        self.sessions = sessions
        self.interrupt_before_tool = interrupt_before_tool
        self.restore_hooks = tuple(restore_hooks)

    async def start(
        self, session_id: str, text: str, scope: Scope, leaf_id: str | None, message_id: str
    ) -> RunEventStream:
        """A new durable run of ``text`` on session ``session_id``, after its entry ``leaf_id``
        (``None``: after its newest entry); not started until read. ``message_id`` (the A2A
        id of the message that started it) rides every checkpoint of the run."""
        if len(message_id) > MAX_MESSAGE_ID_CHARS:
            raise InputRefused(f"a message id may be at most {MAX_MESSAGE_ID_CHARS} characters")
        state = RunStateOptions(
            self.checkpoints,
            self.definition_revision,
            checkpoint_policy="every-turn",
            interrupt_before_tool=self.interrupt_before_tool,
            ownership=dict(scope) if scope is not None else None,
            checkpoint_metadata={MESSAGE_ID_KEY: message_id},
        )
        session = self.agent.create_session(id=session_id, leaf_id=leaf_id)
        if leaf_id is None:
            await session.checkout()
        stream: RunEventStream = session.stream(text, run_state=state)
        return stream

    async def status(self, run_id: str, scope: Scope) -> AgentRunStatus | None:
        """The run as its checkpoint records it, or ``None`` when it is absent, foreign, or a
        run of another agent."""
        found = await load_agent_run_state(self.checkpoints, {"run_id": run_id}, ownership=scope)
        if found is None or found.state.agent_id != self.agent_id:
            return None
        return found

    async def updated_at(self, run_id: str, scope: Scope) -> float | None:
        """When the run's checkpoint was last written (epoch seconds), or ``None`` when it is
        absent or foreign."""
        record = await self.checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=scope)
        return None if record is None else record.updated_at

    def resume(self, found: AgentRunStatus, decisions: Any, scope: Scope) -> ResumeEventStream:
        """The resume stream of a ``decisions`` batch for the run ``found`` describes, claimed
        at the version it was read at (a concurrent resume makes this one a conflict)."""
        return resume_agent_run_stream(
            self.agent,
            _ref(found),
            {"expected_version": found.version, "decisions": decisions},
            checkpoints=self.checkpoints,
            definition_revision=self.definition_revision,
            restore_hooks=self.restore_hooks,
            ownership=scope,
        )

    async def deny(self, found: AgentRunStatus, scope: Scope) -> str:
        """Deny the suspended run ``found`` describes (none of its pending calls runs); its
        status afterwards."""
        result = await resume_agent_run(
            self.agent,
            _ref(found),
            {"expected_version": found.version, "decision": "deny"},
            checkpoints=self.checkpoints,
            definition_revision=self.definition_revision,
            restore_hooks=self.restore_hooks,
            ownership=scope,
        )
        return str(result.status)


def _ref(found: AgentRunStatus) -> dict[str, str]:
    return {"run_id": found.state.run_id, "session_id": found.state.session_id}
