"""The checkpoint store conformance suite (see :class:`CheckpointStoreConformance`)."""

from __future__ import annotations

import math
import uuid
from typing import Any

import anyio
import pytest

from ..errors import CheckpointConflictError
from ..stores import CheckpointRecord, CheckpointStore, InvalidCheckpointError, validate_save
from ._races import CheckpointRaces

__all__ = ("CheckpointStoreConformance",)

OWNER_A = {"tenant_id": "t1", "user_id": "u1"}
OWNER_B = {"tenant_id": "t2", "user_id": "u1"}

ROUND_TRIP_VALUE: dict[str, Any] = {
    "schema_version": 1,
    "status": "suspended",
    "text": "héllo wörld ✓ 𝄞",
    "ratio": 0.125,
    "count": 12345678901,
    "negative": -3,
    "flag": True,
    "off": False,
    "nothing": None,
    "list": [1, "two", {"three": 3}, [], {}],
    "nested": {"z": {"y": [None, 1.5]}, "a": ""},
}


def _namespace() -> str:
    # A fresh namespace per test keeps tests independent on a shared server.
    return f"prism.conformance.{uuid.uuid4().hex}"


def _owner() -> dict[str, str]:
    return {"tenant_id": f"t-{uuid.uuid4().hex}", "user_id": "u1"}


class CheckpointStoreConformance(CheckpointRaces):
    """The behaviour every :class:`~prism_core.CheckpointStore` must show.

    Subclass it in a test module as ``class TestMyStore(CheckpointStoreConformance)`` and
    define a ``checkpoint_store`` fixture (an async generator fixture may be used) that yields
    a fresh, open store. The tests run on whichever anyio backends the ``anyio_backend``
    fixture in scope selects; override it in the subclass when the store is asyncio-only.
    Define ``checkpoint_store_factory`` too: a callable opening another, independent
    instance on the same backend, so writers race across instances as workers in separate
    processes do (the memory store returns ``checkpoint_store`` itself).
    Every test writes into its own namespace (and list tests under their own owner), so the
    suite can run against a shared server that already holds other records.
    """

    @pytest.mark.anyio
    async def test_save_then_load_round_trips_every_field(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """A saved record loads back with its value, version, metadata, owner, token and times."""
        ns = _namespace()
        assert await checkpoint_store.load(ns, "run-1", ownership=OWNER_A) is None
        saved = await checkpoint_store.save(
            ns,
            "run-1",
            ROUND_TRIP_VALUE,
            version=1,
            expected_version=0,
            ownership=OWNER_A,
            fencing_token=7,
            metadata={"agent_id": "a1", "note": "ünïcode"},
            category="agent-run",
        )
        loaded = await checkpoint_store.load(ns, "run-1", ownership=OWNER_A)
        assert loaded is not None
        for record in (saved, loaded):
            assert record.namespace == ns
            assert record.key == "run-1"
            assert record.version == 1
            assert record.value == ROUND_TRIP_VALUE
            assert dict(record.metadata or {}) == {"agent_id": "a1", "note": "ünïcode"}
            assert dict(record.ownership or {}) == OWNER_A
            assert record.fencing_token == 7
            assert record.category == "agent-run"
            assert record.created_at > 0
            assert record.updated_at >= record.created_at
        assert loaded.created_at == pytest.approx(saved.created_at, abs=1e-3)
        assert loaded.updated_at == pytest.approx(saved.updated_at, abs=1e-3)

        second = await checkpoint_store.save(
            ns,
            "run-1",
            {"step": 2},
            version=2,
            expected_version=1,
            ownership=OWNER_A,
            fencing_token=7,
        )
        assert second.version == 2
        assert second.value == {"step": 2}
        assert second.created_at == pytest.approx(saved.created_at, abs=1e-3)
        assert second.updated_at >= saved.updated_at - 1e-3

    @pytest.mark.anyio
    async def test_any_json_value_round_trips(self, checkpoint_store: CheckpointStore) -> None:
        """Scalars, null, lists and deep objects all come back equal."""
        ns = _namespace()
        values: list[Any] = [None, 0, -1.25, "", "text", True, [], {}, [1, [2, [3]]]]
        values.append({"a": {"b": {"c": [True, None, "x" * 1000]}}})
        for index, value in enumerate(values):
            await checkpoint_store.save(ns, f"k{index}", value, version=1)
        for index, value in enumerate(values):
            record = await checkpoint_store.load(ns, f"k{index}")
            assert record is not None
            assert record.value == value
            assert type(record.value) is type(value)

    @pytest.mark.anyio
    async def test_unknown_key_loads_none(self, checkpoint_store: CheckpointStore) -> None:
        """Loading a key that was never saved gives ``None``."""
        assert await checkpoint_store.load(_namespace(), "missing") is None

    @pytest.mark.anyio
    async def test_expected_version_zero_creates_only(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """``expected_version=0`` creates a record and conflicts once one exists."""
        ns = _namespace()
        created = await checkpoint_store.save(ns, "k", {"n": 1}, version=1, expected_version=0)
        assert created.version == 1
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "k", {"n": 2}, version=2, expected_version=0)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value) == (1, {"n": 1})

    @pytest.mark.anyio
    async def test_save_request_is_the_write_path(self, checkpoint_store: CheckpointStore) -> None:
        """``save_request`` (the path the kernel saves through) writes what the keyword
        ``save`` of the same arguments writes, and refuses a stale request the same way,
        changing nothing."""
        ns = _namespace()
        request = validate_save(
            ns, "k", {"n": 1}, version=1, expected_version=0, metadata={"m": "1"}, category="c"
        )
        saved = await checkpoint_store.save_request(request)
        assert (saved.version, saved.value, saved.metadata) == (1, {"n": 1}, {"m": "1"})
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value, record.category) == (1, {"n": 1}, "c")
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save_request(request)
        again = await checkpoint_store.load(ns, "k")
        assert again is not None
        assert (again.version, again.value) == (1, {"n": 1})

    @pytest.mark.anyio
    async def test_compare_and_swap_succeeds_on_matching_version(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """A save whose ``expected_version`` is the stored version replaces the record."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", {"n": 1}, version=1)
        updated = await checkpoint_store.save(ns, "k", {"n": 2}, version=2, expected_version=1)
        assert (updated.version, updated.value) == (2, {"n": 2})
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value) == (2, {"n": 2})

    @pytest.mark.anyio
    async def test_compare_and_swap_mismatch_conflicts(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """A stale or missing ``expected_version`` conflicts and writes nothing."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", {"n": 1}, version=1)
        await checkpoint_store.save(ns, "k", {"n": 2}, version=2, expected_version=1)
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "k", {"n": 3}, version=3, expected_version=1)
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "k", {"n": 3}, version=4, expected_version=3)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value) == (2, {"n": 2})
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "absent", {"n": 1}, version=2, expected_version=1)
        assert await checkpoint_store.load(ns, "absent") is None

    @pytest.mark.anyio
    async def test_version_not_above_current_conflicts(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """Saving the current or a lower version conflicts; skipping ahead is allowed."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", "v2", version=2)
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "k", "again", version=2)
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "k", "older", version=1)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value) == (2, "v2")
        jumped = await checkpoint_store.save(ns, "k", "v5", version=5)
        assert jumped.version == 5

    @pytest.mark.anyio
    async def test_lower_fencing_token_conflicts(self, checkpoint_store: CheckpointStore) -> None:
        """A token below the stored one conflicts and leaves the record as it was."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", "first", version=1, fencing_token=5)
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "k", "stale", version=2, fencing_token=4)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value, record.fencing_token) == (1, "first", 5)

    @pytest.mark.anyio
    async def test_the_largest_token_round_trips_and_a_larger_one_is_refused(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """A fencing token or version of 2**63 - 1 is stored and read back exactly; one above
        it is refused with ``InvalidCheckpointError`` before anything is written, so a record
        is never left with a number it cannot read back."""
        ns = _namespace()
        top = 2**63 - 1
        await checkpoint_store.save(ns, "k", "first", version=1, fencing_token=top)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert record.fencing_token == top
        for too_big in (top + 1, 10**20):
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.save(ns, "k", "x", version=2, fencing_token=too_big)
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.save(ns, "other", "x", version=too_big)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value, record.fencing_token) == (1, "first", top)
        assert await checkpoint_store.load(ns, "other") is None

    @pytest.mark.anyio
    async def test_missing_fencing_token_against_fenced_record_conflicts(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """Once a record is fenced, a save without a token conflicts."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", "first", version=1, fencing_token=0)
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "k", "unfenced", version=2)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.fencing_token) == (1, 0)

    @pytest.mark.anyio
    async def test_equal_and_higher_fencing_tokens_succeed(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """An equal token keeps the fence, a higher one raises it and then fences out the old."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", "unfenced", version=1)
        adopted = await checkpoint_store.save(ns, "k", "fenced", version=2, fencing_token=3)
        assert adopted.fencing_token == 3
        same = await checkpoint_store.save(ns, "k", "same", version=3, fencing_token=3)
        assert same.fencing_token == 3
        higher = await checkpoint_store.save(ns, "k", "higher", version=4, fencing_token=9)
        assert higher.fencing_token == 9
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(ns, "k", "old holder", version=5, fencing_token=3)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value, record.fencing_token) == (4, "higher", 9)

    @pytest.mark.anyio
    async def test_foreign_owner_reads_as_absent(self, checkpoint_store: CheckpointStore) -> None:
        """Another owner, a partial owner or no owner loads ``None`` and deletes nothing."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", {"secret": 1}, version=1, ownership=OWNER_A)
        for other in (OWNER_B, {"tenant_id": "t1"}, None, {}):
            assert await checkpoint_store.load(ns, "k", ownership=other) is None
            assert await checkpoint_store.delete(ns, "k", ownership=other) is False
        reordered = {"user_id": "u1", "tenant_id": "t1"}
        record = await checkpoint_store.load(ns, "k", ownership=reordered)
        assert record is not None
        assert record.value == {"secret": 1}

    @pytest.mark.anyio
    async def test_foreign_save_conflicts_like_any_conflict(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """A save over a foreign record fails with the very message of a version conflict."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", "mine", version=1, ownership=OWNER_A)
        with pytest.raises(CheckpointConflictError) as ordinary:
            await checkpoint_store.save(ns, "k", "again", version=1, ownership=OWNER_A)
        with pytest.raises(CheckpointConflictError) as foreign:
            await checkpoint_store.save(ns, "k", "theirs", version=2, ownership=OWNER_B)
        with pytest.raises(CheckpointConflictError) as unowned:
            await checkpoint_store.save(ns, "k", "nobody", version=2, expected_version=1)
        assert str(foreign.value) == str(ordinary.value)
        assert str(unowned.value) == str(ordinary.value)
        assert foreign.value.code == ordinary.value.code == "ERR_PRISM_CHECKPOINT_CONFLICT"
        record = await checkpoint_store.load(ns, "k", ownership=OWNER_A)
        assert record is not None
        assert (record.version, record.value) == (1, "mine")

    @pytest.mark.anyio
    async def test_empty_ownership_means_unowned(self, checkpoint_store: CheckpointStore) -> None:
        """``{}`` and ``None`` name the same (unowned) scope everywhere."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", 1, version=1, ownership={})
        record = await checkpoint_store.load(ns, "k", ownership=None)
        assert record is not None
        assert not record.ownership
        updated = await checkpoint_store.save(ns, "k", 2, version=2, ownership=None)
        assert updated.value == 2
        page = await checkpoint_store.list(ns, ownership={})
        assert [r.key for r in page.records] == ["k"]
        assert await checkpoint_store.delete(ns, "k", ownership={}) is True

    @pytest.mark.anyio
    async def test_metadata_is_replaced_and_kept_out_of_value(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """Each save replaces the metadata map, which never leaks into ``value``."""
        ns = _namespace()
        value = {"state": "running"}
        await checkpoint_store.save(ns, "k", value, version=1, metadata={"a": "1", "b": "2"})
        await checkpoint_store.save(ns, "k", value, version=2, metadata={"c": "3"})
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert dict(record.metadata or {}) == {"c": "3"}
        assert record.value == value
        await checkpoint_store.save(ns, "k", value, version=3)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert not record.metadata
        assert record.value == value

    @pytest.mark.anyio
    async def test_values_are_isolated_from_callers(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """Mutating a saved, returned or loaded value never changes what is stored."""
        ns = _namespace()
        original: dict[str, Any] = {"items": [1, 2], "inner": {"x": 1}}
        saved = await checkpoint_store.save(ns, "k", original, version=1)
        original["items"].append(3)
        original["inner"]["x"] = 99
        saved.value["items"].append(4)
        loaded = await checkpoint_store.load(ns, "k")
        assert loaded is not None
        assert loaded.value == {"items": [1, 2], "inner": {"x": 1}}
        loaded.value["items"].clear()
        loaded.value["inner"]["y"] = 2
        again = await checkpoint_store.load(ns, "k")
        assert again is not None
        assert again.value == {"items": [1, 2], "inner": {"x": 1}}

    @pytest.mark.anyio
    async def test_invalid_arguments_raise_and_write_nothing(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """Malformed saves raise ``InvalidCheckpointError`` before touching the store."""
        ns = _namespace()
        bad_calls: list[tuple[str, Any, dict[str, Any]]] = [
            ("version 0", {"ok": 1}, {"version": 0}),
            ("negative version", {"ok": 1}, {"version": -1}),
            ("bool version", {"ok": 1}, {"version": True}),
            ("float version", {"ok": 1}, {"version": 1.0}),
            ("string version", {"ok": 1}, {"version": "1"}),
            ("negative expected_version", {"ok": 1}, {"version": 1, "expected_version": -1}),
            ("bool expected_version", {"ok": 1}, {"version": 1, "expected_version": False}),
            ("negative fencing_token", {"ok": 1}, {"version": 1, "fencing_token": -1}),
            ("bool fencing_token", {"ok": 1}, {"version": 1, "fencing_token": True}),
            ("NaN", {"x": float("nan")}, {"version": 1}),
            ("infinity", [math.inf], {"version": 1}),
            ("set", {"x": {1, 2}}, {"version": 1}),
            ("object", object(), {"version": 1}),
            ("non-string metadata value", 1, {"version": 1, "metadata": {"a": 1}}),
            ("non-string metadata key", 1, {"version": 1, "metadata": {1: "a"}}),
            ("metadata not a map", 1, {"version": 1, "metadata": ["a"]}),
            ("non-string ownership value", 1, {"version": 1, "ownership": {"t": 1}}),
            ("non-string category", 1, {"version": 1, "category": 5}),
        ]
        for label, value, kwargs in bad_calls:
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.save(ns, "k", value, **kwargs)
            assert await checkpoint_store.load(ns, "k") is None, label
        with pytest.raises(InvalidCheckpointError):
            await checkpoint_store.save("", "k", 1, version=1)
        with pytest.raises(InvalidCheckpointError):
            await checkpoint_store.save(ns, "", 1, version=1)
        assert (await checkpoint_store.list(ns)).records == ()

        await checkpoint_store.save(ns, "k", "kept", version=1, fencing_token=1)
        for _label, value, kwargs in bad_calls:
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.save(ns, "k", value, **kwargs)
        record = await checkpoint_store.load(ns, "k")
        assert record is not None
        assert (record.version, record.value, record.fencing_token) == (1, "kept", 1)

    @pytest.mark.anyio
    async def test_list_pages_in_key_order(self, checkpoint_store: CheckpointStore) -> None:
        """Five records page as 2 + 2 + 1 in key order, the last page without a cursor."""
        ns = _namespace()
        for key in ("k3", "k0", "k4", "k1", "k2"):
            await checkpoint_store.save(ns, key, {"key": key}, version=1)
        seen: list[list[str]] = []
        cursor: str | None = None
        for _ in range(3):
            page = await checkpoint_store.list(ns, limit=2, cursor=cursor)
            seen.append([record.key for record in page.records])
            cursor = page.cursor
            if cursor is None:
                break
        assert seen == [["k0", "k1"], ["k2", "k3"], ["k4"]]
        assert cursor is None
        first = await checkpoint_store.list(ns, limit=2)
        assert [r.value for r in first.records] == [{"key": "k0"}, {"key": "k1"}]
        assert all(r.namespace == ns and r.version == 1 for r in first.records)

    @pytest.mark.anyio
    async def test_list_exact_multiple_ends_without_cursor(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """When the records fill the last page exactly, that page has no cursor."""
        ns = _namespace()
        for key in ("a", "b", "c", "d"):
            await checkpoint_store.save(ns, key, key, version=1)
        first = await checkpoint_store.list(ns, limit=2)
        assert [r.key for r in first.records] == ["a", "b"]
        assert first.cursor is not None
        second = await checkpoint_store.list(ns, limit=2, cursor=first.cursor)
        assert [r.key for r in second.records] == ["c", "d"]
        assert second.cursor is None
        empty = await checkpoint_store.list(_namespace())
        assert empty.records == ()
        assert empty.cursor is None

    @pytest.mark.anyio
    async def test_list_filters_by_namespace(self, checkpoint_store: CheckpointStore) -> None:
        """A namespace filter lists that namespace; without one, every namespace in order."""
        owner = _owner()
        ns_a, ns_b = sorted([_namespace(), _namespace()])
        await checkpoint_store.save(ns_b, "k1", "b1", version=1, ownership=owner)
        await checkpoint_store.save(ns_a, "k2", "a2", version=1, ownership=owner)
        await checkpoint_store.save(ns_a, "k1", "a1", version=1, ownership=owner)
        only_b = await checkpoint_store.list(ns_b, ownership=owner)
        assert [(r.namespace, r.key) for r in only_b.records] == [(ns_b, "k1")]
        every = await checkpoint_store.list(ownership=owner)
        assert [(r.namespace, r.key) for r in every.records] == [
            (ns_a, "k1"),
            (ns_a, "k2"),
            (ns_b, "k1"),
        ]
        paged: list[tuple[str, str]] = []
        cursor: str | None = None
        while True:
            page = await checkpoint_store.list(ownership=owner, limit=1, cursor=cursor)
            paged.extend((r.namespace, r.key) for r in page.records)
            cursor = page.cursor
            if cursor is None:
                break
        assert paged == [(ns_a, "k1"), (ns_a, "k2"), (ns_b, "k1")]

    @pytest.mark.anyio
    async def test_list_shows_only_the_callers_records(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """Listing returns records owned by exactly the caller's ownership (``None``: unowned)."""
        ns = _namespace()
        await checkpoint_store.save(ns, "a-owned", 1, version=1, ownership=OWNER_A)
        await checkpoint_store.save(ns, "b-owned", 2, version=1, ownership=OWNER_B)
        await checkpoint_store.save(ns, "unowned", 3, version=1)
        await checkpoint_store.save(ns, "partial", 4, version=1, ownership={"tenant_id": "t1"})
        mine = await checkpoint_store.list(ns, ownership=OWNER_A)
        assert [r.key for r in mine.records] == ["a-owned"]
        assert dict(mine.records[0].ownership or {}) == OWNER_A
        theirs = await checkpoint_store.list(ns, ownership=OWNER_B)
        assert [r.key for r in theirs.records] == ["b-owned"]
        nobody = await checkpoint_store.list(ns)
        assert [r.key for r in nobody.records] == ["unowned"]
        stranger = await checkpoint_store.list(ns, ownership=_owner())
        assert stranger.records == ()

    @pytest.mark.anyio
    async def test_list_rejects_bad_arguments(self, checkpoint_store: CheckpointStore) -> None:
        """A forged cursor or an out-of-range limit raises ``InvalidCheckpointError``."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", 1, version=1)
        for cursor in ("not a cursor!", "%%%"):
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.list(ns, cursor=cursor)
        bad_limits: list[Any] = [0, -1, 1001, True, 2.0, "10"]
        for limit in bad_limits:
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.list(ns, limit=limit)
        bad_cursor: Any = 5
        with pytest.raises(InvalidCheckpointError):
            await checkpoint_store.list(ns, cursor=bad_cursor)
        page = await checkpoint_store.list(ns, limit=1000)
        assert [r.key for r in page.records] == ["k"]

    @pytest.mark.anyio
    async def test_delete_removes_the_record(self, checkpoint_store: CheckpointStore) -> None:
        """Delete answers ``True`` once, then ``False``; the key can be created again."""
        ns = _namespace()
        await checkpoint_store.save(ns, "k", "v", version=3, ownership=OWNER_A)
        assert await checkpoint_store.delete(ns, "k", ownership=OWNER_A) is True
        assert await checkpoint_store.load(ns, "k", ownership=OWNER_A) is None
        assert await checkpoint_store.delete(ns, "k", ownership=OWNER_A) is False
        assert await checkpoint_store.delete(ns, "never-saved") is False
        assert (await checkpoint_store.list(ns, ownership=OWNER_A)).records == ()
        again = await checkpoint_store.save(ns, "k", "new", version=1, expected_version=0)
        assert (again.version, again.value, again.ownership or None) == (1, "new", None)

    @pytest.mark.anyio
    async def test_concurrent_compare_and_swap_has_one_winner(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """16 writers racing from version 1 to 2: one wins, 15 conflict, the winner is stored."""
        ns = _namespace()
        await checkpoint_store.save(ns, "race", {"writer": None}, version=1)
        winners: list[CheckpointRecord] = []
        losers: list[int] = []

        async def writer(index: int) -> None:
            try:
                record = await checkpoint_store.save(
                    ns, "race", {"writer": index}, version=2, expected_version=1
                )
            except CheckpointConflictError:
                losers.append(index)
            else:
                winners.append(record)

        async with anyio.create_task_group() as tg:
            for index in range(16):
                tg.start_soon(writer, index)
        assert len(winners) == 1
        assert len(losers) == 15
        stored = await checkpoint_store.load(ns, "race")
        assert stored is not None
        assert stored.version == 2
        assert stored.value == winners[0].value
        assert stored.value["writer"] not in losers

    @pytest.mark.anyio
    async def test_concurrent_create_only_has_one_winner(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """16 concurrent create-only saves of one key: exactly one creates it."""
        ns = _namespace()
        winners: list[Any] = []
        conflicts = 0

        async def creator(index: int) -> None:
            nonlocal conflicts
            try:
                record = await checkpoint_store.save(
                    ns, "race", {"writer": index}, version=1, expected_version=0
                )
            except CheckpointConflictError:
                conflicts += 1
            else:
                winners.append(record.value)

        async with anyio.create_task_group() as tg:
            for index in range(16):
                tg.start_soon(creator, index)
        assert len(winners) == 1
        assert conflicts == 15
        stored = await checkpoint_store.load(ns, "race")
        assert stored is not None
        assert stored.value == winners[0]

    @pytest.mark.anyio
    async def test_aclose_is_idempotent(self, checkpoint_store: CheckpointStore) -> None:
        """Closing the store twice is harmless."""
        await checkpoint_store.save(_namespace(), "k", 1, version=1)
        await checkpoint_store.aclose()
        await checkpoint_store.aclose()
