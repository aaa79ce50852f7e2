"""``run_worker``: claim runs that wait for a worker, under a lease, and run them.

Who decides is not who runs: ``decide_agent_run`` (the CLI, the console, AG-UI, A2A) records a
decision and marks the run (``durable/_work.py``); a worker finds the mark, claims the run with
a ``continue`` under its own lease and runs it to its next stop (suspended or ended), then
drops the mark. It also continues unowned runs whose lease expired (a worker that died). A
run it cannot continue (a call in doubt, an agent the host no longer serves, a refused
resume) is left as it is, logged once, and not tried again until its checkpoint changes.

Finding work: a sweep lists the marks and the expired unowned runs; it runs when the store
wakes the worker (:class:`~prism_core.stores.RunWakeups`: a decision recorded anywhere on the
same stores) and otherwise every ``poll_ms``, so a lost wake-up only delays a run. A wake-up
lists the marks alone (the expired runs are listed at least every ``poll_ms``). A mark seen
for the first time is claimed at the version it names, without reading the run first, so a
decision reaches its tool through one read (the marks), the continue's own load, its claim
and, for a side-effecting tool, the ``dispatched`` mark; every other candidate is read before
it takes a slot, so runs another worker holds do not crowd out those this one may claim.

Notifications: a worker given ``notifiers`` delivers the outbox of its stores
(``workers/_delivery.py``) every ``poll_ms``, hosts the agents of the runs it continues with
``notify``, and, when it leaves a run because a call of it is in doubt, writes that run's
``in_doubt`` notification (once per version, whoever finds it).

Stopping: ``stop`` ends the sweeps and cancels the runs in flight without writing anything
for them (as a killed process would); they stay ``running`` and the next worker continues
them once their lease has expired.

It must not decide anything: it only continues what was decided.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import attrs

from .._capability import capability
from .._notification import Notification, NotifierConfigError, check_notifiers, notification_id
from ..durable._checkpoints import CheckpointStore
from ..durable._expiry import expire_agent_runs
from ..durable._in_doubt import IN_DOUBT_CODE
from ..durable._lease import lease_is_live, validate_lease_ms
from ..durable._outbox import note_request, write_notes
from ..durable._pair import StorePair
from ..durable._wakeups import RunWakeups
from ..durable._work import WorkMark, delete_work_mark, list_work_marks, note_refusal
from ..errors import AgentRunError, AgentRunStateError, CheckpointConflictError, PrismError
from ..resume import (
    AgentRunLifecycle,
    AgentRunStatus,
    call_resolve_agent,
    create_agent_run_lifecycle,
    list_agent_runs,
    load_agent_run_state,
)
from ._delivery import run_deliverer
from ._resolver import entered_resolver

__all__ = ("WorkerConfigError", "run_worker")

logger = logging.getLogger(__package__ or __name__)

#: Most marks (and expired runs) one sweep reads.
_SWEEP_PAGES = 10
_PAGE = 100
#: Refusals that mean another worker holds the run: no log, no memo.
_TAKEN = frozenset({"ERR_PRISM_RUN_LEASED", "ERR_PRISM_CHECKPOINT_CONFLICT"})


class WorkerConfigError(PrismError, ValueError):
    """A worker option is malformed (raised before the worker reads anything)."""

    code = "ERR_PRISM_WORKER_CONFIG"


@attrs.frozen
class _Refusal:
    """Why a run was not continued: an error code, its message, the exception to log."""

    code: str
    message: str
    error: BaseException | None = None


@attrs.frozen
class _Candidate:
    run_id: str
    ownership: Mapping[str, str] | None
    mark: WorkMark | None = None


def _check_options(lease_ms: Any, poll_ms: Any, concurrency: Any, stop: Any) -> None:
    try:
        validate_lease_ms(lease_ms)
    except (PrismError, TypeError, ValueError) as exc:
        raise WorkerConfigError(str(exc)) from None
    for name, value in (("poll_ms", poll_ms), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise WorkerConfigError(f"{name} must be a positive integer, got {value!r}")
    if stop is not None and not (hasattr(stop, "wait") and hasattr(stop, "is_set")):
        raise WorkerConfigError("stop must be an anyio.Event (or None)")


def _unpack(answer: Any) -> tuple[Any, Any]:
    if isinstance(answer, Mapping):
        return answer.get("agent"), answer.get("definition_revision")
    if isinstance(answer, tuple) and len(answer) == 2:
        return answer[0], answer[1]
    return answer, None


def _hosting(
    resolver: Callable[..., Any],
    stores: StorePair,
    ownership: Mapping[str, str] | None,
    notify: bool = False,
) -> Callable[..., Any]:
    """``resolver``, with every agent it answers hosted on the worker's stores for the run's
    ``ownership`` (``Agent.hosted``, with ``notify`` for a worker with notifiers; an agent
    without it is copied onto the session store)."""

    async def resolve(agent_id: str, revision: str | None = None) -> Any:
        answer = await call_resolve_agent(resolver, agent_id, revision=revision)
        agent, definition_revision = _unpack(answer)
        if agent is None:
            return None
        hosted = getattr(agent, "hosted", None)
        if callable(hosted) and isinstance(definition_revision, str):
            options: dict[str, Any] = {"ownership": ownership}
            if notify:
                options["notify"] = True
            agent = hosted(stores, definition_revision=definition_revision, **options)
        elif callable(getattr(agent, "evolve", None)) and agent.store is not stores.sessions:
            agent = agent.evolve(store=stores.sessions)
        return (agent, definition_revision)

    return resolve


async def _host_answer(hook: Callable[[Any], Any] | None, state: Any, absent: Any) -> Any:
    """What the host's sync or async ``hook(state)`` answers (``absent`` without one)."""
    if hook is None:
        return absent
    answer = hook(state)
    return await answer if inspect.isawaitable(answer) else answer


@attrs.define
class _Worker:
    stores: StorePair
    resolver: Callable[..., Any]
    lease_ms: int
    concurrency: int
    restore_hooks: tuple[Any, ...] = ()
    #: The host's ``guardrail_packs(state)`` and ``guardrails(state)``: what a resume of a
    #: run must be handed again (``None``: nothing).
    guardrail_packs: Callable[[Any], Any] | None = None
    guardrails: Callable[[Any], Any] | None = None
    #: Whether the worker has notifiers (its runs are hosted with ``notify``).
    notify: bool = False
    in_flight: set[str] = attrs.Factory(set)
    #: Runs left as they are: run id → the checkpoint version they were refused at.
    refused: dict[str, int] = attrs.Factory(dict)
    #: Marks claimed once at their own version (run id → that version): from then on the
    #: run is read before it takes a slot.
    tried: dict[str, int] = attrs.Factory(dict)

    @property
    def checkpoints(self) -> CheckpointStore:
        """The store the runs and their marks live in."""
        return self.stores.checkpoints

    @property
    def hands_over(self) -> bool:
        """Whether the host hands packs or guards over again (then every run is read
        before it is claimed: the host's answer depends on its state)."""
        return self.guardrail_packs is not None or self.guardrails is not None

    def lifecycle(self, ownership: Mapping[str, str] | None) -> AgentRunLifecycle:
        """The lifecycle that continues runs of ``ownership``: the host's agents hosted for
        it, the host's restore hooks."""
        return create_agent_run_lifecycle(
            checkpoints=self.checkpoints,
            resolve_agent=_hosting(self.resolver, self.stores, ownership, self.notify),
            restore_hooks=self.restore_hooks,
        )

    async def candidates(self, *, expired: bool) -> list[_Candidate]:
        """The marked runs, then (with ``expired``) the unowned runs whose lease expired."""
        found: list[_Candidate] = []
        cursor: str | None = None
        for _ in range(_SWEEP_PAGES):
            marks, cursor = await list_work_marks(self.checkpoints, limit=_PAGE, cursor=cursor)
            found.extend(_Candidate(m.run_id, m.ownership, m) for m in marks)
            if cursor is None:
                break
        marked = {c.run_id for c in found}
        # What is no longer marked was run to its stop, here or elsewhere.
        self.tried = {run_id: v for run_id, v in self.tried.items() if run_id in marked}
        if not expired:
            return found
        page = await list_agent_runs(self.checkpoints, recoverable=True, limit=_PAGE)
        found.extend(
            _Candidate(summary.run_id, None)
            for summary in page.runs
            # Only runs that had a lease: one without gives no sign of life and may be
            # running right now in its host's process.
            if summary.lease_expires_at is not None and summary.run_id not in marked
        )
        return found

    async def sweep(self, group: anyio.abc.TaskGroup, *, expired: bool = True) -> None:
        """Start a task for each candidate a worker may claim now (running, no live lease,
        not left as it is at this version), up to ``concurrency`` in flight; the runs whose
        lease expired are candidates with ``expired``. A mark not tried yet is claimed at its
        version unread; every other candidate is read first (:meth:`claimable`). Candidates
        are taken in a random order, so workers sharing a store do not all race for the
        same."""
        candidates = await self.candidates(expired=expired)
        logger.debug("swept: %d runs to continue", len(candidates))
        random.shuffle(candidates)
        for candidate in candidates:
            if len(self.in_flight) >= self.concurrency:
                return
            run_id, mark = candidate.run_id, candidate.mark
            if run_id in self.in_flight:
                continue
            status: AgentRunStatus | None = None
            seen = (self.tried.get(run_id), self.refused.get(run_id))
            if mark is None or mark.version in seen or self.hands_over:
                status = await self.claimable(candidate)
                if status is None:
                    continue
            else:
                self.tried[run_id] = mark.version
            self.in_flight.add(run_id)
            group.start_soon(self.work, candidate, status)

    async def claimable(self, candidate: _Candidate) -> AgentRunStatus | None:
        """The candidate's run when this worker may claim it now, else ``None`` (a mark whose
        run stopped is deleted on the way)."""
        run_id = candidate.run_id
        status = await load_agent_run_state(
            self.checkpoints, {"run_id": run_id}, ownership=candidate.ownership
        )
        if status is None or status.state.status != "running":
            if candidate.mark is not None:
                await delete_work_mark(self.checkpoints, candidate.mark)
            self.refused.pop(run_id, None)
            return None
        if lease_is_live(status.state.lease_expires_at):
            return None
        if self.refused.get(run_id) == status.version:
            return None
        return status

    async def work(self, candidate: _Candidate, status: AgentRunStatus | None) -> None:
        try:
            await self._work(candidate, status)
        except Exception:
            logger.exception("run %s: the worker failed on it; left as it is", candidate.run_id)
        finally:
            self.in_flight.discard(candidate.run_id)

    async def _leave(
        self,
        candidate: _Candidate,
        version: int,
        refusal: _Refusal,
        status: AgentRunStatus | None = None,
    ) -> None:
        """Leave the run as it is until its checkpoint moves past ``version``; say so once,
        in the log and on its mark (where whoever waits for the run reads it), and, for a
        call in doubt of a run that notifies, in its ``in_doubt`` notification."""
        run_id = candidate.run_id
        self.refused[run_id] = version
        if candidate.mark is not None and candidate.mark.version == version:
            await note_refusal(self.checkpoints, candidate.mark, refusal.code, refusal.message)
        if refusal.code == IN_DOUBT_CODE and status is not None and status.version == version:
            await self._in_doubt(status)
        logger.warning(
            "run %s: left as it is at version %d (%s): %s",
            run_id,
            version,
            refusal.code,
            refusal.message,
            exc_info=refusal.error,
            extra={"prism_run_id": run_id, "prism_error_code": refusal.code},
        )

    async def _in_doubt(self, status: AgentRunStatus) -> None:
        """Write the ``in_doubt`` notification of a run left in doubt at its version (once:
        its id is the run's and the version's), when the run notifies or this worker does."""
        state = status.state
        if not (state.notify or self.notify):
            return
        notification = Notification(
            id=notification_id(state.run_id, status.version, "in_doubt"),
            event="in_doubt",
            run_id=state.run_id,
            session_id=state.session_id,
            agent_id=state.agent_id,
            status=state.status,
            version=status.version,
            occurred_at=time.time(),
        )
        await write_notes(self.checkpoints, [note_request(notification)])

    async def _work(self, candidate: _Candidate, status: AgentRunStatus | None) -> None:
        mark = candidate.mark
        if status is None and mark is not None:
            # Claimed at the mark's version, unread: a run that moved on since is refused
            # before anything is written, and is read (and handled) below.
            refused = await self._continue(candidate, mark.version)
            if refused is None:
                return
            status = await self.claimable(candidate)
            if status is None:
                return
            if status.version == mark.version:
                # Refused for what the run is, not because it moved on.
                await self._leave(candidate, status.version, refused, status)
                return
        if status is None:
            return
        refused = await self._continue(candidate, status.version, status)
        if refused is not None:
            await self._leave(candidate, status.version, refused, status)

    async def _continue(
        self, candidate: _Candidate, version: int, status: AgentRunStatus | None = None
    ) -> _Refusal | None:
        """Continue the run from ``version`` to its next stop (dropping its mark); the
        refusal when it was not continued, ``None`` otherwise (another worker's run too).
        ``status`` (the run as read) is what the host's hand-over hooks are asked about."""
        run_id = candidate.run_id
        logger.info("run %s: continuing from version %d", run_id, version)
        try:
            state = status.state if status is not None else None
            result = await self.lifecycle(candidate.ownership).resume(
                {"run_id": run_id},
                {"expected_version": version, "decision": "continue"},
                ownership=candidate.ownership,
                lease_ms=self.lease_ms,
                guardrail_packs=await _host_answer(self.guardrail_packs, state, ()),
                guardrails=await _host_answer(self.guardrails, state, None),
            )
            outcome = result.status
        except AgentRunError as exc:
            # The run reached its end (failed or aborted): that is a stop like any other.
            outcome = exc.result.status
        except (AgentRunStateError, CheckpointConflictError, PrismError) as exc:
            return None if exc.code in _TAKEN else _Refusal(exc.code, exc.message)
        except Exception as exc:
            # The host's resolver or agent failed (an agent it no longer serves, say).
            return _Refusal(type(exc).__name__, str(exc), exc)
        logger.info("run %s: %s", run_id, outcome)
        self.refused.pop(run_id, None)
        if candidate.mark is not None:
            await delete_work_mark(self.checkpoints, candidate.mark)
        return None


async def run_worker(
    *,
    checkpoints: CheckpointStore,
    sessions: Any,
    resolve_agent: Any,
    lease_ms: int = 30000,
    poll_ms: int = 500,
    concurrency: int = 4,
    stop: anyio.Event | None = None,
    restore_hooks: Sequence[Any] = (),
    guardrail_packs: Callable[[Any], Any] | None = None,
    guardrails: Callable[[Any], Any] | None = None,
    notifiers: Sequence[Any] = (),
) -> None:
    """Run decided and abandoned runs until ``stop`` is set (see the module docstring).

    ``resolve_agent`` is a resolver (``(agent_id[, revision=]) -> (agent, revision)``, sync
    or async) or an async context manager factory yielding one, entered once for the
    worker's life. Each run is claimed with a ``continue`` under a ``lease_ms`` lease (the
    run's own when it has one), at most ``concurrency`` at once, with the agent hosted on
    ``checkpoints`` and ``sessions`` for the run's ownership (``Agent.hosted``). Every sweep
    that lists expired runs first expires overdue decisions (``expire_agent_runs``).
    ``restore_hooks`` run on every claim; ``guardrail_packs(state)`` and
    ``guardrails(state)`` (sync or async) hand back what a run recorded by identity, as for
    ``prism_server.create_app``. ``notifiers`` (each with an async ``deliver(notification)``,
    such as :class:`~prism_core.WebhookNotifier`) get the outbox of the stores, delivered
    every ``poll_ms``, and the runs the worker continues notify. Raises
    :class:`WorkerConfigError` for a malformed option before it reads anything.
    """
    _check_options(lease_ms, poll_ms, concurrency, stop)
    for name, hook in (("guardrail_packs", guardrail_packs), ("guardrails", guardrails)):
        if hook is not None and not callable(hook):
            raise WorkerConfigError(f"{name} must be callable(state)")
    try:
        chosen = check_notifiers(notifiers)
    except NotifierConfigError as exc:
        raise WorkerConfigError(exc.message) from None
    wakeups = capability(checkpoints, RunWakeups)
    async with entered_resolver(resolve_agent) as resolver:
        worker = _Worker(
            StorePair(checkpoints, sessions),
            resolver,
            lease_ms,
            concurrency,
            restore_hooks=tuple(restore_hooks),
            guardrail_packs=guardrail_packs,
            guardrails=guardrails,
            notify=bool(chosen),
        )
        async with anyio.create_task_group() as group:
            if chosen:
                group.start_soon(
                    functools.partial(
                        run_deliverer, checkpoints=checkpoints, notifiers=chosen, poll_ms=poll_ms
                    )
                )
            if stop is not None:

                async def stopping() -> None:
                    await stop.wait()
                    group.cancel_scope.cancel()

                group.start_soon(stopping)
            if wakeups is None:
                await _poll(worker, group, poll_ms / 1000, None)
            else:
                async with wakeups.watch_runs() as watch:
                    await _poll(worker, group, poll_ms / 1000, watch)


async def _poll(worker: _Worker, group: anyio.abc.TaskGroup, every: float, watch: Any) -> None:
    every = every if math.isfinite(every) else 3600.0
    # The runs whose lease expired are listed at least every ``every`` seconds; a wake-up
    # (a decision, which left a mark) lists the marks alone.
    listed_expired = -math.inf
    woken = False
    while True:
        now = time.monotonic()
        expired = not woken or now - listed_expired >= every
        try:
            if expired:
                await expire_agent_runs(worker.checkpoints)
            await worker.sweep(group, expired=expired)
            if expired:
                listed_expired = now
        except PrismError as exc:
            # A store that is down for a moment: try again at the next sweep.
            logger.warning("worker sweep failed (%s): %s", exc.code, exc.message)
        if watch is None:
            await anyio.sleep(every)
        else:
            woken = await watch.wait(every)
