"""The effect ledger conformance suites (:class:`EffectLedgerConformance`, the shared-commit
and session-deletion ones)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from .._effect_record import EffectRecord
from ..codec import dumps
from ..durable._capabilities import shared_transaction
from ..durable._effects import DecisionQuery, EffectLedger, list_effects
from ..durable._ledger_rows import LedgerDecision, LedgerEffect, LedgerWrite
from ..errors import CheckpointConflictError
from ..records import create_session_entry
from ..records._deletion import SessionDeleter
from ..stores import InvalidCheckpointError, validate_save

__all__ = (
    "EffectLedgerConformance",
    "SessionDeletionConformance",
    "SharedCommitLedgerConformance",
)


def _ids() -> tuple[str, dict[str, str]]:
    hex_ = uuid.uuid4().hex
    return f"prism.ledger.{hex_}", {"tenant_id": f"t-{hex_}"}


def _runs(count: int) -> list[str]:
    """Run ids no other test uses (a ledger row is keyed by its run and call)."""
    hex_ = uuid.uuid4().hex[:12]
    return [f"run-{hex_}-{index}" for index in range(1, count + 1)]


def effect(
    run_id: str,
    call_id: str,
    *,
    owner: dict[str, str] | None,
    tool: str = "charge",
    status: str = "dispatched",
    arguments: Any = None,
    approved: Sequence[str] = (),
    started_at: float | None = None,
    session_id: str = "s1",
) -> EffectRecord:
    """An effect record of call ``call_id`` of run ``run_id`` with the fields given."""
    return EffectRecord(
        run_id=run_id,
        session_id=session_id,
        parent_run_id=None,
        agent_id="agent",
        tool_name=tool,
        tool_call_id=call_id,
        idempotency_key=f"idem-{run_id}-{call_id}",
        fencing_token=3,
        arguments={"order": "A-3", "amount": 12} if arguments is None else arguments,
        arguments_hash="a" * 64,
        status=status,  # type: ignore[arg-type]
        result_hash=None if status == "dispatched" else "b" * 64,
        started_at=time.time() if started_at is None else started_at,
        finished_at=None,
        executed_by="host:1",
        approved_by=tuple(approved),
        ownership=owner,
    )


def decision(
    run_id: str, position: int, *, owner: dict[str, str] | None, reason: str = "ok", at: float
) -> LedgerDecision:
    """A decision row of run ``run_id`` at ``position``, decided ``at``."""
    row = {
        "kind": "decision",
        "run_id": run_id,
        "session_id": "s1",
        "position": position,
        "outcome": "allow_once",
        "actor": "ana",
        "reason": reason,
        "decided_at": at,
    }
    return LedgerDecision(
        run_id=run_id,
        session_id="s1",
        position=position,
        decided_at=at,
        ownership=owner,
        text=dumps(row).decode("utf-8"),
    )


async def save_with(
    store: Any,
    ns: str,
    key: str,
    version: int,
    *,
    owner: dict[str, str] | None,
    effects: Sequence[EffectRecord] = (),
    decisions: Sequence[LedgerDecision] = (),
    expected_version: int | None = None,
) -> Any:
    """Save a run-like record carrying the ledger rows given (through ``save_request``)."""
    ledger = LedgerWrite(
        effects=tuple(LedgerEffect.of(e) for e in effects), decisions=tuple(decisions)
    )
    request = validate_save(
        ns,
        key,
        {"status": "running", "v": version},
        version=version,
        expected_version=expected_version,
        ownership=owner,
        ledger=ledger,
    )
    return await store.save_request(request)


def _any(value: Any) -> Any:
    return value


def _calls(page: Any) -> list[str]:
    return [record.tool_call_id for record in page.effects]


class EffectLedgerConformance:
    """The behaviour of a checkpoint store that keeps an effect ledger
    (:class:`~prism_core.stores.EffectLedger`).

    Subclass it with a ``checkpoint_store`` fixture yielding a fresh, open store. Every test
    writes under its own owner, so a shared server may hold other rows.
    """

    @pytest.mark.anyio
    async def test_store_declares_the_capability(self, checkpoint_store: Any) -> None:
        """The kernel finds the ledger with ``isinstance``."""
        assert isinstance(checkpoint_store, EffectLedger)

    @pytest.mark.anyio
    async def test_rows_ride_the_save_and_keep_their_first_place(
        self, checkpoint_store: Any
    ) -> None:
        """A save writes its rows; a later write of a call replaces it in its first place."""
        (run1,) = _runs(1)
        ns, owner = _ids()
        first = effect(run1, "c1", owner=owner, arguments={"order": "A-3", "note": "é\u2028"})
        await save_with(checkpoint_store, ns, run1, 1, owner=owner, effects=[first])
        second = effect(run1, "c2", owner=owner)
        await save_with(checkpoint_store, ns, run1, 2, owner=owner, effects=[second])
        done = attrs.evolve(first, status="completed", result_hash="c" * 64, finished_at=5.0)
        await save_with(checkpoint_store, ns, run1, 3, owner=owner, effects=[done])
        page = await list_effects(checkpoint_store, ownership=owner)
        assert page.effects == (done, second)
        assert page.cursor is None

    @pytest.mark.anyio
    async def test_a_refused_save_writes_no_row(self, checkpoint_store: Any) -> None:
        """A save that loses its compare-and-swap writes none of its rows."""
        (run1,) = _runs(1)
        ns, owner = _ids()
        await save_with(checkpoint_store, ns, run1, 1, owner=owner)
        with pytest.raises(CheckpointConflictError):
            await save_with(
                checkpoint_store,
                ns,
                run1,
                2,
                owner=owner,
                expected_version=7,
                effects=[effect(run1, "c1", owner=owner)],
                decisions=[decision(run1, 0, owner=owner, at=1.0)],
            )
        assert (await list_effects(checkpoint_store, ownership=owner)).effects == ()
        rows = await checkpoint_store.query_decisions(DecisionQuery.of(ownership=owner))
        assert rows.decisions == ()

    @pytest.mark.anyio
    async def test_every_filter(self, checkpoint_store: Any) -> None:
        """Tool, approver, argument values, key, run, status and time each narrow the list."""
        run1, run2 = _runs(2)
        ns, owner = _ids()
        rows = [
            effect(run1, "c1", owner=owner, tool="refund", approved=["ana", "bo"], started_at=10),
            effect(
                run1,
                "c2",
                owner=owner,
                tool="charge",
                status="completed",
                arguments={"order": "A-4", "amount": 12},
                started_at=20,
            ),
            effect(
                run2,
                "c1",
                owner=owner,
                tool="refund",
                status="in_doubt",
                approved=["bo"],
                arguments={"order": "A-3", "amount": 99},
                started_at=30,
            ),
        ]
        await save_with(checkpoint_store, ns, run1, 1, owner=owner, effects=rows[:2])
        await save_with(checkpoint_store, ns, run2, 1, owner=owner, effects=rows[2:])

        async def calls(**filters: Any) -> list[tuple[str, str]]:
            page = await list_effects(checkpoint_store, ownership=owner, **filters)
            return [(r.run_id, r.tool_call_id) for r in page.effects]

        assert await calls() == [(run1, "c1"), (run1, "c2"), (run2, "c1")]
        assert await calls(tool_name="refund") == [(run1, "c1"), (run2, "c1")]
        assert await calls(actor="ana") == [(run1, "c1")]
        assert await calls(actor="bo") == [(run1, "c1"), (run2, "c1")]
        assert await calls(actor="nobody") == []
        assert await calls(arguments={"order": "A-3"}) == [(run1, "c1"), (run2, "c1")]
        assert await calls(arguments={"order": "A-3", "amount": 12}) == [(run1, "c1")]
        assert await calls(arguments={"amount": 12}) == [(run1, "c1"), (run1, "c2")]
        assert await calls(arguments={"amount": "12"}) == []
        assert await calls(idempotency_key=f"idem-{run2}-c1") == [(run2, "c1")]
        assert await calls(run_id=run1) == [(run1, "c1"), (run1, "c2")]
        assert await calls(status="in_doubt") == [(run2, "c1")]
        assert await calls(status="failed") == []
        assert await calls(since=20) == [(run1, "c2"), (run2, "c1")]
        assert await calls(until=20) == [(run1, "c1")]
        assert await calls(since=15, until=25) == [(run1, "c2")]
        assert await calls(tool_name="refund", actor="bo", status="dispatched") == [(run1, "c1")]

    @pytest.mark.anyio
    async def test_ownership_is_matched_exactly(self, checkpoint_store: Any) -> None:
        """Other owners' rows are never listed, marked or erased; unowned is its own scope."""
        mine, theirs = _runs(2)
        ns, owner = _ids()
        other = {"tenant_id": owner["tenant_id"], "user_id": "u2"}
        await save_with(
            checkpoint_store,
            ns,
            mine,
            1,
            owner=owner,
            effects=[effect(mine, "c1", owner=owner)],
        )
        await save_with(
            checkpoint_store,
            ns,
            theirs,
            1,
            owner=other,
            effects=[effect(theirs, "c1", owner=other)],
        )
        assert _calls(await list_effects(checkpoint_store, ownership=owner)) == ["c1"]
        page = await list_effects(checkpoint_store, ownership=other)
        assert [r.run_id for r in page.effects] == [theirs]
        assert await checkpoint_store.mark_in_doubt(theirs, ["c1"], ownership=owner) == 0
        assert await checkpoint_store.erase_session("s1", ownership={"tenant_id": "nobody"}) == 0
        assert (await list_effects(checkpoint_store, ownership=other)).effects[0].status == (
            "dispatched"
        )

    @pytest.mark.anyio
    async def test_pages_follow_the_cursor(self, checkpoint_store: Any) -> None:
        """Pages of ``limit`` rows, each cursor leading to the next; bad cursors refused."""
        (run1,) = _runs(1)
        ns, owner = _ids()
        rows = [effect(run1, f"c{index}", owner=owner) for index in range(7)]
        await save_with(checkpoint_store, ns, run1, 1, owner=owner, effects=rows)
        seen: list[str] = []
        cursor = None
        for _ in range(10):
            page = await list_effects(checkpoint_store, ownership=owner, limit=3, cursor=cursor)
            assert len(page.effects) <= 3
            seen.extend(_calls(page))
            cursor = page.cursor
            if cursor is None:
                break
        assert seen == [f"c{index}" for index in range(7)]
        for bad in ("nonsense", "d.3", "e.-1", 5):
            with pytest.raises(InvalidCheckpointError):
                await list_effects(checkpoint_store, ownership=owner, cursor=bad)  # type: ignore[arg-type]

    @pytest.mark.anyio
    async def test_a_window_holds_rows_written_out_of_start_order(
        self, checkpoint_store: Any
    ) -> None:
        """A row written before another but started after it is still inside a window that
        starts after the other; pages of a window follow the cursor in write order."""
        (run1,) = _runs(1)
        ns, owner = _ids()
        starts = [50.0, 10.0, 40.0, 20.0, 60.0, 5.0, 45.0]
        rows = [
            effect(run1, f"c{index}", owner=owner, started_at=start)
            for index, start in enumerate(starts)
        ]
        await save_with(checkpoint_store, ns, run1, 1, owner=owner, effects=rows)
        inside = [f"c{index}" for index, start in enumerate(starts) if start >= 30]
        for filters in ({}, {"arguments": {"order": "A-3"}}, {"tool_name": "charge"}):
            seen: list[str] = []
            cursor = None
            for _ in range(10):
                page = await list_effects(
                    checkpoint_store, ownership=owner, since=30, limit=2, cursor=cursor, **filters
                )
                seen.extend(_calls(page))
                cursor = page.cursor
                if cursor is None:
                    break
            assert seen == inside
        until = await list_effects(checkpoint_store, ownership=owner, until=30)
        assert _calls(until) == [f"c{i}" for i, start in enumerate(starts) if start < 30]

    @pytest.mark.anyio
    async def test_deleting_the_checkpoint_keeps_the_rows(self, checkpoint_store: Any) -> None:
        """The ledger outlives the run's record."""
        (run1,) = _runs(1)
        ns, owner = _ids()
        await save_with(
            checkpoint_store, ns, run1, 1, owner=owner, effects=[effect(run1, "c1", owner=owner)]
        )
        assert await checkpoint_store.delete(ns, run1, ownership=owner)
        assert _calls(await list_effects(checkpoint_store, ownership=owner)) == ["c1"]

    @pytest.mark.anyio
    async def test_decision_rows_are_written_once_and_read_in_order(
        self, checkpoint_store: Any
    ) -> None:
        """A decision row is kept once per position; ``since`` and paging read them."""
        (run1,) = _runs(1)
        ns, owner = _ids()
        await save_with(
            checkpoint_store,
            ns,
            run1,
            1,
            owner=owner,
            decisions=[
                decision(run1, 0, owner=owner, at=10.0, reason="first"),
                decision(run1, 1, owner=owner, at=20.0),
            ],
        )
        await save_with(
            checkpoint_store,
            ns,
            run1,
            2,
            owner=owner,
            decisions=[
                decision(run1, 1, owner=owner, at=20.0, reason="rewritten"),
                decision(run1, 2, owner=owner, at=30.0),
            ],
        )
        page = await checkpoint_store.query_decisions(DecisionQuery.of(ownership=owner))
        assert [(d["position"], d["reason"]) for d in page.decisions] == [
            (0, "first"),
            (1, "ok"),
            (2, "ok"),
        ]
        later = await checkpoint_store.query_decisions(DecisionQuery.of(ownership=owner, since=20))
        assert [d["position"] for d in later.decisions] == [1, 2]
        first = await checkpoint_store.query_decisions(DecisionQuery.of(ownership=owner, limit=2))
        assert [d["position"] for d in first.decisions] == [0, 1]
        assert first.cursor is not None
        rest = await checkpoint_store.query_decisions(
            DecisionQuery.of(ownership=owner, limit=2, cursor=first.cursor)
        )
        assert [d["position"] for d in rest.decisions] == [2]
        assert rest.cursor is None

    @pytest.mark.anyio
    async def test_mark_in_doubt_moves_only_dispatched_rows(self, checkpoint_store: Any) -> None:
        """``dispatched`` becomes ``in_doubt``; a settled call keeps its status."""
        (run1,) = _runs(1)
        ns, owner = _ids()
        await save_with(
            checkpoint_store,
            ns,
            run1,
            1,
            owner=owner,
            effects=[
                effect(run1, "c1", owner=owner),
                effect(run1, "c2", owner=owner, status="completed"),
            ],
        )
        moved = await checkpoint_store.mark_in_doubt(run1, ["c1", "c2", "c9"], ownership=owner)
        assert moved == 1
        page = await list_effects(checkpoint_store, ownership=owner)
        assert [(r.tool_call_id, r.status) for r in page.effects] == [
            ("c1", "in_doubt"),
            ("c2", "completed"),
        ]
        assert _calls(await list_effects(checkpoint_store, ownership=owner, status="in_doubt")) == [
            "c1"
        ]
        assert await checkpoint_store.mark_in_doubt(run1, ["c1"], ownership=owner) == 0

    @pytest.mark.anyio
    async def test_erasing_a_session_keeps_only_hashes(self, checkpoint_store: Any) -> None:
        """Arguments and reasons become hashes; the call is no longer found by its arguments;
        other sessions' rows are untouched."""
        run1, run2 = _runs(2)
        ns, owner = _ids()
        gone = effect(run1, "c1", owner=owner, approved=["ana"], session_id="s1")
        kept = effect(run2, "c1", owner=owner, session_id="s2")
        await save_with(
            checkpoint_store,
            ns,
            run1,
            1,
            owner=owner,
            effects=[gone, kept],
            decisions=[decision(run1, 0, owner=owner, at=1.0, reason="customer asked")],
        )
        changed = await checkpoint_store.erase_session("s1", ownership=owner)
        assert changed == 2
        page = await list_effects(checkpoint_store, ownership=owner)
        erased = page.effects[0]
        assert erased.arguments == f"sha256:{gone.arguments_hash}"
        assert erased.approved_by == ("ana",)
        assert page.effects[1] == kept
        found = await list_effects(checkpoint_store, ownership=owner, arguments={"order": "A-3"})
        assert [(r.run_id, r.tool_call_id) for r in found.effects] == [(run2, "c1")]
        assert _calls(await list_effects(checkpoint_store, ownership=owner, actor="ana")) == ["c1"]
        rows = await checkpoint_store.query_decisions(DecisionQuery.of(ownership=owner))
        (row,) = rows.decisions
        assert row["reason"].startswith("sha256:")
        assert "customer" not in row["reason"]


class SharedCommitLedgerConformance:
    """The ledger rows of a save queued on a shared commit: written with it, or not at all.

    Subclass it with a ``shared_stores`` fixture yielding ``(checkpoints, sessions)`` that
    commit together and keep a ledger."""

    @pytest.mark.anyio
    async def test_rows_commit_with_the_transaction(self, shared_stores: Any) -> None:
        """A committed block writes the rows of its save; a refused one writes none."""
        (run1,) = _runs(1)
        checkpoints, sessions = shared_stores
        ns, owner = _ids()
        session = f"s-{uuid.uuid4().hex}"
        ledger = LedgerWrite(effects=(LedgerEffect.of(effect(run1, "c1", owner=owner)),))
        tx: Any = shared_transaction(checkpoints, sessions)
        assert tx is not None
        async with tx as batch:
            batch.save_request(
                validate_save(
                    ns, run1, {"status": "running"}, version=1, ownership=owner, ledger=ledger
                )
            )
            batch.append(create_session_entry(session_id=session, kind="label", label="x"))
        assert _calls(await list_effects(checkpoints, ownership=owner)) == ["c1"]
        refused = LedgerWrite(effects=(LedgerEffect.of(effect(run1, "c2", owner=owner)),))
        tx = shared_transaction(checkpoints, sessions)
        assert tx is not None

        async def refused_commit() -> None:
            async with tx as batch:
                batch.save_request(
                    validate_save(
                        ns,
                        run1,
                        {"status": "running"},
                        version=2,
                        expected_version=9,
                        ownership=owner,
                        ledger=refused,
                    )
                )
                batch.append(create_session_entry(session_id=session, kind="label", label="y"))

        with pytest.raises(CheckpointConflictError):
            await refused_commit()
        assert _calls(await list_effects(checkpoints, ownership=owner)) == ["c1"]


class SessionDeletionConformance:
    """The behaviour of a session store that deletes sessions
    (:class:`~prism_core.stores.SessionDeleter`); a ``session_store`` fixture yields it."""

    @pytest.mark.anyio
    async def test_deletes_one_session_whole(self, session_store: Any) -> None:
        """Every entry of the session goes, others stay, and the session starts afresh."""
        assert isinstance(session_store, SessionDeleter)
        session_store = _any(session_store)
        gone, kept = f"s-{uuid.uuid4().hex}", f"s-{uuid.uuid4().hex}"
        first = await session_store.append(
            create_session_entry(session_id=gone, kind="label", label="a")
        )
        await session_store.append(
            create_session_entry(session_id=gone, kind="label", label="b", parent_id=first.id)
        )
        other = await session_store.append(
            create_session_entry(session_id=kept, kind="label", label="c")
        )
        assert await session_store.delete_session(gone) == 2
        assert await session_store.list(gone) == []
        assert await session_store.get(first.id) is None
        assert [e.id for e in await session_store.list(kept)] == [other.id]
        assert await session_store.delete_session(gone) == 0
        again = await session_store.append(
            create_session_entry(session_id=gone, kind="label", label="new")
        )
        assert [e.id for e in await session_store.list(gone)] == [again.id]
