"""Sub-agent runs: the delegate behind ``agent.as_tool()``.

A call runs the child agent in a session of its own on the parent's session store; the ids of
that session and run are derived from the parent run and the call. Under a durable parent the
child is durable too: on the parent's checkpoint store and policy, under its owner scope and
lease. So whichever worker runs the call (the first, a resume's, a ``continue``'s after a
crash) finds the same child and does what its checkpoint says:

- no checkpoint: the child starts;
- ``running`` (its worker died): the child's own ``continue``, with the resolutions the
  parent's ``continue`` handed it (no tool of the child runs twice);
- ``suspended``: resumed with the decisions the parent recorded for it (``child_resume``), or,
  without them, its suspension holds the parent again;
- ended: its final answer (or the error it ended with) is the call's result.

The child's limits are what is left of the parent's, the parent's tool-call guards apply to
its tool calls, its events reach the parent's subscribers as ``SubAgentEvent`` while it runs
(the pump stops with the child), and an abort of the parent aborts it.

It must not decide what the parent does with the outcome: the tool round does
(``runs/_delegation``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any, Protocol

import anyio
import attrs

from .._agent_config import AgentConfig
from ..content import ErrorInfo, ToolCallContent, ToolResult, to_messages
from ..durable._children import child_run_id, child_session_id
from ..durable._options import RunStateOptions, coerce_run_state_options
from ..errors import AgentRunStateError, PrismError
from ..events import AgentEvent, SubAgentEvent
from ..records._store import SessionStore
from ..runs._counters import RunCounters
from ..runs._delegation import ParentRun, charge_child, child_budget, child_guardrails
from ..runs._driver import RunDriver
from ..runs._execution import RunExecution
from ..runs._options import coerce_run_options
from ._checks import ResumeRequest, load_agent_run_state
from ._nested import ChildContinue, child_request
from ._pipeline import Prepared, Settled, prepare_resume
from ._ports import ResumableAgent

__all__ = ("CHILD_INPUT_SCHEMA", "SubAgentTool")

#: The parameters of every sub-agent tool: the task, as text.
CHILD_INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string"}},
    "required": ["input"],
}


class ChildAgent(Protocol):
    """The agent a sub-agent tool runs (an ``Agent``)."""

    @property
    def config(self) -> AgentConfig:
        """The child agent's configuration."""
        ...

    def create_session(
        self, *, id: str | None = None, store: Any = None, leaf_id: str | None = None
    ) -> Any:
        """A new session of the child agent on ``store``."""
        ...


@attrs.frozen
class _OnStore:
    """The child agent as a resume rebuilds it: its sessions on the parent's session store."""

    agent: ChildAgent
    store: SessionStore

    @property
    def config(self) -> AgentConfig:
        return self.agent.config

    def create_session(self, *, id: str | None = None, leaf_id: str | None = None) -> Any:
        return self.agent.create_session(id=id, leaf_id=leaf_id, store=self.store)


@attrs.define
class _Stretch:
    """One stretch of a child run the parent drives: its driver and counters at the start."""

    driver: RunDriver
    before: Any


@attrs.frozen
class _Suspended:
    """A child still suspended for a decision nobody recorded."""

    interruption: Any
    status: str = "suspended"


@attrs.frozen(kw_only=True)
class _Begun:
    """How a call picks its child up: events of a settled resume, a stretch to drive, and
    the result known without driving (a ``ToolResult``, a settled resume's, ``_Suspended``)."""

    events: tuple[AgentEvent, ...] = ()
    stretch: _Stretch | None = None
    result: Any = None


class SubAgentTool:
    """The ``execute`` of ``agent.as_tool()``: runs ``agent`` as a sub-agent of the run that
    calls the tool (see the module docstring). Called outside a run, it refuses."""

    def __init__(self, agent: ChildAgent) -> None:
        self.agent = agent

    def __call__(self, args: dict[str, Any], context: Any) -> Any:
        raise PrismError(
            "a sub-agent tool runs inside an agent run (its parent); it cannot be dispatched "
            "on its own",
            code="ERR_PRISM_SUBAGENT_CONTEXT",
        )

    def resumable(self, store: SessionStore) -> ResumableAgent:
        """The child agent, its sessions on the parent's session ``store``."""
        return _OnStore(self.agent, store)

    def child_revision(self, parent_revision: str) -> str:
        """The child's own ``run_state`` revision when it has one, else the parent's."""
        own = coerce_run_state_options(self.agent.config.run_state)
        return own.definition_revision if own is not None else parent_revision

    async def run_child(
        self, parent: ParentRun, call: ToolCallContent, outcome: Any
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the child for ``call`` (see :class:`~prism_core.runs._delegation.Delegate`)."""
        child_id = child_run_id(parent.run_id, call.id)
        outcome.child_run_id = child_id
        begun = await self._begin(parent, call, child_id)
        for settled in begun.events:
            yield _wrap(parent, call, settled)
        result = begun.result
        output: Any = None
        stretch = begun.stretch
        if stretch is not None:
            driver = stretch.driver
            execution = driver.execution
            _bound(parent, execution, stretch.before)
            parent.signal.on_abort(lambda reason: _abort(execution, reason))
            try:
                while (event := await driver.next()) is not None:
                    yield _wrap(parent, call, event)
            except anyio.get_cancelled_exc_class():
                await _stop(driver)
                raise
            except BaseException:
                # The worker is going away (or the parent's step was closed): the child's
                # checkpoint stays where it is, as after a crash.
                driver.abandon("the parent run stopped")
                raise
            charge_child(parent, stretch.before, execution.counters)
            result = execution.result
            # The output as JSON (an instance of the child's class would not be a result).
            output = execution.output_json
        if isinstance(result, ToolResult):
            outcome.result = result
        elif result is not None and result.status == "suspended":
            outcome.suspension = result.interruption
        else:
            assert result is not None
            outcome.result = _result_of(call, result.status, result.text, output, result)

    async def _begin(self, parent: ParentRun, call: ToolCallContent, child_id: str) -> _Begun:
        """What the child's checkpoint says to do: a stretch to drive, a settled resume's
        events and result, a suspension nobody decided, or the result of an ended child."""
        options = parent.durable
        if options is None:
            return _Begun(stretch=self._start(parent, call, child_id, None))
        status = await load_agent_run_state(
            options.checkpoints, {"run_id": child_id}, ownership=options.ownership
        )
        if status is None:
            return _Begun(stretch=self._start(parent, call, child_id, self._run_state(options)))
        state = status.state
        if state.terminal:
            return _Begun(result=await self._ended(parent, call, state))
        force = False
        if state.status == "running":
            handed: ChildContinue = parent.children.get(call.id) or ChildContinue()
            resume: dict[str, Any] = {"expected_version": status.version, "decision": "continue"}
            if handed.resolutions:
                resume["resolutions"] = [
                    {k: v for k, v in attrs.asdict(r).items() if v is not None}
                    for r in handed.resolutions
                ]
            force = handed.force
            resume.update(handed.who)
        else:
            pending = next((c for c in parent.pending_calls if c.tool_call_id == call.id), None)
            recorded = pending.child_resume if pending is not None else None
            if recorded is None or recorded.get("expected_version") != status.version:
                # No decision was recorded for this suspension: it holds the parent again.
                return _Begun(result=_Suspended(state.interruption))
            resume = dict(recorded)
        request = child_request(
            self,
            ResumeRequest(
                checkpoints=options.checkpoints,
                definition_revision=options.definition_revision,
                ownership=options.ownership,
                force=force,
            ),
            guardrails=_guards(parent),
        )
        view = self.resumable(parent.session_store)
        ref = {"run_id": child_id, "session_id": state.session_id}
        prepared = await prepare_resume(view, ref, resume, request)
        if isinstance(prepared, Settled):
            return _Begun(events=prepared.events, result=prepared.result)
        assert isinstance(prepared, Prepared)
        counters = prepared.driver.execution.counters
        return _Begun(stretch=_Stretch(prepared.driver, attrs.evolve(counters)))

    def _run_state(self, options: RunStateOptions) -> RunStateOptions | None:
        """The child's durable options: the parent's store, revision, policy, owner scope and
        lease; ``None`` when the child agent has a ``run_state`` of its own (on the same store
        and policy, else the call is refused)."""
        own = coerce_run_state_options(self.agent.config.run_state)
        if own is not None:
            if (
                own.checkpoints is not options.checkpoints
                or own.checkpoint_policy != options.checkpoint_policy
            ):
                raise AgentRunStateError(
                    "a sub-agent of a durable run must checkpoint on its parent's store with "
                    "its parent's checkpoint_policy; give the child agent no run_state of its "
                    "own (it then takes its parent's) or the same store and policy",
                    code="ERR_PRISM_SUBAGENT_RUN_STATE",
                )
            return None
        return RunStateOptions(
            options.checkpoints,
            options.definition_revision,
            interrupt_before_tool=options.interrupt_before_tool,
            checkpoint_policy=options.checkpoint_policy,
            max_state_bytes=options.max_state_bytes,
            checkpoint_metadata=options.checkpoint_metadata,
            ownership=options.ownership,
            lease_ms=options.lease_ms,
            approval_timeout_ms=options.approval_timeout_ms,
        )

    def _start(
        self,
        parent: ParentRun,
        call: ToolCallContent,
        child_id: str,
        run_state: RunStateOptions | None,
    ) -> _Stretch:
        """A new child run on a new session, made the session's active run."""
        session = self.agent.create_session(
            id=child_session_id(parent.run_id, call.id), store=parent.session_store
        )
        before = RunCounters()
        options: dict[str, Any] = {"limits": child_budget(parent, before)}
        guards = _guards(parent)
        if guards is not None:
            options["guardrails"] = guards
        if run_state is not None:
            options["run_state"] = run_state
        if parent.started_by is not None:
            options["actor"] = parent.started_by
        text = call.arguments.get("input")
        execution = RunExecution(
            session,
            to_messages(text if isinstance(text, str) else ""),
            coerce_run_options(options),
            run_id=child_id,
            parent_run_id=parent.run_id,
        )
        session.run_slot.claim(execution)
        return _Stretch(RunDriver(execution), before)

    async def _ended(self, parent: ParentRun, call: ToolCallContent, state: Any) -> ToolResult:
        """The result of a child that already ended: its output, else its last answer."""
        text = ""
        if state.status == "succeeded" and state.output is None:
            path = await parent.session_store.read_branch_path(state.session_id, state.leaf_id)
            for entry in reversed(path):
                message = entry.message
                if message is not None and message.role == "assistant":
                    text = message.text
                    break
        return _result_of(call, state.status, text, state.output, state)


def _guards(parent: ParentRun) -> Any:
    return child_guardrails(parent.guardrails)


def _wrap(parent: ParentRun, call: ToolCallContent, event: AgentEvent) -> AgentEvent:
    return parent.emit(
        SubAgentEvent(
            session_id=parent.session_id,
            run_id=parent.run_id,
            tool_call_id=call.id,
            child_run_id=event.run_id or "",
            child_session_id=event.session_id,
            event=event,
        )
    )


def _bound(parent: ParentRun, execution: RunExecution, before: Any) -> None:
    """Narrow a child to what is left of the parent's budget (a resumed child brings the
    limits and deadline it recorded; they only narrow)."""
    limits = execution.plan.limits.narrowed(child_budget(parent, before))
    execution.plan = attrs.evolve(execution.plan, limits=limits)
    if parent.deadline is not None and (
        execution.deadline is None or execution.deadline > parent.deadline
    ):
        execution.deadline = parent.deadline


def _abort(execution: RunExecution, reason: Any) -> None:
    """The parent was aborted: abort the child and cancel its step in flight."""
    execution.signal.abort(reason)
    if execution.step_scope is not None:
        execution.step_scope.cancel()


async def _stop(driver: RunDriver) -> None:
    """The parent's step was cancelled while the child ran (an abort, the wall-time limit):
    the child ends aborted (its terminal checkpoint written when it can be), then settles."""
    execution = driver.execution
    if driver.settled:
        return
    if execution.result is None:
        with anyio.CancelScope(shield=True):
            try:
                await execution.abort_terminal("the parent run stopped")
            except Exception:
                execution.abort_terminal_now("the parent run stopped")
    driver.abandon("the parent run stopped")


def _result_of(
    call: ToolCallContent, status: str, text: str, output: Any, ended: Any
) -> ToolResult:
    """The tool result of a child that ended with ``status``."""
    if status == "succeeded":
        return ToolResult(call.id, call.name, output if output is not None else text)
    error = getattr(ended, "error", None)
    message = f"the sub-agent run ended {status}"
    if error is not None:
        message += f": {error.message}"
    code = error.code if error is not None and error.code else f"subagent_{status}"
    return ToolResult(call.id, call.name, error=ErrorInfo(message, code=code))
