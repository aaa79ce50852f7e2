"""``CheckpointStoreBase``: a store writes one ``SaveRequest``, callers keep the keyword
``save``, and the durable writer hands over the state's bytes it already encoded."""

from __future__ import annotations

from typing import Any

import pytest

import prism_core.codec as codec
from prism_core import AgentRunStateError, RunStateOptions, create_agent, create_mock_provider
from prism_core.codec import dumps
from prism_core.stores import (
    CheckpointRecord,
    CheckpointStoreBase,
    InvalidCheckpointError,
    MemoryCheckpointStore,
    SaveRequest,
)
from tests.core.helpers import echo_tool, scripted_agent, text_turn, tool_turn


class Apart(MemoryCheckpointStore):
    """The memory store without the shared commit: every checkpoint write is a save."""

    def shared_transaction(self, sessions: object) -> None:
        return None


class TakingRequests(Apart):
    """The memory store, recording each request it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[SaveRequest] = []

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        self.requests.append(request)
        return await super().save_request(request)


class OverridingSave(Apart):
    """A subclass that intercepts ``save_request``, as a counting test double does."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        self.saves += 1
        return await super().save_request(request)


class Forwarding:
    """A proxy with a ``save_request`` of its own that forwards everything else."""

    #: Its records die with the process, like the memory store's it wraps.
    process_local = True

    def __init__(self, inner: Any) -> None:
        self.inner, self.saves = inner, 0

    async def save_request(self, request: SaveRequest) -> Any:
        self.saves += 1
        return await self.inner.save_request(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_store_missing_a_method_cannot_be_built() -> None:
    """The base refuses a subclass that does not implement ``save_request`` (or another of
    the protocol's methods) when it is instantiated, not at its first save."""

    class Incomplete(CheckpointStoreBase):
        async def load(self, *args: Any, **kw: Any) -> Any:
            return None

    with pytest.raises(TypeError, match="save_request"):
        Incomplete()  # type: ignore[abstract]


@pytest.mark.anyio
async def test_the_keyword_save_checks_its_arguments_into_one_request() -> None:
    """``save(...)`` hands ``save_request`` the ``validate_save`` request of its arguments;
    malformed arguments never reach it."""
    store = TakingRequests()
    record = await store.save(
        "ns", "k", {"status": "running"}, version=1, ownership={}, metadata={"a": "b"}
    )
    (request,) = store.requests
    assert (request.namespace, request.key, request.version) == ("ns", "k", 1)
    assert request.value_json == dumps({"status": "running"}).decode()
    assert (request.ownership, request.metadata, request.status) == (None, {"a": "b"}, "running")
    assert record.value == {"status": "running"}
    with pytest.raises(InvalidCheckpointError):
        await store.save("ns", "k", {"v": 2}, version=0)
    assert len(store.requests) == 1


async def _durable_run(checkpoints: Any) -> int:
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"n": 1})), tool_turn(("c2", "echo", {"n": 2})), text_turn("ok")],
        id="saver",
        tools=[echo_tool()],
    )
    session = agent.create_session()
    result = await session.run(
        "go", run_state=RunStateOptions(checkpoints, "rev-1", checkpoint_policy="every-turn")
    )
    assert result.status == "succeeded"
    record = await checkpoints.load("prism.agent-run", result.run_id)
    assert record is not None
    return int(record.version)


@pytest.mark.anyio
async def test_a_durable_run_saves_through_save_request_encoding_each_state_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The writer builds each request with the bytes it encoded for the state's size bound:
    ``validate_save`` never encodes a value during the run, and every write is a request."""
    store = TakingRequests()
    encoded_states: list[Any] = []
    encode = codec.dumps

    def counting(value: Any) -> bytes:
        if isinstance(value, dict) and "run_id" in value:
            encoded_states.append(value)
        return encode(value)

    # ``validate_save`` looks ``dumps`` up when it runs; the size bound's encoding does not.
    monkeypatch.setattr(codec, "dumps", counting)
    version = await _durable_run(store)
    assert encoded_states == []
    assert [r.version for r in store.requests] == list(range(1, version + 1))
    assert all(r.value_bytes == len(r.value_json.encode()) for r in store.requests)


@pytest.mark.anyio
async def test_a_store_that_intercepts_save_request_sees_every_save() -> None:
    """A subclass overriding ``save_request``, and a proxy forwarding to a store, see every
    save of a run: ``save_request`` is the one path the kernel writes through."""
    subclass = OverridingSave()
    assert await _durable_run(subclass) == subclass.saves
    proxy = Forwarding(Apart())
    assert await _durable_run(proxy) == proxy.saves


class KeywordOnly:
    """A proxy that intercepts only the keyword ``save`` (and has no ``save_request``)."""

    process_local = True

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def save(self, *args: Any, **kw: Any) -> Any:
        return await self.inner.save(*args, **kw)

    async def load(self, *args: Any, **kw: Any) -> Any:
        return await self.inner.load(*args, **kw)

    async def delete(self, *args: Any, **kw: Any) -> Any:
        return await self.inner.delete(*args, **kw)

    async def list(self, *args: Any, **kw: Any) -> Any:
        return await self.inner.list(*args, **kw)


@pytest.mark.anyio
async def test_a_store_without_save_request_is_refused_before_the_run() -> None:
    """A checkpoint store that offers only the keyword ``save`` is refused when the run
    starts (``ERR_PRISM_AGENT_RUN_STATE``), before any provider request or write."""
    requests: list[Any] = []
    agent = create_agent(
        id="saver",
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(turns=[text_turn("ok")], on_request=requests.append),
    )
    inner = Apart()
    with pytest.raises(AgentRunStateError, match="save_request") as info:
        await agent.create_session().run(
            "go", run_state=RunStateOptions(KeywordOnly(inner), "rev-1")
        )
    assert info.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert requests == []
    assert (await inner.list()).records == ()


@pytest.mark.anyio
async def test_the_kernel_never_calls_the_keyword_save() -> None:
    """Every save of a run goes through ``save_request``: a store whose keyword ``save``
    fails still runs a durable run to the end, one request per version."""

    class NoKeywordSave(TakingRequests):
        async def save(self, *args: Any, **kw: Any) -> CheckpointRecord:
            raise AssertionError("the kernel called the keyword save")

    store = NoKeywordSave()
    version = await _durable_run(store)
    assert [r.version for r in store.requests] == list(range(1, version + 1))
