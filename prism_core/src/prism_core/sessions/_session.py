"""``AgentSession``: a conversation on a branch of a session store, and the runs on it."""

from __future__ import annotations

from typing import Any

import anyio
import attrs

from .._agent_config import AgentConfig
from .._attention_frontier import AttentionFrontier
from .._threads import call_on_loop
from ..content import to_messages
from ..errors import PrismError
from ..events import AgentEvent
from ..guardrails import CompiledGuardrailPacks, compile_guardrail_packs
from ..middleware import MiddlewareContext
from ..models import ModelConfig
from ..records._entries import SessionEntry, new_entry_id
from ..records._meter import ContextMeter
from ..records._store import SessionStore
from ..records._transcript import Transcript
from ..redaction import redact_value
from ..results import AgentRunResult
from ..runs._broadcast import (
    EventBroadcaster,
    EventSubscription,
    OverflowPolicy,
    validate_subscribe_options,
)
from ..runs._compact import compact_branch, resolve_keep_recent
from ..runs._compaction import CompactionResult, CompactionStrategy
from ..runs._driver import RunDriver, RunEventStream
from ..runs._execution import RunExecution
from ..runs._options import InvalidOptionsError, coerce_run_options
from ..runs._slot import RunSlot
from ..runs._steering import SteerQueue
from ..skills import LoadedSkillSet
from ._ports import SessionAgent

__all__ = (
    "DEFAULT_SNAPSHOT_CACHE_TTL_MS",
    "HARD_MAX_SNAPSHOT_CACHE_TTL_MS",
    "AgentSession",
    "SessionClosedError",
)

#: How long ``session.snapshot()`` reuses an unchanged branch, by default and at most.
DEFAULT_SNAPSHOT_CACHE_TTL_MS = 1000
HARD_MAX_SNAPSHOT_CACHE_TTL_MS = 30000


class SessionClosedError(PrismError):
    """The session was closed; it accepts no new runs."""

    code = "ERR_PRISM_SESSION_CLOSED"


class AgentSession:
    """A session of an agent: runs, streams, subscriptions and branch navigation.

    Only one run may be active at a time; a second concurrent run is rejected, not queued.
    What its runs work on, the session lends them: :attr:`transcript` (the branch, its
    history and appends), :attr:`broadcaster` (where events go), :attr:`steers` (messages
    steered into the active run) and :attr:`run_slot` (which run holds the session).
    """

    def __init__(
        self,
        agent: SessionAgent,
        *,
        id: str,
        store: SessionStore,
        leaf_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        compiled_packs: CompiledGuardrailPacks | None = None,
        snapshot_cache_ttl_ms: float = DEFAULT_SNAPSHOT_CACHE_TTL_MS,
    ) -> None:
        if (
            isinstance(snapshot_cache_ttl_ms, bool)
            or not isinstance(snapshot_cache_ttl_ms, int | float)
            or not 0 <= snapshot_cache_ttl_ms <= HARD_MAX_SNAPSHOT_CACHE_TTL_MS
        ):
            raise TypeError(
                f"snapshot_cache_ttl_ms must be a number in 0..{HARD_MAX_SNAPSHOT_CACHE_TTL_MS}"
            )
        self.snapshot_cache_ttl_ms = snapshot_cache_ttl_ms
        self._snapshot: tuple[str | None, float, tuple[SessionEntry, ...]] | None = None
        self.agent = agent
        self.id = id
        self.store = store
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.compiled_packs = compiled_packs
        self.loaded_skills = LoadedSkillSet()
        #: The attention compiler's sticky changes to the session's provider input.
        self.attention_frontier = AttentionFrontier()
        #: The session's branch as its runs work on it.
        self.transcript = Transcript(id, store, leaf_id)
        #: Where the session's events are published (subscriptions read from it).
        self.broadcaster = EventBroadcaster()
        #: Messages steered into the active run, waiting for its next turn boundary.
        self.steers = SteerQueue()
        #: Which run holds the session.
        self.run_slot = RunSlot(
            session_id=id,
            transcript=self.transcript,
            broadcaster=self.broadcaster,
            steers=self.steers,
            middleware=agent.config.middleware,
        )
        self._closed = False

    @property
    def config(self) -> AgentConfig:
        """The configuration of the session's agent (what its runs read)."""
        return self.agent.config

    @property
    def leaf_id(self) -> str | None:
        """The session's current leaf entry (``None`` on an empty session)."""
        return self.transcript.leaf_id

    @property
    def current_model(self) -> ModelConfig:
        """The model the branch last changed to (a ``model_change`` entry), else the agent's."""
        return self.transcript.model or self.config.model

    # -- runs -------------------------------------------------------------------------------

    async def run(self, input: Any, **options: Any) -> AgentRunResult:
        """Run ``input`` (a string, a message, or messages) to the end.

        Returns the result for ``succeeded``/``suspended``/``denied``; raises
        :class:`~prism_core.AgentRunError` (with ``.result``) for ``failed`` and ``aborted``.
        """
        execution = self._start_run(input, options)
        await RunDriver(execution).drain()
        error = execution.terminal_error()
        if error is not None:
            raise error
        assert execution.result is not None
        return execution.result

    async def prompt(self, input: Any, **options: Any) -> AgentRunResult:
        """The same as :meth:`run`."""
        return await self.run(input, **options)

    async def follow_up(self, input: Any, **options: Any) -> AgentRunResult:
        """A new run on the session with ``input``, continuing its conversation: the same as
        :meth:`run`, and refused like it while a run is active (Prism queues no runs)."""
        return await self.run(input, **options)

    def stream(
        self,
        input: Any,
        *,
        max_queued_events: int = 1024,
        overflow: OverflowPolicy = "close",
        **options: Any,
    ) -> RunEventStream:
        """An async iterator over exactly one new run's events (see :class:`RunEventStream`).

        The stream subscribes first, bounded by ``max_queued_events``/``overflow`` exactly as
        :meth:`subscribe` is (``close``: one ``event_subscriber_overflow`` notice, then the
        stream ends while the run goes on to its end; ``drop_oldest``/``drop_newest``), then
        starts the run. A malformed bound is refused here, before any run starts.
        """
        try:
            validate_subscribe_options(max_queued_events, overflow)
        except ValueError as exc:
            raise InvalidOptionsError(str(exc)) from exc
        return RunEventStream(
            lambda: self._start_run(input, options),
            lambda: self.broadcaster.subscribe(
                max_queued_events=max_queued_events, overflow=overflow
            ),
        )

    def subscribe(
        self,
        *,
        across_runs: bool = False,
        max_queued_events: int = 1024,
        overflow: OverflowPolicy = "close",
    ) -> EventSubscription:
        """A live subscription to this session's events.

        Run-scoped by default (closed when the run ends); ``across_runs=True`` keeps it open
        until the host closes it or the session closes. Consume it concurrently with the run.
        """
        return self.broadcaster.subscribe(
            across_runs=across_runs, max_queued_events=max_queued_events, overflow=overflow
        )

    def abort(self, reason: Any = None) -> bool:
        """Abort the active run (its provider stream and tool are cancelled); ``False`` if idle.

        Safe from any thread: off the run's event loop, the abort is handed to the loop and
        this returns once it has been applied there.
        """
        execution = self.run_slot.active
        if execution is None:
            return False
        call_on_loop(execution.event_loop, execution.interrupt, reason)
        return True

    def steer(self, input: Any, *, soft_interrupt: bool = False) -> None:
        """Queue user input into the active run.

        It is applied at the next turn boundary (after input guardrails; a blocked message is
        dropped with ``steer_rejected``). ``soft_interrupt=True`` also cancels the provider
        stream in flight so the run moves on to the steered input at once. Fails when no run
        is active or the queue is full (8 messages, 64 KiB).
        """
        execution = self.run_slot.active
        if execution is None:
            raise PrismError(
                f"No active run on session {self.id!r} to steer", code="ERR_PRISM_NO_ACTIVE_RUN"
            )
        try:
            messages = to_messages(input)
        except (TypeError, ValueError) as exc:
            raise InvalidOptionsError(str(exc)) from exc
        for message in messages:
            if message.role != "user":
                raise InvalidOptionsError("steered messages must have the user role")
        for message in messages:
            self.steers.push(message)
        if soft_interrupt:
            execution.soft_interrupt()

    async def compact(
        self,
        *,
        keep_recent_entries: int | None = None,
        strategy: CompactionStrategy | None = None,
    ) -> CompactionResult | None:
        """Compact the current branch now: one ``compaction`` entry replaces everything before
        the last ``keep_recent_entries`` entries. Returns ``None`` when there is nothing to
        compact (or the branch already ends with a compaction). Rejected while a run is active.
        """
        self._refuse_while_running("compact")
        config = self.config.compaction
        keep = resolve_keep_recent(config, keep_recent_entries)

        def emit(event: AgentEvent) -> None:
            self.broadcaster.publish(redact_value(event, self.config.redactor))

        return await compact_branch(
            self.transcript,
            metadata=self.metadata,
            middleware=self.config.middleware,
            redactor=self.config.redactor,
            keep_recent=keep,
            strategy=strategy or (config.strategy if config is not None else None),
            run_id=None,
            signal=None,
            emit=emit,
        )

    def context_meter(self) -> ContextMeter:
        """The latest provider turn's input tokens (reported, or an estimate) against the
        configured context window."""
        compaction = self.config.compaction
        cap = self.config.context_window or (
            compaction.context_window if compaction is not None else None
        )
        reading = self.transcript.last_input
        if reading is None:
            return ContextMeter.measure(None, "none", cap)
        tokens, source = reading
        return ContextMeter.measure(tokens, source, cap)

    @property
    def guardrail_pack_refs(self) -> tuple[Any, ...]:
        """The session's guardrail packs as normalised refs (what enforcement compiled)."""
        return tuple(self.compiled_packs.refs) if self.compiled_packs is not None else ()

    @property
    def running(self) -> bool:
        """Whether a run is active."""
        return self.run_slot.running

    async def close(self) -> None:
        """Dispatch ``session_shutdown`` middleware once, then close every subscriber.

        It does not abort an active run; close after the run settles.
        """
        if self._closed:
            return
        self._closed = True
        await self.config.middleware.notify(
            "session_shutdown",
            MiddlewareContext(point="session_shutdown", session_id=self.id, metadata=self.metadata),
        )
        self.broadcaster.close_all()

    # -- branch navigation ------------------------------------------------------------------

    async def snapshot(self) -> tuple[SessionEntry, ...]:
        """The current branch, from a cache reused for ``snapshot_cache_ttl_ms`` while the
        leaf is unchanged (``0`` reads the store every time)."""
        now = anyio.current_time()
        cached = self._snapshot
        if (
            cached is not None
            and cached[0] == self.leaf_id
            and (now - cached[1]) * 1000 < self.snapshot_cache_ttl_ms
        ):
            return cached[2]
        entries = tuple(await self.transcript.read_branch(self.leaf_id))
        if self.snapshot_cache_ttl_ms > 0:
            self._snapshot = (self.leaf_id, now, entries)
        return entries

    async def entries(self) -> list[SessionEntry]:
        """The entries of the current branch, root to leaf (during a durable run, with the
        entries held for its next commit)."""
        return await self.transcript.read_branch(self.leaf_id)

    async def checkout(self, leaf_id: str | None = None) -> list[SessionEntry]:
        """Move to ``leaf_id`` (default: the session's newest entry) and rebuild history.

        Returns the new branch. Fails for an unknown leaf or while a run is active.
        """
        self._refuse_while_running("checkout")
        if leaf_id is None:
            entries = await self.store.list(self.id)
            leaf_id = entries[-1].id if entries else None
        path = await self.store.read_branch_path(self.id, leaf_id)
        self.transcript.move_to(leaf_id, path)
        return path

    def fork(
        self,
        *,
        leaf_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        store: SessionStore | None = None,
    ) -> AgentSession:
        """A new session object on the same session id and store at ``leaf_id`` (default: the
        current leaf). No entry is copied; new runs branch from that leaf."""
        return AgentSession(
            self.agent,
            id=self.id,
            store=store or self.store,
            leaf_id=leaf_id if leaf_id is not None else self.leaf_id,
            metadata=metadata if metadata is not None else dict(self.metadata),
            compiled_packs=self._fresh_packs(),
        )

    async def clone(
        self,
        *,
        id: str | None = None,
        leaf_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        store: SessionStore | None = None,
    ) -> AgentSession:
        """Copy the current branch (or the branch ending at ``leaf_id``) to a new session id
        with new entry ids, and return a session on it."""
        target = store or self.store
        new_id = id or f"session_{new_entry_id()[6:]}"
        if new_id == self.id and target is self.store:
            raise InvalidOptionsError("clone needs a new session id (or another store)")
        path = await self.transcript.read_branch(leaf_id if leaf_id is not None else self.leaf_id)
        mapping: dict[str, str] = {}
        parent: str | None = None
        for entry in path:
            copied = attrs.evolve(
                entry,
                id=new_entry_id(),
                session_id=new_id,
                parent_id=parent,
                first_kept_entry_id=mapping.get(entry.first_kept_entry_id or ""),
            )
            await target.append(copied)
            mapping[entry.id] = copied.id
            parent = copied.id
        return AgentSession(
            self.agent,
            id=new_id,
            store=target,
            leaf_id=parent,
            metadata=metadata if metadata is not None else dict(self.metadata),
            compiled_packs=self._fresh_packs(),
        )

    # -- internals ----------------------------------------------------------------------------

    def _refuse_while_running(self, what: str) -> None:
        if self.run_slot.running:
            raise PrismError(
                f"Cannot {what} while a run is active on session {self.id!r}",
                code="ERR_PRISM_RUN_ACTIVE",
            )

    def _start_run(self, input: Any, options: dict[str, Any]) -> RunExecution:
        if self._closed:
            raise SessionClosedError(f"Session {self.id!r} is closed")
        run_options = coerce_run_options(options)
        try:
            messages = to_messages(input)
        except (TypeError, ValueError) as exc:
            raise InvalidOptionsError(str(exc)) from exc
        if self.run_slot.running:
            self.run_slot.refuse()
        execution = RunExecution(self, messages, run_options)
        self.run_slot.claim(execution)
        return execution

    def _fresh_packs(self) -> CompiledGuardrailPacks | None:
        """The same packs compiled anew, so a fork or clone starts with its own pack state."""
        if self.compiled_packs is None:
            return None
        return compile_guardrail_packs(
            self.compiled_packs.refs,
            catalogue=self.config.pack_catalogue,
            can_suspend=True,
            redactor=self.config.redactor,
        )
