"""Corrupt stored records, checked through the public APIs on any checkpoint store.

A backend's test seeds a good record with :func:`seed`, corrupts it with its own driver, and
calls :func:`expect_corrupt` or :func:`expect_metadata_absent`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    CheckpointStoreError,
    create_agent,
    create_agent_run_lifecycle,
    create_mock_provider,
    list_agent_runs,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.durable import AgentRunState, Interruption
from prism_core.durable._state import state_to_json
from prism_core.records._memory import MemorySessionStore
from prism_core.stores import CORRUPT_CHECKPOINT_CODE

from .durable_support import REVISION
from .helpers import text_turn

RUN_ID = "run-corrupt"
SESSION_ID = "s-corrupt"
REF = {"run_id": RUN_ID, "session_id": SESSION_ID}

#: Reads the stored record's raw fields with the backend's own driver.
RawRead = Callable[[], Awaitable[Any]]


def good_state(**changes: Any) -> dict[str, Any]:
    """The JSON of a valid suspended schema-v1 state of run :data:`RUN_ID`."""
    state = AgentRunState(
        status="suspended",
        run_id=RUN_ID,
        session_id=SESSION_ID,
        agent_id="investigator",
        definition_revision=REVISION,
        fingerprint="f" * 64,
        leaf_id=None,
        interruption=Interruption(kind="tool_approval", reason="needs a person"),
    )
    return {**state_to_json(state), **changes}


_GOOD = object()


async def seed(store: Any, value: Any = _GOOD, metadata: dict[str, str] | None = None) -> None:
    """Save a record (version 1, a good state unless ``value`` is given) for :data:`RUN_ID`."""
    await store.save(
        AGENT_RUN_NAMESPACE,
        RUN_ID,
        good_state() if value is _GOOD else value,
        version=1,
        expected_version=0,
        metadata=metadata if metadata is not None else {"git": "abc"},
        category="agent-run",
    )


class _SessionsOfTheCheckpointBackend(MemorySessionStore):
    """Stands in for a session store that lives as long as the checkpoint store under test
    (every entry point refuses the corrupt record before it reads a session)."""

    process_local = False


def _agent() -> Any:
    return create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=_SessionsOfTheCheckpointBackend(),
        provider=create_mock_provider([text_turn("done")]),
    )


def _lifecycle(store: Any) -> Any:
    return create_agent_run_lifecycle(
        checkpoints=store, resolve_agent=lambda agent_id: (_agent(), REVISION)
    )


async def expect_corrupt(store: Any, raw: RawRead) -> None:
    """The store refuses the record as corrupt; the durable layer names the run; nothing is
    written (the raw record is unchanged)."""
    before = await raw()
    with pytest.raises(CheckpointStoreError) as loaded:
        await store.load(AGENT_RUN_NAMESPACE, RUN_ID)
    assert loaded.value.code == CORRUPT_CHECKPOINT_CODE
    assert RUN_ID in loaded.value.message
    with pytest.raises(AgentRunStateError, match=RUN_ID) as direct:
        await load_agent_run_state(store, REF)
    assert direct.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert isinstance(direct.value.__cause__, CheckpointStoreError)
    lifecycle = _lifecycle(store)
    with pytest.raises(AgentRunStateError, match=RUN_ID) as status:
        await lifecycle.status(REF)
    assert status.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    with pytest.raises(AgentRunStateError, match=RUN_ID):
        await lifecycle.resume(REF, {"decision": "deny", "expected_version": 1})
    with pytest.raises(AgentRunStateError, match=RUN_ID):
        await resume_agent_run(
            _agent(),
            REF,
            {"decision": "deny", "expected_version": 1},
            checkpoints=store,
            definition_revision=REVISION,
        )
    assert await raw() == before


async def expect_not_a_state(store: Any, raw: RawRead) -> None:
    """A record whose value is JSON but not a run state: the store returns it as saved, and
    every durable entry point refuses it as a malformed state without writing."""
    before = await raw()
    record = await store.load(AGENT_RUN_NAMESPACE, RUN_ID)
    assert record is not None
    with pytest.raises(AgentRunStateError, match=r"(?i)agent run state"):
        await load_agent_run_state(store, REF)
    with pytest.raises(AgentRunStateError, match=r"(?i)agent run state"):
        await _lifecycle(store).status(REF)
    with pytest.raises(AgentRunStateError, match=r"(?i)agent run state"):
        await resume_agent_run(
            _agent(),
            REF,
            {"decision": "deny", "expected_version": 1},
            checkpoints=store,
            definition_revision=REVISION,
        )
    assert await raw() == before


async def expect_metadata_absent(store: Any, *, from_store: bool = True) -> None:
    """Sidecar metadata that cannot be read comes back as absent, never as a failure: from the
    store itself (``from_store``) and in any case from the durable layer."""
    record = await store.load(AGENT_RUN_NAMESPACE, RUN_ID)
    assert record is not None
    if from_store:
        assert record.metadata is None
    assert record.value["run_id"] == RUN_ID
    status = await load_agent_run_state(store, REF)
    assert status is not None
    assert status.metadata is None
    assert status.state.status == "suspended"
    found = await _lifecycle(store).status(REF)
    assert found is not None
    assert found.metadata is None


#: A second run, seeded beside :data:`RUN_ID` so a listing has a good record to return.
NEIGHBOUR_ID = "run-fine"


async def seed_neighbours(store: Any) -> None:
    """Save good suspended runs keyed just before and just after :data:`RUN_ID` (a listing
    reads the corrupt record in the middle of them)."""
    for run_id in ("run-a-fine", NEIGHBOUR_ID):
        await store.save(
            AGENT_RUN_NAMESPACE,
            run_id,
            good_state(run_id=run_id),
            version=1,
            expected_version=0,
            category="agent-run",
        )


async def expect_listed_around(store: Any) -> None:
    """With :data:`RUN_ID` corrupt between two good runs (:func:`seed_neighbours`), the store's
    ``list`` (and its status index, when it has one) and ``list_agent_runs`` (with and
    without a status filter, and paged one run at a time) return the good runs and name the
    corrupt key in ``unreadable``: one bad record never fails or empties a listing."""
    page = await store.list(AGENT_RUN_NAMESPACE)
    assert [record.key for record in page.records] == ["run-a-fine", NEIGHBOUR_ID]
    assert [(u.namespace, u.key) for u in page.unreadable] == [(AGENT_RUN_NAMESPACE, RUN_ID)]
    assert "corrupt" in page.unreadable[0].reason
    by_status = getattr(store, "list_by_status", None)
    if by_status is not None:
        page = await by_status(AGENT_RUN_NAMESPACE, "suspended")
        assert [record.key for record in page.records] == ["run-a-fine", NEIGHBOUR_ID]
        assert [u.key for u in page.unreadable] == [RUN_ID]
    for status in (None, "suspended"):
        runs = await list_agent_runs(store, status=status)
        assert [run.run_id for run in runs.runs] == ["run-a-fine", NEIGHBOUR_ID]
        assert [u.key for u in runs.unreadable] == [RUN_ID]
    seen, reported, cursor = [], [], None
    while True:
        one = await list_agent_runs(store, limit=1, cursor=cursor)
        seen.extend(run.run_id for run in one.runs)
        reported.extend(u.key for u in one.unreadable)
        if one.cursor is None:
            break
        cursor = one.cursor
    assert seen == ["run-a-fine", NEIGHBOUR_ID]
    assert reported == [RUN_ID]
