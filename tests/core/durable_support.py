"""Builders for durable-run tests: a counting checkpoint store and history-aware providers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prism_core import (
    AGENT_RUN_NAMESPACE,
    Agent,
    CheckpointRecord,
    MemoryCheckpointStore,
    ProviderEvent,
    ProviderRequest,
    RunStateOptions,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    create_mock_provider,
)
from prism_core.codec import dumps

REVISION = "2026-11-30.1"


class CountingStore:
    """Wraps a checkpoint store and counts what reaches it."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner or create_memory_checkpoint_store()
        self.saves = 0
        self.loads = 0
        self.calls = 0
        self.renewals = 0

    @property
    def process_local(self) -> bool:
        """A wrapper lives as long as the store it wraps."""
        return bool(getattr(self.inner, "process_local", False)) or isinstance(
            self.inner, MemoryCheckpointStore
        )

    async def load(self, *args: Any, **kw: Any) -> CheckpointRecord | None:
        self.calls += 1
        self.loads += 1
        return await self.inner.load(*args, **kw)  # type: ignore[no-any-return]

    async def save(self, *args: Any, **kw: Any) -> CheckpointRecord:
        self.calls += 1
        self.saves += 1
        return await self.inner.save(*args, **kw)  # type: ignore[no-any-return]

    async def save_request(self, request: Any) -> CheckpointRecord:
        self.calls += 1
        self.saves += 1
        return await self.inner.save_request(request)  # type: ignore[no-any-return]

    async def renew_lease(self, *args: Any, **kw: Any) -> None:
        """In-place lease renewal, like the memory store it wraps."""
        self.calls += 1
        self.renewals += 1
        await self.inner.renew_lease(*args, **kw)

    async def delete(self, *args: Any, **kw: Any) -> bool:
        self.calls += 1
        return await self.inner.delete(*args, **kw)  # type: ignore[no-any-return]

    async def list(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        return await self.inner.list(*args, **kw)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def raw(self, run_id: str) -> bytes | None:
        """The stored record's canonical bytes (value, version, metadata) for equality checks."""
        record = await self.inner.load(AGENT_RUN_NAMESPACE, run_id, ownership=None)
        if record is None:
            return None
        return dumps([record.value, record.version, dict(record.metadata or {})])


class KilledAtSave(BaseException):
    """Stands in for SIGKILL at a checkpoint write: nothing in the run may catch it."""


class DyingStore(CountingStore):
    """A counting store whose worker dies (``KilledAtSave``) at the first save after
    ``die_when()`` becomes true: the crash lands exactly there, wherever the run's consumer
    is, so nothing of that save is written."""

    def __init__(self, die_when: Any, inner: Any = None) -> None:
        super().__init__(inner)
        self.die_when = die_when
        self.died = False

    async def save_request(self, request: Any) -> CheckpointRecord:
        if not self.died and self.die_when():
            self.died = True
            raise KilledAtSave("the worker died at this checkpoint write")
        return await super().save_request(request)


async def run_id_when_killed(stream: Any) -> str:
    """Consume ``stream`` until its worker dies at a checkpoint write (``KilledAtSave``);
    the run's id."""
    run_id = ""
    try:
        async for event in stream:
            run_id = event.run_id
    except KilledAtSave:
        return run_id
    raise AssertionError("the run ended without its worker dying")


def by_history(turns: Sequence[Sequence[ProviderEvent]]) -> Any:
    """A provider that picks its turn from how many assistant messages the request holds, so a
    resumed run (new process, new provider object) continues the same script."""

    def events(request: ProviderRequest) -> Sequence[ProviderEvent]:
        index = sum(1 for m in request.messages if m.role == "assistant")
        return turns[min(index, len(turns) - 1)]

    return create_mock_provider(events)


class World:
    """Shared stores, as two worker processes would share them."""

    def __init__(self) -> None:
        self.checkpoints = CountingStore()
        self.sessions = create_memory_session_store()

    def agent(self, turns: Sequence[Sequence[ProviderEvent]], **config: Any) -> Agent:
        """A fresh agent object (as another worker would build it) on the shared stores."""
        config.setdefault("id", "investigator")
        config.setdefault("model", {"provider": "mock", "model": "demo"})
        return create_agent(provider=by_history(turns), store=self.sessions, **config)

    def run_state(self, **options: Any) -> RunStateOptions:
        """Durable options on the shared checkpoint store."""
        return RunStateOptions(self.checkpoints, REVISION, **options)

    def resume_options(self, **options: Any) -> dict[str, Any]:
        """Keyword arguments for resume_agent_run on the shared stores."""
        return {"checkpoints": self.checkpoints, "definition_revision": REVISION, **options}


async def rewrite_as_in_doubt(
    checkpoints: Any, run_id: str, owner: Any = None, *, call_id: str = "c1"
) -> None:
    """Rewrite a suspended run's record as a crash between ``call_id``'s dispatch and its
    result (the run's other pending calls approved)."""
    record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=owner)
    value = dict(record.value)
    value.update(status="running", interruption=None)
    value["pending_calls"] = [
        {**call, "status": "dispatched" if call["tool_call_id"] == call_id else "approved"}
        for call in value["pending_calls"]
    ]
    await checkpoints.save(
        AGENT_RUN_NAMESPACE,
        run_id,
        value,
        version=record.version + 1,
        expected_version=record.version,
        ownership=owner,
    )
