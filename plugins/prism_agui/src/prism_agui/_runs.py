"""Opening the Prism run an AG-UI input asks for: a new run on the thread, or a resume.

Both return the run's event stream with its first event already read, so a refusal (a busy
thread, a bad decision batch) is raised here, before any AG-UI event but the opening one.
"""

from __future__ import annotations

from typing import Any

import attrs
from ag_ui.core import RunAgentInput

from prism_core import (
    AbortSignal,
    AgentDecisionError,
    Principal,
    load_agent_run_state,
    resume_agent_run_stream,
)

from ._agent import AgentFactory
from ._decisions import decisions_for
from ._errors import InterruptPending, RunActive, ThreadUnavailable
from ._input import user_text

__all__ = ("OpenedRun", "open_run")


@attrs.frozen
class OpenedRun:
    """A started or resumed run: its stream, the event already read from it, its ids, and
    what aborts it (the session of a new run, the signal of a resume)."""

    stream: Any = attrs.field(eq=False)
    first: Any = attrs.field(eq=False)
    run_id: str
    session_id: str
    session: Any = attrs.field(default=None, eq=False)
    signal: AbortSignal | None = attrs.field(default=None, eq=False)

    def abort(self, reason: str) -> None:
        """Abort the run through the core (which records it ``aborted``); its stream then
        ends with the abort."""
        if self.session is not None:
            self.session.abort(reason)
        if self.signal is not None:
            self.signal.abort(reason)

    async def aclose(self) -> None:
        """Leave the stream (aborting a run still going) and close the session."""
        try:
            await self.stream.aclose()
        finally:
            if self.session is not None:
                await self.session.close()


async def _first(stream: Any) -> Any:
    try:
        first = await anext(stream)
    except BaseException:
        await stream.aclose()
        raise
    return first


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
    try:
        await session.checkout()
        # The run names its starter: the caller's actor.
        stream = session.stream(text, actor=caller.actor)
        first = await _first(stream)
    except BaseException:
        await session.close()
        raise
    opened = OpenedRun(stream, first, first.run_id, thread_id, session)
    try:
        await factory.threads.move(claim, first.run_id, scope)
    except BaseException:
        await opened.aclose()
        raise
    return opened


async def _resume(
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
    signal = AbortSignal()
    stream = resume_agent_run_stream(
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
        signal=signal,
    )
    first = await _first(stream)
    return OpenedRun(stream, first, state.run_id, state.session_id, signal=signal)


async def open_run(
    factory: AgentFactory, run_input: RunAgentInput, caller: Principal, agent: Any
) -> OpenedRun:
    """The run ``run_input`` asks for, with ``agent`` hosted for ``caller``: a resume when it
    carries ``resume`` entries, else a new run of its last user message on the thread."""
    if run_input.resume:
        return await _resume(factory, run_input, caller, agent)
    return await _start(factory, run_input, caller, agent)
