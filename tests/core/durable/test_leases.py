"""Leases: a live worker's lease refuses a continue (unless forced), renews while a step is
in flight, and an expired lease makes the run recoverable."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import anyio
import attrs
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    RunStateOptions,
    create_memory_session_store,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.durable._lease import (
    LEASE_CLOCK_SKEW_MS,
    lease_is_live,
    now_ms,
    record_lease,
)
from tests.core.durable_support import CountingStore
from tests.core.fencing_support import REVISION, Stall, only_run, ref, worker


def test_lease_liveness_tolerates_clock_skew() -> None:
    """A lease reads as live until its expiry plus the skew tolerance, then as expired."""
    assert lease_is_live(1000, now=999)
    assert lease_is_live(1000, now=1000 + LEASE_CLOCK_SKEW_MS - 1)
    assert not lease_is_live(1000, now=1000 + LEASE_CLOCK_SKEW_MS)
    assert not lease_is_live(None, now=0)


def test_recoverable_means_running_without_a_live_lease() -> None:
    """Running with an expired or no lease is recoverable; a live lease or another status
    is not."""
    from prism_core.durable._lease import recoverable
    from prism_core.durable._state import AgentRunState

    base = AgentRunState(
        status="running",
        run_id="r",
        session_id="s",
        agent_id="a",
        definition_revision="1",
        fingerprint="f",
        leaf_id=None,
    )
    assert recoverable(base, now=10_000)
    assert recoverable(attrs.evolve(base, lease_expires_at=1000), now=1000 + LEASE_CLOCK_SKEW_MS)
    assert not recoverable(attrs.evolve(base, lease_expires_at=9000), now=10_000)
    assert not recoverable(attrs.evolve(base, status="suspended"), now=10_000)


@pytest.mark.anyio
async def test_invalid_lease_ms_is_refused() -> None:
    """lease_ms outside 100..86400000 (or not an int) fails the run before any work."""
    sessions = create_memory_session_store()
    for bad in (0, 50, True, 1.5):
        with pytest.raises(AgentRunStateError):
            await (
                worker(sessions, [])
                .create_session(id="s")
                .run(
                    "go",
                    run_state={
                        "checkpoints": CountingStore(),
                        "definition_revision": REVISION,
                        "lease_ms": bad,
                    },
                )
            )


@pytest.mark.anyio
async def test_live_lease_refuses_continue_renews_and_force_claims() -> None:
    """While A is stalled its lease is live and renewed; a plain continue is refused with no
    write, a forced one claims the run."""
    store, sessions = CountingStore(), create_memory_session_store()
    session_id = f"s-{uuid.uuid4().hex[:6]}"
    stall = Stall(at=1)
    a_log: list[Any] = []
    b_log: list[Any] = []

    async def run_a() -> None:
        with contextlib.suppress(Exception):
            await (
                worker(sessions, a_log, stall=stall)
                .create_session(id=session_id)
                .run(
                    "go",
                    run_state=RunStateOptions(
                        store, REVISION, checkpoint_policy="every-turn", lease_ms=300
                    ),
                )
            )

    async with anyio.create_task_group() as group:
        group.start_soon(run_a)
        with anyio.fail_after(10):
            await stall.entered.wait()
        run_id = await only_run(store)
        first = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
        assert first is not None
        first_expiry = record_lease(first)
        assert first_expiry is not None
        assert first_expiry > now_ms()
        assert first.value["lease_ms"] == 300
        saves = store.saves
        await anyio.sleep(0.45)
        renewed = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
        assert renewed is not None
        # Renewed in place: the version the operator read is still the run's version.
        assert renewed.version == first.version
        assert store.renewals >= 1
        assert store.saves == saves
        renewed_expiry = record_lease(renewed)
        assert renewed_expiry is not None
        assert renewed_expiry > first_expiry
        status = await load_agent_run_state(store, ref(run_id, session_id))
        assert status is not None
        assert status.state.lease_expires_at == renewed_expiry
        saves = store.saves
        with pytest.raises(AgentRunStateError) as info:
            await resume_agent_run(
                worker(sessions, b_log),
                ref(run_id, session_id),
                {"expected_version": status.version, "decision": "continue"},
                checkpoints=store,
                definition_revision=REVISION,
            )
        assert info.value.code == "ERR_PRISM_RUN_LEASED"
        assert store.saves == saves
        stall.release.set()
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_expired_lease_is_recoverable_and_the_claim_leases_again() -> None:
    """A run whose worker vanished (its lease expired) continues without force; the resumed
    run holds a lease of the same length while it works and drops it when it ends."""
    store, sessions = CountingStore(), create_memory_session_store()
    session_id = f"s-{uuid.uuid4().hex[:6]}"
    stall = Stall(at=1)
    a_log: list[Any] = []

    async def run_a() -> None:
        await (
            worker(sessions, a_log, stall=stall)
            .create_session(id=session_id)
            .run(
                "go",
                run_state=RunStateOptions(
                    store, REVISION, checkpoint_policy="every-turn", lease_ms=60000
                ),
            )
        )

    async with anyio.create_task_group() as group:
        group.start_soon(run_a)
        with anyio.fail_after(10):
            await stall.entered.wait()
        # The worker dies: cancelled mid-call, it writes nothing more.
        group.cancel_scope.cancel()
    run_id = await only_run(store)
    record = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    # Its lease runs out (here: written as expired, beyond the skew tolerance).
    expired = {**record.value, "lease_expires_at": now_ms() - LEASE_CLOCK_SKEW_MS - 1}
    await store.inner.save(
        AGENT_RUN_NAMESPACE,
        run_id,
        expired,
        version=record.version + 1,
        expected_version=record.version,
        fencing_token=record.fencing_token,
    )
    seen: list[Any] = []

    async def observe(request: Any) -> None:
        current = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
        seen.append(record_lease(current))

    b_log: list[Any] = []
    agent = worker(sessions, b_log, stall=observe)
    done = await resume_agent_run(
        agent,
        ref(run_id, session_id),
        {"expected_version": record.version + 1, "decision": "continue"},
        checkpoints=store,
        definition_revision=REVISION,
    )
    assert done.status == "succeeded"
    assert a_log == [("echo", {"n": 1})]
    assert b_log == [("echo", {"n": 2})]
    assert seen
    assert all(expiry is not None and expiry > now_ms() for expiry in seen)
    final = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert final is not None
    assert final.value["status"] == "succeeded"
    assert "lease_expires_at" not in final.value


@pytest.mark.anyio
async def test_dispatched_mark_carries_the_lease() -> None:
    """A side-effecting call's dispatched mark is a checkpoint write like any other: it takes
    the lease, so while the tool runs the record holds the mark and a live lease, and a
    continue is refused as leased before the in-doubt rules are consulted."""
    from prism_core import ToolDefinition
    from prism_core.durable import in_doubt_calls

    store, sessions = CountingStore(), create_memory_session_store()
    seen: list[Any] = []

    async def echo(args: dict[str, Any], context: Any) -> Any:
        record = await store.inner.load(AGENT_RUN_NAMESPACE, context.run_id)
        assert record is not None
        seen.append((in_doubt_calls(record.value), record_lease(record)))
        with pytest.raises(AgentRunStateError) as refused:
            await resume_agent_run(
                worker(sessions, []),
                ref(context.run_id, "s"),
                {"expected_version": record.version, "decision": "continue"},
                checkpoints=store,
                definition_revision=REVISION,
            )
        seen.append(refused.value.code)
        assert record.value["status"] == "running"
        return {"echo": args}

    result = await (
        worker(sessions, [], tools=[ToolDefinition("echo", echo)])
        .create_session(id="s")
        .run(
            "go",
            run_state=RunStateOptions(
                store, REVISION, checkpoint_policy="every-turn", lease_ms=30_000
            ),
        )
    )
    assert result.status == "succeeded"
    assert [entry if isinstance(entry, str) else entry[0] for entry in seen] == [
        ("c1",),
        "ERR_PRISM_RUN_LEASED",
        ("c2",),
        "ERR_PRISM_RUN_LEASED",
    ]
    for _doubt, expires in (seen[0], seen[2]):
        assert expires is not None
        assert expires > now_ms() + 20_000


@pytest.mark.anyio
async def test_listing_reads_the_lease() -> None:
    """list_agent_runs reports a leased run's expiry (epoch seconds) and does not offer it
    as recoverable while its worker holds it; once it ends, it holds no lease."""
    from prism_core import ToolDefinition
    from prism_core.resume import list_agent_runs

    store, sessions = CountingStore(), create_memory_session_store()
    seen: list[Any] = []

    async def echo(args: dict[str, Any], context: Any) -> Any:
        page = await list_agent_runs(store)
        held = await list_agent_runs(store, recoverable=True)
        seen.append((page.runs[0].lease_expires_at, held.runs))
        return {"echo": args}

    result = await (
        worker(sessions, [], tools=[ToolDefinition("echo", echo)])
        .create_session(id="s")
        .run(
            "go",
            run_state=RunStateOptions(
                store, REVISION, checkpoint_policy="every-turn", lease_ms=30_000
            ),
        )
    )
    assert result.status == "succeeded"
    expires, recoverable = seen[0]
    assert expires is not None
    assert expires > now_ms() / 1000 + 20
    assert recoverable == ()
    ended = (await list_agent_runs(store)).runs[0]
    assert (ended.status, ended.lease_expires_at) == ("succeeded", None)
