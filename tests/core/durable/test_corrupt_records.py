"""Corrupt records in the memory checkpoint store: typed errors, metadata read as absent."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from prism_core import AGENT_RUN_NAMESPACE, create_memory_checkpoint_store

from ..records_support import (
    RUN_ID,
    expect_corrupt,
    expect_metadata_absent,
    expect_not_a_state,
    seed,
)

SLOT = (AGENT_RUN_NAMESPACE, RUN_ID)


def _corrupt(store: Any, **fields: Any) -> None:
    # The memory store has no driver: its one stored form is the record object itself.
    store._records[SLOT] = attrs.evolve(store._records[SLOT], **fields)


def _raw(store: Any) -> Any:
    async def read() -> Any:
        return store._records[SLOT]

    return read


@pytest.mark.anyio
@pytest.mark.parametrize("value_json", ['{"status": "suspen', "", "[1, 2", "\x00"])
async def test_memory_value_that_is_not_json_is_a_typed_error(value_json: str) -> None:
    """A truncated, empty or garbled stored value is ERR_PRISM_CHECKPOINT_CORRUPT from the
    store and an AgentRunStateError naming the run from status and resume."""
    store = create_memory_checkpoint_store()
    await seed(store)
    _corrupt(store, value_json=value_json)
    await expect_corrupt(store, _raw(store))


@pytest.mark.anyio
@pytest.mark.parametrize("value", [[1, 2], "suspended", 7, None, {"status": "running"}])
async def test_memory_value_that_is_json_but_not_a_state(value: Any) -> None:
    """JSON that is not a run state object is a malformed state, with zero writes."""
    store = create_memory_checkpoint_store()
    await seed(store, value=value)
    await expect_not_a_state(store, _raw(store))


@pytest.mark.anyio
async def test_memory_metadata_that_is_not_a_string_map_reads_as_absent() -> None:
    """A sidecar that is not a map of strings reads as absent through every API."""
    store = create_memory_checkpoint_store()
    await seed(store)
    _corrupt(store, metadata={"n": 1})
    # The memory store hands back what it holds; the durable layer reads it as absent.
    await expect_metadata_absent(store, from_store=False)
