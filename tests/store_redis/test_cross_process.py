"""Two processes sharing one Redis see one record and one compare-and-swap order."""

from __future__ import annotations

import sys

import anyio
import pytest
import redis.asyncio as aioredis

from prism_core.errors import CheckpointConflictError
from prism_store_redis import create_redis_checkpoint_store
from tests.conftest import REDIS_URL

WRITER = """
import asyncio, sys
from prism_core.errors import CheckpointConflictError
from prism_store_redis import create_redis_checkpoint_store

async def main(url, prefix, version, expected):
    async with create_redis_checkpoint_store(url, prefix=prefix) as store:
        try:
            await store.save(
                "prism.agent-run", "run:1", {"status": "running", "by": "child"},
                version=version, expected_version=expected,
                ownership={"tenant_id": "t1"}, fencing_token=3,
            )
        except CheckpointConflictError:
            print("conflict")
        else:
            print("saved")

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


async def run_writer(prefix: str, version: int, expected: int) -> str:
    """Run the writer in a fresh interpreter; its one line of output."""
    result = await anyio.run_process(
        [sys.executable, "-c", WRITER, REDIS_URL, prefix, str(version), str(expected)]
    )
    return result.stdout.decode().strip()


@pytest.mark.anyio
async def test_subprocess_write_then_parent_cas(redis_client: aioredis.Redis, prefix: str) -> None:
    """A child process creates a record; this process reads it, CAS-updates it, and the
    child's stale CAS then conflicts."""
    assert await run_writer(prefix, 1, 0) == "saved"
    owner = {"tenant_id": "t1"}
    async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
        record = await store.load("prism.agent-run", "run:1", ownership=owner)
        assert record is not None
        assert (record.version, record.value["by"], record.fencing_token) == (1, "child", 3)
        assert await store.load("prism.agent-run", "run:1") is None
        updated = await store.save(
            "prism.agent-run",
            "run:1",
            {"status": "suspended", "by": "parent"},
            version=2,
            expected_version=1,
            ownership=owner,
            fencing_token=3,
        )
        with pytest.raises(CheckpointConflictError):
            await store.save(
                "prism.agent-run", "run:1", {}, version=2, expected_version=1, ownership=owner
            )
        assert await run_writer(prefix, 2, 1) == "conflict"
        final = await store.load("prism.agent-run", "run:1", ownership=owner)
        assert final is not None
        assert (final.version, final.value) == (2, updated.value)
        assert final.created_at == pytest.approx(record.created_at, abs=1e-3)
