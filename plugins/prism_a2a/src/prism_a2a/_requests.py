"""Each message is turned into a Prism run, or a recorded decision, before the a2a-sdk commits
to a task; the request then only watches.

The SDK asks its request-context builder for the task id before it creates the task, so the
builder does the work a message asks for: a message without a ``taskId`` starts a new durable
run in a task of the face's own (never in the request) and its first event gives the run id,
which becomes the task id; a message on a task that waits reads that run's checkpoint and
records its ``decisions`` (:func:`prism_core.decide_agent_run`: one audited write, nothing run
here), which the face's workers then run. Either way every refusal (a part the agent does not
read, a bad batch, a stale approval id, a foreign context, a push config it will not keep) is
raised here, while the SDK can still answer it as a JSON-RPC error, before any task changes
and before anything runs. A message on a task that does not wait for input (a finished one,
or one still working) is refused as the run's state refuses it
(:class:`~prism_core.AgentRunStateError`, A2A's ``UnsupportedOperationError``).

A new run is watched up to its first checkpoint (the first turn's ``turn_started``, or its
end if it ends sooner), so a ``tasks/get`` answered after the stream's first event finds it.
The request context carries what the executor then observes (:class:`ObservedRun`): the run's
id, its owner, and where to start observing it from the stores. The request's call context is
marked with the task as this request opened it (:func:`~._tasks.open_request`), so the SDK's
own reads see the task its events built, never a run that already moved on.
"""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
from a2a.server.agent_execution import RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.types import SendMessageRequest, Task

from prism_core import (
    AgentEvent,
    AgentRunStateError,
    AgentStartedEvent,
    PrismError,
    observation_point,
)

from ._access import call_principal
from ._contexts import ContextClaims
from ._decisions import check_media_types, message_decisions, message_text
from ._errors import TaskNotFound, a2a_error
from ._push import PushConfigs, message_push_config
from ._runs import PrismRuns, Scope, StartedSession
from ._tasks import open_request
from ._views import task_view

__all__ = ("QUEUED_EVENTS", "ObservedRun", "PrismRequestContext", "PrismRequestContextBuilder")

#: The events after which a new run has written its first checkpoint (or has ended).
_CHECKPOINTED = frozenset(("turn_started", "agent_suspended", "agent_finished", "error"))
#: Events a new run may get ahead of the builder watching it to its first checkpoint.
QUEUED_EVENTS = 4096


@attrs.frozen
class ObservedRun:
    """What a request's executor observes: the run ``run_id`` of ``scope``, from the event id
    ``after`` (``None``: from its start); ``arguments`` are the decided calls' arguments by
    tool call id; ``read`` the events already seen live (a run that ended before its first
    checkpoint is known only from them)."""

    run_id: str
    session_id: str
    scope: Scope
    after: str | None
    arguments: dict[str, Any] = attrs.field(factory=dict)
    read: tuple[AgentEvent, ...] = ()


class PrismRequestContext(RequestContext):
    """The SDK's request context, with the Prism run the request started or decided."""

    def __init__(self, *, observed: ObservedRun, **fields: Any) -> None:
        super().__init__(**fields)
        self.observed = observed


async def _watch_until(started: StartedSession, read: list[AgentEvent]) -> None:
    """Read ``started``'s events into ``read`` up to its first checkpoint (or its end)."""
    async for event in started.watching:
        read.append(event)
        if event.type in _CHECKPOINTED:
            return


class PrismRequestContextBuilder(RequestContextBuilder):
    """Starts the request's run, or records its decisions, and names its task after it."""

    def __init__(self, runs: PrismRuns, push: PushConfigs | None) -> None:
        self._runs = runs
        self._claims = ContextClaims(runs)
        self._push = push

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        """The request context of a started or decided run; a Prism refusal as the SDK's
        error."""
        if params is None:
            raise RuntimeError("a message request without its parameters")
        try:
            if task_id is None:
                return await self._start(context, params, context_id)
            return await self._decide(context, params, task_id)
        except PrismError as exc:
            raise a2a_error(exc) from exc

    async def _start(
        self, context: ServerCallContext, params: SendMessageRequest, context_id: str | None
    ) -> RequestContext:
        caller = call_principal(context)
        scope = caller.scope
        text = message_text(params.message)
        push_config = message_push_config(params, self._push)
        session_id = context_id or self._claims.new_id()
        claim, leaf_id = await self._claims.check(session_id, scope)
        message_id = params.message.message_id
        holding = (
            self._push.starting(session_id)
            if push_config is not None and self._push is not None
            else contextlib.nullcontext()
        )
        async with holding:
            started = await self._runs.start(
                session_id, text, caller, leaf_id, message_id, max_queued_events=QUEUED_EVENTS
            )
            read: list[AgentEvent] = []
            try:
                first = await started.first_event()
                if not isinstance(first, AgentStartedEvent):
                    error = getattr(first, "error", None)
                    raise PrismError(
                        getattr(error, "message", None) or f"a new run began with {first.type}",
                        code=getattr(error, "code", None) or "ERR_PRISM_A2A_INTERNAL",
                    )
                run_id = first.run_id
                try:
                    await self._claims.move(session_id, run_id, claim, scope)
                except BaseException:
                    # Another task took the context first: this run has not reached a turn.
                    started.session.abort("another task started on the context")
                    raise
                if push_config is not None and self._push is not None:
                    await self._push.put(run_id, push_config, caller)
            except BaseException:
                started.stop_watching()
                raise
        read.append(first)
        try:
            await _watch_until(started, read)
        finally:
            started.stop_watching()
        open_request(context, run_id, None)
        observed = ObservedRun(run_id, session_id, scope, after=None, read=tuple(read))
        return PrismRequestContext(
            observed=observed,
            call_context=context,
            request=params,
            task_id=run_id,
            context_id=session_id,
        )

    async def _decide(
        self, context: ServerCallContext, params: SendMessageRequest, task_id: str
    ) -> RequestContext:
        caller = call_principal(context)
        scope = caller.scope
        check_media_types(params.message)
        found = await self._runs.status(task_id, scope)
        if found is None:
            raise TaskNotFound(f"no task {task_id!r}")
        status = found.state.status
        if status != "suspended":
            state = "is still working" if status == "running" else f"has ended ({status})"
            raise AgentRunStateError(
                f"task {task_id} {state}: a message on a task is taken only while the task "
                "waits for input"
            )
        decisions = message_decisions(params.message)
        push_config = message_push_config(params, self._push)
        # Taken before the decision, so nothing a fast worker does after it is missed.
        point = await observation_point(
            self._runs.checkpoints, self._runs.sessions, task_id, ownership=scope
        )
        opened = await task_view(found, self._runs.sessions)
        arguments = await self._runs.call_arguments(found)
        holding = (
            self._push.starting(found.state.session_id)
            if push_config is not None and self._push is not None
            else contextlib.nullcontext()
        )
        async with holding:
            # Kept only once the decision is, and before its update is delivered.
            decided = await self._runs.decide(found, decisions, caller)
            if push_config is not None and self._push is not None:
                await self._push.put(task_id, push_config, caller)
        for call in decided.state.pending_calls:
            if call.modified_arguments is not None:
                arguments[call.tool_call_id] = dict(call.modified_arguments)
        open_request(context, task_id, opened)
        observed = ObservedRun(
            task_id, found.state.session_id, scope, after=point, arguments=arguments
        )
        return PrismRequestContext(
            observed=observed,
            call_context=context,
            request=params,
            task_id=task_id,
            context_id=found.state.session_id,
        )
