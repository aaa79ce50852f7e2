"""The host-facing resume API: ``resume_agent_run``, its stream, and the lifecycle adapter."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import AgentRunStateError
from ..events import AgentEvent
from ..results import AgentRunResult
from ..runs._broadcast import OverflowPolicy
from ..runs._stream import DriverStream
from ._decisions import coerce_run_ref, validate_resume_input
from ._options import DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS, CheckpointMetadataSource
from ._resume import (
    NOT_FOUND,
    AgentRunStatus,
    Prepared,
    ResumeRequest,
    Settled,
    load_agent_run_state,
    prepare_resume,
)
from ._resume_checks import check_stream_options, coerce_hooks

if TYPE_CHECKING:
    from ..agents import Agent
    from ..runs._driver import RunDriver
    from ..sessions._session import AgentSession
    from ._checkpoints import CheckpointStore

__all__ = (
    "AgentRunLifecycle",
    "ResumeEventStream",
    "create_agent_run_lifecycle",
    "resume_agent_run",
    "resume_agent_run_stream",
)


def _request(
    *,
    checkpoints: CheckpointStore,
    definition_revision: str,
    restore_hooks: Sequence[Any] = (),
    restore_hook_timeout_ms: float = DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS,
    checkpoint_metadata: CheckpointMetadataSource = None,
    persist_session_state: bool | None = None,
    include_skill_bodies: bool | None = None,
    ownership: Mapping[str, str] | None = None,
    on_session: Callable[[AgentSession], Any] | None = None,
) -> ResumeRequest:
    return ResumeRequest(
        checkpoints=checkpoints,
        definition_revision=definition_revision,
        restore_hooks=restore_hooks,
        restore_hook_timeout_ms=restore_hook_timeout_ms,
        checkpoint_metadata=checkpoint_metadata,
        persist_session_state=persist_session_state,
        include_skill_bodies=include_skill_bodies,
        ownership=ownership,
        on_session=on_session,
    )


async def _finish(prepared: Prepared | Settled) -> AgentRunResult:
    if isinstance(prepared, Settled):
        return prepared.result
    execution = prepared.driver.execution
    await prepared.driver.drain()
    error = execution.terminal_error()
    if error is not None:
        raise error
    assert execution.result is not None
    return execution.result


async def resume_agent_run(
    agent: Agent,
    ref: Any,
    resume: Any,
    *,
    checkpoints: CheckpointStore,
    definition_revision: str,
    restore_hooks: Sequence[Any] = (),
    restore_hook_timeout_ms: float = DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS,
    checkpoint_metadata: CheckpointMetadataSource = None,
    persist_session_state: bool | None = None,
    include_skill_bodies: bool | None = None,
    ownership: Mapping[str, str] | None = None,
    on_session: Callable[[AgentSession], Any] | None = None,
) -> AgentRunResult:
    """Resume a durable run with ``{"expected_version", "decision" | "decisions"}``.

    ``approve`` (or a fully decided batch) and ``continue`` claim the run and run it on;
    ``deny`` ends it ``denied``; a partial batch re-suspends with the rest. Raises
    :class:`~prism_core.AgentDecisionError` for malformed input before any store access,
    :class:`~prism_core.AgentRunStateError` for a stale, foreign, mismatched or unclean
    checkpoint, :class:`~prism_core.CheckpointRestoreError` when a restore hook fails, and
    :class:`~prism_core.AgentRunError` when the resumed run fails or is aborted.
    """
    validate_resume_input(resume)
    request = _request(
        checkpoints=checkpoints,
        definition_revision=definition_revision,
        restore_hooks=restore_hooks,
        restore_hook_timeout_ms=restore_hook_timeout_ms,
        checkpoint_metadata=checkpoint_metadata,
        persist_session_state=persist_session_state,
        include_skill_bodies=include_skill_bodies,
        ownership=ownership,
        on_session=on_session,
    )
    return await _finish(await prepare_resume(agent, ref, resume, request))


class ResumeEventStream(DriverStream):
    """The events of one resume: ``agent_denied`` or ``agent_suspended`` for runs that do not
    claim, else ``agent_started``, ``agent_resumed`` and the resumed run's events. Leaving
    early aborts only the resumed execution. ``result`` is set once it has ended."""

    def __init__(self, prepare: Callable[[], Awaitable[Prepared | Settled]]) -> None:
        super().__init__()
        self._prepare = prepare
        self._settled: list[AgentEvent] | None = None
        self._settled_result: AgentRunResult | None = None

    @property
    def result(self) -> AgentRunResult | None:
        """The resume's result once it has ended, else ``None``."""
        if self._settled is not None:
            return self._settled_result
        return self._driver.execution.result if self._driver is not None else None

    async def _start(self) -> RunDriver:
        # __anext__ prepares the resume itself, since a deny or a partial batch has no run.
        raise AssertionError("a resume stream prepares its run in __anext__")

    async def __anext__(self) -> AgentEvent:
        if self._driver is None and self._settled is None and not self._done:
            try:
                prepared = await self._prepare()
            except BaseException:
                self._done = True
                raise
            if isinstance(prepared, Settled):
                self._settled = list(prepared.events)
                self._settled_result = prepared.result
            else:
                self._driver = prepared.driver
        if self._settled is not None:
            if not self._settled:
                self._done = True
                raise StopAsyncIteration
            return self._settled.pop(0)
        return await super().__anext__()


def resume_agent_run_stream(
    agent: Agent,
    ref: Any,
    resume: Any,
    *,
    checkpoints: CheckpointStore,
    definition_revision: str,
    restore_hooks: Sequence[Any] = (),
    restore_hook_timeout_ms: float = DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS,
    checkpoint_metadata: CheckpointMetadataSource = None,
    persist_session_state: bool | None = None,
    include_skill_bodies: bool | None = None,
    ownership: Mapping[str, str] | None = None,
    on_session: Callable[[AgentSession], Any] | None = None,
    max_queued_events: int = 1024,
    overflow: OverflowPolicy = "close",
) -> ResumeEventStream:
    """Like :func:`resume_agent_run`, as an async iterator over the resume's events.

    Malformed input raises :class:`~prism_core.AgentDecisionError` here, at once.
    """
    validate_resume_input(resume)
    check_stream_options(max_queued_events, overflow)
    request = _request(
        checkpoints=checkpoints,
        definition_revision=definition_revision,
        restore_hooks=restore_hooks,
        restore_hook_timeout_ms=restore_hook_timeout_ms,
        checkpoint_metadata=checkpoint_metadata,
        persist_session_state=persist_session_state,
        include_skill_bodies=include_skill_bodies,
        ownership=ownership,
        on_session=on_session,
    )
    return ResumeEventStream(lambda: prepare_resume(agent, ref, resume, request))


_REQUEST_KEYS = (
    "ownership",
    "agent_id",
    "checkpoint_metadata",
    "restore_hooks",
    "restore_hook_timeout_ms",
    "persist_session_state",
    "include_skill_bodies",
    "on_session",
)


@attrs.define
class AgentRunLifecycle:
    """Status and resume for hosts that resolve agents per request (servers, workers).

    ``resolve_agent(agent_id)`` (sync or async) returns ``(agent, definition_revision)`` or a
    mapping with those keys; lifecycle ``restore_hooks`` run before per-resume hooks.
    """

    checkpoints: CheckpointStore = attrs.field(eq=False)
    resolve_agent: Callable[[str], Any] = attrs.field(eq=False)
    restore_hooks: tuple[Any, ...] = ()
    restore_hook_timeout_ms: float = DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS

    async def status(
        self,
        ref: Any,
        *,
        agent_id: str | None = None,
        ownership: Mapping[str, str] | None = None,
    ) -> AgentRunStatus | None:
        """The run's state, version and metadata; ``None`` when absent, foreign, or owned by
        another agent than ``agent_id``."""
        found = await load_agent_run_state(self.checkpoints, ref, ownership=ownership)
        if found is None or (agent_id is not None and found.state.agent_id != agent_id):
            return None
        return found

    async def _prepare(
        self, ref: Any, resume: Any, request: Mapping[str, Any]
    ) -> Prepared | Settled:
        unknown = sorted(set(request) - set(_REQUEST_KEYS))
        if unknown:
            raise AgentRunStateError(f"unknown resume request keys {unknown}")
        found = await self.status(
            ref, agent_id=request.get("agent_id"), ownership=request.get("ownership")
        )
        if found is None:
            raise AgentRunStateError(NOT_FOUND)
        resolved = self.resolve_agent(found.state.agent_id)
        if inspect.isawaitable(resolved):
            resolved = await resolved
        if isinstance(resolved, Mapping):
            agent, revision = resolved.get("agent"), resolved.get("definition_revision")
        elif isinstance(resolved, tuple) and len(resolved) == 2:
            agent, revision = resolved
        else:
            raise AgentRunStateError(
                "resolve_agent must return (agent, definition_revision) or a mapping with them"
            )
        if agent is None:
            raise AgentRunStateError(NOT_FOUND)
        if not isinstance(revision, str):
            raise AgentRunStateError("resolve_agent returned no definition_revision")
        resume_request = _request(
            checkpoints=self.checkpoints,
            definition_revision=revision,
            restore_hooks=request.get("restore_hooks", ()),
            restore_hook_timeout_ms=request.get(
                "restore_hook_timeout_ms", self.restore_hook_timeout_ms
            ),
            checkpoint_metadata=request.get("checkpoint_metadata"),
            persist_session_state=request.get("persist_session_state"),
            include_skill_bodies=request.get("include_skill_bodies"),
            ownership=request.get("ownership"),
            on_session=request.get("on_session"),
        )
        return await prepare_resume(
            agent, ref, resume, resume_request, lifecycle_hooks=self.restore_hooks
        )

    async def resume(self, ref: Any, resume: Any, **request: Any) -> AgentRunResult:
        """Resume through the same pipeline as :func:`resume_agent_run`."""
        validate_resume_input(resume)
        coerce_run_ref(ref)
        return await _finish(await self._prepare(ref, resume, request))

    def resume_stream(self, ref: Any, resume: Any, **request: Any) -> ResumeEventStream:
        """Resume as a stream (see :func:`resume_agent_run_stream`)."""
        validate_resume_input(resume)
        coerce_run_ref(ref)
        max_queued = request.pop("max_queued_events", 1024)
        overflow = request.pop("overflow", "close")
        check_stream_options(max_queued, overflow)
        return ResumeEventStream(lambda: self._prepare(ref, resume, request))


def create_agent_run_lifecycle(
    *,
    checkpoints: CheckpointStore,
    resolve_agent: Callable[[str], Any],
    restore_hooks: Sequence[Any] = (),
    restore_hook_timeout_ms: float = DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS,
) -> AgentRunLifecycle:
    """A lifecycle adapter over ``checkpoints`` (see :class:`AgentRunLifecycle`)."""
    if not callable(resolve_agent):
        raise AgentRunStateError("resolve_agent must be callable(agent_id)")
    return AgentRunLifecycle(
        checkpoints=checkpoints,
        resolve_agent=resolve_agent,
        restore_hooks=coerce_hooks(restore_hooks),
        restore_hook_timeout_ms=restore_hook_timeout_ms,
    )
