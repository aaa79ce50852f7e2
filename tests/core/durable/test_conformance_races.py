"""The kit's cross-instance races catch a store that is atomic only within one instance."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from prism_core.stores import CheckpointStore
from prism_core.testing import CheckpointStoreConformance, SessionStoreConformance

from ..json_file_store import JsonFileCheckpointStore

CROSS_INSTANCE = (
    "test_cross_instance_compare_and_swap_has_one_winner",
    "test_cross_instance_create_only_has_one_winner",
    "test_cross_instance_fencing_keeps_the_highest_token",
)
SINGLE_INSTANCE = (
    "test_concurrent_compare_and_swap_has_one_winner",
    "test_concurrent_create_only_has_one_winner",
    "test_save_then_load_round_trips_every_field",
    "test_compare_and_swap_mismatch_conflicts",
    "test_lower_fencing_token_conflicts",
    "test_equal_and_higher_fencing_tokens_succeed",
)


def _kit_test(name: str) -> Callable[..., Awaitable[None]]:
    test: Callable[..., Awaitable[None]] = getattr(CheckpointStoreConformance(), name)
    return test


@pytest.mark.anyio
@pytest.mark.parametrize("name", SINGLE_INSTANCE)
async def test_unlocked_json_store_passes_the_single_instance_tests(
    name: str, tmp_path: Path
) -> None:
    """Against one instance, the per-instance lock is enough: the old races all pass."""
    store = JsonFileCheckpointStore(tmp_path / "checkpoints.json")
    await _kit_test(name)(store)


@pytest.mark.anyio
@pytest.mark.parametrize("name", CROSS_INSTANCE)
async def test_unlocked_json_store_fails_the_cross_instance_races(
    name: str, tmp_path: Path
) -> None:
    """Writers on four instances of the same file slip between read and write: the kit fails.

    Which interleaving a scheduler picks varies (trio shuffles its run batches), so a lucky
    order can let a round pass; over twenty rounds on fresh files the kit must catch it.
    """
    failures = 0
    for round_ in range(20):
        path = tmp_path / f"checkpoints-{round_}.json"
        try:
            await _kit_test(name)(
                JsonFileCheckpointStore(path), lambda path=path: JsonFileCheckpointStore(path)
            )
        except AssertionError:
            failures += 1
    assert failures >= 1, "an unlocked store passed every cross-instance race"


@pytest.mark.anyio
@pytest.mark.parametrize("name", CROSS_INSTANCE)
async def test_json_store_with_a_shared_lock_passes_the_cross_instance_races(
    name: str, tmp_path: Path
) -> None:
    """The same store, locked across instances, passes: the races test the lock, nothing else."""
    path = tmp_path / "checkpoints.json"
    lock = anyio.Lock()
    store = JsonFileCheckpointStore(path, lock=lock)
    await _kit_test(name)(store, lambda: JsonFileCheckpointStore(path, lock=lock))


def test_the_double_is_a_checkpoint_store(tmp_path: Path) -> None:
    """The double satisfies the protocol, so the kit is exercised on a real implementation."""
    assert isinstance(JsonFileCheckpointStore(tmp_path / "x.json"), CheckpointStore)


def test_a_missing_factory_fails_with_instructions() -> None:
    """Without a factory fixture the default one fails, naming what to define."""
    for suite, kind in (
        (CheckpointStoreConformance(), "checkpoint"),
        (SessionStoreConformance(), "session"),
    ):
        fixture = getattr(suite, f"{kind}_store_factory")
        with pytest.raises(pytest.fail.Exception) as info:
            fixture.__wrapped__(suite)
        assert f"define a {kind}_store_factory fixture" in str(info.value)
        assert f"returns the {kind}_store fixture itself" in str(info.value)
