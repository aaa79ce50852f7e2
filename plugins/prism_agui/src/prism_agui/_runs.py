"""Opening the Prism run an AG-UI input asks for: a new run on the thread, or a decision.

A new run is started in a task of the app's own (:class:`prism_web.FaceWorkers`), not in the
request: the request watches it through a subscription to its session, so a client that goes
away stops watching and the run goes on to its next stop. A decision (``resume``) is recorded
(:func:`prism_core.decide_agent_run`: one audited compare-and-swap write, nothing run here)
and run by a worker (the app's own, or any other on the same stores); the request watches it
from the stores (:func:`prism_core.observe_agent_run`).

Both return the events to forward with the first one already read, so a refusal (a busy
thread, a bad decision batch) is raised here, before any AG-UI event but the opening one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import attrs
from ag_ui.core import RunAgentInput

from prism_core import (
    AgentDecisionError,
    Principal,
    PrismError,
    decide_agent_run,
    load_agent_run_state,
    observation_point,
    observe_agent_run,
)

from ._agent import AgentFactory
from ._decisions import decisions_for
from ._errors import InterruptPending, RunActive, ThreadUnavailable
from ._input import user_text

__all__ = ("QUEUED_EVENTS", "OpenedRun", "open_run")

#: Events a watching request may fall behind a new run by before it is told it lost some.
QUEUED_EVENTS = 4096


@attrs.frozen
class OpenedRun:
    """The events of a started or decided run to forward, the first already read, and its
    ids. Closing it stops the watching only: the run is not the request's."""

    events: AsyncIterator[Any] = attrs.field(eq=False)
    first: Any = attrs.field(eq=False)
    run_id: str
    session_id: str

    async def aclose(self) -> None:
        """Stop watching the run."""
        closer = getattr(self.events, "aclose", None)
        if closer is not None:
            await closer()


async def _start(
    factory: AgentFactory, run_input: RunAgentInput, caller: Principal, agent: Any
) -> OpenedRun:
    text = user_text(run_input)
    thread_id = run_input.thread_id
    scope = caller.scope
    claim = await factory.threads.read(thread_id, scope)
    if claim.run_id is not None:
        found = await load_agent_run_state(
            factory.checkpoints, {"run_id": claim.run_id}, ownership=scope
        )
        status = found.state.status if found is not None else None
        if status == "suspended":
            raise InterruptPending(
                "the thread's run waits for decisions: answer its interrupts with resume"
            )
        if status == "running":
            raise RunActive("the thread's last run has not finished")
    session = agent.create_session(id=thread_id)
    await session.checkout()
    watching = session.subscribe(max_queued_events=QUEUED_EVENTS)

    async def run() -> None:
        try:
            # The run names its starter: the caller's actor.
            await session.run(text, actor=caller.actor)
        except PrismError:
            pass  # a failed or aborted run ends with its own events
        finally:
            await session.close()

    task = factory.workers.start_run(run)
    try:
        first = await anext(watching)
    except StopAsyncIteration:
        # Refused before its first event (invalid options, a busy session): say why.
        await task.wait()
        raise PrismError(
            "the run ended before it started", code="ERR_PRISM_AGUI_INTERNAL"
        ) from None
    except BaseException:
        watching.close()
        raise
    opened = OpenedRun(_subscription_events(watching), first, first.run_id, thread_id)
    try:
        await factory.threads.move(claim, first.run_id, scope)
    except BaseException:
        await opened.aclose()
        raise
    return opened


async def _subscription_events(watching: Any) -> AsyncIterator[Any]:
    try:
        async for event in watching:
            yield event
    finally:
        watching.close()


async def _decide(
    factory: AgentFactory, run_input: RunAgentInput, caller: Principal, agent: Any
) -> OpenedRun:
    resume = run_input.resume or []
    scope = caller.scope
    try:
        claim = await factory.threads.read(run_input.thread_id, scope)
    except ThreadUnavailable:
        # Answered as an id that never existed: the caller cannot tell another's run is there.
        claim = None
    found = None
    if claim is not None and claim.run_id is not None:
        found = await load_agent_run_state(
            factory.checkpoints, {"run_id": claim.run_id}, ownership=scope
        )
    if found is None:
        raise AgentDecisionError(
            "no run on this thread waits for these interrupts", code="ERR_PRISM_DECISION_UNKNOWN"
        )
    state = found.state
    pending = state.interruption.pending_decisions if state.interruption is not None else ()
    decisions = decisions_for(resume, {d.approval_id: d.kind for d in pending})
    point = await observation_point(
        factory.checkpoints, factory.sessions, state.run_id, ownership=scope
    )
    await decide_agent_run(
        agent,
        {"run_id": state.run_id, "session_id": state.session_id},
        {
            "expected_version": found.version,
            "decisions": decisions,
            # The audit names the authorized caller and this door, never what the input says.
            "actor": caller.actor,
            "channel": caller.channel,
        },
        checkpoints=factory.checkpoints,
        definition_revision=factory.revision,
        ownership=scope,
    )
    factory.workers.ensure_started()
    observed = _observed_events(
        observe_agent_run(
            factory.checkpoints, factory.sessions, state.run_id, ownership=scope, after=point
        )
    )
    try:
        first = await anext(observed)
    except BaseException:
        await observed.aclose()
        raise
    return OpenedRun(observed, first, state.run_id, state.session_id)


async def _observed_events(observed: Any) -> AsyncGenerator[Any, None]:
    async with contextlib.aclosing(observed):
        async for item in observed:
            yield item.event


async def open_run(
    factory: AgentFactory, run_input: RunAgentInput, caller: Principal, agent: Any
) -> OpenedRun:
    """The run ``run_input`` asks for, with ``agent`` hosted for ``caller``: a decision when
    it carries ``resume`` entries, else a new run of its last user message on the thread."""
    if run_input.resume:
        return await _decide(factory, run_input, caller, agent)
    return await _start(factory, run_input, caller, agent)
