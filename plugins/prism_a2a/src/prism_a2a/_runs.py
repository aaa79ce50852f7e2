"""The Prism side of the endpoint: one agent's durable runs on the host's two stores.

The agent is hosted for each caller (:meth:`prism_core.Agent.hosted`: every-turn checkpoints
under the caller's ownership, a lease so a worker continues a run this process dropped, and
``notify`` when the face has notifiers; the agent keeps the rest of its own ``run_state``). A
run names the caller's actor as its starter. Deciding is not running: a ``decisions`` batch
(never ``continue`` or ``resolutions``: those are host actions) and a cancel (a ``deny``) are
recorded with :func:`prism_core.decide_agent_run`, audited with the caller's actor and
channel, and a worker (the face's own :class:`prism_web.FaceWorkers`, or any other on the same
stores) runs what was decided. A new run runs in a task of the face's own, never in the
request that started it. Nothing here knows the A2A protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    AgentRunStatus,
    Principal,
    PrismError,
    StorePair,
    ToolCallContent,
    codec,
    decide_agent_run,
    load_agent_run_state,
)
from prism_web import FaceWorkers, Forbidden

from ._errors import InputRefused

__all__ = ("MAX_MESSAGE_ID_CHARS", "MESSAGE_ID_KEY", "PrismRuns", "Scope", "StartedSession")

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
        workers: int = 1,
        lease_ms: int = 30000,
        notifiers: Sequence[Any] = (),
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
        self.lease_ms = lease_ms
        #: The face's workers (decided runs, and the outbox) and its background runs (new ones).
        self.workers = FaceWorkers(
            stores,
            self.resolve,
            workers=workers,
            lease_ms=lease_ms,
            notifiers=notifiers,
            restore_hooks=self.restore_hooks,
        )
        #: Whether the runs this face starts write their state changes to the outbox.
        self.notify = bool(self.workers.notifiers)
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

    def resolve(self, agent_id: str) -> tuple[Any, str] | None:
        """The workers' resolver: this face's agent (with ``interrupt_before_tool`` when the
        face sets it, so a continued run keeps waiting before each call) and its revision;
        ``None`` for another agent."""
        if agent_id != self.agent_id:
            return None
        agent = self.agent
        if self.interrupt_before_tool:
            try:
                agent = self._hosted(None)
            except AgentRunStateError as exc:
                if exc.code != _HOSTED_OWNER:
                    raise
        return agent, self.definition_revision

    def check_caller(self, caller: Principal) -> None:
        """:class:`~prism_web.Forbidden` when the agent's own ``run_state`` names another
        owner than ``caller``'s."""
        self.for_caller(caller.scope)

    def for_caller(self, scope: Scope, **options: Any) -> Any:
        """The agent hosted for the owner ``scope`` under the face's lease and ``notify``
        (``options``: more of :meth:`~prism_core.Agent.hosted`'s)."""
        try:
            # A lease: a run this face started is continued by a worker if the face dies.
            return self._hosted(scope, lease_ms=self.lease_ms, notify=self.notify, **options)
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
        *,
        max_queued_events: int,
    ) -> StartedSession:
        """Start a new durable run of ``text`` on session ``session_id`` for ``caller`` (its
        starter), after its entry ``leaf_id`` (``None``: after its newest entry), in a task of
        the face's own; its events are watched through a subscription opened before it
        starts. ``message_id`` (the A2A id of the message that started it) rides every
        checkpoint of the run."""
        if len(message_id) > MAX_MESSAGE_ID_CHARS:
            raise InputRefused(f"a message id may be at most {MAX_MESSAGE_ID_CHARS} characters")
        agent = self.for_caller(caller.scope, checkpoint_metadata={MESSAGE_ID_KEY: message_id})
        session = agent.create_session(id=session_id, leaf_id=leaf_id)
        if leaf_id is None:
            await session.checkout()
        watching = session.subscribe(max_queued_events=max_queued_events)

        async def run() -> None:
            try:
                await session.run(text, actor=caller.actor)
            except PrismError:
                pass  # a failed or aborted run ends with its own events and checkpoint
            finally:
                await session.close()

        return StartedSession(session, watching, self.workers.start_run(run))

    async def status(self, run_id: str, scope: Scope) -> AgentRunStatus | None:
        """The run as its checkpoint records it, or ``None`` when it is absent, foreign, or a
        run of another agent."""
        found = await load_agent_run_state(self.checkpoints, {"run_id": run_id}, ownership=scope)
        if found is None or found.state.agent_id != self.agent_id:
            return None
        return found

    async def call_arguments(self, found: AgentRunStatus) -> dict[str, Any]:
        """The arguments of the run's tool calls as its transcript holds them, by call id
        (those appended after its last checkpoint included)."""
        state = found.state
        entries = await self.sessions.list(state.session_id)
        arguments: dict[str, Any] = {}
        for entry in entries:
            message = entry.message
            if entry.run_id != state.run_id or message is None or message.role != "assistant":
                continue
            for block in message.content:
                if isinstance(block, ToolCallContent):
                    arguments[block.id] = codec.unstructure(block.arguments)
        return arguments

    async def updated_at(self, run_id: str, scope: Scope) -> float | None:
        """When the run's checkpoint was last written (epoch seconds), or ``None`` when it is
        absent or foreign."""
        record = await self.checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=scope)
        return None if record is None else record.updated_at

    async def decide(
        self, found: AgentRunStatus, decisions: Any, caller: Principal
    ) -> AgentRunStatus:
        """Record a ``decisions`` batch for the run ``found`` describes, at the version it was
        read at (a concurrent decision makes this one a conflict), audited with ``caller``'s
        actor and channel; nothing runs here: the face's workers (started now) run it."""
        decided = await self._decide(
            found, {"decisions": decisions, **_audit(caller)}, caller.scope
        )
        self.workers.ensure_started()
        return decided

    async def deny(self, found: AgentRunStatus, caller: Principal) -> str:
        """Deny the suspended run ``found`` describes (none of its pending calls runs; the
        run ends ``denied``), audited with ``caller``'s actor and channel; its status."""
        denied = await self._decide(found, {"decision": "deny", **_audit(caller)}, caller.scope)
        return str(denied.state.status)

    async def _decide(
        self, found: AgentRunStatus, resume: dict[str, Any], scope: Scope
    ) -> AgentRunStatus:
        decided: AgentRunStatus = await decide_agent_run(
            self.for_caller(scope),
            _ref(found),
            {"expected_version": found.version, **resume},
            checkpoints=self.checkpoints,
            definition_revision=self.definition_revision,
            ownership=scope,
        )
        return decided

    async def aclose(self) -> None:
        """Stop the face's workers and background runs (see :class:`prism_web.FaceWorkers`)."""
        await self.workers.aclose()


class StartedSession:
    """A new run started in the face's own task: its session, the subscription watching it
    (opened before it started) and the task."""

    def __init__(self, session: Any, watching: Any, task: Any) -> None:
        self.session = session
        self.watching = watching
        self.task = task

    async def first_event(self) -> Any:
        """The run's first event (``agent_started``); the run's refusal when it ended before
        any event (a session that already runs, options the kernel refuses)."""
        try:
            return await anext(self.watching)
        except StopAsyncIteration:
            await self.task.wait()
            raise PrismError(
                "the run ended before it started", code="ERR_PRISM_A2A_INTERNAL"
            ) from None

    def stop_watching(self) -> None:
        """Close the subscription: the run goes on."""
        self.watching.close()


def _audit(caller: Principal) -> dict[str, Any]:
    """Who the audit names: the authorized caller and its door, never what a message says."""
    return {"actor": caller.actor, "channel": caller.channel}


def _ref(found: AgentRunStatus) -> dict[str, str]:
    return {"run_id": found.state.run_id, "session_id": found.state.session_id}
