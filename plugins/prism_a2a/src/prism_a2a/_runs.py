"""The Prism side of the endpoint: one agent's durable runs on the host's two stores.

The agent is hosted for each caller (:meth:`prism_core.Agent.hosted`: every-turn checkpoints
under the caller's ownership; the agent keeps the rest of its own ``run_state``). A run names
the caller's actor as its starter; a resume carries a ``decisions`` batch (never ``continue``
or ``resolutions``: those are host actions) and a cancel is a ``deny``, both audited with the
caller's actor and channel. Nothing here knows the A2A protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    AgentRunStatus,
    Principal,
    ResumeEventStream,
    RunEventStream,
    StorePair,
    load_agent_run_state,
    resume_agent_run,
    resume_agent_run_stream,
)
from prism_web import Forbidden

from ._errors import InputRefused

__all__ = ("MAX_MESSAGE_ID_CHARS", "MESSAGE_ID_KEY", "PrismRuns", "Scope")

#: The caller's ownership scope (``None``: the unscoped tenant).
Scope = Mapping[str, str] | None
#: The checkpoint metadata key that holds the A2A id of the message that started the run.
MESSAGE_ID_KEY = "a2a.message_id"
#: The longest message id a new task may start with (it rides every checkpoint).
MAX_MESSAGE_ID_CHARS = 256
#: The kernel's refusal to host an agent for another owner than its ``run_state`` names.
_HOSTED_OWNER = "ERR_PRISM_HOSTED_OWNER"


class PrismRuns:
    """Starts, reads, resumes and denies the runs of ``agent`` on ``stores`` (the agent runs
    on them whatever stores it was built with)."""

    def __init__(
        self,
        agent: Any,
        *,
        definition_revision: str,
        stores: StorePair,
        interrupt_before_tool: bool = False,
        restore_hooks: Sequence[Any] = (),
    ) -> None:
        if not isinstance(definition_revision, str) or not definition_revision:
            raise ValueError("definition_revision must be a non-empty string")
        if not (agent.id or agent.name):
            raise ValueError("an agent served over A2A needs an id or a name: its runs are durable")
        self.agent = agent
        self.agent_id: str = agent.id or agent.name or ""
        self.definition_revision = definition_revision
        self.stores = stores
        self.checkpoints = stores.checkpoints
        self.sessions = stores.sessions
        self.interrupt_before_tool = interrupt_before_tool
        self.restore_hooks = tuple(restore_hooks)
        # Hosted once now, so a run_state the kernel refuses fails at create_a2a_app, not per
        # request (an agent that names its owner is checked against each caller).
        try:
            self._hosted(None)
        except AgentRunStateError as exc:
            if exc.code != _HOSTED_OWNER:
                raise

    def _hosted(self, scope: Scope, **options: Any) -> Any:
        return self.agent.hosted(
            self.stores,
            definition_revision=self.definition_revision,
            ownership=scope,
            interrupt_before_tool=self.interrupt_before_tool,
            **options,
        )

    def check_caller(self, caller: Principal) -> None:
        """:class:`~prism_web.Forbidden` when the agent's own ``run_state`` names another
        owner than ``caller``'s."""
        self.for_caller(caller.scope)

    def for_caller(self, scope: Scope, **options: Any) -> Any:
        """The agent hosted for the owner ``scope`` (``options``: more of
        :meth:`~prism_core.Agent.hosted`'s)."""
        try:
            return self._hosted(scope, **options)
        except AgentRunStateError as exc:
            if exc.code == _HOSTED_OWNER:
                raise Forbidden("this agent runs for another owner") from None
            raise

    async def start(
        self,
        session_id: str,
        text: str,
        caller: Principal,
        leaf_id: str | None,
        message_id: str,
    ) -> RunEventStream:
        """A new durable run of ``text`` on session ``session_id`` for ``caller`` (its
        starter), after its entry ``leaf_id`` (``None``: after its newest entry); not started
        until read. ``message_id`` (the A2A id of the message that started it) rides every
        checkpoint of the run."""
        if len(message_id) > MAX_MESSAGE_ID_CHARS:
            raise InputRefused(f"a message id may be at most {MAX_MESSAGE_ID_CHARS} characters")
        agent = self.for_caller(caller.scope, checkpoint_metadata={MESSAGE_ID_KEY: message_id})
        session = agent.create_session(id=session_id, leaf_id=leaf_id)
        if leaf_id is None:
            await session.checkout()
        stream: RunEventStream = session.stream(text, actor=caller.actor)
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

    def resume(self, found: AgentRunStatus, decisions: Any, caller: Principal) -> ResumeEventStream:
        """The resume stream of a ``decisions`` batch for the run ``found`` describes, claimed
        at the version it was read at (a concurrent resume makes this one a conflict),
        audited with ``caller``'s actor and channel."""
        return resume_agent_run_stream(
            self.for_caller(caller.scope),
            _ref(found),
            {"expected_version": found.version, "decisions": decisions, **_audit(caller)},
            checkpoints=self.checkpoints,
            definition_revision=self.definition_revision,
            restore_hooks=self.restore_hooks,
            ownership=caller.scope,
        )

    async def deny(self, found: AgentRunStatus, caller: Principal) -> str:
        """Deny the suspended run ``found`` describes (none of its pending calls runs),
        audited with ``caller``'s actor and channel; its status afterwards."""
        result = await resume_agent_run(
            self.for_caller(caller.scope),
            _ref(found),
            {"expected_version": found.version, "decision": "deny", **_audit(caller)},
            checkpoints=self.checkpoints,
            definition_revision=self.definition_revision,
            restore_hooks=self.restore_hooks,
            ownership=caller.scope,
        )
        return str(result.status)


def _audit(caller: Principal) -> dict[str, Any]:
    """Who the audit names: the authorized caller and its door, never what a message says."""
    return {"actor": caller.actor, "channel": caller.channel}


def _ref(found: AgentRunStatus) -> dict[str, str]:
    return {"run_id": found.state.run_id, "session_id": found.state.session_id}
