"""Previewing a resume, purging finished runs and erasing a session, on the memory stores
(the other backends run the same operations and also read their raw storage)."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import create_memory_checkpoint_store, create_memory_session_store
from prism_core.codec import dumps
from tests import ledger_operations


def snapshot_of(checkpoints: Any, sessions: Any) -> Any:
    """Everything the two memory stores hold, as bytes."""

    async def snapshot() -> bytes:
        records = {
            f"{ns}/{key}": repr(stored) for (ns, key), stored in checkpoints._records.items()
        }
        ledger = checkpoints._ledger
        return dumps(
            {
                "records": records,
                "effects": repr(ledger._effects),
                "decisions": repr(ledger._decisions),
                "entries": repr(sessions._entries),
                "order": repr(sessions._by_session),
            }
        )

    return snapshot


@pytest.mark.anyio
async def test_a_preview_writes_nothing() -> None:
    """What the previews say, and the stores byte for byte as they were."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    await ledger_operations.a_preview_writes_nothing(
        checkpoints, sessions, snapshot_of(checkpoints, sessions)
    )


@pytest.mark.anyio
async def test_finished_runs_are_purged() -> None:
    """Finished runs older than the date go; the ledger stays."""
    await ledger_operations.finished_runs_are_purged(
        create_memory_checkpoint_store(), create_memory_session_store()
    )


@pytest.mark.anyio
async def test_a_session_is_erased() -> None:
    """Refused while active; then transcript and runs gone, hashes in the ledger, and no
    erased text anywhere in the memory stores."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    await ledger_operations.a_session_is_erased(checkpoints, sessions)
    held = (await snapshot_of(checkpoints, sessions)()).decode()
    assert ledger_operations.ERASED_ARGUMENT not in held
    assert ledger_operations.ERASED_REASON not in held
