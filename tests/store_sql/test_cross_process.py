"""Another process writes a SQLite checkpoint; this one reads it and moves it on by CAS."""

from __future__ import annotations

import json
import sys
import textwrap

import anyio
import pytest

from prism_core.errors import CheckpointConflictError
from prism_store_sql import create_sql_checkpoint_store

from .conftest import Target

OWNER = {"tenant_id": "t1", "user_id": "u1"}

WRITER = textwrap.dedent(
    """
    import asyncio, json, sys
    from prism_store_sql import create_sql_checkpoint_store

    async def main():
        async with create_sql_checkpoint_store(sys.argv[1]) as store:
            record = await store.save(
                "prism.agent-run", "run-1", {"status": "running", "turn": 1},
                version=1, expected_version=0, ownership=json.loads(sys.argv[2]),
                fencing_token=4, metadata={"worker": "child"}, category="agent-run",
            )
            print(record.version)

    asyncio.run(main())
    """
)

READER = textwrap.dedent(
    """
    import asyncio, json, sys
    from prism_store_sql import create_sql_checkpoint_store

    async def main():
        async with create_sql_checkpoint_store(sys.argv[1], create_schema=False) as store:
            record = await store.load("prism.agent-run", "run-1", ownership=json.loads(sys.argv[2]))
            print(json.dumps([record.version, record.value, record.fencing_token]))

    asyncio.run(main())
    """
)


@pytest.mark.anyio
async def test_a_checkpoint_written_by_another_process_is_read_and_updated(
    sqlite_target: Target,
) -> None:
    """A subprocess creates the record; this process loads it, CAS-updates it, and the
    subprocess sees the update."""
    owner = json.dumps(OWNER)
    written = await anyio.run_process([sys.executable, "-c", WRITER, sqlite_target.url, owner])
    assert written.stdout.decode().strip() == "1"

    async with create_sql_checkpoint_store(sqlite_target.url) as store:
        record = await store.load("prism.agent-run", "run-1", ownership=OWNER)
        assert record is not None
        assert (record.version, record.value, record.fencing_token) == (
            1,
            {"status": "running", "turn": 1},
            4,
        )
        assert dict(record.metadata or {}) == {"worker": "child"}
        assert record.category == "agent-run"
        updated = await store.save(
            "prism.agent-run",
            "run-1",
            {"status": "suspended", "turn": 2},
            version=2,
            expected_version=1,
            ownership=OWNER,
            fencing_token=4,
        )
        assert updated.created_at == record.created_at
        with pytest.raises(CheckpointConflictError):
            await store.save(
                "prism.agent-run", "run-1", {}, version=3, expected_version=1, ownership=OWNER
            )

    seen = await anyio.run_process([sys.executable, "-c", READER, sqlite_target.url, owner])
    assert json.loads(seen.stdout) == [2, {"status": "suspended", "turn": 2}, 4]
