"""``AgentSession``: a conversation on a branch of a session store, and the runs on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..codec import dumps
from ..content import ErrorInfo, Message, to_messages
from ..errors import AgentRunError, PrismError
from ..events import ErrorEvent
from ..middleware import MiddlewareContext
from ..models import ModelConfig
from ..results import AgentRunResult
from ..runs._broadcast import EventBroadcaster, EventSubscription, OverflowPolicy
from ..runs._driver import RunDriver, RunEventStream
from ..runs._execution import RunExecution
from ..runs._options import InvalidOptionsError, coerce_run_options
from ._branch import branch_messages
from ._entries import SessionEntry, create_session_entry, new_entry_id
from ._store import SessionStore

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = ("AgentSession", "SessionClosedError")


class SessionClosedError(PrismError):
    """The session was closed; it accepts no new runs."""

    code = "ERR_PRISM_SESSION_CLOSED"


class AgentSession:
    """A session of an agent: runs, streams, subscriptions and branch navigation.

    Only one run may be active at a time; a second concurrent run is rejected, not queued.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        id: str,
        store: SessionStore,
        leaf_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        guardrail_packs: Any = None,
    ) -> None:
        self.agent = agent
        self.id = id
        self.store = store
        self.leaf_id = leaf_id
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.guardrail_packs = guardrail_packs
        self.current_model: ModelConfig = agent.model
        self._broadcaster = EventBroadcaster()
        self._active: RunExecution | None = None
        self._started = False
        self._closed = False
        self._history: list[Message] | None = None
        self._history_size = 0

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

    def stream(
        self,
        input: Any,
        *,
        max_queued_events: int = 1024,
        overflow: OverflowPolicy = "close",
        **options: Any,
    ) -> RunEventStream:
        """An async iterator over exactly one new run's events (see :class:`RunEventStream`).

        The stream pulls events as the consumer asks for them, so nothing queues;
        ``max_queued_events``/``overflow`` are validated for symmetry with :meth:`subscribe`.
        """
        from ..runs._broadcast import validate_subscribe_options

        validate_subscribe_options(max_queued_events, overflow)
        return RunEventStream(self, input, options)

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
        return self._broadcaster.subscribe(
            across_runs=across_runs, max_queued_events=max_queued_events, overflow=overflow
        )

    def abort(self, reason: Any = None) -> bool:
        """Abort the active run (its provider stream and tool are cancelled); ``False`` if idle."""
        execution = self._active
        if execution is None:
            return False
        execution.signal.abort(reason)
        if execution.step_scope is not None:
            execution.step_scope.cancel()
        return True

    @property
    def running(self) -> bool:
        """Whether a run is active."""
        return self._active is not None

    async def close(self) -> None:
        """Dispatch ``session_shutdown`` middleware once, then close every subscriber.

        It does not abort an active run; close after the run settles.
        """
        if self._closed:
            return
        self._closed = True
        await self.agent.middleware.notify(
            "session_shutdown",
            MiddlewareContext(point="session_shutdown", session_id=self.id, metadata=self.metadata),
        )
        self._broadcaster.close_all()

    # -- branch navigation ------------------------------------------------------------------

    async def entries(self) -> list[SessionEntry]:
        """The entries of the current branch, root to leaf."""
        return await self.store.read_branch_path(self.id, self.leaf_id)

    async def checkout(self, leaf_id: str | None = None) -> list[SessionEntry]:
        """Move to ``leaf_id`` (default: the session's newest entry) and rebuild history.

        Returns the new branch. Fails for an unknown leaf or while a run is active.
        """
        self._refuse_while_running("checkout")
        if leaf_id is None:
            entries = await self.store.list(self.id)
            leaf_id = entries[-1].id if entries else None
        path = await self.store.read_branch_path(self.id, leaf_id)
        self.leaf_id = leaf_id
        self._load_history(path)
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
            guardrail_packs=self.guardrail_packs,
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
        path = await self.store.read_branch_path(
            self.id, leaf_id if leaf_id is not None else self.leaf_id
        )
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
            guardrail_packs=self.guardrail_packs,
        )

    # -- internals used by runs ---------------------------------------------------------------

    def _refuse_while_running(self, what: str) -> None:
        if self._active is not None:
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
        if self._active is not None:
            self._reject_concurrent_run()
        execution = RunExecution(self, messages, run_options)
        self._active = execution
        return execution

    def _reject_concurrent_run(self) -> None:
        run_id = f"run_{new_entry_id()[6:]}"
        error = ErrorInfo(
            f"A run is already active on session {self.id!r}; Prism does not queue runs",
            code="ERR_PRISM_RUN_ACTIVE",
        )
        self._broadcaster.publish(ErrorEvent(session_id=self.id, run_id=run_id, error=error))
        result = AgentRunResult(
            session_id=self.id, run_id=run_id, status="failed", error=error, leaf_id=self.leaf_id
        )
        raise AgentRunError(error.message, result=result, code=error.code)

    async def _ensure_started(self, execution: RunExecution) -> None:
        if self._started:
            return
        self._started = True
        await self.agent.middleware.notify(
            "session_start",
            MiddlewareContext(
                point="session_start",
                session_id=self.id,
                run_id=execution.run_id,
                metadata=execution.metadata,
                signal=execution.signal,
            ),
        )

    async def _ensure_history(self) -> None:
        if self._history is None:
            self._load_history(await self.store.read_branch_path(self.id, self.leaf_id))

    def _load_history(self, path: list[SessionEntry]) -> None:
        self._history = branch_messages(path)
        self._history_size = sum(len(dumps(m)) + 1 for m in self._history)
        self.current_model = self.agent.model
        for entry in reversed(path):
            if entry.kind == "model_change" and entry.model is not None:
                self.current_model = entry.model
                break

    def _history_messages(self) -> list[Message]:
        assert self._history is not None
        return self._history

    def _history_bytes(self) -> int:
        return self._history_size

    async def _append_entry(self, *, kind: Any, run_id: str | None, **payload: Any) -> SessionEntry:
        entry = create_session_entry(
            session_id=self.id, kind=kind, parent_id=self.leaf_id, run_id=run_id, **payload
        )
        stored = await self.store.append(entry)
        self.leaf_id = stored.id
        return stored

    async def _append_message(self, message: Message, run_id: str | None) -> SessionEntry:
        entry = await self._append_entry(kind="message", run_id=run_id, message=message)
        if self._history is not None:
            self._history.append(message)
            self._history_size += len(dumps(message)) + 1
        return entry

    async def _turn_boundary(self, execution: RunExecution) -> None:
        """Work done at each provider-turn boundary (steering, compaction, checkpoints)."""

    async def _settle_run(self, execution: RunExecution) -> None:
        self._settle_run_now(execution)

    def _settle_run_now(self, execution: RunExecution) -> None:
        if self._active is execution:
            self._active = None
        self._broadcaster.close_run_subscribers()
