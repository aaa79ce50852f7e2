"""The host-facing resume API: ``resume_agent_run``, its stream, and the lifecycle adapter.

It owns the public signatures and the request they build; the pipeline itself is
``_resume``. It reads the agent and the session only through
:class:`~._resume_ports.ResumableAgentOf` and must not import ``agents`` or ``sessions/``,
not even for typing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .._echo import clip, echo
from ..durable._checkpoints import reading_run_record
from ..durable._fencing import validate_claim_options
from ..durable._options import DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS, CheckpointMetadataSource
from ..durable._run_guards import coerce_resume_guardrails
from ..errors import AgentRunNotFoundError, AgentRunStateError, PrismError
from ..results import AgentRunResult
from ..runs._broadcast import OverflowPolicy
from ..signals import AbortSignal
from ._checks import (
    CAPABILITY_MISMATCH,
    SESSION_MISMATCH,
    check_ownership,
    check_stream_options,
    coerce_hooks,
    not_found,
)
from ._deny import deny_run_id
from ._input import ResumeInput, coerce_run_ref, validate_resume_input
from ._pipeline import (
    AgentRunStatus,
    Prepared,
    Recorded,
    ResumeRequest,
    Settled,
    load_agent_run_state,
    prepare_resume,
)
from ._ports import ResumableAgentOf, SessionT
from ._record import decided_status
from ._resolver import call_resolve_agent
from ._signal import check_signal, coerce_signal
from ._stream import ResumeEventStream

if TYPE_CHECKING:
    from ..durable._checkpoints import CheckpointStore

__all__ = (
    "AgentRunLifecycle",
    "ResumeEventStream",
    "create_agent_run_lifecycle",
    "decide_agent_run",
    "resume_agent_run",
    "resume_agent_run_stream",
)

logger = logging.getLogger(__package__ or __name__)


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
    on_session: Callable[[Any], Any] | None = None,
    fencing_token: int | None = None,
    force: bool = False,
    signal: AbortSignal | None = None,
    guardrail_packs: Sequence[Any] | None = None,
    guardrails: Any = None,
    lease_ms: int | None = None,
) -> ResumeRequest:
    validate_claim_options(fencing_token, force)
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
        fencing_token=fencing_token,
        force=force,
        signal=signal,
        guardrail_packs=_packs(guardrail_packs),
        guardrails=coerce_resume_guardrails(guardrails),
        lease_ms=lease_ms,
    )


def _agent_of(resolved: Any) -> Any:
    """The agent of a ``resolve_agent`` answer (``None`` when it names none)."""
    if isinstance(resolved, Mapping):
        return resolved.get("agent")
    if isinstance(resolved, tuple) and len(resolved) == 2:
        return resolved[0]
    return resolved


def _run_id(ref: Any) -> str:
    try:
        return coerce_run_ref(ref).run_id
    except Exception:  # a malformed ref is refused by the pipeline itself
        return "?"


@contextlib.contextmanager
def _logged_refusal(ref: Any) -> Iterator[None]:
    """Log a resume refused before it ran anything: the run and the error code only, since
    a refusal's message may quote the caller's values."""
    try:
        yield
    except PrismError as exc:
        run_id = clip(_run_id(ref))
        logger.warning(
            "resume of run %s refused: %s",
            run_id,
            exc.code,
            extra={"prism_run_id": run_id, "prism_error_code": exc.code},
        )
        raise


async def _prepare(
    ref: Any, prepare: Callable[[], Awaitable[Prepared | Settled | Recorded]]
) -> Prepared | Settled | Recorded:
    # A record the store cannot read is reported as this run's unreadable state.
    with _logged_refusal(ref), reading_run_record(_run_id(ref)):
        return await prepare()


async def _prepare_run(
    ref: Any, prepare: Callable[[], Awaitable[Prepared | Settled | Recorded]]
) -> Prepared | Settled:
    """:func:`_prepare` of a resume that runs (never only records)."""
    prepared = await _prepare(ref, prepare)
    assert not isinstance(prepared, Recorded)
    return prepared


def _packs(value: Sequence[Any] | None) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise AgentRunStateError("guardrail_packs must be a list of pack refs")
    return tuple(value)


async def _finish(prepared: Prepared | Settled | Recorded) -> AgentRunResult:
    assert not isinstance(prepared, Recorded)
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
    agent: ResumableAgentOf[SessionT],
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
    on_session: Callable[[SessionT], Any] | None = None,
    fencing_token: int | None = None,
    force: bool = False,
    signal: AbortSignal | None = None,
    guardrail_packs: Sequence[Any] | None = None,
    guardrails: Any = None,
) -> AgentRunResult:
    """Resume a durable run with ``{"expected_version", "decision" | "decisions"}``.

    ``approve`` (or a fully decided batch) and ``continue`` claim the run and run it on;
    ``deny`` ends it ``denied``; a partial batch re-suspends with the rest. Raises
    :class:`~prism_core.AgentDecisionError` for malformed input before any store access,
    :class:`~prism_core.AgentRunStateError` for a stale, foreign, mismatched or unclean
    checkpoint, :class:`~prism_core.CheckpointRestoreError` when a restore hook fails, and
    :class:`~prism_core.AgentRunError` when the resumed run fails or is aborted.

    ``signal`` (an :class:`~prism_core.AbortSignal`) is checked before each preparation step:
    fired before the claim, the resume raises :class:`~prism_core.ResumeAbortedError` having
    claimed and run nothing; fired after it, the resumed run aborts like a live run.
    ``guardrail_packs`` supplies again the packs the checkpoint records by identity (inline
    packs with ``deny`` predicates); a resume that cannot reinstate every recorded pack is
    refused before the claim with :class:`~prism_core.AgentRunStateError` naming the pack.
    ``guardrails`` (the shape of the run option) hands over again the run's own guards: a
    run that recorded guards of its own is refused before the claim
    (``ERR_PRISM_RUN_GUARDRAILS``, naming the missing and unexpected guards) unless they have
    exactly the recorded stage, name and revision, in order; a run that recorded none is
    refused when any are given. The guards are then enforced as in the live run: after the
    agent's guards and the packs.
    """
    with _logged_refusal(ref):
        plan = validate_resume_input(resume)
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
            fencing_token=fencing_token,
            force=force,
            signal=signal,
            guardrail_packs=guardrail_packs,
            guardrails=guardrails,
        )
    return await _finish(
        await _prepare(ref, lambda: prepare_resume(agent, ref, resume, request, plan=plan))
    )


async def decide_agent_run(
    agent: ResumableAgentOf[SessionT],
    ref: Any,
    resume: Any,
    *,
    checkpoints: CheckpointStore,
    definition_revision: str,
    ownership: Mapping[str, str] | None = None,
    fencing_token: int | None = None,
    guardrail_packs: Sequence[Any] | None = None,
    guardrails: Any = None,
) -> AgentRunStatus:
    """Record ``resume``'s decisions (or a ``continue``'s resolutions) without running them.

    Validates exactly as :func:`resume_agent_run` (and raises the same errors, before any
    write) and records the decisions, audited, in one compare-and-swap write; it runs no
    tool, no model turn, no restore hook and no ``reconcile``. A ``deny`` ends the run
    ``denied``; a partial batch suspends it again with the rest; anything else leaves it
    ``running`` with no live lease, marked for a worker (``run_worker``, ``prism worker``,
    any ``continue``), and wakes the workers watching ``checkpoints``. Returns the run as its
    checkpoint now records it.
    """
    with _logged_refusal(ref):
        plan = validate_resume_input(resume)
        request = _request(
            checkpoints=checkpoints,
            definition_revision=definition_revision,
            ownership=ownership,
            fencing_token=fencing_token,
            guardrail_packs=guardrail_packs,
            guardrails=guardrails,
        )
    prepared = await _prepare(
        ref, lambda: prepare_resume(agent, ref, resume, request, plan=plan, record_only=True)
    )
    return await decided_status(prepared, checkpoints, request.ownership, ref)


def resume_agent_run_stream(
    agent: ResumableAgentOf[SessionT],
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
    on_session: Callable[[SessionT], Any] | None = None,
    signal: AbortSignal | None = None,
    guardrail_packs: Sequence[Any] | None = None,
    guardrails: Any = None,
    max_queued_events: int = 1024,
    overflow: OverflowPolicy = "close",
    fencing_token: int | None = None,
    force: bool = False,
) -> ResumeEventStream:
    """Like :func:`resume_agent_run`, as an async iterator over the resume's events, queued
    under ``max_queued_events``/``overflow`` as ``session.subscribe`` queues them.

    Malformed input raises :class:`~prism_core.AgentDecisionError` here, at once.
    """
    with _logged_refusal(ref):
        plan = validate_resume_input(resume)
        check_stream_options(max_queued_events, overflow)
        # Built now, so every malformed option is refused at the call, before any store access.
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
            fencing_token=fencing_token,
            force=force,
            signal=signal,
            guardrail_packs=guardrail_packs,
            guardrails=guardrails,
        )

    def prepare(observe: Callable[[Any], Any]) -> Awaitable[Prepared | Settled]:
        observed = attrs.evolve(request, on_session=observe)
        return _prepare_run(ref, lambda: prepare_resume(agent, ref, resume, observed, plan=plan))

    return ResumeEventStream(
        prepare,
        on_session=on_session,
        max_queued_events=max_queued_events,
        overflow=overflow,
    )


_REQUEST_KEYS = (
    "ownership",
    "agent_id",
    "checkpoint_metadata",
    "restore_hooks",
    "restore_hook_timeout_ms",
    "persist_session_state",
    "include_skill_bodies",
    "on_session",
    "fencing_token",
    "force",
    "signal",
    "guardrail_packs",
    "guardrails",
    "lease_ms",
)


@attrs.define
class AgentRunLifecycle:
    """Status and resume for hosts that resolve agents per request (servers, workers).

    ``resolve_agent(agent_id)`` (sync or async) returns ``(agent, definition_revision)`` or a
    mapping with those keys; one that accepts a keyword ``revision`` is called as
    ``resolve_agent(agent_id, revision=<the run's recorded revision>)``, so a host can serve
    old runs with the old definition. Lifecycle ``restore_hooks`` run before per-resume
    hooks.

    A ``deny`` needs no matching definition (it runs nothing): with another revision or
    fingerprint, or when ``resolve_agent`` answers ``None`` (or an agent of ``None``) or
    raises :class:`LookupError` / :class:`~prism_core.AgentRunNotFoundError` for the agent,
    the run still ends ``denied`` and is audited; without a definition there is no redactor,
    so the actor and reason are stored as given.
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
        if agent_id is not None and not isinstance(agent_id, str):
            raise AgentRunStateError(f"agent_id must be a string, got {type(agent_id).__name__}")
        with reading_run_record(_run_id(ref)):
            found = await load_agent_run_state(self.checkpoints, ref, ownership=ownership)
        if found is None or (agent_id is not None and found.state.agent_id != agent_id):
            return None
        return found

    async def _prepare(
        self,
        ref: Any,
        resume: Any,
        request: Mapping[str, Any],
        plan: ResumeInput,
        *,
        record_only: bool = False,
    ) -> Prepared | Settled | Recorded:
        unknown = sorted(set(request) - set(_REQUEST_KEYS))
        if unknown:
            raise AgentRunStateError(f"unknown resume request keys {echo(unknown, 200)}")
        # An aborted resume reads no record and resolves no agent.
        signal = coerce_signal(request.get("signal"))
        check_signal(signal, "the checkpoint load")
        agent_id = request.get("agent_id")
        if agent_id is not None and not isinstance(agent_id, str):
            raise AgentRunStateError(f"agent_id must be a string, got {type(agent_id).__name__}")
        run_ref = coerce_run_ref(ref)
        with reading_run_record(run_ref.run_id):
            found = await load_agent_run_state(
                self.checkpoints, {"run_id": run_ref.run_id}, ownership=request.get("ownership")
            )
        if found is None:
            raise AgentRunNotFoundError(not_found(run_ref.run_id))
        if run_ref.session_id is not None and found.state.session_id != run_ref.session_id:
            raise AgentRunStateError(SESSION_MISMATCH)
        if agent_id is not None and found.state.agent_id != agent_id:
            raise AgentRunStateError(CAPABILITY_MISMATCH)
        check_signal(signal, "the agent resolution")
        denying = plan.decision == "deny"
        try:
            resolved = await call_resolve_agent(
                self.resolve_agent,
                found.state.agent_id,
                revision=found.state.definition_revision,
            )
        except (LookupError, AgentRunNotFoundError):
            if not denying:
                raise
            resolved = None
        if denying and (resolved is None or _agent_of(resolved) is None):
            # The host serves this agent no more: a deny runs nothing, so it needs none.
            events, result = await deny_run_id(
                run_ref.run_id,
                plan,
                self._request(found.state.definition_revision, request),
                redactor=None,
            )
            return Settled(events=events, result=result, session=None)
        if isinstance(resolved, Mapping):
            agent, revision = resolved.get("agent"), resolved.get("definition_revision")
        elif isinstance(resolved, tuple) and len(resolved) == 2:
            agent, revision = resolved
        else:
            raise AgentRunStateError(
                "resolve_agent must return (agent, definition_revision) or a mapping with them"
            )
        if agent is None:
            raise AgentRunNotFoundError(not_found(run_ref.run_id))
        if not isinstance(revision, str):
            raise AgentRunStateError("resolve_agent returned no definition_revision")
        return await prepare_resume(
            agent,
            ref,
            resume,
            self._request(revision, request),
            lifecycle_hooks=self.restore_hooks,
            plan=plan,
            record_only=record_only,
        )

    def _request(self, revision: str, request: Mapping[str, Any]) -> ResumeRequest:
        return _request(
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
            fencing_token=request.get("fencing_token"),
            force=request.get("force", False),
            signal=request.get("signal"),
            guardrail_packs=request.get("guardrail_packs"),
            guardrails=request.get("guardrails"),
            lease_ms=request.get("lease_ms"),
        )

    async def resume(self, ref: Any, resume: Any, **request: Any) -> AgentRunResult:
        """Resume through the same pipeline as :func:`resume_agent_run`."""
        with _logged_refusal(ref):
            plan = validate_resume_input(resume)
            coerce_run_ref(ref)
        return await _finish(await _prepare(ref, lambda: self._prepare(ref, resume, request, plan)))

    async def decide(self, ref: Any, resume: Any, **request: Any) -> AgentRunStatus:
        """Record the decisions without running them (see :func:`decide_agent_run`); the
        agent is resolved as for :meth:`resume` (a ``deny`` needs none)."""
        with _logged_refusal(ref):
            plan = validate_resume_input(resume)
            coerce_run_ref(ref)
        prepared = await _prepare(
            ref, lambda: self._prepare(ref, resume, request, plan, record_only=True)
        )
        return await decided_status(
            prepared, self.checkpoints, check_ownership(request.get("ownership")), ref
        )

    def resume_stream(self, ref: Any, resume: Any, **request: Any) -> ResumeEventStream:
        """Resume as a stream (see :func:`resume_agent_run_stream`)."""
        with _logged_refusal(ref):
            plan = validate_resume_input(resume)
            coerce_run_ref(ref)
            max_queued = request.pop("max_queued_events", 1024)
            overflow = request.pop("overflow", "close")
            check_stream_options(max_queued, overflow)
        on_session = request.pop("on_session", None)

        def prepare(observe: Callable[[Any], Any]) -> Awaitable[Prepared | Settled]:
            return _prepare_run(
                ref,
                lambda: self._prepare(ref, resume, {**request, "on_session": observe}, plan),
            )

        return ResumeEventStream(
            prepare, on_session=on_session, max_queued_events=max_queued, overflow=overflow
        )


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
