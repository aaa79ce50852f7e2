"""Each message is turned into a Prism run before the a2a-sdk commits to a task.

The SDK asks its request-context builder for the task id before it creates the task, so the
builder starts the work: a message without a ``taskId`` starts a new durable run and its first
event gives the run id, which becomes the task id; a message on a task reads that run's
checkpoint and starts the resume of its ``decisions``. Either way the first event is read here,
so every refusal (a part the agent does not read, a bad batch, a stale approval id, a foreign
context) is raised while the SDK can still answer it as a JSON-RPC error, before any task
changes and before anything runs. A message on a task that does not wait for input (a finished
one, or one still working) is refused as the run's state refuses it
(:class:`~prism_core.AgentRunStateError`, A2A's ``UnsupportedOperationError``), whatever it
holds.

A new run is read on to its first checkpoint (the first turn's ``turn_started``, or its end
if it ends sooner), still before any provider request or tool call: the SDK then finds the
task in the task store when it takes the request up, so it never races the run's first write.
The started stream rides the request context to the executor, which reads the rest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from a2a.server.agent_execution import RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.types import SendMessageRequest, Task

from prism_core import AgentEvent, AgentRunStateError, AgentStartedEvent, PrismError

from ._access import call_principal
from ._contexts import ContextClaims
from ._decisions import check_media_types, message_decisions, message_text
from ._errors import TaskNotFound, a2a_error
from ._runs import PrismRuns

__all__ = ("PrismRequestContext", "PrismRequestContextBuilder", "StartedRun")


#: The events after which a new run has written its first checkpoint (or has ended).
_CHECKPOINTED = frozenset(("turn_started", "agent_suspended", "agent_finished", "error"))


class StartedRun:
    """A run's event stream whose first events have been read: iterating it yields those
    events, then the rest. Closing it (or dropping it unread) aborts what it still owns."""

    def __init__(self, stream: Any, read: list[AgentEvent]) -> None:
        self._stream = stream
        self._read = read

    async def events(self) -> AsyncIterator[AgentEvent]:
        """The run's events, the ones already read first."""
        while self._read:
            yield self._read.pop(0)
        async for event in self._stream:
            yield event

    async def aclose(self) -> None:
        """Stop reading: a run that is still going is aborted, as leaving a stream early is."""
        await self._stream.aclose()


class PrismRequestContext(RequestContext):
    """The SDK's request context, with the Prism run the request started."""

    def __init__(self, *, started: StartedRun, **fields: Any) -> None:
        super().__init__(**fields)
        self.started = started


async def _read_until(stream: Any, read: list[AgentEvent], kinds: frozenset[str]) -> None:
    """Read ``stream`` into ``read``: its next event, and on up to one of ``kinds``."""
    while True:
        try:
            event: AgentEvent = await stream.__anext__()
        except StopAsyncIteration:
            if not read:
                raise RuntimeError("a Prism run stream ended before its first event") from None
            return
        read.append(event)
        if not kinds or event.type in kinds:
            return


class PrismRequestContextBuilder(RequestContextBuilder):
    """Starts (or resumes) the request's run and names its task after it."""

    def __init__(self, runs: PrismRuns) -> None:
        self._runs = runs
        self._claims = ContextClaims(runs)

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        """The request context of a started run; a Prism refusal as the SDK's error."""
        if params is None:
            raise RuntimeError("a message request without its parameters")
        try:
            if task_id is None:
                return await self._start(context, params, context_id)
            return await self._resume(context, params, task_id)
        except PrismError as exc:
            raise a2a_error(exc) from exc

    async def _start(
        self, context: ServerCallContext, params: SendMessageRequest, context_id: str | None
    ) -> RequestContext:
        caller = call_principal(context)
        scope = caller.scope
        text = message_text(params.message)
        session_id = context_id or self._claims.new_id()
        claim, leaf_id = await self._claims.check(session_id, scope)
        message_id = params.message.message_id
        stream = await self._runs.start(session_id, text, caller, leaf_id, message_id)
        read: list[AgentEvent] = []
        try:
            await _read_until(stream, read, frozenset())
            started = read[0]
            if not isinstance(started, AgentStartedEvent):
                raise RuntimeError(f"a new run began with {started.type}, not agent_started")
            run_id = started.run_id
            await self._claims.move(session_id, run_id, claim, scope)
            await _read_until(stream, read, _CHECKPOINTED)
        except BaseException:
            await stream.aclose()
            raise
        return PrismRequestContext(
            started=StartedRun(stream, read),
            call_context=context,
            request=params,
            task_id=run_id,
            context_id=session_id,
        )

    async def _resume(
        self, context: ServerCallContext, params: SendMessageRequest, task_id: str
    ) -> RequestContext:
        caller = call_principal(context)
        check_media_types(params.message)
        found = await self._runs.status(task_id, caller.scope)
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
        stream = self._runs.resume(found, decisions, caller)
        read: list[AgentEvent] = []
        try:
            await _read_until(stream, read, frozenset())
        except BaseException:
            await stream.aclose()
            raise
        return PrismRequestContext(
            started=StartedRun(stream, read),
            call_context=context,
            request=params,
            task_id=task_id,
            context_id=found.state.session_id,
        )
