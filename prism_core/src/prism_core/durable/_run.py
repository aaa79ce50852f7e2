"""The durable side of one run: turn checkpoints, suspension, dispatch marks, terminal saves.

It reads the run through :class:`~._host.HostRun` and must not import the run loop, sessions or
agents, not even for typing; ``runs/`` reaches it through :mod:`._boundary`.

The write protocol of an every-turn run whose checkpoint store can commit together with its
session store (``shared_transaction``): the session holds the entries the run appends, and
each checkpoint write commits them with it, in one transaction. A turn whose tools are all
read-only or idempotent is then one commit (its turn checkpoint); a side-effecting call adds
one (its ``dispatched`` mark, written before it starts, with everything held until then).
Other runs, and stores without the capability, append each entry when it is made.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

import anyio
import attrs

from ..codec import dumps
from ..content import ErrorInfo, Message, ToolCallContent
from ..errors import (
    AgentDecisionError,
    AgentLoopStateError,
    AgentRunStateError,
    GuardrailPackError,
)
from ..guardrails._pack_identity import checkpoint_rows
from ..limits import DEFAULT_MAX_OUTPUT_RETRIES
from ..records._held import HeldEntries
from ..skills import MAX_LOADED_SKILLS
from ._capabilities import shared_transaction
from ._checkpoints import CheckpointStoreUnavailableError
from ._gates import Gate, interruption_for, pending_decision
from ._host import HostRun
from ._ledger import RunLedger
from ._options import DEFAULT_MAX_PENDING_DECISIONS, RunStateOptions
from ._receipts import ReceiptBook, process_actor
from ._state import (
    MAX_SKILL_BODIES_BYTES,
    MAX_SKILL_BODY_BYTES,
    MAX_SKILL_NAME_CHARS,
    AgentRunState,
    DecisionRecord,
    DecisionScope,
    Interruption,
    LoopStateRecord,
    PendingCall,
    ResolutionRecord,
    RunCountersState,
    RunGuardrailRecord,
    RunStatus,
    SessionStateRecord,
    SkillBody,
    StickyDecision,
    arguments_hash,
)
from ._writer import CheckpointWriter

__all__ = ("DurableRun", "RunStateInfo", "stopped_by_store")

STORE_UNAVAILABLE = CheckpointStoreUnavailableError.code

#: Most resolution audits a checkpoint keeps (the newest).
MAX_RESOLUTION_RECORDS = 64
#: The most decision records a checkpoint keeps (the newest); a run that decides more keeps
#: its latest decisions and counts the older ones in ``AgentRunState.audit_omitted``.
MAX_AUDIT_RECORDS = 256


@attrs.frozen(kw_only=True)
class RunStateInfo:
    """What a result says about its durable state: the checkpoint ``version`` and ``status``."""

    version: int
    status: str
    metadata: dict[str, str] | None = None


_UNCLAIMED = object()


def _commits_together(checkpoints: object, sessions: object) -> bool:
    """Whether ``checkpoints`` offers a shared commit with ``sessions`` (see
    ``_capabilities``)."""
    return shared_transaction(checkpoints, sessions) is not None


def stopped_by_store(status: RunStatus, error: ErrorInfo | None) -> bool:
    """Whether a run ends ``failed`` only because a store was unreachable (the transient
    code ``ERR_PRISM_STORE_UNAVAILABLE``), which must not mark its record failed."""
    return status == "failed" and error is not None and error.code == STORE_UNAVAILABLE


class DurableRun:
    """Checkpoints one run writes, in order, through a :class:`CheckpointWriter`."""

    def __init__(
        self,
        execution: HostRun,
        options: RunStateOptions,
        *,
        fingerprint: str,
        version: int = 0,
        metadata: dict[str, str] | None = None,
        sticky: Sequence[StickyDecision] = (),
        metadata_source: Any = None,
        run_guardrails: tuple[RunGuardrailRecord, ...] | None = None,
        fingerprint_parts: Mapping[str, Any] | None = None,
    ) -> None:
        self.execution = execution
        #: The digests of the fingerprint's parts, recorded so a refused resume names them.
        self.fingerprint_parts = None if fingerprint_parts is None else dict(fingerprint_parts)
        #: The decisions that settled this run's pending calls (rides every later checkpoint).
        self.audit: list[DecisionRecord] = []
        #: Older decision records the run's checkpoints no longer hold.
        self.audit_omitted = 0
        #: The identities of the run's own guards, recorded in every checkpoint.
        self.run_guardrails = run_guardrails
        self.options = options
        self.fingerprint = fingerprint
        agent = execution.agent
        self.agent_id = agent.id or agent.name or ""
        self.every_turn = options.checkpoint_policy == "every-turn"
        self.sticky: list[StickyDecision] = list(sticky)
        self.pending_calls: list[PendingCall] = []
        #: How this run's in-doubt calls were settled (rides every later checkpoint).
        self.resolutions: list[ResolutionRecord] = []
        #: The allowed calls this run was handed to run and owes a receipt for.
        self.receipts = ReceiptBook()
        #: The session leaf and counters at the start of the current tool round. Dispatch
        #: marks record these, not the live leaf, so a continue after a crash walks the whole
        #: round from its assistant message and sees which calls never got a result.
        self.anchor_leaf: str | None = None
        self.anchor_counters: RunCountersState | None = None
        #: The session leaf a resume claimed at (the claim is a running checkpoint there).
        self.claimed_leaf: str | object | None = _UNCLAIMED
        self.writer = CheckpointWriter(
            store=options.checkpoints,
            run_id=execution.run_id,
            max_state_bytes=options.max_state_bytes,
            ownership=options.ownership,
            fencing_token=options.fencing_token,
            redactor=execution.plan.redactor,
            metadata_source=metadata_source
            if metadata_source is not None
            else options.checkpoint_metadata,
            version=version,
            metadata=metadata,
            lease_ms=options.lease_ms,
            deadline=lambda: execution.deadline,
            middleware=agent.middleware,
            context=execution.mw_context,
        )
        #: The run's limits and their JSON form, made once (the limits are frozen).
        self._limits: tuple[Any, dict[str, Any]] | None = None
        #: The effect records of this run's calls, carried by its next checkpoint write.
        self.ledger = RunLedger.of_run(self)
        #: The session's held entries, when this run commits them with its checkpoints.
        self.held: HeldEntries | None = None
        sessions = execution.session.store
        if self.every_turn and _commits_together(options.checkpoints, sessions):
            self.writer.sessions = sessions
            self.held = execution.session.transcript.hold()

    @property
    def has_record(self) -> bool:
        """Whether this run has a checkpoint record (written or claimed)."""
        return self.writer.version > 0

    @property
    def version(self) -> int:
        """The version of the last checkpoint written or claimed (0: none)."""
        return self.writer.version

    @property
    def fencing_token(self) -> int:
        """The run's current fencing token: what its last claim wrote (or the host gave), ``0``
        before any claim. An effect system fences a call's side effect on it."""
        return self.writer.fencing_token or 0

    def info(self, status: str) -> RunStateInfo:
        """The ``run_state`` a result reports."""
        return RunStateInfo(
            version=self.writer.version, status=status, metadata=self.writer.metadata
        )

    @property
    def lost(self) -> BaseException | None:
        """The error that ended this run's ownership of its record, if one did."""
        return self.writer.lost

    # -- building states ----------------------------------------------------------------

    def _loop_state(self) -> LoopStateRecord | None:
        loop = self.execution.plan.loop
        snapshot = getattr(loop, "snapshot", None)
        if not callable(snapshot):
            return None
        value = snapshot()
        try:
            dumps(value)
        except (TypeError, ValueError) as exc:
            raise AgentLoopStateError(
                f"loop {loop.name!r} snapshot is not JSON: {exc}", code="ERR_PRISM_LOOP_SNAPSHOT"
            ) from exc
        return LoopStateRecord(name=loop.name, revision=str(loop.revision), snapshot=value)

    def _session_state(self) -> SessionStateRecord | None:
        session = self.execution.session
        packs = session.compiled_packs
        if not self.options.persist_session_state and packs is None:
            return None
        if not self.options.persist_session_state:
            # A run's guardrail packs always ride its checkpoints, so a resume can never run
            # with weaker enforcement than the run it continues.
            return SessionStateRecord(guardrail_packs=self._pack_block())
        skills = session.loaded_skills.skills()
        names = tuple(s.name for s in skills)
        # The catalogue is refused, never cut, when it would not load back.
        if len(names) > MAX_LOADED_SKILLS or any(
            not 1 <= len(name) <= MAX_SKILL_NAME_CHARS for name in names
        ):
            raise AgentRunStateError(
                f"the loaded skill catalogue exceeds the checkpoint bounds ({MAX_LOADED_SKILLS} "
                f"names of 1..{MAX_SKILL_NAME_CHARS} characters; {len(names)} loaded)"
            )
        bodies: tuple[SkillBody, ...] | None = None
        if self.options.include_skill_bodies:
            bodies = tuple(SkillBody(name=s.name, instructions=s.instructions) for s in skills)
            sizes = [len(b.instructions.encode("utf-8")) for b in bodies]
            if any(size > MAX_SKILL_BODY_BYTES for size in sizes) or sum(sizes) > (
                MAX_SKILL_BODIES_BYTES
            ):
                raise AgentRunStateError(
                    "loaded skill bodies exceed the checkpoint bounds "
                    f"({MAX_SKILL_BODY_BYTES} bytes each, {MAX_SKILL_BODIES_BYTES} in total)"
                )
        return SessionStateRecord(
            loaded_skill_names=names,
            loaded_skill_bodies=bodies,
            guardrail_packs=self._pack_block(),
            attention_sticky=session.attention_frontier.snapshot(),
        )

    def _pack_block(self) -> dict[str, Any] | None:
        packs = self.execution.session.compiled_packs
        if packs is None:
            return None
        try:
            # A pack whose state is unset (``None``: nothing observed yet) writes no state, so
            # a resume starts it afresh, as the run did.
            state = {
                pack_id: snapshot
                for pack_id, snapshot in packs.snapshot_state().items()
                if packs.state_of(pack_id) is not None
            }
            block: dict[str, Any] = {"packs": checkpoint_rows(packs)}
            if state:
                block["state"] = state
            return block
        except GuardrailPackError as exc:
            raise AgentRunStateError(f"guardrail packs cannot ride the checkpoint: {exc}") from exc

    def _wall_deadline(self) -> float | None:
        deadline = self.execution.deadline
        if deadline is None:
            return None
        return time.time() + (deadline - anyio.current_time())

    def state(
        self,
        status: RunStatus,
        *,
        interruption: Interruption | None = None,
        pending_input: tuple[Message, ...] = (),
        error: ErrorInfo | None = None,
        at_anchor: bool = False,
    ) -> AgentRunState:
        """The run's current frontier as a state with ``status`` (``at_anchor``: at the
        start of the current tool round, as a dispatch mark records it)."""
        execution = self.execution
        terminal = status in ("succeeded", "failed", "aborted", "denied")
        leaf = self.anchor_leaf if at_anchor else execution.session.leaf_id
        counters_state = (
            self.anchor_counters
            if at_anchor and self.anchor_counters is not None
            else self._counters()
        )
        return AgentRunState(
            status=status,
            run_id=execution.run_id,
            session_id=execution.session_id,
            agent_id=self.agent_id,
            definition_revision=self.options.definition_revision,
            fingerprint=self.fingerprint,
            leaf_id=leaf,
            counters=counters_state,
            limits=self._limits_data(),
            wall_deadline=self._wall_deadline(),
            checkpoint_policy="every-turn" if self.every_turn else None,
            interrupt_before_tool=self.options.interrupt_before_tool,
            max_state_bytes=self.options.max_state_bytes,
            interruption=interruption,
            pending_calls=() if terminal else tuple(self.pending_calls),
            pending_input=pending_input,
            sticky_decisions=() if terminal else tuple(self.sticky),
            loop_state=self._loop_state(),
            tool_names=execution.plan.tool_names,
            session_state=self._session_state(),
            run_guardrails=self.run_guardrails,
            error=error,
            resolutions=tuple(self.resolutions[-MAX_RESOLUTION_RECORDS:]),
            audit=tuple(self.audit[-MAX_AUDIT_RECORDS:]),
            audit_omitted=self.audit_omitted + max(0, len(self.audit) - MAX_AUDIT_RECORDS),
            fingerprint_parts=self.fingerprint_parts,
            output_schema=execution.output_schema,
            output=execution.output_json if status == "succeeded" else None,
            started_by=execution.started_by,
            approval_timeout_ms=self.options.approval_timeout_ms,
            notify=self.options.notify,
            parent_run_id=execution.parent_run_id,
        )

    def _limits_data(self) -> dict[str, Any]:
        limits = self.execution.plan.limits
        cached = self._limits
        if cached is None or cached[0] is not limits:
            data = attrs.asdict(limits)
            # The default retry bound is left out, so runs without typed output keep their bytes.
            if data.get("max_output_retries") == DEFAULT_MAX_OUTPUT_RETRIES:
                del data["max_output_retries"]
            cached = self._limits = (limits, data)
        # A copy per state: each state owns its map, as when it was made afresh every turn.
        return dict(cached[1])

    def _counters(self) -> RunCountersState:
        counters = self.execution.counters
        return RunCountersState(
            turns=counters.turns,
            provider_attempts=counters.provider_attempts,
            tool_rounds=counters.tool_rounds,
            tool_calls=counters.tool_calls,
            usage=counters.usage if counters.usage_reported else None,
            stop_continuations=counters.stop_continuations,
            output_retries=counters.output_retries,
        )

    def set_anchor(self) -> None:
        """Remember the session leaf and counters where the next tool round starts."""
        self.anchor_leaf = self.execution.session.leaf_id
        self.anchor_counters = self._counters()

    # -- writes -------------------------------------------------------------------------

    async def turn_boundary(self) -> None:
        """Under ``every-turn``, write a running checkpoint before the next provider request.

        Right after a claim that changed nothing since, the claim already is that checkpoint.
        Under any policy, this is where the next tool round's dispatch marks are anchored.
        """
        self.set_anchor()
        if not self.every_turn:
            return
        claimed_leaf, self.claimed_leaf = self.claimed_leaf, _UNCLAIMED
        if claimed_leaf == self.execution.session.leaf_id and not self.pending_calls:
            return
        self.pending_calls = []
        await self._write(self.state("running"))

    async def suspend(
        self, gates: Sequence[Gate], *, pending_input: tuple[Message, ...] = ()
    ) -> Interruption:
        """Write one suspension for ``gates`` and return its interruption.

        One gate's interruption carries its kind, reason, call and guardrail; several are one
        ``tool_approval`` interruption, "N tool side effects require approval". More than
        ``DEFAULT_MAX_PENDING_DECISIONS`` gates are refused (``ERR_PRISM_DECISION_LIMIT``).
        """
        if len(gates) > DEFAULT_MAX_PENDING_DECISIONS:
            raise AgentDecisionError(
                f"Pending decisions exceed {DEFAULT_MAX_PENDING_DECISIONS} per run",
                code="ERR_PRISM_DECISION_LIMIT",
            )
        now = time.time()
        timeout = self.options.approval_timeout_ms
        decisions = tuple(pending_decision(gate, now=now, timeout_ms=timeout) for gate in gates)
        interruption = interruption_for(decisions)
        calls: dict[str, PendingCall] = {}
        for gate in gates:
            if gate.kind == "input_guardrail" and gate.child_run_id is None:
                continue
            # A sub-agent call waiting on several child decisions is one pending call.
            calls.setdefault(
                gate.call.id,
                PendingCall(
                    tool_call_id=gate.call.id,
                    name=gate.call.name,
                    arguments_hash=arguments_hash(gate.call.arguments),
                    status="pending",
                    approval_id=gate.approval_id,
                    child_run_id=gate.child_run_id,
                ),
            )
        self.pending_calls = list(calls.values())
        # The calls' arguments ride a notifying run's ``suspended`` notification (redacted).
        arguments = (
            {gate.call.id: gate.call.arguments for gate in gates} if self.options.notify else None
        )
        await self._write(
            self.state("suspended", interruption=interruption, pending_input=pending_input),
            arguments,
        )
        return interruption

    async def mark_dispatched(self, call: ToolCallContent) -> None:
        """Record that ``call``'s side effect is about to start (written right before it does).

        The mark is written at the round's anchor (see :attr:`anchor_leaf`): from there, a
        continue sees the round's assistant message and every result stored since.
        """
        # An allowed call's mark names the process that runs it, for a receipt after a crash.
        by = process_actor() if self.receipts.owes(call.id) else None
        if any(pending.tool_call_id == call.id for pending in self.pending_calls):
            self.pending_calls = [
                attrs.evolve(pending, status="dispatched", dispatched_by=by)
                if pending.tool_call_id == call.id
                else pending
                for pending in self.pending_calls
            ]
        else:
            self.pending_calls.append(
                PendingCall(
                    tool_call_id=call.id,
                    name=call.name,
                    arguments_hash=arguments_hash(call.arguments),
                    status="dispatched",
                )
            )
        if self.anchor_leaf is None:
            self.set_anchor()
        await self._write(self.state("running", at_anchor=True))

    def dispatched_calls(self) -> tuple[str, ...]:
        """The calls whose ``dispatched`` mark is written and whose result is not: their side
        effect may be under way."""
        return tuple(c.tool_call_id for c in self.pending_calls if c.status == "dispatched")

    def add_receipt(self, call: ToolCallContent, outcome: str, reason: str | None = None) -> None:
        """Record what became of ``call`` (``executed``, ``execution_failed``) when it is an
        allowed call this run owes a receipt; it rides the run's next checkpoint."""
        self.receipts.settle(
            self.audit,
            call.id,
            outcome,
            version=self.version,
            arguments_hash=arguments_hash(call.arguments),
            reason=reason,
        )

    def settle_pending(self, tool_call_id: str) -> None:
        """Forget a pending call once its result is in the session store."""
        self.pending_calls = [c for c in self.pending_calls if c.tool_call_id != tool_call_id]

    async def check_still_owner(self) -> None:
        """The pre-dispatch check of a call that gets no ``dispatched`` mark: raise
        :class:`~prism_core.CheckpointConflictError` when another worker has claimed the run
        since this run's last write, so a superseded worker runs no further tool.

        One read (a load compared on version and fencing token), not a write: it costs no
        commit and does not bump the version. A claim landing between this read and the
        tool's start is not caught here; tools with effects that must never overlap key them
        on the run's fencing token or take the ``dispatched`` mark (a conditional write).
        A run without a record (nothing was checkpointed yet) cannot have been claimed.
        """
        if self.has_record:
            await self.writer.check_owner()

    def hold_lease(self) -> AbstractAsyncContextManager[None]:
        """While the body runs, renew a leased run's lease every third of ``lease_ms`` in a
        task group owned by this block. A failed renewal stops renewing (the next write or
        pre-dispatch check reports the loss); it never cancels the body. A run without a
        lease (or that lost its record) gets a block that does nothing."""
        lease_ms = self.writer.lease_ms
        if lease_ms is None or self.writer.lost is not None:
            # Entered around every step of the run: no generator for a run that renews nothing.
            return nullcontext()
        return self._renewing(lease_ms)

    @asynccontextmanager
    async def _renewing(self, lease_ms: int) -> AsyncIterator[None]:
        failure: BaseException | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._renew_lease, lease_ms / 3000)
            try:
                yield
            except BaseException as exc:
                # Raised outside the group, so the body's error (or cancellation) reaches the
                # caller as itself, not wrapped in an exception group.
                failure = exc
            finally:
                group.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _renew_lease(self, interval: float) -> None:
        while True:
            await anyio.sleep(interval)
            try:
                await self.writer.renew()
            except Exception:
                # ``writer.lost`` holds the cause; the run learns of it at its next write.
                return

    async def finish(
        self,
        status: RunStatus,
        error: ErrorInfo | None = None,
        *,
        stop_reason: str | None = None,
        stop_detail: str | None = None,
    ) -> None:
        """Write the terminal state, when the run has a record (a clean run writes nothing).

        A run that lost its record (superseded by a claim, or the store stayed unreachable)
        writes nothing: its record stays as the new owner or the last write left it. Nor does
        a run that failed because a store (its session store included) was unreachable: it
        stays ``running``, continuable once the store is back.
        """
        if self.writer.lost is not None or stopped_by_store(status, error):
            self.release_held()
            return
        if self.has_record:
            self.pending_calls = []
            state = self.state(status, error=error)
            if stop_reason is not None:
                state = attrs.evolve(state, stop_reason=stop_reason, stop_detail=stop_detail)
            await self._write(state)
        elif self.held is not None:
            # No checkpoint to commit with (none was written yet): append as any run does.
            for entry in tuple(self.held.entries):
                await self.writer.sessions.append(entry)
                self.held.committed(1)
        self.release_held()

    async def _write(
        self, state: AgentRunState, arguments: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        """Save ``state``, committing the entries the session holds and the pending effect
        records with it (``arguments``: those of the calls a suspension waits on, by call
        id)."""
        held = self.held
        effects = self.ledger.pending()
        if held is None:
            await self.writer.save(state, effects=effects, arguments=arguments)
            self.ledger.written(effects)
            return
        entries = tuple(held.entries)
        try:
            await self.writer.save(state, entries, effects, arguments=arguments)
        except BaseException:
            # Not committed (or not known to be): the session goes back to what its store
            # holds, and the run appends directly from here on.
            self.release_held()
            raise
        held.committed(len(entries))
        self.ledger.written(effects)

    def release_held(self) -> None:
        """Stop holding session entries; those still held were never committed, so the
        session's leaf and history go back to what its store holds."""
        if self.held is not None:
            self.held = None
            self.execution.session.transcript.release()

    def sticky_for(self, scope: DecisionScope) -> StickyDecision | None:
        """A sticky decision covering ``scope`` (every recorded field equal), if any."""
        for sticky in self.sticky:
            if sticky.scope.covers(scope):
                return sticky
        return None
